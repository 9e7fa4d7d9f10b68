/* mpi_spawn.c: spawn latency benchmark program (MPICH 5 wheel, or any MPI
 * that can spawn).
 *
 * Build: <venv>/bin/mpicc -O2 -o mpi_spawn mpi_spawn.c -Wl,-rpath,<venv>/lib
 * Run:   fastpmi -n 2 ./mpi_spawn K
 *        <venv>/bin/mpiexec -n 2 ./mpi_spawn K
 *
 * The parents (any number) synchronise, then time one MPI_Comm_spawn of K
 * copies of this program. The call returns once the K children have started,
 * finished MPI_Init (whose PMI exchange ends in the children's first fence)
 * and connected back: from the spawn request to the children's first fence
 * completing, plus the connect. Rank 0 prints
 *     mpi_spawn ok children=K spawn_ms=T
 * Children only initialise, disconnect from the parents and finalise.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    MPI_Comm parent, inter;
    int rank = -1, k = argc > 1 ? atoi(argv[1]) : 1;
    char self[4096];
    char *child_argv[] = {"--child", NULL};
    ssize_t n;
    double t0, t1;

    if (MPI_Init(&argc, &argv) != MPI_SUCCESS)
        return 1;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) {
        MPI_Comm_disconnect(&parent);
        MPI_Finalize();
        return 0;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0 || k < 1) {
        fprintf(stderr, "mpi_spawn: usage: mpi_spawn K (K >= 1)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    self[n] = '\0';
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    if (MPI_Comm_spawn(self, child_argv, k, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter,
                       MPI_ERRCODES_IGNORE) != MPI_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 3);
    t1 = MPI_Wtime();
    if (rank == 0) {
        printf("mpi_spawn ok children=%d spawn_ms=%.3f\n", k, (t1 - t0) * 1e3);
        fflush(stdout);
    }
    MPI_Comm_disconnect(&inter);
    MPI_Finalize();
    return 0;
}
