/* pmix_release_tool.c: a PMIx tool that lets the ranks of a job held in
 * PMIx_Init (fastpmi --stop-in-init) go on, as a debugger does once it
 * has attached: PMIX_DEBUGGER_RELEASE to the job's namespace.
 *
 * Usage: pmix_release_tool RENDEZVOUS-FILE NAMESPACE
 *
 * Connects to the server named by RENDEZVOUS-FILE (PMIX_SERVER_URI
 * "file:..."), notifies PMIX_DEBUGGER_RELEASE with the custom range
 * NAMESPACE:* (PMIX_EVENT_CUSTOM_RANGE), prints "pmix tool released NS",
 * and finalizes. Exit 1 on a failed call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <pmix_tool.h>

static volatile int done = 0;
static pmix_status_t status = PMIX_ERROR;

static void notified(pmix_status_t st, void *cbdata)
{
    (void)cbdata;
    status = st;
    done = 1;
}

int main(int argc, char **argv)
{
    pmix_proc_t me, target;
    pmix_info_t info[2];
    pmix_status_t rc;
    char uri[4200];

    if (argc != 3) {
        fprintf(stderr, "usage: pmix_release_tool RENDEZVOUS-FILE NAMESPACE\n");
        return 2;
    }
    snprintf(uri, sizeof uri, "file:%s", argv[1]);
    PMIX_INFO_LOAD(&info[0], PMIX_SERVER_URI, uri, PMIX_STRING);
    if ((rc = PMIx_tool_init(&me, info, 1)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_release_tool: PMIx_tool_init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    pmix_data_array_t range = {.type = PMIX_PROC, .size = 1, .array = &target};
    PMIX_LOAD_PROCID(&target, argv[2], PMIX_RANK_WILDCARD);
    PMIX_INFO_LOAD(&info[0], PMIX_EVENT_CUSTOM_RANGE, &range, PMIX_DATA_ARRAY);
    PMIX_INFO_LOAD(&info[1], PMIX_EVENT_NON_DEFAULT, NULL, PMIX_BOOL);
    rc = PMIx_Notify_event(PMIX_DEBUGGER_RELEASE, &me, PMIX_RANGE_CUSTOM, info, 2, notified, NULL);
    if (rc != PMIX_SUCCESS && rc != PMIX_OPERATION_SUCCEEDED) {
        fprintf(stderr, "pmix_release_tool: notify: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    for (int i = 0; rc == PMIX_SUCCESS && !done && i < 10000; i++)
        usleep(1000);
    if (rc == PMIX_SUCCESS && (!done || (status != PMIX_SUCCESS && status != PMIX_OPERATION_SUCCEEDED))) {
        fprintf(stderr, "pmix_release_tool: notify completed with %s\n",
                done ? PMIx_Error_string(status) : "nothing after 10 s");
        return 1;
    }
    printf("pmix tool released %s\n", argv[2]);
    fflush(stdout);
    PMIx_tool_finalize();
    return 0;
}
