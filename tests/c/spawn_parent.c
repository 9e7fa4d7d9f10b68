/* spawn_parent.c: MPI_Comm_spawn of K copies of this program, then
 * MPI_Intercomm_merge and an MPI_Allreduce over the merged communicator.
 *
 * Usage: spawn_parent K        (the parent job; any number of ranks P)
 *        spawn_parent --child  (started by MPI_Comm_spawn; not by hand)
 *
 * Parent (MPI_Comm_get_parent is MPI_COMM_NULL):
 *   1. MPI_Comm_spawn of /proc/self/exe with argv {"--child"} and K
 *      processes, root 0, over MPI_COMM_WORLD; every errcode must be
 *      MPI_SUCCESS and the intercommunicator's remote size K.
 *   2. MPI_Intercomm_merge (parents low): size P+K, parents are ranks
 *      0..P-1 in their world order.
 *   3. MPI_Allreduce(SUM) of (merged rank + 1): (P+K)(P+K+1)/2; and
 *      MPI_Allreduce(SUM) of 1 from children only, 0 from parents: K.
 *   4. Parent rank 0 prints
 *        spawn ok parents=P children=K merged=P+K sum=S
 * Child (spawned): MPI_Comm_get_parent is not MPI_COMM_NULL; world size K;
 * the parent group's size (remote size) P; the same merge and allreduces
 * (children high); child rank 0 prints
 *        spawn child ok children=K parents=P merged=P+K sum=S
 * Every failed check prints `spawn_parent: ...` on stderr and exits 1.
 * Both sides free the merged communicator and MPI_Comm_disconnect the
 * intercommunicator before MPI_Finalize.
 *
 * Build: the stack's mpicc (MPICH 5 wheel, Intel MPI); portable MPI-3.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0;
static const char *role = "parent";
static int wrank = -1;

#define CHECK_WHO "spawn_parent: %s rank %d: ", role, wrank
#include "check.h"

/* The absolute path of this executable, so the spawned command does not
 * depend on PATH or the launcher's working directory. */
static void self_path(char *buf, size_t len, const char *argv0)
{
    ssize_t n = readlink("/proc/self/exe", buf, len - 1);
    if (n > 0) {
        buf[n] = '\0';
    } else {
        snprintf(buf, len, "%s", argv0);
    }
}

/* Merge, check sizes and order, run the two allreduces. Returns the sum. */
static long merged_checks(MPI_Comm inter, int is_child, int psize, int ksize)
{
    MPI_Comm merged;
    int msize = -1, mrank = -1;
    long mine, sum = -1, nchild = -1, one;

    MPI_Intercomm_merge(inter, is_child, &merged);
    MPI_Comm_size(merged, &msize);
    MPI_Comm_rank(merged, &mrank);
    if (msize != psize + ksize)
        FAIL("merged size %d, expected %d+%d", msize, psize, ksize);
    if (!is_child && mrank != wrank)
        FAIL("parent merged rank %d, expected its world rank %d", mrank, wrank);
    if (is_child && mrank != psize + wrank)
        FAIL("child merged rank %d, expected %d", mrank, psize + wrank);

    mine = mrank + 1;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, merged);
    if (sum != (long)msize * (msize + 1) / 2)
        FAIL("allreduce sum %ld, expected %ld", sum, (long)msize * (msize + 1) / 2);
    one = is_child ? 1 : 0;
    MPI_Allreduce(&one, &nchild, 1, MPI_LONG, MPI_SUM, merged);
    if (nchild != ksize)
        FAIL("children counted %ld, expected %d", nchild, ksize);
    MPI_Comm_free(&merged);
    return sum;
}

int main(int argc, char **argv)
{
    MPI_Comm parent, inter;
    int wsize = -1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    MPI_Comm_get_parent(&parent);

    if (parent == MPI_COMM_NULL) {
        char exe[4096];
        char *child_argv[] = {"--child", NULL};
        int k = argc > 1 ? atoi(argv[1]) : 0, *errcodes, rsize = -1;
        long sum;

        if (argc > 1 && strcmp(argv[1], "--child") == 0) {
            FAIL("started with --child but MPI_Comm_get_parent is MPI_COMM_NULL");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        if (k < 1) {
            FAIL("usage: spawn_parent K (K >= 1 children); got argc %d", argc);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        self_path(exe, sizeof exe, argv[0]);
        errcodes = malloc(sizeof(int) * (size_t)k);
        for (int i = 0; i < k; i++)
            errcodes[i] = -1;
        int rc = MPI_Comm_spawn(exe, child_argv, k, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter,
                                errcodes);
        if (rc != MPI_SUCCESS)
            FAIL("MPI_Comm_spawn rc=%d", rc);
        for (int i = 0; i < k; i++)
            if (errcodes[i] != MPI_SUCCESS)
                FAIL("errcodes[%d] = %d", i, errcodes[i]);
        free(errcodes);
        MPI_Comm_remote_size(inter, &rsize);
        if (rsize != k)
            FAIL("intercommunicator remote size %d, expected %d", rsize, k);

        sum = merged_checks(inter, 0, wsize, k);
        MPI_Comm_disconnect(&inter);
        if (failures == 0 && wrank == 0)
            printf("spawn ok parents=%d children=%d merged=%d sum=%ld\n", wsize, k, wsize + k,
                   sum);
    } else {
        int psize = -1;
        long sum;

        role = "child";
        if (argc < 2 || strcmp(argv[1], "--child") != 0)
            FAIL("spawned without the --child argument (argc %d)", argc);
        MPI_Comm_remote_size(parent, &psize);
        sum = merged_checks(parent, 1, psize, wsize);
        MPI_Comm_disconnect(&parent);
        if (failures == 0 && wrank == 0)
            printf("spawn child ok children=%d parents=%d merged=%d sum=%ld\n", wsize, psize,
                   wsize + psize, sum);
    }
    fflush(stdout);
    MPI_Finalize();
    return failures ? 1 : 0;
}
