/* mpmd_appnum.c: MPMD launch check (PMI appnum through MPICH).
 *
 * Each rank prints one line:
 *
 *     rank R size S appnum A
 *
 * where A is MPI_APPNUM from MPI_Comm_get_attr(MPI_COMM_WORLD, ...), i.e. the
 * index of the launcher's ':'-separated section the rank belongs to. With
 * `fastpmi -n 2 ./mpmd_appnum : -n 3 ./mpmd_appnum` ranks 0-1 report appnum 0
 * and ranks 2-4 appnum 1, all with size 5. A rank where the attribute is
 * missing prints `appnum none` and exits 1.
 *
 * Build: mpicc.mpich -O2 -o mpmd_appnum mpmd_appnum.c
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank = -1, size = -1, flag = 0, rc = 0;
    int *appnum = NULL;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &appnum, &flag);

    if (flag && appnum) {
        printf("rank %d size %d appnum %d\n", rank, size, *appnum);
    } else {
        printf("rank %d size %d appnum none\n", rank, size);
        rc = 1;
    }
    fflush(stdout);

    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
