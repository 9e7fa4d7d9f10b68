/* pmi2_capi.c: error codes and edge cases of fastpmi's PMI-2 C ABI.
 *
 * Built against fastpmi's include/pmi2.h and linked with fastpmi's -lpmi2.
 * Usage: pmi2_capi N [launcher|singleton|abort]
 *   N: expected job size (all ranks on one node).
 *   launcher (default): under the fastpmi launcher (name service and job
 *     connect available).
 *   singleton: run without any launcher (N = 1; name service and job
 *     connect fail with PMI2_ERR_OTHER).
 *   abort: after the checks up to the first fence, rank N-1 calls
 *     PMI2_Abort(1, "pmi2_capi abort test") and the others wait in a fence.
 * Checked:
 *   - before PMI2_Init: PMI2_Initialized() == 0, calls return PMI2_ERR_INIT;
 *     PMI2_Init with a NULL output is PMI2_ERR_INVALID_ARG;
 *   - rank/size/GetRank/GetSize (local size == N);
 *   - put argument checks: NULL key/value, empty key, '=' in a key, 64-byte
 *     key accepted, 65-byte key PMI2_ERR_INVALID_KEY_LENGTH, 1024-byte value
 *     accepted, 1025-byte value PMI2_ERR_INVALID_VAL_LENGTH;
 *   - get: every rank's 1024-byte value; the negative-vallen truncation rule
 *     (maxvalue 10, len, len + 1); jobid NULL and ""; maxvalue 0; NULL
 *     vallen/value; a missing key (PMI2_ERR_OTHER); another job's id;
 *   - int arrays: localRanksCount, localRanks (full and cut at 1),
 *     universeSize, PMI_process_mapping (not an int array: PMI2_ERR_OTHER),
 *     a missing attribute (found 0);
 *   - string attributes into a too-small buffer (PMI2_ERR_NOMEM, truncated);
 *     PMI2_Job_GetId likewise;
 *   - PMIX_Ring: two rounds and an empty value; a value too long for
 *     maxvalue;
 *   - PMI2_Job_Spawn with bad arguments (no command, maxprocs 0, a
 *     negative argc, NULL commands): PMI2_ERR_INVALID_ARG before anything
 *     is sent (spawning itself: pmi2_spawn.c);
 *   - name service publish / lookup / unpublish and job connect (launcher);
 *   - after PMI2_Finalize: PMI2_ERR_INIT, PMI2_Initialized() == 0.
 * Rank 0 prints `pmi2 capi ok size=N`; failed checks are printed as
 * `pmi2_capi: rank R: ...` on stderr and make the exit status 1.
 */
#include <pmi2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank = -1, size = -1, failures = 0;

#define CHECK_WHO "pmi2_capi: rank %d: ", rank
#include "check.h"

/* A PMI2_MAX_VALLEN-byte value that names rank r. */
static void big_value(int r, char out[PMI2_MAX_VALLEN + 1])
{
    int n = snprintf(out, PMI2_MAX_VALLEN + 1, "max-%d-", r);
    for (int i = n; i < PMI2_MAX_VALLEN; i++)
        out[i] = "0123456789abcdef"[(r + i) % 16];
    out[PMI2_MAX_VALLEN] = '\0';
}

static void ring_round(const char *tag)
{
    char mine[64], left[64], right[64], want[64];
    int r = -1, n = -1;
    snprintf(mine, sizeof mine, "%s-%d", tag, rank);
    EXPECT_RC(PMIX_Ring(mine, &r, &n, left, right, sizeof left), PMI2_SUCCESS);
    if (r != rank || n != size)
        FAIL("PMIX_Ring gave rank %d of %d", r, n);
    snprintf(want, sizeof want, "%s-%d", tag, (rank + size - 1) % size);
    if (strcmp(left, want) != 0)
        FAIL("PMIX_Ring left \"%s\", expected \"%s\"", left, want);
    snprintf(want, sizeof want, "%s-%d", tag, (rank + 1) % size);
    if (strcmp(right, want) != 0)
        FAIL("PMIX_Ring right \"%s\", expected \"%s\"", right, want);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 2 ? argv[2] : "launcher";
    int launcher = strcmp(mode, "singleton") != 0;
    int spawned = -1, appnum = -1, n = -1, found = -1, outlen = -1, vallen = 0, rc;
    char jobid[256], key[PMI2_MAX_KEYLEN + 2], value[PMI2_MAX_VALLEN + 1];
    char got[PMI2_MAX_VALLEN + 2], big[PMI2_MAX_VALLEN + 2];

    /* Before init. */
    if (PMI2_Initialized() != 0)
        FAIL("PMI2_Initialized() before PMI2_Init");
    EXPECT_RC(PMI2_KVS_Put("k", "v"), PMI2_ERR_INIT);
    EXPECT_RC(PMI2_KVS_Fence(), PMI2_ERR_INIT);
    EXPECT_RC(PMI2_Job_GetRank(&n), PMI2_ERR_INIT);
    EXPECT_RC(PMI2_KVS_Get(NULL, PMI2_ID_NULL, "k", got, sizeof got, &vallen), PMI2_ERR_INIT);
    EXPECT_RC(PMI2_Finalize(), PMI2_ERR_INIT);
    EXPECT_RC(PMI2_Init(&spawned, NULL, &rank, &appnum), PMI2_ERR_INVALID_ARG);

    rc = PMI2_Init(&spawned, &size, &rank, &appnum);
    if (rc != PMI2_SUCCESS) {
        fprintf(stderr, "pmi2_capi: PMI2_Init failed: rc=%d\n", rc);
        return 2;
    }
    if (PMI2_Initialized() != 1)
        FAIL("PMI2_Initialized() after PMI2_Init");
    if (argc > 1 && size != atoi(argv[1]))
        FAIL("size %d, expected %s", size, argv[1]);
    if (size < 1 || rank < 0 || rank >= size) {
        FAIL("rank %d size %d", rank, size);
        return 1;
    }
    if (spawned != 0 || appnum != 0)
        FAIL("spawned %d appnum %d", spawned, appnum);
    EXPECT_RC(PMI2_Job_GetRank(&n), PMI2_SUCCESS);
    if (n != rank)
        FAIL("PMI2_Job_GetRank %d", n);
    EXPECT_RC(PMI2_Job_GetRank(NULL), PMI2_ERR_INVALID_ARG);
    EXPECT_RC(PMI2_Info_GetSize(&n), PMI2_SUCCESS);
    if (n != size)
        FAIL("PMI2_Info_GetSize %d, expected %d", n, size);
    EXPECT_RC(PMI2_Job_GetId(jobid, sizeof jobid), PMI2_SUCCESS);
    {
        char tiny[2] = {'x', 'x'};
        EXPECT_RC(PMI2_Job_GetId(tiny, sizeof tiny), PMI2_ERR_NOMEM);
        if (tiny[0] != jobid[0] || tiny[1] != '\0')
            FAIL("truncated job id not NUL-terminated");
        EXPECT_RC(PMI2_Job_GetId(tiny, 0), PMI2_ERR_INVALID_LENGTH);
        EXPECT_RC(PMI2_Job_GetId(NULL, 10), PMI2_ERR_INVALID_ARG);
    }

    /* Put argument checks. */
    EXPECT_RC(PMI2_KVS_Put(NULL, "v"), PMI2_ERR_INVALID_ARG);
    EXPECT_RC(PMI2_KVS_Put("k", NULL), PMI2_ERR_INVALID_ARG);
    EXPECT_RC(PMI2_KVS_Put("", "v"), PMI2_ERR_INVALID_KEY);
    EXPECT_RC(PMI2_KVS_Put("a=b", "v"), PMI2_ERR_INVALID_KEY);
    memset(key, 'k', PMI2_MAX_KEYLEN + 1);
    key[PMI2_MAX_KEYLEN + 1] = '\0';
    EXPECT_RC(PMI2_KVS_Put(key, "v"), PMI2_ERR_INVALID_KEY_LENGTH);
    EXPECT_RC(PMI2_Info_PutNodeAttr(key, "v"), PMI2_ERR_INVALID_KEY_LENGTH);
    EXPECT_RC(PMI2_KVS_Get(NULL, PMI2_ID_NULL, key, got, sizeof got, &vallen),
              PMI2_ERR_INVALID_KEY_LENGTH);
    snprintf(key + PMI2_MAX_KEYLEN - 8, 9, "%08d", rank); /* 64 bytes */
    EXPECT_RC(PMI2_KVS_Put(key, "sixty-four-byte-key"), PMI2_SUCCESS);
    memset(big, 'v', PMI2_MAX_VALLEN + 1);
    big[PMI2_MAX_VALLEN + 1] = '\0';
    EXPECT_RC(PMI2_KVS_Put("capi-too-long", big), PMI2_ERR_INVALID_VAL_LENGTH);
    EXPECT_RC(PMI2_Info_PutNodeAttr("capi-too-long", big), PMI2_ERR_INVALID_VAL_LENGTH);
    EXPECT_RC(PMI2_KVS_Put("capi-newline", "a\nb"), PMI2_ERR_INVALID_VAL);
    {
        char k[32];
        snprintf(k, sizeof k, "capi-max-%d", rank);
        big_value(rank, value);
        EXPECT_RC(PMI2_KVS_Put(k, value), PMI2_SUCCESS);
        snprintf(k, sizeof k, "capi-empty-%d", rank);
        EXPECT_RC(PMI2_KVS_Put(k, ""), PMI2_SUCCESS);
    }
    EXPECT_RC(PMI2_KVS_Fence(), PMI2_SUCCESS);

    if (strcmp(mode, "abort") == 0) {
        if (rank == size - 1) {
            usleep(100 * 1000);
            PMI2_Abort(1, "pmi2_capi abort test");
            FAIL("PMI2_Abort returned");
            return 1;
        }
        rc = PMI2_KVS_Fence();
        fprintf(stderr, "pmi2_capi: rank %d: fence after rank %d's abort returned %d\n", rank,
                size - 1, rc);
        return rc == PMI2_ERR_OTHER ? 3 : 1;
    }

    /* Gets. */
    for (int i = 0; i < size; i++) {
        int r = (rank + i) % size;
        char k[32];
        snprintf(k, sizeof k, "capi-max-%d", r);
        big_value(r, value);
        memset(got, 0, sizeof got);
        EXPECT_RC(PMI2_KVS_Get(jobid, r, k, got, PMI2_MAX_VALLEN + 1, &vallen), PMI2_SUCCESS);
        if (vallen != PMI2_MAX_VALLEN || strcmp(got, value) != 0)
            FAIL("get %s: vallen %d, value %.20s...", k, vallen, got);
        snprintf(k, sizeof k, "capi-empty-%d", r);
        got[0] = 'x';
        EXPECT_RC(PMI2_KVS_Get(NULL, PMI2_ID_NULL, k, got, sizeof got, &vallen), PMI2_SUCCESS);
        if (vallen != 0 || got[0] != '\0')
            FAIL("get %s: vallen %d, value \"%s\"", k, vallen, got);
    }
    {
        char k[32], want[PMI2_MAX_VALLEN + 1];
        int r = (rank + 1) % size;
        snprintf(k, sizeof k, "capi-max-%d", r);
        big_value(r, want);
        /* Truncated: maxvalue - 1 bytes, NUL, *vallen = -(full length). */
        memset(got, 'x', sizeof got);
        EXPECT_RC(PMI2_KVS_Get("", r, k, got, 10, &vallen), PMI2_SUCCESS);
        if (vallen != -PMI2_MAX_VALLEN || got[9] != '\0' || strncmp(got, want, 9) != 0 ||
            got[10] != 'x')
            FAIL("truncated get: vallen %d, value \"%.12s\"", vallen, got);
        /* Exactly the value without room for the NUL: truncated too. */
        EXPECT_RC(PMI2_KVS_Get(NULL, r, k, got, PMI2_MAX_VALLEN, &vallen), PMI2_SUCCESS);
        if (vallen != -PMI2_MAX_VALLEN || got[PMI2_MAX_VALLEN - 1] != '\0')
            FAIL("get into len bytes: vallen %d", vallen);
        EXPECT_RC(PMI2_KVS_Get(NULL, r, k, got, 0, &vallen), PMI2_ERR_INVALID_LENGTH);
        EXPECT_RC(PMI2_KVS_Get(NULL, r, k, got, sizeof got, NULL), PMI2_ERR_INVALID_ARG);
        EXPECT_RC(PMI2_KVS_Get(NULL, r, k, NULL, sizeof got, &vallen), PMI2_ERR_INVALID_ARG);
        EXPECT_RC(PMI2_KVS_Get(NULL, r, NULL, got, sizeof got, &vallen), PMI2_ERR_INVALID_ARG);
        vallen = 7;
        EXPECT_RC(PMI2_KVS_Get(NULL, PMI2_ID_NULL, "capi-nobody-put-this", got, sizeof got, &vallen),
                  PMI2_ERR_OTHER);
        if (vallen != 0 || got[0] != '\0')
            FAIL("missing key: vallen %d, value \"%s\"", vallen, got);
        EXPECT_RC(PMI2_KVS_Get("fastpmi-no-such-job", PMI2_ID_NULL, k, got, sizeof got, &vallen),
                  PMI2_ERR_OTHER);
    }

    /* Integer arrays. */
    {
        int arr[4096];
        EXPECT_RC(PMI2_Info_GetNodeAttrIntArray("localRanksCount", arr, 4096, &outlen, &found),
                  PMI2_SUCCESS);
        if (found != 1 || outlen != 1 || arr[0] != size)
            FAIL("localRanksCount: found %d outlen %d [0]=%d", found, outlen, arr[0]);
        EXPECT_RC(PMI2_Info_GetNodeAttrIntArray("localRanks", arr, 4096, &outlen, &found),
                  PMI2_SUCCESS);
        if (found != 1 || outlen != size)
            FAIL("localRanks: found %d outlen %d", found, outlen);
        for (int i = 0; i < outlen && i < 4096; i++)
            if (arr[i] != i)
                FAIL("localRanks[%d] = %d", i, arr[i]);
        arr[1] = -7;
        EXPECT_RC(PMI2_Info_GetNodeAttrIntArray("localRanks", arr, 1, &outlen, &found),
                  PMI2_SUCCESS);
        if (found != 1 || outlen != 1 || arr[0] != 0 || arr[1] != -7)
            FAIL("localRanks cut at 1: found %d outlen %d", found, outlen);
        EXPECT_RC(PMI2_Info_GetNodeAttrIntArray("localRanks", arr, 4096, NULL, &found),
                  PMI2_ERR_INVALID_ARG);
        EXPECT_RC(PMI2_Info_GetNodeAttrIntArray("localRanks", arr, 0, &outlen, &found),
                  PMI2_ERR_INVALID_LENGTH);
        EXPECT_RC(PMI2_Info_GetNodeAttrIntArray("capi-no-such-attr", arr, 4, &outlen, &found),
                  PMI2_SUCCESS);
        if (found != 0 || outlen != 0)
            FAIL("missing int array: found %d outlen %d", found, outlen);
        EXPECT_RC(PMI2_Info_GetJobAttrIntArray("universeSize", arr, 4, &outlen, &found),
                  PMI2_SUCCESS);
        if (found != 1 || outlen != 1 || arr[0] < size)
            FAIL("universeSize: found %d outlen %d [0]=%d", found, outlen, arr[0]);
        EXPECT_RC(PMI2_Info_GetJobAttrIntArray("PMI_process_mapping", arr, 4, &outlen, &found),
                  PMI2_ERR_OTHER);
    }

    /* String attributes. */
    {
        char small[5] = "xxxx";
        char want[64];
        snprintf(want, sizeof want, "(vector,(0,1,%d))", size);
        EXPECT_RC(PMI2_Info_GetJobAttr("PMI_process_mapping", got, sizeof got, &found), PMI2_SUCCESS);
        if (found != 1 || strcmp(got, want) != 0)
            FAIL("PMI_process_mapping: found %d \"%s\"", found, got);
        EXPECT_RC(PMI2_Info_GetJobAttr("PMI_process_mapping", small, sizeof small, &found),
                  PMI2_ERR_NOMEM);
        if (found != 1 || strcmp(small, "(vec") != 0)
            FAIL("truncated job attribute: found %d \"%s\"", found, small);
        EXPECT_RC(PMI2_Info_GetJobAttr("PMI_process_mapping", got, sizeof got, NULL),
                  PMI2_ERR_INVALID_ARG);
        EXPECT_RC(PMI2_Info_GetJobAttr("capi-no-such-attr", got, sizeof got, &found), PMI2_SUCCESS);
        if (found != 0)
            FAIL("missing job attribute found");
        EXPECT_RC(PMI2_Info_GetNodeAttr("capi-no-such-attr", got, 0, &found, 0),
                  PMI2_ERR_INVALID_LENGTH);
        if (rank == 0)
            EXPECT_RC(PMI2_Info_PutNodeAttr("capi-attr", "node-attribute-value"), PMI2_SUCCESS);
        EXPECT_RC(PMI2_Info_GetNodeAttr("capi-attr", got, sizeof got, &found, 1), PMI2_SUCCESS);
        if (found != 1 || strcmp(got, "node-attribute-value") != 0)
            FAIL("capi-attr: found %d \"%s\"", found, got);
        EXPECT_RC(PMI2_Info_GetNodeAttr("capi-attr", small, sizeof small, &found, 0),
                  PMI2_ERR_NOMEM);
        if (found != 1 || strcmp(small, "node") != 0)
            FAIL("truncated node attribute: found %d \"%s\"", found, small);
    }

    /* Ring. */
    ring_round("ring");
    ring_round("second");
    {
        char left[8] = "x", right[8] = "x";
        int r = -1, nr = -1;
        EXPECT_RC(PMIX_Ring("", &r, &nr, left, right, sizeof left), PMI2_SUCCESS);
        if (left[0] != '\0' || right[0] != '\0')
            FAIL("empty ring values: \"%s\" \"%s\"", left, right);
        EXPECT_RC(PMIX_Ring("longer-than-8", &r, &nr, left, right, sizeof left),
                  PMI2_ERR_INVALID_VAL_LENGTH);
        EXPECT_RC(PMIX_Ring("v", NULL, &nr, left, right, sizeof left), PMI2_ERR_INVALID_ARG);
    }

    /* Spawn argument checks (spawning itself: pmi2_spawn.c). */
    {
        const char *cmds[1] = {"true"};
        int argcs[1] = {0}, neg[1] = {-1}, maxprocs[1] = {1}, zero[1] = {0}, errors[1] = {0};
        char newjob[64];
        EXPECT_RC(PMI2_Job_Spawn(0, cmds, argcs, NULL, maxprocs, NULL, NULL, 0, NULL, newjob,
                                 sizeof newjob, errors),
                  PMI2_ERR_INVALID_ARG);
        EXPECT_RC(PMI2_Job_Spawn(1, cmds, argcs, NULL, zero, NULL, NULL, 0, NULL, newjob,
                                 sizeof newjob, errors),
                  PMI2_ERR_INVALID_ARG);
        EXPECT_RC(PMI2_Job_Spawn(1, cmds, neg, NULL, maxprocs, NULL, NULL, 0, NULL, newjob,
                                 sizeof newjob, errors),
                  PMI2_ERR_INVALID_ARG);
        EXPECT_RC(PMI2_Job_Spawn(1, NULL, argcs, NULL, maxprocs, NULL, NULL, 0, NULL, newjob,
                                 sizeof newjob, errors),
                  PMI2_ERR_INVALID_ARG);
    }

    /* Name service and jobs. */
    if (launcher) {
        char port[64];
        if (rank == 0)
            EXPECT_RC(PMI2_Nameserv_publish("capi-service", NULL, "capi-port-0"), PMI2_SUCCESS);
        EXPECT_RC(PMI2_KVS_Fence(), PMI2_SUCCESS);
        EXPECT_RC(PMI2_Nameserv_lookup("capi-service", NULL, port, sizeof port), PMI2_SUCCESS);
        if (strcmp(port, "capi-port-0") != 0)
            FAIL("lookup gave \"%s\"", port);
        EXPECT_RC(PMI2_Nameserv_lookup("capi-service", NULL, port, 4), PMI2_ERR_NOMEM);
        EXPECT_RC(PMI2_KVS_Fence(), PMI2_SUCCESS);
        if (rank == 0)
            EXPECT_RC(PMI2_Nameserv_unpublish("capi-service", NULL), PMI2_SUCCESS);
        EXPECT_RC(PMI2_KVS_Fence(), PMI2_SUCCESS);
        EXPECT_RC(PMI2_Nameserv_lookup("capi-service", NULL, port, sizeof port), PMI2_ERR_OTHER);
        EXPECT_RC(PMI2_Job_Connect(jobid, NULL), PMI2_SUCCESS);
        EXPECT_RC(PMI2_Job_Disconnect(jobid), PMI2_SUCCESS);
    } else {
        char port[64];
        EXPECT_RC(PMI2_Nameserv_publish("capi-service", NULL, "p"), PMI2_ERR_OTHER);
        EXPECT_RC(PMI2_Nameserv_lookup("capi-service", NULL, port, sizeof port), PMI2_ERR_OTHER);
        EXPECT_RC(PMI2_Job_Connect(jobid, NULL), PMI2_ERR_OTHER);
    }
    EXPECT_RC(PMI2_Nameserv_publish(NULL, NULL, "p"), PMI2_ERR_INVALID_ARG);
    EXPECT_RC(PMI2_Job_Connect(NULL, NULL), PMI2_ERR_INVALID_ARG);

    EXPECT_RC(PMI2_Finalize(), PMI2_SUCCESS);
    if (PMI2_Initialized() != 0)
        FAIL("PMI2_Initialized() after PMI2_Finalize");
    EXPECT_RC(PMI2_KVS_Put("k", "v"), PMI2_ERR_INIT);
    EXPECT_RC(PMI2_Finalize(), PMI2_ERR_INIT);

    if (failures) {
        fprintf(stderr, "pmi2_capi: rank %d: %d check(s) failed\n", rank, failures);
        return 1;
    }
    if (rank == 0) {
        printf("pmi2 capi ok size=%d\n", size);
        fflush(stdout);
    }
    return 0;
}
