/* mpi_comm_from_group.c: a communicator from a Sessions process set
 * (Open MPI 5: MPI_Comm_create_from_group runs PMIx_Group_construct with
 * a context id, then PMIx_Group_destruct).
 *
 * Each rank: MPI_Session_init; MPI_Group_from_session_pset("mpi://WORLD");
 * MPI_Comm_create_from_group with tag "fastpmi.test"; MPI_Allreduce of
 * its rank over the new communicator; prints
 *
 *     comm from group rank R size N sum S
 *
 * and frees everything. Exit status 1 on any MPI error (a line on stderr
 * names the call).
 *
 * Build: mpicc -O2 -o mpi_comm_from_group mpi_comm_from_group.c   (the wheel)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static void check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        fprintf(stderr, "mpi_comm_from_group: %s failed (%d): %s\n", what, rc, msg);
        exit(1);
    }
}

int main(void)
{
    MPI_Session s;
    MPI_Group g;
    MPI_Comm c;
    int rank = -1, size = -1, sum = 0;
    check(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s), "MPI_Session_init");
    check(MPI_Group_from_session_pset(s, "mpi://WORLD", &g), "MPI_Group_from_session_pset");
    check(MPI_Comm_create_from_group(g, "fastpmi.test", MPI_INFO_NULL, MPI_ERRORS_RETURN, &c),
          "MPI_Comm_create_from_group");
    check(MPI_Comm_rank(c, &rank), "MPI_Comm_rank");
    check(MPI_Comm_size(c, &size), "MPI_Comm_size");
    check(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, c), "MPI_Allreduce");
    printf("comm from group rank %d size %d sum %d\n", rank, size, sum);
    check(MPI_Comm_free(&c), "MPI_Comm_free");
    check(MPI_Group_free(&g), "MPI_Group_free");
    check(MPI_Session_finalize(&s), "MPI_Session_finalize");
    return 0;
}
