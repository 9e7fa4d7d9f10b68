/* pmi2_slurm.c: interop check for Slurm's PMI-2 client library (libpmi2.so.0).
 *
 * Targets the semantics of docs/wire-protocol.md (fence is a barrier; a node
 * attribute get with wait blocks until the put). Each rank:
 *   1. PMI2_Init; checks rank/size range, spawned 0, the size against
 *      argv[1] when given, and appnum against argv[2] (default 0; Slurm's
 *      slurmstepd always sends appnum -1).
 *   2. PMI2_Job_GetId.
 *   3. PMI2_KVS_Put("key-<rank>", value_for(rank)), a 100-byte value that
 *      carries the rank and a rank-dependent padding.
 *   4. PMI2_KVS_Fence.
 *   5. PMI2_KVS_Get(jobid, r, "key-<r>") for every rank r (starting at its own
 *      rank + 1 so ranks do not all hit the same key at once), verifying the
 *      value byte for byte and the returned length.
 *   6. PMI2_KVS_Get of a key nobody put must fail (Slurm's client maps
 *      found=FALSE to PMI2_ERR_OTHER) and leave the connection usable.
 *   7. PMI2_Info_GetJobAttr("PMI_process_mapping") == "(vector,(0,1,N))", or
 *      "(vector,(0,N/P,P))" with argv[3] = P ranks per node (a job over
 *      node servers, docs/nested.md).
 *   8. PMI2_Info_GetNodeAttr of a never-put attribute without wait: rc 0,
 *      found 0.
 *   9. Rank 0 (with argv[3]: each node's first rank F) sleeps 20 ms then
 *      PMI2_Info_PutNodeAttr("fastpmi-test-attr",
 *      "hello-from-rank<F>-size<N>"); every other rank of the node calls
 *      PMI2_Info_GetNodeAttr(..., waitfor=1) (so it normally waits) and checks
 *      found == 1 and the exact value.
 *  10. PMI2_Finalize.
 * Rank 0 prints `pmi2 ok size=N` when all of its own checks passed. Every rank
 * prints one diagnostic line per failed check on stderr (prefixed
 * `pmi2_slurm: rank R:`), continues with the checks that still make sense,
 * and exits 1 if any check failed (2 if PMI2_Init itself failed).
 *
 * Build: gcc -O2 -I/usr/include/slurm -o pmi2_slurm pmi2_slurm.c -lpmi2
 *        (Debian package libpmi2-0-dev)
 * Run:   fastpmi -n 64 ./pmi2_slurm 64
 *        srun --mpi=pmi2 -n 64 ./pmi2_slurm 64 -1
 */
#include <pmi2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VALUE_LEN 100
#define NODE_ATTR "fastpmi-test-attr"

static int rank = -1, size = -1, failures = 0;

#define CHECK_WHO "pmi2_slurm: rank %d: ", rank
#include "check.h"

/* Exactly VALUE_LEN characters: "rank-<r>-" then a padding pattern that
 * depends on r, so a value returned for the wrong key is caught. Only
 * [a-z0-9-] (no ';', '=' or space, which the wire formats cannot carry). */
static void value_for(int r, char out[VALUE_LEN + 1])
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    int n = snprintf(out, VALUE_LEN + 1, "rank-%d-", r);
    for (int i = n; i < VALUE_LEN; i++)
        out[i] = alphabet[(r * 7 + i) % 36];
    out[VALUE_LEN] = '\0';
}

int main(int argc, char **argv)
{
    int spawned = -1, appnum = -1, rc;
    char jobid[1024] = "";
    char key[PMI2_MAX_KEYLEN];
    char value[VALUE_LEN + 1];
    char got[PMI2_MAX_VALLEN + 1];

    rc = PMI2_Init(&spawned, &size, &rank, &appnum);
    if (rc != PMI2_SUCCESS) {
        fprintf(stderr, "pmi2_slurm: PMI2_Init failed: rc=%d\n", rc);
        return 2;
    }
    if (size < 1 || rank < 0 || rank >= size)
        FAIL("PMI2_Init gave rank %d size %d", rank, size);
    if (argc > 1 && size != atoi(argv[1]))
        FAIL("PMI2_Init size = %d, expected %s", size, argv[1]);
    {
        int want_appnum = argc > 2 ? atoi(argv[2]) : 0;
        if (appnum != want_appnum)
            FAIL("PMI2_Init appnum = %d, expected %d", appnum, want_appnum);
    }
    if (spawned != 0)
        FAIL("PMI2_Init spawned = %d, expected 0", spawned);
    if (size < 1 || rank < 0 || rank >= size) {
        PMI2_Finalize();
        return 1;
    }

    int ppn = argc > 3 ? atoi(argv[3]) : size;
    if (ppn < 1 || size % ppn != 0) {
        FAIL("%d ranks per node do not divide %d ranks", ppn, size);
        ppn = size;
    }

    rc = PMI2_Job_GetId(jobid, sizeof jobid);
    if (rc != PMI2_SUCCESS)
        FAIL("PMI2_Job_GetId rc=%d", rc);

    snprintf(key, sizeof key, "key-%d", rank);
    value_for(rank, value);
    rc = PMI2_KVS_Put(key, value);
    if (rc != PMI2_SUCCESS)
        FAIL("PMI2_KVS_Put(%s) rc=%d", key, rc);

    rc = PMI2_KVS_Fence();
    if (rc != PMI2_SUCCESS)
        FAIL("PMI2_KVS_Fence rc=%d", rc);

    for (int i = 1; i <= size; i++) {
        int r = (rank + i) % size, vallen = 0;
        snprintf(key, sizeof key, "key-%d", r);
        value_for(r, value);
        memset(got, 0, sizeof got);
        rc = PMI2_KVS_Get(jobid, r, key, got, sizeof got, &vallen);
        if (rc != PMI2_SUCCESS) {
            FAIL("PMI2_KVS_Get(jobid=%s, src=%d, %s) rc=%d", jobid, r, key, rc);
            continue;
        }
        if (strcmp(got, value) != 0)
            FAIL("PMI2_KVS_Get(%s) from rank %d returned \"%s\", expected \"%s\"",
                 key, r, got, value);
        if (vallen != VALUE_LEN)
            FAIL("PMI2_KVS_Get(%s) vallen = %d, expected %d", key, vallen, VALUE_LEN);
    }

    {
        int vallen = 0;
        rc = PMI2_KVS_Get(jobid, PMI2_ID_NULL, "fastpmi-no-such-key", got, sizeof got, &vallen);
        if (rc == PMI2_SUCCESS)
            FAIL("PMI2_KVS_Get of a key nobody put succeeded (value \"%s\")", got);
    }

    {
        int found = -1;
        char expected[64];
        snprintf(expected, sizeof expected, "(vector,(0,%d,%d))", size / ppn, ppn);
        memset(got, 0, sizeof got);
        rc = PMI2_Info_GetJobAttr("PMI_process_mapping", got, sizeof got, &found);
        if (rc != PMI2_SUCCESS)
            FAIL("PMI2_Info_GetJobAttr(PMI_process_mapping) rc=%d", rc);
        else if (found != 1)
            FAIL("PMI2_Info_GetJobAttr(PMI_process_mapping) found=%d", found);
        else if (strcmp(got, expected) != 0)
            FAIL("PMI_process_mapping = \"%s\", expected \"%s\"", got, expected);
    }

    {
        int found = -1;
        rc = PMI2_Info_GetNodeAttr("fastpmi-never-put-attr", got, sizeof got, &found, 0);
        if (rc != PMI2_SUCCESS)
            FAIL("PMI2_Info_GetNodeAttr(fastpmi-never-put-attr, waitfor=0) rc=%d", rc);
        else if (found != 0)
            FAIL("PMI2_Info_GetNodeAttr(fastpmi-never-put-attr, waitfor=0) found=%d value \"%s\"",
                 found, got);
    }

    {
        char attr[64];
        int first = rank - rank % ppn;
        snprintf(attr, sizeof attr, "hello-from-rank%d-size%d", first, size);
        if (rank == first) {
            usleep(20 * 1000);
            rc = PMI2_Info_PutNodeAttr(NODE_ATTR, attr);
            if (rc != PMI2_SUCCESS)
                FAIL("PMI2_Info_PutNodeAttr(%s) rc=%d", NODE_ATTR, rc);
        } else {
            int found = -1;
            memset(got, 0, sizeof got);
            rc = PMI2_Info_GetNodeAttr(NODE_ATTR, got, sizeof got, &found, 1);
            if (rc != PMI2_SUCCESS)
                FAIL("PMI2_Info_GetNodeAttr(%s, waitfor=1) rc=%d", NODE_ATTR, rc);
            else if (found != 1)
                FAIL("PMI2_Info_GetNodeAttr(%s, waitfor=1) found=%d", NODE_ATTR, found);
            else if (strcmp(got, attr) != 0)
                FAIL("node attribute %s = \"%s\", expected \"%s\"", NODE_ATTR, got, attr);
        }
    }

    rc = PMI2_Finalize();
    if (rc != PMI2_SUCCESS)
        FAIL("PMI2_Finalize rc=%d", rc);

    if (failures) {
        fprintf(stderr, "pmi2_slurm: rank %d: %d check(s) failed\n", rank, failures);
        return 1;
    }
    if (rank == 0) {
        printf("pmi2 ok size=%d\n", size);
        fflush(stdout);
    }
    return 0;
}
