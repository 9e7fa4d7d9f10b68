/* pmix_group_invite.c: a group formed by invitation (PMIx_Group_invite,
 * PMIx_Group_join).
 *
 * Usage: pmix_group_invite   (4 ranks)
 *
 * Every rank registers a handler for PMIX_GROUP_INVITED and fences. Rank 0
 * invites ranks 0, 1 and 2 into group "inv" and prints
 *
 *     pmix invite rank 0 status S
 *
 * once the invitation completes; ranks 1 and 2 wait for the invitation
 * (10 s at most), accept it with PMIx_Group_join (from the main thread,
 * not the handler) and print
 *
 *     pmix join rank R group G leader NS:L status S
 *
 * Rank 3 is not invited and prints nothing. All fence again and finalize.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <pmix.h>

static pmix_proc_t me, leader;
static volatile int invited = 0;
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

int main(void)
{
    pmix_status_t rc, code = PMIX_GROUP_INVITED;
    pmix_info_t *results = NULL;
    size_t nresults = 0;

    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_group_invite: PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    rc = PMIx_Register_event_handler(&code, 1, NULL, 0, on_invite, NULL, NULL);
    if (rc < 0 || PMIx_Fence(NULL, 0, NULL, 0) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_group_invite: rank %u: set-up failed\n", me.rank);
        return 1;
    }
    if (me.rank == 0) {
        pmix_proc_t procs[3];
        for (pmix_rank_t r = 0; r < 3; r++)
            PMIX_LOAD_PROCID(&procs[r], me.nspace, r);
        rc = PMIx_Group_invite("inv", procs, 3, NULL, 0, &results, &nresults);
        printf("pmix invite rank 0 status %s\n", PMIx_Error_string(rc));
    } else if (me.rank < 3) {
        for (int i = 0; i < 1000 && !invited; i++)
            usleep(10000);
        if (!invited) {
            fprintf(stderr, "pmix_group_invite: rank %u: no invitation\n", me.rank);
            return 1;
        }
        rc = PMIx_Group_join(group, &leader, PMIX_GROUP_ACCEPT, NULL, 0, &results, &nresults);
        printf("pmix join rank %u group %s leader %s:%u status %s\n", me.rank, group,
               leader.nspace, leader.rank, PMIx_Error_string(rc));
    }
    fflush(stdout);
    if (PMIx_Fence(NULL, 0, NULL, 0) != PMIX_SUCCESS)
        return 1;
    PMIx_Finalize(NULL, 0);
    return 0;
}
