/* pmi2_late.c: a job where one rank is late to PMI while the others fence,
 * for the diagnosis tests (fastpmi ps, --fence-timeout, SIGUSR1) and
 * --stop-in-init.
 *
 * The late rank (env FASTPMI_TEST_LATE_RANK, compared with PMI_RANK or
 * PMI_ID before init; unset or -1: no late rank) waits, before PMI2_Init,
 * until the file named by FASTPMI_TEST_GO exists (polled every 20 ms, at
 * most 120 s); before waiting it writes its pid to <FASTPMI_TEST_MARK_DIR>/pid.<rank>
 * when that variable is set. Every rank then: PMI2_Init; if FASTPMI_TEST_MARK_DIR is set,
 * creates <dir>/init.<rank> (so a test sees who got past init); puts
 * "late-<rank>", fences, gets its neighbour's key and checks it, finalizes
 * and prints "late ok rank R size N".
 *
 * Built twice: against Slurm's libpmi2 (socket path) and against fastpmi's
 * libpmi2 (shared-memory path).
 */
#include <pmi2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "late_rank.h"

int main(void)
{
    int spawned = 0, size = -1, rank = -1, appnum = -1, rc, vallen = 0;
    char key[PMI2_MAX_KEYLEN], value[128], got[PMI2_MAX_VALLEN];
    const char *dir = getenv("FASTPMI_TEST_MARK_DIR");

    if (late_rank_wait("pmi2_late") != 0)
        return 2;
    rc = PMI2_Init(&spawned, &size, &rank, &appnum);
    if (rc != PMI2_SUCCESS) {
        fprintf(stderr, "pmi2_late: PMI2_Init failed: rc=%d\n", rc);
        return 2;
    }
    if (dir) {
        char path[4096];
        FILE *f;
        snprintf(path, sizeof path, "%s/init.%d", dir, rank);
        f = fopen(path, "w");
        if (!f || fclose(f) != 0) {
            perror("pmi2_late: mark file");
            return 2;
        }
    }
    snprintf(key, sizeof key, "late-%d", rank);
    snprintf(value, sizeof value, "value-%d", rank);
    if ((rc = PMI2_KVS_Put(key, value)) != PMI2_SUCCESS) {
        fprintf(stderr, "pmi2_late: rank %d: put rc=%d\n", rank, rc);
        return 2;
    }
    if ((rc = PMI2_KVS_Fence()) != PMI2_SUCCESS) {
        fprintf(stderr, "pmi2_late: rank %d: fence rc=%d\n", rank, rc);
        return 3;
    }
    snprintf(key, sizeof key, "late-%d", (rank + 1) % size);
    snprintf(value, sizeof value, "value-%d", (rank + 1) % size);
    rc = PMI2_KVS_Get(NULL, PMI2_ID_NULL, key, got, sizeof got, &vallen);
    if (rc != PMI2_SUCCESS || strcmp(got, value) != 0) {
        fprintf(stderr, "pmi2_late: rank %d: get %s rc=%d value '%s'\n", rank, key, rc, got);
        return 4;
    }
    if ((rc = PMI2_Finalize()) != PMI2_SUCCESS) {
        fprintf(stderr, "pmi2_late: rank %d: finalize rc=%d\n", rank, rc);
        return 5;
    }
    printf("late ok rank %d size %d\n", rank, size);
    return 0;
}
