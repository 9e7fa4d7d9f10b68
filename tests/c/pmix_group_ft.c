/* pmix_group_ft.c: PMIx groups when a member dies (RFC0033), under
 * `fastpmi --fault-tolerant` (tests/ft_pmix_groups.rs).
 *
 * Usage: pmix_group_ft invite|destruct   (4 ranks)
 *
 * invite: every rank registers handlers for PMIX_GROUP_INVITED and
 * PMIX_GROUP_INVITE_FAILED and fences. Rank 0 invites ranks 0-2 into
 * "inv" (PMIx_Group_invite_nb); rank 2 SIGKILLs itself once invited, rank
 * 1 joins. Rank 0 waits (15 s at most) for PMIX_GROUP_INVITE_FAILED and
 * prints "invite failed rank R" with the affected rank; then ranks 0 and
 * 1 go on without it: they construct "rest" of ranks 0 and 1 and print
 * "rest rank R ok". Status 3 when the event does not come.
 *
 * destruct: ranks 0-2 construct "t" with PMIX_GROUP_NOTIFY_TERMINATION
 * and a handler for PMIX_GROUP_MEMBER_FAILED; rank 2 SIGKILLs itself;
 * ranks 0 and 1 wait (15 s at most) for the event, then destruct "t" and
 * print "destruct rank R ok failed F" with the affected rank of the event.
 * Status 3 when the event does not come, 4 when the destruct fails.
 *
 * Rank 3 takes no part. Everyone left finalizes and exits 0.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <pmix.h>

static pmix_proc_t me, leader;
static volatile int invited = 0, affected = -1;
static char group[64] = "?";

static void on_invite(size_t id, pmix_status_t status, const pmix_proc_t *source,
                      pmix_info_t info[], size_t ninfo, pmix_info_t results[], size_t nresults,
                      pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id, (void)status, (void)results, (void)nresults;
    for (size_t i = 0; i < ninfo; i++)
        if (PMIX_CHECK_KEY(&info[i], PMIX_GROUP_ID) && info[i].value.type == PMIX_STRING)
            snprintf(group, sizeof group, "%s", info[i].value.data.string);
    if (source)
        leader = *source;
    invited = 1;
    if (cbfunc)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

/* PMIX_GROUP_INVITE_FAILED and PMIX_GROUP_MEMBER_FAILED: who died. */
static void on_failed(size_t id, pmix_status_t status, const pmix_proc_t *source,
                      pmix_info_t info[], size_t ninfo, pmix_info_t results[], size_t nresults,
                      pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id, (void)status, (void)source, (void)results, (void)nresults;
    for (size_t i = 0; i < ninfo; i++)
        if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_AFFECTED_PROC) && info[i].value.type == PMIX_PROC)
            affected = (int)info[i].value.data.proc->rank;
    if (cbfunc)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static void invite_done(pmix_status_t status, pmix_info_t *info, size_t ninfo, void *cbdata,
                        pmix_release_cbfunc_t release_fn, void *release_cbdata)
{
    (void)status, (void)info, (void)ninfo, (void)cbdata;
    if (release_fn)
        release_fn(release_cbdata);
}

static int wait_affected(void)
{
    for (int i = 0; i < 1500 && affected < 0; i++)
        usleep(10000);
    return affected >= 0;
}

int main(int argc, char **argv)
{
    pmix_status_t rc, inv = PMIX_GROUP_INVITED;
    pmix_status_t fail[] = {PMIX_GROUP_INVITE_FAILED, PMIX_GROUP_MEMBER_FAILED};
    pmix_info_t *results = NULL;
    size_t nresults = 0;
    int destruct = argc > 1 && strcmp(argv[1], "destruct") == 0;

    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_group_ft: PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    PMIx_Register_event_handler(&inv, 1, NULL, 0, on_invite, NULL, NULL);
    PMIx_Register_event_handler(fail, 2, NULL, 0, on_failed, NULL, NULL);
    if (PMIx_Fence(NULL, 0, NULL, 0) != PMIX_SUCCESS)
        return 1;
    if (me.rank < 3 && destruct) {
        pmix_proc_t procs[3];
        pmix_info_t info;
        bool yes = true;
        for (pmix_rank_t r = 0; r < 3; r++)
            PMIX_LOAD_PROCID(&procs[r], me.nspace, r);
        PMIX_INFO_LOAD(&info, PMIX_GROUP_NOTIFY_TERMINATION, &yes, PMIX_BOOL);
        if (PMIx_Group_construct("t", procs, 3, &info, 1, &results, &nresults) != PMIX_SUCCESS)
            return 2;
        if (me.rank == 2)
            raise(SIGKILL);
        if (!wait_affected())
            return 3;
        if (PMIx_Group_destruct("t", NULL, 0) != PMIX_SUCCESS)
            return 4;
        printf("destruct rank %u ok failed %d\n", me.rank, affected);
    } else if (me.rank < 3) {
        if (me.rank == 0) {
            pmix_proc_t procs[3];
            for (pmix_rank_t r = 0; r < 3; r++)
                PMIX_LOAD_PROCID(&procs[r], me.nspace, r);
            if (PMIx_Group_invite_nb("inv", procs, 3, NULL, 0, invite_done, NULL) != PMIX_SUCCESS)
                return 2;
            if (!wait_affected())
                return 3;
            printf("invite failed rank %d\n", affected);
        } else {
            for (int i = 0; i < 1500 && !invited; i++)
                usleep(10000);
            if (!invited)
                return 2;
            if (me.rank == 2)
                raise(SIGKILL);
            if (PMIx_Group_join(group, &leader, PMIX_GROUP_ACCEPT, NULL, 0, &results,
                                &nresults) != PMIX_SUCCESS)
                return 2;
        }
        /* The leader and rank 1 go on without rank 2. */
        pmix_proc_t rest[2];
        for (pmix_rank_t r = 0; r < 2; r++)
            PMIX_LOAD_PROCID(&rest[r], me.nspace, r);
        if (PMIx_Group_construct("rest", rest, 2, NULL, 0, &results, &nresults) != PMIX_SUCCESS)
            return 4;
        printf("rest rank %u ok\n", me.rank);
    }
    fflush(stdout);
    PMIx_Finalize(NULL, 0);
    return 0;
}
