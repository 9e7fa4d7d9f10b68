/* pmi1_spawn.c: PMI_Spawn_multiple through fastpmi's PMI-1 C API.
 *
 * Built against fastpmi's include/pmi.h and linked with fastpmi's -lpmi.
 * Usage: pmi1_spawn A B      (the parent job; any number of ranks)
 *        pmi1_spawn --child PARENT_KVS N TAG   (started by the spawn)
 *
 * Parent: PMI_Init (spawned PMI_FALSE). Rank 0 calls PMI_Spawn_multiple of
 * two commands, both /proc/self/exe: A processes with argv {"--child",
 * <its kvsname>, A+B, "first"} and B processes with {"--child", <kvsname>,
 * A+B, "second"}; no info keys for the first command, info `wdir` = its
 * working directory for the second; one preput pair `fastpmi-preput` =
 * `from-<its kvsname>`. It must return PMI_SUCCESS with every errors[i] 0.
 * Rank 0 prints
 *     pmi1 spawn ok children=A+B
 * Child: PMI_Init must report spawned PMI_TRUE; size A+B; appnum 0 for the
 * "first" command, 1 for "second"; its kvsname must differ from the
 * parent's; PMI_KVS_Get(`fastpmi-preput`) must be `from-<parent kvsname>`;
 * then every child puts `c1-<rank>`, commits, PMI_Barrier, and gets every
 * other child's key. Child rank 0 prints
 *     pmi1 spawn child ok size=N preput=from-<parent kvsname>
 * and every child `pmi1 spawn child rank R appnum A`.
 * A failed check prints `pmi1_spawn: ...` on stderr, exit 1 (2 if PMI_Init
 * failed).
 */
#include <pmi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PREPUT_KEY "fastpmi-preput"

static int rank = -1, failures = 0;
static const char *role = "parent";

#define CHECK_WHO "pmi1_spawn: %s rank %d: ", role, rank
#include "check.h"

static void parent(const char *kvs, int a, int b)
{
    char exe[4096], cwd[4096], total[16], ppval[300];
    const char *cmds[2], *argv0[5], *argv1[5], **argvs[2];
    int maxprocs[2], infosizes[2] = {0, 1}, *errors, rc;
    PMI_keyval_t info1[1], preput[1];
    const PMI_keyval_t *infos[2] = {NULL, info1};
    ssize_t n;

    if (rank != 0)
        return;
    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    if (!getcwd(cwd, sizeof cwd))
        FAIL("getcwd failed");
    snprintf(total, sizeof total, "%d", a + b);
    snprintf(ppval, sizeof ppval, "from-%s", kvs);
    cmds[0] = exe;
    cmds[1] = exe;
    argv0[0] = "--child";
    argv0[1] = kvs;
    argv0[2] = total;
    argv0[3] = "first";
    argv0[4] = NULL;
    argv1[0] = "--child";
    argv1[1] = kvs;
    argv1[2] = total;
    argv1[3] = "second";
    argv1[4] = NULL;
    argvs[0] = argv0;
    argvs[1] = argv1;
    maxprocs[0] = a;
    maxprocs[1] = b;
    info1[0].key = "wdir";
    info1[0].val = cwd;
    preput[0].key = PREPUT_KEY;
    preput[0].val = ppval;
    errors = malloc(sizeof(int) * (size_t)(a + b));
    for (int i = 0; i < a + b; i++)
        errors[i] = -1;

    rc = PMI_Spawn_multiple(2, cmds, argvs, maxprocs, infosizes, infos, 1, preput, errors);
    if (rc != PMI_SUCCESS) {
        FAIL("PMI_Spawn_multiple rc=%d", rc);
    } else {
        for (int i = 0; i < a + b; i++)
            if (errors[i] != 0)
                FAIL("errors[%d] = %d", i, errors[i]);
    }
    free(errors);
    if (failures == 0)
        printf("pmi1 spawn ok children=%d\n", a + b);
}

static void child(const char *kvs, int size, int argc, char **argv)
{
    char got[1025], want[1025], key[64];
    int rc, appnum = -1, want_app;

    role = "child";
    if (argc < 5) {
        FAIL("spawned with argc %d, expected --child PARENT_KVS N TAG", argc);
        return;
    }
    want_app = strcmp(argv[4], "second") == 0 ? 1 : 0;
    if (size != atoi(argv[3]))
        FAIL("size %d, expected %s", size, argv[3]);
    rc = PMI_Get_appnum(&appnum);
    if (rc != PMI_SUCCESS || appnum != want_app)
        FAIL("PMI_Get_appnum rc=%d appnum %d, expected %d (%s)", rc, appnum, want_app,
             argv[4]);
    if (strcmp(kvs, argv[2]) == 0)
        FAIL("child kvsname \"%s\" equals the parent's", kvs);

    snprintf(want, sizeof want, "from-%s", argv[2]);
    memset(got, 0, sizeof got);
    rc = PMI_KVS_Get(kvs, PREPUT_KEY, got, sizeof got);
    if (rc != PMI_SUCCESS)
        FAIL("PMI_KVS_Get(%s) rc=%d", PREPUT_KEY, rc);
    else if (strcmp(got, want) != 0)
        FAIL("preput %s = \"%s\", expected \"%s\"", PREPUT_KEY, got, want);

    snprintf(key, sizeof key, "c1-%d", rank);
    snprintf(want, sizeof want, "value-of-c1-%d-of-%d", rank, size);
    if ((rc = PMI_KVS_Put(kvs, key, want)) != PMI_SUCCESS)
        FAIL("PMI_KVS_Put(%s) rc=%d", key, rc);
    if ((rc = PMI_KVS_Commit(kvs)) != PMI_SUCCESS)
        FAIL("PMI_KVS_Commit rc=%d", rc);
    if ((rc = PMI_Barrier()) != PMI_SUCCESS)
        FAIL("PMI_Barrier rc=%d", rc);
    for (int i = 1; i <= size; i++) {
        int r = (rank + i) % size;
        snprintf(key, sizeof key, "c1-%d", r);
        snprintf(want, sizeof want, "value-of-c1-%d-of-%d", r, size);
        memset(got, 0, sizeof got);
        rc = PMI_KVS_Get(kvs, key, got, sizeof got);
        if (rc != PMI_SUCCESS)
            FAIL("PMI_KVS_Get(%s) rc=%d", key, rc);
        else if (strcmp(got, want) != 0)
            FAIL("PMI_KVS_Get(%s) = \"%s\", expected \"%s\"", key, got, want);
    }
    printf("pmi1 spawn child rank %d appnum %d\n", rank, appnum);
    if (failures == 0 && rank == 0)
        printf("pmi1 spawn child ok size=%d preput=from-%s\n", size, argv[2]);
}

int main(int argc, char **argv)
{
    int spawned = -1, size = -1, rc;
    char kvs[256] = "";
    int is_child = argc > 1 && strcmp(argv[1], "--child") == 0;

    rc = PMI_Init(&spawned);
    if (rc != PMI_SUCCESS) {
        fprintf(stderr, "pmi1_spawn: PMI_Init failed: rc=%d\n", rc);
        return 2;
    }
    if ((rc = PMI_Get_rank(&rank)) != PMI_SUCCESS)
        FAIL("PMI_Get_rank rc=%d", rc);
    if ((rc = PMI_Get_size(&size)) != PMI_SUCCESS)
        FAIL("PMI_Get_size rc=%d", rc);
    if ((rc = PMI_KVS_Get_my_name(kvs, sizeof kvs)) != PMI_SUCCESS || kvs[0] == '\0')
        FAIL("PMI_KVS_Get_my_name rc=%d \"%s\"", rc, kvs);
    if (is_child) {
        if (spawned != PMI_TRUE)
            FAIL("PMI_Init spawned = %d in a spawned child, expected PMI_TRUE", spawned);
        child(kvs, size, argc, argv);
    } else {
        int a = argc > 2 ? atoi(argv[1]) : 0, b = argc > 2 ? atoi(argv[2]) : 0;
        if (spawned != PMI_FALSE)
            FAIL("PMI_Init spawned = %d in the parent, expected PMI_FALSE", spawned);
        if (a < 1 || b < 1)
            FAIL("usage: pmi1_spawn A B (A, B >= 1)");
        else
            parent(kvs, a, b);
    }
    fflush(stdout);
    if ((rc = PMI_Finalize()) != PMI_SUCCESS)
        FAIL("PMI_Finalize rc=%d", rc);
    return failures ? 1 : 0;
}
