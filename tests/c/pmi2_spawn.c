/* pmi2_spawn.c: PMI2_Job_Spawn through Slurm's PMI-2 client (libpmi2.so.0).
 *
 * Usage: pmi2_spawn K           (the parent job; any number of ranks)
 *        pmi2_spawn --child PARENT_JOBID K WDIR   (started by the spawn)
 *
 * Parent: PMI2_Init (spawned 0). Rank 0 calls PMI2_Job_Spawn of one command,
 * /proc/self/exe, K processes, argv {"--child", <its jobid>, K, <cwd>}, one
 * info key `wdir` = its working directory, and one preput pair
 * `fastpmi-preput` = `from-<its jobid>`. The call must succeed, every
 * errors[i] be 0 and the returned job id be non-empty and differ from the
 * parent's. Rank 0 prints
 *     pmi2 spawn ok children=K
 * All parent ranks PMI2_Finalize.
 * Child: PMI2_Init must report spawned 1, size K, appnum 0; its job id must
 * differ from the parent's; its working directory must be WDIR;
 * PMI2_KVS_Get of `fastpmi-preput` must give `from-<parent jobid>`; then
 * every child puts `child-<rank>`, fences and gets every other child's
 * key (values carry the rank). Child rank 0 prints
 *     pmi2 spawn child ok size=K preput=from-<parent jobid>
 * A failed check prints `pmi2_spawn: ...` on stderr, exit 1 (2 if
 * PMI2_Init failed).
 *
 * Build: gcc -O2 -I/usr/include/slurm -o pmi2_spawn pmi2_spawn.c -lpmi2
 */
#include <pmi2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PREPUT_KEY "fastpmi-preput"

static int rank = -1, failures = 0;
static const char *role = "parent";

#define CHECK_WHO "pmi2_spawn: %s rank %d: ", role, rank
#include "check.h"

static int parent(int size, int k)
{
    char jobid[1024] = "", newjob[1024] = "", exe[4096], cwd[4096], kstr[16], ppval[1100];
    const char *cmds[1], *argv0[4], **argvs[1];
    int argcs[1] = {4}, maxprocs[1], infosizes[1] = {1}, *errors, rc;
    MPID_Info info = {0}, preput = {0};
    const MPID_Info *infovec[1] = {&info};
    const MPID_Info *preputvec[1] = {&preput};
    ssize_t n;

    (void)size;
    rc = PMI2_Job_GetId(jobid, sizeof jobid);
    if (rc != PMI2_SUCCESS || jobid[0] == '\0')
        FAIL("PMI2_Job_GetId rc=%d jobid \"%s\"", rc, jobid);
    if (rank != 0)
        return 0;

    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    if (!getcwd(cwd, sizeof cwd))
        FAIL("getcwd failed");
    snprintf(kstr, sizeof kstr, "%d", k);
    snprintf(ppval, sizeof ppval, "from-%s", jobid);
    cmds[0] = exe;
    argv0[0] = "--child";
    argv0[1] = jobid;
    argv0[2] = kstr;
    argv0[3] = cwd;
    argvs[0] = argv0;
    maxprocs[0] = k;
    info.key = "wdir";
    info.value = cwd;
    preput.key = PREPUT_KEY;
    preput.value = ppval;
    errors = malloc(sizeof(int) * (size_t)k);
    for (int i = 0; i < k; i++)
        errors[i] = -1;

    rc = PMI2_Job_Spawn(1, cmds, argcs, argvs, maxprocs, infosizes, infovec, 1, preputvec,
                        newjob, sizeof newjob, errors);
    if (rc != PMI2_SUCCESS) {
        FAIL("PMI2_Job_Spawn rc=%d", rc);
    } else {
        for (int i = 0; i < k; i++)
            if (errors[i] != 0)
                FAIL("errors[%d] = %d", i, errors[i]);
        if (newjob[0] == '\0')
            FAIL("PMI2_Job_Spawn returned an empty job id");
        else if (strcmp(newjob, jobid) == 0)
            FAIL("the spawned job has the parent's job id \"%s\"", jobid);
    }
    free(errors);
    if (failures == 0)
        printf("pmi2 spawn ok children=%d\n", k);
    return 0;
}

static void child(int size, int appnum, int argc, char **argv)
{
    char jobid[1024] = "", got[PMI2_MAX_VALLEN + 1], want[PMI2_MAX_VALLEN + 1], key[64];
    char cwd[4096] = "";
    int rc, vallen = 0;

    role = "child";
    if (argc < 5) {
        FAIL("spawned with argc %d, expected --child PARENT_JOBID K WDIR", argc);
        return;
    }
    if (size != atoi(argv[3]))
        FAIL("size %d, expected %s", size, argv[3]);
    if (appnum != 0)
        FAIL("appnum %d, expected 0", appnum);
    rc = PMI2_Job_GetId(jobid, sizeof jobid);
    if (rc != PMI2_SUCCESS || jobid[0] == '\0')
        FAIL("PMI2_Job_GetId rc=%d jobid \"%s\"", rc, jobid);
    else if (strcmp(jobid, argv[2]) == 0)
        FAIL("child job id \"%s\" equals the parent's", jobid);
    if (!getcwd(cwd, sizeof cwd) || strcmp(cwd, argv[4]) != 0)
        FAIL("working directory \"%s\", expected \"%s\" (info key wdir)", cwd, argv[4]);

    snprintf(want, sizeof want, "from-%s", argv[2]);
    memset(got, 0, sizeof got);
    rc = PMI2_KVS_Get(jobid, PMI2_ID_NULL, PREPUT_KEY, got, sizeof got, &vallen);
    if (rc != PMI2_SUCCESS)
        FAIL("PMI2_KVS_Get(%s) rc=%d", PREPUT_KEY, rc);
    else if (strcmp(got, want) != 0)
        FAIL("preput %s = \"%s\", expected \"%s\"", PREPUT_KEY, got, want);

    snprintf(key, sizeof key, "child-%d", rank);
    snprintf(want, sizeof want, "value-of-child-%d-of-%d", rank, size);
    rc = PMI2_KVS_Put(key, want);
    if (rc != PMI2_SUCCESS)
        FAIL("PMI2_KVS_Put(%s) rc=%d", key, rc);
    rc = PMI2_KVS_Fence();
    if (rc != PMI2_SUCCESS)
        FAIL("PMI2_KVS_Fence rc=%d", rc);
    for (int i = 1; i <= size; i++) {
        int r = (rank + i) % size;
        snprintf(key, sizeof key, "child-%d", r);
        snprintf(want, sizeof want, "value-of-child-%d-of-%d", r, size);
        memset(got, 0, sizeof got);
        rc = PMI2_KVS_Get(jobid, r, key, got, sizeof got, &vallen);
        if (rc != PMI2_SUCCESS)
            FAIL("PMI2_KVS_Get(%s) rc=%d", key, rc);
        else if (strcmp(got, want) != 0)
            FAIL("PMI2_KVS_Get(%s) = \"%s\", expected \"%s\"", key, got, want);
    }
    if (failures == 0 && rank == 0)
        printf("pmi2 spawn child ok size=%d preput=from-%s\n", size, argv[2]);
}

int main(int argc, char **argv)
{
    int spawned = -1, size = -1, appnum = -1, rc;
    int is_child = argc > 1 && strcmp(argv[1], "--child") == 0;

    rc = PMI2_Init(&spawned, &size, &rank, &appnum);
    if (rc != PMI2_SUCCESS) {
        fprintf(stderr, "pmi2_spawn: PMI2_Init failed: rc=%d\n", rc);
        return 2;
    }
    if (is_child) {
        if (spawned != 1)
            FAIL("PMI2_Init spawned = %d in a spawned child, expected 1", spawned);
        child(size, appnum, argc, argv);
    } else {
        int k = argc > 1 ? atoi(argv[1]) : 0;
        if (spawned != 0)
            FAIL("PMI2_Init spawned = %d in the parent, expected 0", spawned);
        if (k < 1)
            FAIL("usage: pmi2_spawn K (K >= 1)");
        else
            parent(size, k);
    }
    fflush(stdout);
    rc = PMI2_Finalize();
    if (rc != PMI2_SUCCESS)
        FAIL("PMI2_Finalize rc=%d", rc);
    return failures ? 1 : 0;
}
