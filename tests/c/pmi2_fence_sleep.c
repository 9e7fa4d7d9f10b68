/* pmi2_fence_sleep.c: a job where one rank never reaches the fence, so a test
 * can kill it (kill -9) while every other rank is blocked in PMI2_KVS_Fence.
 *
 * Each rank: PMI2_Init, PMI2_KVS_Put("key-<rank>", ...), then announces its
 * pid, then
 *   - the victim rank (env FASTPMI_TEST_SLEEP_RANK, default N-1) sleeps
 *     forever (pause());
 *   - every other rank calls PMI2_KVS_Fence, which cannot complete while the
 *     victim lives. If the fence fails the rank reports the rc and exits 3 (the
 *     expected outcome when the launcher releases waiters with an error); if
 *     it ever succeeds the rank exits 4 (a fence that is not a barrier).
 *
 * The pid announcement is the line `pid <rank> <pid>` on stdout, and, when
 * env FASTPMI_TEST_PID_DIR is set, a file <dir>/pid.<rank> holding the same
 * line (written to a temporary name and renamed, so a reader that sees the
 * file sees all of it). Every rank writes its file after its put and just
 * before the fence (or, for the victim, the sleep), so once all N files
 * exist every other rank is in, or about to enter, the fence.
 *
 * Under Hydra 4.0.2 the other ranks' fences complete at once (Hydra's PMI-2
 * fence is not a barrier), so they exit 4 before anything can be killed.
 *
 * Build: gcc -O2 -I/usr/include/slurm -o pmi2_fence_sleep pmi2_fence_sleep.c -lpmi2
 * Run:   FASTPMI_TEST_PID_DIR=/tmp/d FASTPMI_TEST_SLEEP_RANK=37 fastpmi -n 64 ./pmi2_fence_sleep
 */
#include <pmi2.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void)
{
    int spawned = 0, size = -1, rank = -1, appnum = -1, rc, victim;
    char key[PMI2_MAX_KEYLEN], value[128];
    const char *s, *dir;

    rc = PMI2_Init(&spawned, &size, &rank, &appnum);
    if (rc != PMI2_SUCCESS) {
        fprintf(stderr, "pmi2_fence_sleep: PMI2_Init failed: rc=%d\n", rc);
        return 2;
    }
    s = getenv("FASTPMI_TEST_SLEEP_RANK");
    victim = s ? atoi(s) : size - 1;

    snprintf(key, sizeof key, "key-%d", rank);
    snprintf(value, sizeof value, "value-of-rank-%d", rank);
    rc = PMI2_KVS_Put(key, value);
    if (rc != PMI2_SUCCESS) {
        fprintf(stderr, "pmi2_fence_sleep: rank %d: PMI2_KVS_Put rc=%d\n", rank, rc);
        return 2;
    }

    printf("pid %d %ld\n", rank, (long)getpid());
    fflush(stdout);
    dir = getenv("FASTPMI_TEST_PID_DIR");
    if (dir) {
        char tmp[4096], path[4096];
        snprintf(tmp, sizeof tmp, "%s/.pid.%d.tmp", dir, rank);
        snprintf(path, sizeof path, "%s/pid.%d", dir, rank);
        FILE *f = fopen(tmp, "w");
        if (!f || fprintf(f, "pid %d %ld\n", rank, (long)getpid()) < 0 || fclose(f) != 0 ||
            rename(tmp, path) != 0) {
            perror("pmi2_fence_sleep: writing pid file");
            return 2;
        }
    }

    if (rank == victim) {
        for (;;)
            pause();
    }

    rc = PMI2_KVS_Fence();
    if (rc != PMI2_SUCCESS) {
        fprintf(stderr, "pmi2_fence_sleep: rank %d: PMI2_KVS_Fence failed rc=%d (expected after rank %d died)\n",
                rank, rc, victim);
        return 3;
    }
    fprintf(stderr, "pmi2_fence_sleep: rank %d: PMI2_KVS_Fence completed although rank %d never entered it\n",
            rank, victim);
    return 4;
}
