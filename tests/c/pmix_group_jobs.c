/* pmix_group_jobs.c: a PMIx group spanning two jobs (a parent and the job
 * it spawned).
 *
 * Usage: pmix_group_jobs   (1 rank; it spawns 2 copies of itself with
 *        the argument "child")
 *
 * The parent spawns its children (PMIx_Spawn), learns their namespace;
 * each child learns the parent's from PMIX_PARENT_ID. All three construct
 * group "span" of {parent:0, child:0, child:1} asking a context id, fence
 * over it, destruct it, and each prints
 *
 *     pmix span NS:R ctxid C
 *
 * Then each job builds a group of its own, asking a context id: the
 * children "kids" of {child:0, child:1}, the parent "solo" of {parent:0};
 * each member prints "pmix kids NS:R ctxid C" or "pmix solo NS:R ctxid C".
 *
 * Exit 1 on a failed call.
 */
#include <stdio.h>
#include <string.h>

#include <pmix.h>

int main(int argc, char **argv)
{
    pmix_proc_t me, members[3];
    pmix_status_t rc;
    pmix_nspace_t parent, children;

    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_group_jobs: PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        pmix_proc_t wild;
        pmix_value_t *v = NULL;
        PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
        if (PMIx_Get(&wild, PMIX_PARENT_ID, NULL, 0, &v) != PMIX_SUCCESS || v->type != PMIX_PROC) {
            fprintf(stderr, "pmix_group_jobs: child %u: no parent id\n", me.rank);
            return 1;
        }
        PMIX_LOAD_NSPACE(parent, v->data.proc->nspace);
        PMIX_LOAD_NSPACE(children, me.nspace);
    } else {
        pmix_app_t app;
        PMIX_APP_CONSTRUCT(&app);
        app.cmd = strdup(argv[0]);
        PMIX_ARGV_APPEND(rc, app.argv, argv[0]);
        PMIX_ARGV_APPEND(rc, app.argv, "child");
        app.maxprocs = 2;
        if ((rc = PMIx_Spawn(NULL, 0, &app, 1, children)) != PMIX_SUCCESS) {
            fprintf(stderr, "pmix_group_jobs: spawn: %s\n", PMIx_Error_string(rc));
            return 1;
        }
        PMIX_LOAD_NSPACE(parent, me.nspace);
    }
    PMIX_LOAD_PROCID(&members[0], parent, 0);
    PMIX_LOAD_PROCID(&members[1], children, 0);
    PMIX_LOAD_PROCID(&members[2], children, 1);
    pmix_info_t dir, *results = NULL;
    size_t nresults = 0, ctxid = 0;
    bool assign = true;
    PMIX_INFO_LOAD(&dir, PMIX_GROUP_ASSIGN_CONTEXT_ID, &assign, PMIX_BOOL);
    rc = PMIx_Group_construct("span", members, 3, &dir, 1, &results, &nresults);
    if (rc != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_group_jobs: %s:%u: construct: %s\n", me.nspace, me.rank,
                PMIx_Error_string(rc));
        return 1;
    }
    for (size_t i = 0; i < nresults; i++)
        if (PMIX_CHECK_KEY(&results[i], PMIX_GROUP_CONTEXT_ID) && results[i].value.type == PMIX_SIZE)
            ctxid = results[i].value.data.size;
    if ((rc = PMIx_Fence(members, 3, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_group_jobs: fence over the group: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    if ((rc = PMIx_Group_destruct("span", NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_group_jobs: destruct: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    printf("pmix span %s:%u ctxid %zu\n", me.nspace, me.rank, ctxid);
    fflush(stdout);

    /* A group of this job's own. */
    const char *own = strcmp(me.nspace, parent) == 0 ? "solo" : "kids";
    size_t n = strcmp(own, "solo") == 0 ? 1 : 2;
    pmix_proc_t mine[2];
    PMIX_LOAD_PROCID(&mine[0], me.nspace, 0);
    PMIX_LOAD_PROCID(&mine[1], me.nspace, 1);
    results = NULL;
    nresults = 0;
    ctxid = 0;
    if ((rc = PMIx_Group_construct(own, mine, n, &dir, 1, &results, &nresults)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_group_jobs: %s:%u: construct %s: %s\n", me.nspace, me.rank, own,
                PMIx_Error_string(rc));
        return 1;
    }
    for (size_t i = 0; i < nresults; i++)
        if (PMIX_CHECK_KEY(&results[i], PMIX_GROUP_CONTEXT_ID) && results[i].value.type == PMIX_SIZE)
            ctxid = results[i].value.data.size;
    if ((rc = PMIx_Group_destruct(own, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_group_jobs: destruct %s: %s\n", own, PMIx_Error_string(rc));
        return 1;
    }
    printf("pmix %s %s:%u ctxid %zu\n", own, me.nspace, me.rank, ctxid);
    fflush(stdout);
    PMIx_Finalize(NULL, 0);
    return 0;
}
