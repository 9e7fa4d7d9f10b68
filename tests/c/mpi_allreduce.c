/* mpi_allreduce.c: MPICH (PMI-1 client built into libmpich) interop check.
 *
 * Every rank contributes its rank to an MPI_Allreduce(SUM); each rank checks
 * the sum against N(N-1)/2, then all ranks meet in an MPI_Barrier and rank 0
 * prints exactly one line:
 *
 *     allreduce ok size=N sum=S
 *
 * Optional argv[1]: the expected world size; a mismatch is an error.
 * Exit status: 0 on success, 1 on any mismatch (with a diagnostic on stderr).
 *
 * Build: mpicc.mpich -O2 -o mpi_allreduce mpi_allreduce.c
 * Run:   fastpmi -n 4 ./mpi_allreduce 4     (or mpiexec.hydra -n 4 ...)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank = -1, size = -1, bad = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    if (argc > 1) {
        int expected_size = atoi(argv[1]);
        if (size != expected_size) {
            fprintf(stderr, "mpi_allreduce: rank %d: MPI_Comm_size = %d, expected %d\n",
                    rank, size, expected_size);
            bad = 1;
        }
    }
    if (rank < 0 || rank >= size) {
        fprintf(stderr, "mpi_allreduce: rank %d out of range for size %d\n", rank, size);
        bad = 1;
    }

    long long mine = rank, sum = -1;
    long long expected = (long long)size * (size - 1) / 2;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (sum != expected) {
        fprintf(stderr, "mpi_allreduce: rank %d: allreduce sum = %lld, expected %lld (size %d)\n",
                rank, sum, expected, size);
        bad = 1;
    }

    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0 && !bad) {
        printf("allreduce ok size=%d sum=%lld\n", size, sum);
        fflush(stdout);
    }
    MPI_Finalize();
    return bad ? 1 : 0;
}
