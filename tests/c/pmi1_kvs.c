/* pmi1_kvs.c: the PMI-1 C API of fastpmi's libpmi.so.0.
 *
 * Built against fastpmi's include/pmi.h and linked with fastpmi's -lpmi.
 * Usage: pmi1_kvs N [A]   (N = expected job size, all ranks on one node;
 *                          A = expected appnum, default 0; Slurm's
 *                          slurmstepd always sends -1)
 * Each rank:
 *   1. PMI_Initialized is PMI_FALSE and calls fail with PMI_ERR_INIT before
 *      PMI_Init; PMI_Init(NULL) is PMI_ERR_INVALID_ARG; PMI_Init, then
 *      PMI_Initialized is PMI_TRUE; size N, rank in range, appnum A,
 *      universe size >= N, spawned PMI_FALSE.
 *   2. The maxima: kvsname 256, key 64, value 1024, id 256.
 *   3. PMI_KVS_Get_my_name; PMI_Get_id and PMI_Get_kvs_domain_id give the
 *      same name.
 *   4. PMI_KVS_Get of PMI_process_mapping is "(vector,(0,1,N))" (a job
 *      attribute read as a key, as PMI-1 servers answer it).
 *   5. PMI_KVS_Put("p1-<rank>", 100-byte value), PMI_KVS_Commit,
 *      PMI_Barrier, then PMI_KVS_Get of every rank's key (value byte for
 *      byte); a second round with other keys and values.
 *   6. Errors: a key nobody put (PMI_FAIL), another kvsname
 *      (PMI_ERR_INVALID_ARG for put, commit and get), a 65-byte key
 *      (PMI_ERR_INVALID_KEY_LENGTH), an empty key (PMI_ERR_INVALID_KEY), a
 *      1025-byte value (PMI_ERR_INVALID_VAL_LENGTH), NULL pointers
 *      (PMI_ERR_INVALID_ARG), a value buffer too small (truncated,
 *      NUL-terminated, PMI_ERR_INVALID_LENGTH), length 0
 *      (PMI_ERR_INVALID_LENGTH).
 *   7. Clique: size N and ranks 0..N-1 (one node); a too-short array is
 *      PMI_ERR_INVALID_LENGTH.
 *   8. Unsupported calls: PMI_KVS_Create -> PMI_FAIL; PMI_Args_to_keyval
 *      -> empty list. PMI_Spawn_multiple with bad arguments (no command,
 *      maxprocs 0, NULL commands) -> PMI_ERR_INVALID_ARG before anything
 *      is sent (spawning itself: pmi1_spawn.c).
 *   9. PMI_Finalize; afterwards PMI_Get_rank is PMI_ERR_INIT and
 *      PMI_Initialized PMI_FALSE.
 * Rank 0 prints `pmi1 ok size=N` when all of its checks passed. A failed
 * check prints `pmi1_kvs: rank R: ...` on stderr; exit 1 (2 if PMI_Init
 * failed).
 */
#include <pmi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VALUE_LEN 100

static int rank = -1, size = -1, failures = 0;

#define CHECK_WHO "pmi1_kvs: rank %d: ", rank
#include "check.h"

static void value_for(const char *tag, int r, char out[VALUE_LEN + 1])
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    int n = snprintf(out, VALUE_LEN + 1, "%s-%d-", tag, r);
    for (int i = n; i < VALUE_LEN; i++)
        out[i] = alphabet[(r * 11 + i) % 36];
    out[VALUE_LEN] = '\0';
}

static void exchange(const char *kvs, const char *tag)
{
    char key[64], value[VALUE_LEN + 1], got[1025];
    snprintf(key, sizeof key, "%s-%d", tag, rank);
    value_for(tag, rank, value);
    EXPECT_RC(PMI_KVS_Put(kvs, key, value), PMI_SUCCESS);
    EXPECT_RC(PMI_KVS_Commit(kvs), PMI_SUCCESS);
    EXPECT_RC(PMI_Barrier(), PMI_SUCCESS);
    for (int i = 1; i <= size; i++) {
        int r = (rank + i) % size;
        snprintf(key, sizeof key, "%s-%d", tag, r);
        value_for(tag, r, value);
        memset(got, 0, sizeof got);
        int rc = PMI_KVS_Get(kvs, key, got, sizeof got);
        if (rc != PMI_SUCCESS)
            FAIL("PMI_KVS_Get(%s) rc=%d", key, rc);
        else if (strcmp(got, value) != 0)
            FAIL("PMI_KVS_Get(%s) = \"%s\", expected \"%s\"", key, got, value);
    }
}

int main(int argc, char **argv)
{
    int spawned = -1, init = -1, n = -1, rc;
    char kvs[256], id[256], got[1025], big[1100];

    EXPECT_RC(PMI_Initialized(&init), PMI_SUCCESS);
    if (init != PMI_FALSE)
        FAIL("PMI_Initialized before PMI_Init = %d", init);
    EXPECT_RC(PMI_Get_rank(&n), PMI_ERR_INIT);
    EXPECT_RC(PMI_Barrier(), PMI_ERR_INIT);
    EXPECT_RC(PMI_Init(NULL), PMI_ERR_INVALID_ARG);

    rc = PMI_Init(&spawned);
    if (rc != PMI_SUCCESS) {
        fprintf(stderr, "pmi1_kvs: PMI_Init failed: rc=%d\n", rc);
        return 2;
    }
    EXPECT_RC(PMI_Initialized(&init), PMI_SUCCESS);
    if (init != PMI_TRUE)
        FAIL("PMI_Initialized after PMI_Init = %d", init);
    if (spawned != PMI_FALSE)
        FAIL("spawned = %d", spawned);
    EXPECT_RC(PMI_Get_size(&size), PMI_SUCCESS);
    EXPECT_RC(PMI_Get_rank(&rank), PMI_SUCCESS);
    if (argc > 1 && size != atoi(argv[1]))
        FAIL("size %d, expected %s", size, argv[1]);
    if (size < 1 || rank < 0 || rank >= size) {
        FAIL("rank %d size %d", rank, size);
        return 1;
    }
    EXPECT_RC(PMI_Get_appnum(&n), PMI_SUCCESS);
    if (n != (argc > 2 ? atoi(argv[2]) : 0))
        FAIL("appnum %d, expected %s", n, argc > 2 ? argv[2] : "0");
    EXPECT_RC(PMI_Get_universe_size(&n), PMI_SUCCESS);
    if (n < size)
        FAIL("universe size %d < size %d", n, size);
    EXPECT_RC(PMI_Get_size(NULL), PMI_ERR_INVALID_ARG);

    EXPECT_RC(PMI_KVS_Get_name_length_max(&n), PMI_SUCCESS);
    if (n != 256) FAIL("name_length_max %d", n);
    EXPECT_RC(PMI_KVS_Get_key_length_max(&n), PMI_SUCCESS);
    if (n != 64) FAIL("key_length_max %d", n);
    EXPECT_RC(PMI_KVS_Get_value_length_max(&n), PMI_SUCCESS);
    if (n != 1024) FAIL("value_length_max %d", n);
    EXPECT_RC(PMI_Get_id_length_max(&n), PMI_SUCCESS);
    if (n != 256) FAIL("id_length_max %d", n);

    EXPECT_RC(PMI_KVS_Get_my_name(kvs, sizeof kvs), PMI_SUCCESS);
    if (kvs[0] == '\0')
        FAIL("empty kvsname");
    EXPECT_RC(PMI_Get_id(id, sizeof id), PMI_SUCCESS);
    if (strcmp(id, kvs) != 0)
        FAIL("PMI_Get_id \"%s\" != kvsname \"%s\"", id, kvs);
    EXPECT_RC(PMI_Get_kvs_domain_id(id, sizeof id), PMI_SUCCESS);
    if (strcmp(id, kvs) != 0)
        FAIL("PMI_Get_kvs_domain_id \"%s\" != kvsname \"%s\"", id, kvs);
    EXPECT_RC(PMI_KVS_Get_my_name(id, 1), PMI_ERR_INVALID_LENGTH);
    if (id[0] != '\0')
        FAIL("1-byte kvsname buffer not NUL-terminated");

    {
        char want[64];
        snprintf(want, sizeof want, "(vector,(0,1,%d))", size);
        EXPECT_RC(PMI_KVS_Get(kvs, "PMI_process_mapping", got, sizeof got), PMI_SUCCESS);
        if (strcmp(got, want) != 0)
            FAIL("PMI_process_mapping = \"%s\", expected \"%s\"", got, want);
    }

    exchange(kvs, "p1");
    exchange(kvs, "p1b");

    /* Errors. */
    EXPECT_RC(PMI_KVS_Get(kvs, "pmi1-nobody-put-this", got, sizeof got), PMI_FAIL);
    EXPECT_RC(PMI_KVS_Get("not-this-kvs", "p1-0", got, sizeof got), PMI_ERR_INVALID_ARG);
    EXPECT_RC(PMI_KVS_Put("not-this-kvs", "k", "v"), PMI_ERR_INVALID_ARG);
    EXPECT_RC(PMI_KVS_Commit("not-this-kvs"), PMI_ERR_INVALID_ARG);
    EXPECT_RC(PMI_KVS_Put(NULL, "k", "v"), PMI_ERR_INVALID_ARG);
    EXPECT_RC(PMI_KVS_Put(kvs, NULL, "v"), PMI_ERR_INVALID_ARG);
    EXPECT_RC(PMI_KVS_Put(kvs, "k", NULL), PMI_ERR_INVALID_ARG);
    EXPECT_RC(PMI_KVS_Put(kvs, "", "v"), PMI_ERR_INVALID_KEY);
    memset(big, 'k', 65);
    big[65] = '\0';
    EXPECT_RC(PMI_KVS_Put(kvs, big, "v"), PMI_ERR_INVALID_KEY_LENGTH);
    EXPECT_RC(PMI_KVS_Get(kvs, big, got, sizeof got), PMI_ERR_INVALID_KEY_LENGTH);
    memset(big, 'v', 1025);
    big[1025] = '\0';
    EXPECT_RC(PMI_KVS_Put(kvs, "pmi1-too-long", big), PMI_ERR_INVALID_VAL_LENGTH);
    EXPECT_RC(PMI_KVS_Get(kvs, "p1-0", NULL, 10), PMI_ERR_INVALID_ARG);
    EXPECT_RC(PMI_KVS_Get(kvs, "p1-0", got, 0), PMI_ERR_INVALID_LENGTH);
    {
        char small[8], want[VALUE_LEN + 1];
        memset(small, 'x', sizeof small);
        value_for("p1", 0, want);
        EXPECT_RC(PMI_KVS_Get(kvs, "p1-0", small, sizeof small), PMI_ERR_INVALID_LENGTH);
        if (small[7] != '\0' || strncmp(small, want, 7) != 0)
            FAIL("truncated get gave \"%.8s\"", small);
    }

    /* Clique: every rank is on this node. */
    EXPECT_RC(PMI_Get_clique_size(&n), PMI_SUCCESS);
    if (n != size)
        FAIL("clique size %d, expected %d", n, size);
    {
        int *ranks = malloc(sizeof(int) * (size_t)size);
        for (int i = 0; i < size; i++)
            ranks[i] = -1;
        EXPECT_RC(PMI_Get_clique_ranks(ranks, size), PMI_SUCCESS);
        for (int i = 0; i < size; i++)
            if (ranks[i] != i)
                FAIL("clique rank [%d] = %d", i, ranks[i]);
        if (size > 1)
            EXPECT_RC(PMI_Get_clique_ranks(ranks, size - 1), PMI_ERR_INVALID_LENGTH);
        EXPECT_RC(PMI_Get_clique_ranks(NULL, size), PMI_ERR_INVALID_ARG);
        free(ranks);
    }

    /* Unsupported and minimal calls. */
    EXPECT_RC(PMI_KVS_Create(id, sizeof id), PMI_FAIL);
    EXPECT_RC(PMI_KVS_Iter_first(kvs, id, sizeof id, got, sizeof got), PMI_FAIL);
    {
        const char *cmds[1] = {"true"};
        int maxprocs[1] = {1}, zero[1] = {0}, errors[1] = {0};
        EXPECT_RC(PMI_Spawn_multiple(0, cmds, NULL, maxprocs, NULL, NULL, 0, NULL, errors),
                  PMI_ERR_INVALID_ARG);
        EXPECT_RC(PMI_Spawn_multiple(1, cmds, NULL, zero, NULL, NULL, 0, NULL, errors),
                  PMI_ERR_INVALID_ARG);
        EXPECT_RC(PMI_Spawn_multiple(1, NULL, NULL, maxprocs, NULL, NULL, 0, NULL, errors),
                  PMI_ERR_INVALID_ARG);
    }
    {
        PMI_keyval_t *kv = (PMI_keyval_t *)&n;
        int kvsize = -1;
        EXPECT_RC(PMI_Args_to_keyval(&argc, (char *((*)[]))&argv, &kv, &kvsize), PMI_SUCCESS);
        if (kv != NULL || kvsize != 0)
            FAIL("PMI_Args_to_keyval gave %p, %d", (void *)kv, kvsize);
        EXPECT_RC(PMI_Free_keyvals(kv, kvsize), PMI_SUCCESS);
    }

    EXPECT_RC(PMI_Finalize(), PMI_SUCCESS);
    EXPECT_RC(PMI_Get_rank(&n), PMI_ERR_INIT);
    EXPECT_RC(PMI_Finalize(), PMI_ERR_INIT);
    EXPECT_RC(PMI_Initialized(&init), PMI_SUCCESS);
    if (init != PMI_FALSE)
        FAIL("PMI_Initialized after PMI_Finalize = %d", init);

    if (failures) {
        fprintf(stderr, "pmi1_kvs: rank %d: %d check(s) failed\n", rank, failures);
        return 1;
    }
    if (rank == 0) {
        printf("pmi1 ok size=%d\n", size);
        fflush(stdout);
    }
    return 0;
}
