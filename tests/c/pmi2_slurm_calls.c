/* pmi2_slurm_calls.c: the rest of fastpmi's libpmi2 C API under Slurm's own
 * PMI-2 server (srun --mpi=pmi2), beyond what pmi2_slurm.c checks.
 *
 * Built against fastpmi's include/pmi2.h and linked with fastpmi's -lpmi2.
 * Usage: srun --mpi=pmi2 -n N pmi2_slurm_calls N [abort]
 *   abort: after init, a put and a fence, rank N-1 calls
 *     PMI2_Abort(1, "pmi2_slurm_calls abort test") and the other ranks
 *     wait in a fence (slurmstepd cancels the step; nothing else runs).
 * Each rank (all on one node):
 *   1. PMI2_Init: size N, spawned 0; PMI2_Job_GetRank is the rank;
 *      PMI2_Job_GetId is "<SLURM_JOB_ID>.<SLURM_STEP_ID>"; PMI2_Info_GetSize
 *      is N (derived from PMI_process_mapping: Slurm has no localRanks).
 *   2. Job attribute universeSize is "N", and as an int array [N];
 *      node attribute localRanks as an int array: found 0 (Slurm has none).
 *   3. PMIX_Ring: left and right are the neighbours' values.
 *   4. Name service: rank 0 publishes a service, all fence, every rank
 *      looks it up (exact port); a never-published name is PMI2_ERR_OTHER;
 *      all fence, rank 0 unpublishes it.
 *   5. Calls slurmstepd never answers are refused at once, not hung on:
 *      PMI2_Job_Connect / PMI2_Job_Disconnect -> PMI2_ERR_OTHER; a KVS get
 *      naming another job -> PMI2_ERR_OTHER (slurmstepd would answer it
 *      from this job's KVS), while the same key of this job is found.
 *   6. PMI2_Job_Spawn -> PMI2_ERR_OTHER (the spawn is sent to slurmstepd,
 *      which does not start it in this test cluster).
 *   7. PMI2_Finalize.
 * Rank 0 prints `pmi2 slurm calls ok size=N` when all of its checks passed.
 * A failed check prints `pmi2_slurm_calls: rank R: ...` on stderr; exit 1
 * (2 if PMI2_Init failed).
 */
#include <pmi2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank = -1, size = -1, failures = 0;

#define CHECK_WHO "pmi2_slurm_calls: rank %d: ", rank
#include "check.h"

int main(int argc, char **argv)
{
    int spawned = -1, appnum = 0, n = -1, found = -1, outlen = -1, rc;
    char jobid[256] = "", want[256], got[PMI2_MAX_VALLEN + 1];
    const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");

    rc = PMI2_Init(&spawned, &size, &rank, &appnum);
    if (rc != PMI2_SUCCESS) {
        fprintf(stderr, "pmi2_slurm_calls: PMI2_Init failed: rc=%d\n", rc);
        return 2;
    }
    if (argc > 1 && size != atoi(argv[1]))
        FAIL("size %d, expected %s", size, argv[1]);
    if (spawned != 0)
        FAIL("spawned %d", spawned);
    EXPECT_RC(PMI2_Job_GetRank(&n), PMI2_SUCCESS);
    if (n != rank)
        FAIL("PMI2_Job_GetRank %d", n);
    EXPECT_RC(PMI2_Job_GetId(jobid, sizeof jobid), PMI2_SUCCESS);
    snprintf(want, sizeof want, "%s.%s", job ? job : "?", step ? step : "?");
    if (strcmp(jobid, want) != 0)
        FAIL("job id \"%s\", expected \"%s\"", jobid, want);
    EXPECT_RC(PMI2_Info_GetSize(&n), PMI2_SUCCESS);
    if (n != size)
        FAIL("PMI2_Info_GetSize %d, expected %d", n, size);

    if (argc > 2 && strcmp(argv[2], "abort") == 0) {
        EXPECT_RC(PMI2_KVS_Put("before-abort", "x"), PMI2_SUCCESS);
        EXPECT_RC(PMI2_KVS_Fence(), PMI2_SUCCESS);
        if (rank == size - 1) {
            PMI2_Abort(1, "pmi2_slurm_calls abort test");
            FAIL("PMI2_Abort returned");
            return 1;
        }
        rc = PMI2_KVS_Fence();
        fprintf(stderr, "pmi2_slurm_calls: rank %d: fence after rank %d's abort returned %d\n",
                rank, size - 1, rc);
        return 1;
    }

    /* Attributes. */
    EXPECT_RC(PMI2_Info_GetJobAttr("universeSize", got, sizeof got, &found), PMI2_SUCCESS);
    snprintf(want, sizeof want, "%d", size);
    if (found != 1 || strcmp(got, want) != 0)
        FAIL("universeSize found=%d \"%s\", expected \"%s\"", found, got, want);
    {
        int arr[4] = {-1, -1, -1, -1};
        EXPECT_RC(PMI2_Info_GetJobAttrIntArray("universeSize", arr, 4, &outlen, &found),
                  PMI2_SUCCESS);
        if (found != 1 || outlen != 1 || arr[0] != size)
            FAIL("universeSize int array found=%d outlen=%d [0]=%d", found, outlen, arr[0]);
        found = -1;
        EXPECT_RC(PMI2_Info_GetNodeAttrIntArray("localRanks", arr, 4, &outlen, &found),
                  PMI2_SUCCESS);
        if (found != 0 || outlen != 0)
            FAIL("localRanks found=%d outlen=%d (slurmstepd has no such attribute)", found,
                 outlen);
    }

    /* Ring. */
    {
        char value[64], left[64] = "", right[64] = "", wl[64], wr[64];
        int rrank = -1, rsize = -1;
        snprintf(value, sizeof value, "ring-%d", rank);
        EXPECT_RC(PMIX_Ring(value, &rrank, &rsize, left, right, sizeof left), PMI2_SUCCESS);
        snprintf(wl, sizeof wl, "ring-%d", (rank + size - 1) % size);
        snprintf(wr, sizeof wr, "ring-%d", (rank + 1) % size);
        if (rrank != rank || rsize != size || strcmp(left, wl) != 0 || strcmp(right, wr) != 0)
            FAIL("PMIX_Ring rank %d size %d left \"%s\" right \"%s\"", rrank, rsize, left,
                 right);
    }

    /* Name service (srun keeps the names). */
    {
        char svc[128], port[PMI2_MAX_VALLEN] = "";
        snprintf(svc, sizeof svc, "fastpmi-svc-%s", jobid);
        if (rank == 0)
            EXPECT_RC(PMI2_Nameserv_publish(svc, NULL, "port-of-rank-0"), PMI2_SUCCESS);
        EXPECT_RC(PMI2_KVS_Fence(), PMI2_SUCCESS);
        EXPECT_RC(PMI2_Nameserv_lookup(svc, NULL, port, sizeof port), PMI2_SUCCESS);
        if (strcmp(port, "port-of-rank-0") != 0)
            FAIL("lookup(%s) = \"%s\"", svc, port);
        EXPECT_RC(PMI2_Nameserv_lookup("fastpmi-never-published", NULL, port, sizeof port),
                  PMI2_ERR_OTHER);
        EXPECT_RC(PMI2_KVS_Fence(), PMI2_SUCCESS);
        if (rank == 0)
            EXPECT_RC(PMI2_Nameserv_unpublish(svc, NULL), PMI2_SUCCESS);
    }

    /* What slurmstepd never answers. */
    EXPECT_RC(PMI2_Job_Connect("999.0", NULL), PMI2_ERR_OTHER);
    EXPECT_RC(PMI2_Job_Disconnect("999.0"), PMI2_ERR_OTHER);
    {
        char key[64];
        int vallen = 0;
        snprintf(key, sizeof key, "calls-%d", rank);
        EXPECT_RC(PMI2_KVS_Put(key, "mine"), PMI2_SUCCESS);
        EXPECT_RC(PMI2_KVS_Fence(), PMI2_SUCCESS);
        snprintf(key, sizeof key, "calls-%d", (rank + 1) % size);
        EXPECT_RC(PMI2_KVS_Get("999.0", PMI2_ID_NULL, key, got, sizeof got, &vallen),
                  PMI2_ERR_OTHER);
        EXPECT_RC(PMI2_KVS_Get(jobid, PMI2_ID_NULL, key, got, sizeof got, &vallen),
                  PMI2_SUCCESS);
        if (strcmp(got, "mine") != 0 || vallen != 4)
            FAIL("get(%s) = \"%s\" (%d)", key, got, vallen);
    }

    /* Spawn. */
    {
        const char *cmds[1] = {"true"};
        int argcs[1] = {0}, maxprocs[1] = {1}, infos[1] = {0}, errors[1] = {0};
        char newjob[64];
        EXPECT_RC(PMI2_Job_Spawn(1, cmds, argcs, NULL, maxprocs, infos, NULL, 0, NULL, newjob,
                                 sizeof newjob, errors),
                  PMI2_ERR_OTHER);
    }

    EXPECT_RC(PMI2_Finalize(), PMI2_SUCCESS);
    if (failures) {
        fprintf(stderr, "pmi2_slurm_calls: rank %d: %d check(s) failed\n", rank, failures);
        return 1;
    }
    if (rank == 0) {
        printf("pmi2 slurm calls ok size=%d\n", size);
        fflush(stdout);
    }
    return 0;
}
