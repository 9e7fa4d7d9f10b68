/* pmix_group_query.c: the group queries (PMIX_QUERY_NUM_GROUPS,
 * PMIX_QUERY_GROUP_NAMES, PMIX_QUERY_GROUP_MEMBERSHIP).
 *
 * Usage: pmix_group_query   (4 ranks)
 *
 * Ranks 0, 1 and 2 construct group "gq", asking a context id (without
 * one, OpenPMIx 4.2 builds a local group without telling its host); after
 * a fence of all, rank 3 (no member) asks the server
 * (PMIX_QUERY_REFRESH_CACHE) for the number of groups, their names and the
 * members of "gq", and prints
 *
 *     pmix groups num N names A,B members NS:R,NS:R,...
 *
 * (members "-" when none came back). The members destruct "gq"; after a
 * second fence rank 3 asks again and prints the same line. Exit 1 on a
 * failed call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pmix.h>

static pmix_proc_t me;

static int fence(void)
{
    pmix_status_t rc = PMIx_Fence(NULL, 0, NULL, 0);
    if (rc != PMIX_SUCCESS)
        fprintf(stderr, "pmix_group_query: fence: %s\n", PMIx_Error_string(rc));
    return rc == PMIX_SUCCESS ? 0 : 1;
}

static void ask(void)
{
    pmix_query_t q[3];
    pmix_info_t *res = NULL;
    size_t nres = 0, num = 0;
    char names[512] = "-", members[1024] = "-";
    char *k0[] = {PMIX_QUERY_NUM_GROUPS, NULL}, *k1[] = {PMIX_QUERY_GROUP_NAMES, NULL},
         *k2[] = {PMIX_QUERY_GROUP_MEMBERSHIP, NULL};
    bool refresh = true;

    for (int i = 0; i < 3; i++)
        PMIX_QUERY_CONSTRUCT(&q[i]);
    q[0].keys = k0;
    q[1].keys = k1;
    q[2].keys = k2;
    PMIX_QUERY_QUALIFIERS_CREATE(&q[0], 1);
    PMIX_INFO_LOAD(&q[0].qualifiers[0], PMIX_QUERY_REFRESH_CACHE, &refresh, PMIX_BOOL);
    PMIX_QUERY_QUALIFIERS_CREATE(&q[1], 1);
    PMIX_INFO_LOAD(&q[1].qualifiers[0], PMIX_QUERY_REFRESH_CACHE, &refresh, PMIX_BOOL);
    PMIX_QUERY_QUALIFIERS_CREATE(&q[2], 2);
    PMIX_INFO_LOAD(&q[2].qualifiers[0], PMIX_QUERY_REFRESH_CACHE, &refresh, PMIX_BOOL);
    PMIX_INFO_LOAD(&q[2].qualifiers[1], PMIX_GROUP_ID, "gq", PMIX_STRING);
    pmix_status_t rc = PMIx_Query_info(q, 3, &res, &nres);
    for (size_t i = 0; (rc == PMIX_SUCCESS || rc == PMIX_ERR_PARTIAL_SUCCESS) && i < nres; i++) {
        if (PMIX_CHECK_KEY(&res[i], PMIX_QUERY_NUM_GROUPS) && res[i].value.type == PMIX_SIZE)
            num = res[i].value.data.size;
        if (PMIX_CHECK_KEY(&res[i], PMIX_QUERY_GROUP_NAMES) &&
            res[i].value.type == PMIX_DATA_ARRAY && res[i].value.data.darray->type == PMIX_STRING) {
            char **s = (char **)res[i].value.data.darray->array;
            names[0] = '\0';
            for (size_t j = 0; j < res[i].value.data.darray->size; j++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                         j ? "," : "", s[j]);
        }
        if (PMIX_CHECK_KEY(&res[i], PMIX_QUERY_GROUP_MEMBERSHIP) &&
            res[i].value.type == PMIX_DATA_ARRAY && res[i].value.data.darray->type == PMIX_PROC) {
            pmix_proc_t *p = (pmix_proc_t *)res[i].value.data.darray->array;
            members[0] = '\0';
            for (size_t j = 0; j < res[i].value.data.darray->size; j++)
                snprintf(members + strlen(members), sizeof members - strlen(members), "%s%s:%u",
                         j ? "," : "", p[j].nspace, p[j].rank);
        }
    }
    printf("pmix groups num %zu names %s members %s\n", num, names, members);
    fflush(stdout);
}

int main(void)
{
    pmix_status_t rc;
    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_group_query: PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    pmix_proc_t procs[3];
    for (pmix_rank_t r = 0; r < 3; r++)
        PMIX_LOAD_PROCID(&procs[r], me.nspace, r);
    if (me.rank < 3) {
        pmix_info_t *results = NULL;
        size_t nresults = 0;
        pmix_info_t dir;
        bool assign = true;
        PMIX_INFO_LOAD(&dir, PMIX_GROUP_ASSIGN_CONTEXT_ID, &assign, PMIX_BOOL);
        if ((rc = PMIx_Group_construct("gq", procs, 3, &dir, 1, &results, &nresults)) !=
            PMIX_SUCCESS) {
            fprintf(stderr, "pmix_group_query: construct: %s\n", PMIx_Error_string(rc));
            return 1;
        }
    }
    if (fence())
        return 1;
    if (me.rank == 3)
        ask();
    if (fence())
        return 1;
    if (me.rank < 3 && (rc = PMIx_Group_destruct("gq", NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_group_query: destruct: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    if (fence())
        return 1;
    if (me.rank == 3)
        ask();
    if (fence())
        return 1;
    PMIx_Finalize(NULL, 0);
    return 0;
}
