/* mpi_stall.c: a job that waits on its last rank, for failure tests.
 *
 * After MPI_Init every rank writes its pid to $FASTPMI_TEST_MARK_DIR/ready.R;
 * the last rank then sleeps 120 s before MPI_Barrier, which the others have
 * entered. Killing the last rank must fail the job at once.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank = -1, size = -1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *dir = getenv("FASTPMI_TEST_MARK_DIR");
    if (dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/ready.%d", dir, rank);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "%d\n", (int)getpid());
            fclose(f);
        }
    }
    if (rank == size - 1)
        sleep(120);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
