/* pmi2_ft.c: a rank's death in a fault-tolerant job (tests/ft_pmi2.rs).
 *
 * Usage: pmi2_ft MODE     MODE: both | abort
 *
 * Every rank: PMI2_Init, puts "k<rank>", fence 1, finds PMI_dead_processes
 * missing (status 11 if found: nobody died yet). Then
 *  - both: rank 1 sleeps 500 ms and exits 3; rank 2 sleeps 500 ms and calls
 *    PMI2_Abort(0, "rank 2 leaves"); abort: only rank 2 does.
 *  - every other rank enters fence 2 at once, which must return an error
 *    (the dead can never join it): "fence error rank R"; a fence that
 *    succeeds ends the rank with status 4.
 *  - then it reads PMI_dead_processes with PMI2_Info_GetJobAttr and with
 *    PMI2_KVS_Get(jobid, PMI2_ID_NULL, ...), every 10 ms for at most 20 s,
 *    until both name every dead rank (1 and 2, or 2): prints
 *    "ft ok rank R dead=<value>", reads k0 (put before the deaths) and
 *    finalizes. Status 5 when the list never comes, 6 when the two ways
 *    disagree, 7 when k0 is missing.
 *
 * With FASTPMI_TEST_GO set, every survivor then waits (polled every 20 ms,
 * at most 60 s) until that file exists before it finalizes, so a test can
 * look at the job with `fastpmi ps`.
 *
 * Built against fastpmi's libpmi2 (shared memory), where fastpmi.h adds:
 * rank 3 first waits for a death with FPMI_Wait_death ("wait death rank 3"
 * once one came; status 8 if none within 20 s), FPMI_Dead_ranks must
 * agree with PMI_dead_processes (status 6), and every survivor, which
 * opened the out-of-band channel after init, reads a death notice for
 * each dead rank ("oob deaths rank R"; status 10 if not within 20 s); and
 * against Slurm's libpmi2 (the socket).
 */
#include <pmi2.h>
#if __has_include(<fastpmi.h>)
#include <fastpmi.h>
#define HAVE_FASTPMI_H 1
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void pause_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Whether the range list names exactly the ranks in want (-1 ended). */
static int names_exactly(const char *list, const int *want)
{
    char seen[64] = {0};
    const char *p = list;
    int i;
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p || a < 0 || a >= 64)
            return 0;
        p = end;
        if (*p == '-') {
            b = strtol(p + 1, &end, 10);
            if (end == p + 1 || b < a || b >= 64)
                return 0;
            p = end;
        }
        for (; a <= b; a++)
            seen[a] = 1;
        if (*p == ',')
            p++;
        else if (*p)
            return 0;
    }
    for (i = 0; want[i] >= 0; i++)
        if (!seen[want[i]])
            return 0;
    for (i = 0; i < 64; i++) {
        int j, wanted = 0;
        for (j = 0; want[j] >= 0; j++)
            wanted |= want[j] == i;
        if (seen[i] && !wanted)
            return 0;
    }
    return 1;
}

int main(int argc, char **argv)
{
    int spawned, size, rank, appnum, rc, found, vallen, tries;
    int both = argc > 1 && strcmp(argv[1], "both") == 0;
    int dead_both[] = {1, 2, -1}, dead_abort[] = {2, -1};
    const int *want = both ? dead_both : dead_abort;
    char key[32], val[64], jobid[256], attr[1024], kvs[1024];

    if (PMI2_Init(&spawned, &size, &rank, &appnum) != PMI2_SUCCESS || size < 4)
        return 2;
    if (PMI2_Job_GetId(jobid, sizeof jobid) != PMI2_SUCCESS)
        return 2;
#ifdef HAVE_FASTPMI_H
    if (rank != 1 && rank != 2 && FPMI_Oob_open(NULL, NULL) != FPMI_SUCCESS)
        return 10;
#endif
    snprintf(key, sizeof key, "k%d", rank);
    snprintf(val, sizeof val, "v%d", rank);
    if (PMI2_KVS_Put(key, val) != PMI2_SUCCESS || PMI2_KVS_Fence() != PMI2_SUCCESS)
        return 2;
    /* Nobody died yet: the attribute is a miss. */
    found = 1;
    if (PMI2_Info_GetJobAttr("PMI_dead_processes", attr, sizeof attr, &found) != PMI2_SUCCESS ||
        found)
        return 11;
    if (rank == 1 && both) {
        pause_ms(500);
        printf("rank 1 exits 3\n");
        fflush(stdout);
        exit(3);
    }
    if (rank == 2) {
        pause_ms(500);
        printf("rank 2 aborts itself\n");
        fflush(stdout);
        PMI2_Abort(0, "rank 2 leaves");
        return 9; /* PMI2_Abort does not return */
    }
#ifdef HAVE_FASTPMI_H
    if (rank == 3) {
        int count = 0;
        if (FPMI_Wait_death(0, 20000, &count) != FPMI_SUCCESS || count < 1)
            return 8;
        printf("wait death rank 3\n");
    }
#endif
    rc = PMI2_KVS_Fence();
    if (rc == PMI2_SUCCESS) {
        fprintf(stderr, "pmi2_ft: rank %d: fence 2 completed without the dead\n", rank);
        return 4;
    }
    printf("fence error rank %d\n", rank);
    for (tries = 0; tries < 2000; tries++) {
        attr[0] = kvs[0] = 0;
        found = 0;
        rc = PMI2_Info_GetJobAttr("PMI_dead_processes", attr, sizeof attr, &found);
        if (rc == PMI2_SUCCESS && found &&
            PMI2_KVS_Get(jobid, PMI2_ID_NULL, "PMI_dead_processes", kvs, sizeof kvs,
                         &vallen) == PMI2_SUCCESS &&
            names_exactly(attr, want)) {
            if (strcmp(attr, kvs) != 0) {
                fprintf(stderr, "pmi2_ft: rank %d: job attr %s, kvs-get %s\n", rank, attr, kvs);
                return 6;
            }
#ifdef HAVE_FASTPMI_H
            {
                int dead[8], n = 0, i;
                if (FPMI_Dead_ranks(dead, 8, &n) != FPMI_SUCCESS)
                    return 6;
                for (i = 0; want[i] >= 0; i++)
                    if (i >= n || dead[i] != want[i])
                        return 6;
                if (n != i)
                    return 6;
            }
#endif
            break;
        }
        pause_ms(10);
    }
    if (tries == 2000) {
        fprintf(stderr, "pmi2_ft: rank %d: PMI_dead_processes is '%s'\n", rank, attr);
        return 5;
    }
    if (PMI2_KVS_Get(jobid, PMI2_ID_NULL, "k0", val, sizeof val, &vallen) != PMI2_SUCCESS ||
        strcmp(val, "v0") != 0)
        return 7;
#ifdef HAVE_FASTPMI_H
    {
        int seen[64] = {0}, got = 0, received, i, all;
        FPMI_Oob_notice n;
        for (tries = 0; tries < 200; tries++) {
            if (FPMI_Oob_poll(100, &n, &received) != FPMI_SUCCESS)
                return 10;
            if (received && n.kind == FPMI_OOB_DEATH && n.rank >= 0 && n.rank < 64 &&
                strcmp(n.jobid, jobid) == 0)
                seen[n.rank] = 1;
            for (all = 1, i = 0; want[i] >= 0; i++)
                all &= seen[want[i]];
            if (all) {
                got = 1;
                break;
            }
        }
        if (!got)
            return 10;
        printf("oob deaths rank %d\n", rank);
    }
#endif
    printf("ft ok rank %d dead=%s\n", rank, attr);
    fflush(stdout);
    if (getenv("FASTPMI_TEST_GO")) {
        for (tries = 0; tries < 3000 && access(getenv("FASTPMI_TEST_GO"), F_OK) != 0; tries++)
            pause_ms(20);
    }
    PMI2_Finalize();
    return 0;
}
