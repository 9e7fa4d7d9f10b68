/* pmix_model.c: programming-model declarations (PMIX_MODEL_DECLARED), the
 * hybrid-application use case of the PMIx standard.
 *
 * Usage: pmix_model   (any number of ranks, at least 2)
 *
 * Every rank: PMIx_Init; registers a handler for PMIX_MODEL_DECLARED;
 * fences (every handler is in place). Then, as a second library of the
 * process would (an OpenMP runtime beside MPI), it calls PMIx_Init again
 * declaring PMIX_PROGRAMMING_MODEL "fastpmi-omp" and
 * PMIX_MODEL_LIBRARY_NAME "fastpmi-test": its own handler must hear it
 * (the library notifies within the process). Rank 0 then notifies
 * PMIX_MODEL_DECLARED to its namespace (PMIX_RANGE_NAMESPACE) with model
 * "fastpmi-mpi"; every other rank's handler must hear it, with rank 0 as
 * the source. A rank prints, as it hears them,
 *
 *     pmix model rank R heard M from S
 *
 * (S: "self" for its own process, else the source's rank), fences, and
 * finalizes twice (once per PMIx_Init). A missing event after 10 s exits 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pmix.h>

static pmix_proc_t me;
static volatile int heard_own = 0, heard_peer = 0;

static void on_model(size_t id, pmix_status_t status, const pmix_proc_t *source,
                     pmix_info_t info[], size_t ninfo, pmix_info_t results[], size_t nresults,
                     pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id, (void)status, (void)results, (void)nresults;
    const char *model = "?";
    for (size_t i = 0; i < ninfo; i++)
        if (PMIX_CHECK_KEY(&info[i], PMIX_PROGRAMMING_MODEL) && info[i].value.type == PMIX_STRING)
            model = info[i].value.data.string;
    int self = source && PMIX_CHECK_PROCID(source, &me);
    char from[32];
    if (self)
        snprintf(from, sizeof from, "self");
    else
        snprintf(from, sizeof from, "%u", source ? source->rank : 9999u);
    printf("pmix model rank %u heard %s from %s\n", me.rank, model, from);
    fflush(stdout);
    if (strcmp(model, "fastpmi-omp") == 0 && self)
        heard_own = 1;
    if (strcmp(model, "fastpmi-mpi") == 0 && !self)
        heard_peer = 1;
    if (cbfunc)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static int wait_for(volatile int *flag, const char *what)
{
    for (int i = 0; i < 1000 && !*flag; i++)
        usleep(10000);
    if (!*flag)
        fprintf(stderr, "pmix_model: rank %u: no %s declaration heard\n", me.rank, what);
    return *flag ? 0 : 1;
}

static int fence(void)
{
    pmix_status_t rc = PMIx_Fence(NULL, 0, NULL, 0);
    if (rc != PMIX_SUCCESS)
        fprintf(stderr, "pmix_model: fence: %s\n", PMIx_Error_string(rc));
    return rc == PMIX_SUCCESS ? 0 : 1;
}

int main(void)
{
    pmix_status_t rc, code = PMIX_MODEL_DECLARED;
    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_model: PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    rc = PMIx_Register_event_handler(&code, 1, NULL, 0, on_model, NULL, NULL);
    if (rc < 0) {
        fprintf(stderr, "pmix_model: register handler: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    if (fence())
        return 1;

    pmix_info_t decl[2];
    PMIX_INFO_LOAD(&decl[0], PMIX_PROGRAMMING_MODEL, "fastpmi-omp", PMIX_STRING);
    PMIX_INFO_LOAD(&decl[1], PMIX_MODEL_LIBRARY_NAME, "fastpmi-test", PMIX_STRING);
    pmix_proc_t again;
    if ((rc = PMIx_Init(&again, decl, 2)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_model: second PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    if (wait_for(&heard_own, "own"))
        return 1;

    if (me.rank == 0) {
        pmix_info_t mpi[2];
        PMIX_INFO_LOAD(&mpi[0], PMIX_PROGRAMMING_MODEL, "fastpmi-mpi", PMIX_STRING);
        PMIX_INFO_LOAD(&mpi[1], PMIX_EVENT_NON_DEFAULT, NULL, PMIX_BOOL);
        rc = PMIx_Notify_event(PMIX_MODEL_DECLARED, &me, PMIX_RANGE_NAMESPACE, mpi, 2, NULL, NULL);
        if (rc != PMIX_SUCCESS && rc != PMIX_OPERATION_SUCCEEDED) {
            fprintf(stderr, "pmix_model: notify: %s\n", PMIx_Error_string(rc));
            return 1;
        }
    } else if (wait_for(&heard_peer, "peer's")) {
        return 1;
    }
    if (fence())
        return 1;
    PMIx_Finalize(NULL, 0);
    PMIx_Finalize(NULL, 0);
    return 0;
}
