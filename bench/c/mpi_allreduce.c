/* mpi_allreduce.c: MPI benchmark program (any MPI: Intel MPI, MPICH).
 *
 * Build: mpicc -O2 -o mpi_allreduce mpi_allreduce.c
 * Run:   fastpmi -n 256 ./mpi_allreduce
 *
 * MPI_Init, one MPI_Allreduce(SUM) of every rank's number, checked against
 * N(N-1)/2, one MPI_Barrier, MPI_Finalize. fastpmi-bench times the whole
 * job from outside; rank 0 prints one line so a harness can tell a job that
 * really ran:   mpi_allreduce ok size=N sum=S
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank = -1, size = -1;
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS)
        return 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long long mine = rank, sum = -1, want = (long long)size * (size - 1) / 2;
    if (MPI_Allreduce(&mine, &sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
        return 1;
    if (sum != want) {
        fprintf(stderr, "mpi_allreduce: rank %d: sum %lld, expected %lld\n", rank, sum, want);
        return 1;
    }
    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS || MPI_Finalize() != MPI_SUCCESS)
        return 1;
    if (rank == 0) {
        printf("mpi_allreduce ok size=%d sum=%lld\n", size, sum);
        fflush(stdout);
    }
    return 0;
}
