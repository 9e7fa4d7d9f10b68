/* mpi_hello.c: MPI startup benchmark program (MPICH).
 *
 * Build: mpicc.mpich -O2 -o mpi_hello mpi_hello.c
 * Run:   fastpmi -n 256 ./mpi_hello
 *        mpiexec.hydra -n 64 ./mpi_hello
 *
 * The whole job is MPI_Init, one MPI_Barrier and MPI_Finalize: what a launcher
 * and its PMI server cost an MPI job before the application does any work.
 * fastpmi-bench times the whole job from outside (launch to the launcher's
 * exit). Rank 0 prints one line so a harness can tell a job that really ran
 * from one that exited 0 without starting MPI.
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
    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        return 1;
    if (MPI_Finalize() != MPI_SUCCESS)
        return 1;
    if (rank == 0) {
        printf("mpi_hello ok size=%d\n", size);
        fflush(stdout);
    }
    return 0;
}
