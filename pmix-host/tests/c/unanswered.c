/* A PMIx client whose every request reaches a host that never answers
 * (pmix-host/tests/unanswered.rs): each call must return an error, and
 * soon. Prints "<call> <status>" per call. */
#include <pmix.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static double t0;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* "<call> <status> <seconds since the previous report>" */
static void report(const char *call, pmix_status_t rc) {
    double t = now();
    printf("%s %d %.3f\n", call, rc, t - t0);
    fflush(stdout);
    t0 = now();
}

int main(void) {
    pmix_proc_t me, other, members[1];
    t0 = now();
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    if (PMIX_SUCCESS != rc) {
        report("PMIx_Init", rc);
        return 1;
    }
    t0 = now();

    pmix_info_t info;
    PMIX_INFO_LOAD(&info, "unanswered-service", "x", PMIX_STRING);
    report("PMIx_Publish", PMIx_Publish(&info, 1));

    pmix_pdata_t pdata;
    PMIX_PDATA_CONSTRUCT(&pdata);
    PMIX_LOAD_KEY(pdata.key, "unanswered-service");
    report("PMIx_Lookup", PMIx_Lookup(&pdata, 1, NULL, 0));

    char *keys[] = {"unanswered-service", NULL};
    report("PMIx_Unpublish", PMIx_Unpublish(keys, NULL, 0));

    pmix_query_t query;
    PMIX_QUERY_CONSTRUCT(&query);
    PMIX_ARGV_APPEND(rc, query.keys, PMIX_QUERY_NAMESPACES);
    pmix_info_t *results = NULL;
    size_t nresults = 0;
    report("PMIx_Query_info", PMIx_Query_info(&query, 1, &results, &nresults));

    pmix_app_t app;
    PMIX_APP_CONSTRUCT(&app);
    app.cmd = strdup("/bin/true");
    PMIX_ARGV_APPEND(rc, app.argv, "/bin/true");
    app.maxprocs = 1;
    char nspace[PMIX_MAX_NSLEN + 1];
    report("PMIx_Spawn", PMIx_Spawn(NULL, 0, &app, 1, nspace));

    /* Another server's process: the library asks its host. */
    PMIX_LOAD_PROCID(&other, "unanswered-elsewhere", 0);
    pmix_value_t *val = NULL;
    pmix_info_t tmo;
    int secs = 20;
    PMIX_INFO_LOAD(&tmo, PMIX_TIMEOUT, &secs, PMIX_INT);
    report("PMIx_Get", PMIx_Get(&other, "unanswered-key", &tmo, 1, &val));

    /* With another server's processes: the library asks its host. */
    pmix_proc_t both[2];
    PMIX_LOAD_PROCID(&both[0], me.nspace, PMIX_RANK_WILDCARD);
    PMIX_LOAD_PROCID(&both[1], "unanswered-elsewhere", PMIX_RANK_WILDCARD);
    report("PMIx_Connect", PMIx_Connect(both, 2, NULL, 0));

    PMIX_LOAD_PROCID(&members[0], me.nspace, me.rank);
    pmix_proc_t *final = NULL;
    size_t nfinal = 0;
    /* A context id only the host can assign. */
    pmix_info_t ctx;
    bool yes = true;
    PMIX_INFO_LOAD(&ctx, PMIX_GROUP_ASSIGN_CONTEXT_ID, &yes, PMIX_BOOL);
    report("PMIx_Group_construct",
           PMIx_Group_construct("unanswered-group", members, 1, &ctx, 1, &final, &nfinal));

    PMIx_Finalize(NULL, 0);
    return 0;
}
