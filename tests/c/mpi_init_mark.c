/* mpi_init_mark.c (MPICH): every rank creates <FASTPMI_TEST_MARK_DIR>/init.<rank>
 * as soon as MPI_Init returns, then does an MPI_Allreduce of its rank and
 * prints "init mark ok size=N sum=S" on rank 0. For --stop-in-init: no file
 * may appear before the launcher releases the ranks. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size, sum = 0;
    const char *dir = getenv("FASTPMI_TEST_MARK_DIR");

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (dir) {
        char path[4096];
        FILE *f;
        snprintf(path, sizeof path, "%s/init.%d", dir, rank);
        f = fopen(path, "w");
        if (!f || fclose(f) != 0) {
            perror("mpi_init_mark: mark file");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("init mark ok size=%d sum=%d\n", size, sum);
    MPI_Finalize();
    return 0;
}
