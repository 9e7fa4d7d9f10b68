/* pmi2_exchange.c: PMI-2 exchange benchmark client (Slurm's libpmi2 API).
 *
 * Build: gcc -O2 -I/usr/include/slurm -o pmi2_exchange pmi2_exchange.c -lpmi2
 *        (Debian package libpmi2-0-dev; the same source links against any
 *        libpmi2.so.0 drop-in, e.g. fastpmi's, through LD_LIBRARY_PATH)
 * Run:   fastpmi -n 256 ./pmi2_exchange
 *        mpiexec.hydra -ppn 64 -n 64 ./pmi2_exchange   (Hydra 4.0.2 hangs at 256)
 *
 * Each rank times, with CLOCK_MONOTONIC:
 *   init     PMI2_Init (+ PMI2_Job_GetId)
 *   put      PMI2_KVS_Put of one 100-byte value under "bx-<rank>"
 *   fence    PMI2_KVS_Fence
 *   getall   PMI2_KVS_Get of every rank's key (starting at rank+1, wrapping),
 *            each value verified byte for byte
 *   fence2   a second PMI2_KVS_Fence (a pure barrier: nothing new was put)
 *   finalize PMI2_Finalize
 *
 * Slowest-rank figures: the measured phases are over once fence2 returns, so
 * a third, untimed round gathers them: every rank puts "bt-<rank>" =
 * "<init_ns>,<fence_ns>,<getall_ns>,<fence2_ns>", fences a third time, and
 * rank 0 gets all N of those keys and reports the maximum (and the mean of
 * getall, and the minimum of fence). This round happens after every timed
 * phase, so it does not disturb them; it only lengthens the job, which
 * matters for a harness that also times the whole job (subtract gather_us
 * if needed).
 *
 * Output: rank 0 prints exactly one line on stdout (times in microseconds):
 *   n=N init_us=.. put_us=.. fence_us=.. getall_us=.. fence2_us=..
 *   finalize_us=.. per_get_us=.. max_init_us=.. max_fence_us=.. min_fence_us=..
 *   max_getall_us=.. max_getall_rank=R mean_getall_us=.. max_fence2_us=..
 *   gather_us=.. total_us=..
 * (one line, space-separated key=value; rank 0's own times unless prefixed
 * max_/min_/mean_; total_us is rank 0's wall time from before PMI2_Init to after
 * PMI2_Finalize).
 * Reading the fence figures: the first fence also absorbs launch skew (rank
 * 0 usually starts first and waits for the last rank to start), so fence_us
 * and max_fence_us are upper bounds; min_fence_us (the last arriver's fence)
 * and fence2_us / max_fence2_us (every rank already running, nothing new
 * put) are the closest to the cost of the fence itself. Under Hydra the
 * PMI-2 fence is not a barrier (its gets wait instead), so there the fence
 * figures are not comparable and the wait shows up in getall_us.
 * Any PMI error or wrong value: a diagnostic on stderr and exit status 1.
 */
#include <pmi2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VALUE_LEN 100

static int rank = -1, size = -1;

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "pmi2_exchange: rank %d: %s failed rc=%d\n", rank, what, rc);
    exit(1);
}

static void value_for(int r, char out[VALUE_LEN + 1])
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    int n = snprintf(out, VALUE_LEN + 1, "rank-%d-", r);
    for (int i = n; i < VALUE_LEN; i++)
        out[i] = alphabet[(r * 7 + i) % 36];
    out[VALUE_LEN] = '\0';
}

int main(void)
{
    int spawned = 0, appnum = 0, rc, vallen;
    char jobid[1024] = "", key[PMI2_MAX_KEYLEN], value[VALUE_LEN + 1];
    char got[PMI2_MAX_VALLEN + 1];
    long long t_start, t0, t1, init_ns, put_ns, fence_ns, getall_ns, fence2_ns, gather_ns = 0,
        finalize_ns;
    long long max_init = 0, max_fence = 0, max_getall = 0, max_fence2 = 0, sum_getall = 0;
    long long min_fence = -1;
    int max_getall_rank = -1;

    t_start = t0 = now_ns();
    rc = PMI2_Init(&spawned, &size, &rank, &appnum);
    if (rc != PMI2_SUCCESS)
        die("PMI2_Init", rc);
    rc = PMI2_Job_GetId(jobid, sizeof jobid);
    if (rc != PMI2_SUCCESS)
        die("PMI2_Job_GetId", rc);
    t1 = now_ns();
    init_ns = t1 - t0;

    snprintf(key, sizeof key, "bx-%d", rank);
    value_for(rank, value);
    t0 = now_ns();
    rc = PMI2_KVS_Put(key, value);
    t1 = now_ns();
    if (rc != PMI2_SUCCESS)
        die("PMI2_KVS_Put", rc);
    put_ns = t1 - t0;

    t0 = now_ns();
    rc = PMI2_KVS_Fence();
    t1 = now_ns();
    if (rc != PMI2_SUCCESS)
        die("PMI2_KVS_Fence (1)", rc);
    fence_ns = t1 - t0;

    t0 = now_ns();
    for (int i = 1; i <= size; i++) {
        int r = (rank + i) % size;
        snprintf(key, sizeof key, "bx-%d", r);
        rc = PMI2_KVS_Get(jobid, r, key, got, sizeof got, &vallen);
        if (rc != PMI2_SUCCESS) {
            fprintf(stderr, "pmi2_exchange: rank %d: PMI2_KVS_Get(%s) from rank %d rc=%d\n", rank, key,
                    r, rc);
            exit(1);
        }
        value_for(r, value);
        if (vallen != VALUE_LEN || strcmp(got, value) != 0) {
            fprintf(stderr, "pmi2_exchange: rank %d: %s = \"%s\" (len %d), expected \"%s\"\n", rank, key,
                    got, vallen, value);
            exit(1);
        }
    }
    t1 = now_ns();
    getall_ns = t1 - t0;

    t0 = now_ns();
    rc = PMI2_KVS_Fence();
    t1 = now_ns();
    if (rc != PMI2_SUCCESS)
        die("PMI2_KVS_Fence (2)", rc);
    fence2_ns = t1 - t0;

    /* Untimed gather of every rank's phase times (see header). */
    t0 = now_ns();
    snprintf(key, sizeof key, "bt-%d", rank);
    snprintf(value, sizeof value, "%lld,%lld,%lld,%lld", init_ns, fence_ns, getall_ns, fence2_ns);
    rc = PMI2_KVS_Put(key, value);
    if (rc != PMI2_SUCCESS)
        die("PMI2_KVS_Put (times)", rc);
    rc = PMI2_KVS_Fence();
    if (rc != PMI2_SUCCESS)
        die("PMI2_KVS_Fence (3)", rc);
    if (rank == 0) {
        for (int r = 0; r < size; r++) {
            long long a, b, c, d;
            snprintf(key, sizeof key, "bt-%d", r);
            rc = PMI2_KVS_Get(jobid, r, key, got, sizeof got, &vallen);
            if (rc != PMI2_SUCCESS)
                die("PMI2_KVS_Get (times)", rc);
            if (sscanf(got, "%lld,%lld,%lld,%lld", &a, &b, &c, &d) != 4) {
                fprintf(stderr, "pmi2_exchange: rank 0: bad times from rank %d: \"%s\"\n", r, got);
                exit(1);
            }
            if (a > max_init)
                max_init = a;
            if (b > max_fence)
                max_fence = b;
            if (min_fence < 0 || b < min_fence)
                min_fence = b;
            if (c > max_getall) {
                max_getall = c;
                max_getall_rank = r;
            }
            if (d > max_fence2)
                max_fence2 = d;
            sum_getall += c;
        }
    }
    gather_ns = now_ns() - t0;

    t0 = now_ns();
    rc = PMI2_Finalize();
    t1 = now_ns();
    if (rc != PMI2_SUCCESS)
        die("PMI2_Finalize", rc);
    finalize_ns = t1 - t0;

    if (rank == 0) {
        printf("n=%d init_us=%.1f put_us=%.1f fence_us=%.1f getall_us=%.1f fence2_us=%.1f "
               "finalize_us=%.1f per_get_us=%.3f max_init_us=%.1f max_fence_us=%.1f min_fence_us=%.1f "
               "max_getall_us=%.1f max_getall_rank=%d mean_getall_us=%.1f max_fence2_us=%.1f "
               "gather_us=%.1f total_us=%.1f\n",
               size, init_ns / 1e3, put_ns / 1e3, fence_ns / 1e3, getall_ns / 1e3, fence2_ns / 1e3,
               finalize_ns / 1e3, getall_ns / 1e3 / size, max_init / 1e3, max_fence / 1e3, min_fence / 1e3,
               max_getall / 1e3, max_getall_rank, sum_getall / 1e3 / size, max_fence2 / 1e3,
               gather_ns / 1e3, (t1 - t_start) / 1e3);
        fflush(stdout);
    }
    return 0;
}
