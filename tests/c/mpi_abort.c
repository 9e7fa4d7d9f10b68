/* mpi_abort.c: MPI_Abort must tear the whole job down with the given code.
 *
 * Rank N-1 calls MPI_Abort(MPI_COMM_WORLD, 7) right after MPI_Init (after a
 * short pause so the others are already blocked); every other rank sits in
 * MPI_Barrier, which can never complete. Expected: the launcher exits 7 and
 * no rank process is left running.
 *
 * If the barrier ever returns (it must not), the rank prints a diagnostic and
 * exits 99; if MPI_Abort returns (it must not), rank N-1 exits 98.
 *
 * Build: mpicc.mpich -O2 -o mpi_abort mpi_abort.c
 * Run:   fastpmi -n 4 ./mpi_abort      -> exit status 7
 */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank = -1, size = -1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    if (rank == size - 1) {
        usleep(200 * 1000);
        fprintf(stderr, "mpi_abort: rank %d calling MPI_Abort(MPI_COMM_WORLD, 7)\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 7);
        fprintf(stderr, "mpi_abort: rank %d: MPI_Abort returned\n", rank);
        return 98;
    }

    MPI_Barrier(MPI_COMM_WORLD);
    fprintf(stderr, "mpi_abort: rank %d: MPI_Barrier returned although rank %d aborted\n",
            rank, size - 1);
    return 99;
}
