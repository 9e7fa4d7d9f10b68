/*
 * pmix_client.c: a PMIx client of libpmix (Debian's libpmix-dev), for the
 * PMIx host's own tests (tests/pmix_client.rs).
 *
 *   pmix_client exchange
 *     PMIx_Put of "card" = "card-R", PMIx_Commit, PMIx_Fence collecting
 *     data, then PMIx_Get of every rank's card; prints
 *     "pmix exchange ok rank R size N".
 *   pmix_client exit-early
 *     PMIx_Init, then exit(0) without PMIx_Finalize.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pmix.h>

int main(int argc, char **argv)
{
    pmix_proc_t me, wild, peer;
    pmix_value_t *v = NULL, val;
    pmix_info_t info;
    pmix_status_t rc;
    uint32_t size = 0;
    char card[64];
    bool collect = true;

    if (argc < 2) {
        fprintf(stderr, "usage: pmix_client exchange|exit-early\n");
        return 2;
    }
    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_client: PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    if (strcmp(argv[1], "exit-early") == 0)
        exit(0);
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    if ((rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &v)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_client: job size: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    size = v->data.uint32;
    snprintf(card, sizeof card, "card-%u", me.rank);
    PMIX_VALUE_LOAD(&val, card, PMIX_STRING);
    if ((rc = PMIx_Put(PMIX_GLOBAL, "card", &val)) != PMIX_SUCCESS ||
        (rc = PMIx_Commit()) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_client: put: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    if ((rc = PMIx_Fence(NULL, 0, &info, 1)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_client: fence: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    for (uint32_t r = 0; r < size; r++) {
        char want[64];
        PMIX_LOAD_PROCID(&peer, me.nspace, r);
        snprintf(want, sizeof want, "card-%u", r);
        if ((rc = PMIx_Get(&peer, "card", NULL, 0, &v)) != PMIX_SUCCESS ||
            v->type != PMIX_STRING || strcmp(v->data.string, want) != 0) {
            fprintf(stderr, "pmix_client: rank %u: card of %u: %s\n", me.rank, r,
                    rc == PMIX_SUCCESS ? "wrong value" : PMIx_Error_string(rc));
            return 1;
        }
    }
    printf("pmix exchange ok rank %u size %u\n", me.rank, size);
    fflush(stdout);
    PMIx_Finalize(NULL, 0);
    return 0;
}
