/* pmix_attrs.c: ask the server which PMIx functions its host serves
 * (PMIx_Query_info of PMIX_QUERY_ATTRIBUTE_SUPPORT with the qualifier
 * PMIX_HOST_FUNCTIONS), as `pattrs --host` does.
 *
 * Usage: pmix_attrs   (1 rank)
 *
 * Prints "pmix attrs status S" (the query's status, PMIx_Error_string)
 * and, on success, "pmix attrs host functions F" with the comma-separated
 * list the server returned. Exit status 0 either way: the caller judges.
 */
#include <stdio.h>
#include <string.h>

#include <pmix.h>

int main(void)
{
    pmix_proc_t me;
    pmix_query_t q;
    pmix_info_t *res = NULL;
    size_t nres = 0;
    char *keys[] = {PMIX_QUERY_ATTRIBUTE_SUPPORT, NULL};
    pmix_status_t rc;

    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_attrs: PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    PMIX_QUERY_CONSTRUCT(&q);
    q.keys = keys;
    PMIX_QUERY_QUALIFIERS_CREATE(&q, 1);
    PMIX_INFO_LOAD(&q.qualifiers[0], PMIX_HOST_FUNCTIONS, "all", PMIX_STRING);
    rc = PMIx_Query_info(&q, 1, &res, &nres);
    printf("pmix attrs status %s\n", PMIx_Error_string(rc));
    /* The answer: PMIX_QUERY_ATTRIBUTE_SUPPORT holding an array of infos,
     * one of them PMIX_HOST_FUNCTIONS with the list. */
    for (size_t i = 0; rc == PMIX_SUCCESS && i < nres; i++) {
        if (res[i].value.type != PMIX_DATA_ARRAY || res[i].value.data.darray == NULL ||
            res[i].value.data.darray->type != PMIX_INFO)
            continue;
        pmix_info_t *in = (pmix_info_t *)res[i].value.data.darray->array;
        for (size_t j = 0; j < res[i].value.data.darray->size; j++)
            if (PMIX_CHECK_KEY(&in[j], PMIX_HOST_FUNCTIONS) && in[j].value.type == PMIX_STRING)
                printf("pmix attrs host functions %s\n", in[j].value.data.string);
    }
    fflush(stdout);
    PMIx_Finalize(NULL, 0);
    return 0;
}
