/* pmi2_fence_loop.c: a loop of PMI2_KVS_Fence, for the tests that stop
 * one rank while the others fence (tests/tools_stopped.rs).
 *
 * Usage: pmi2_fence_loop ITERATIONS
 *
 * Each rank: PMI2_Init, then ITERATIONS times PMI2_KVS_Fence, then
 * PMI2_Finalize and prints "fence loop ok rank R fences N". A fence that
 * fails ends the rank with status 3.
 *
 * The late rank (env FASTPMI_TEST_LATE_RANK, compared with PMI_RANK or
 * PMI_ID before init; unset or -1: none) first writes its pid to
 * <FASTPMI_TEST_MARK_DIR>/pid.<rank> and waits, before PMI2_Init, until
 * the file named by FASTPMI_TEST_GO exists (polled every 20 ms, at most
 * 120 s), so a test can stop it before its first PMI call.
 *
 * Built twice: against fastpmi's libpmi2 (shared memory) and against
 * Slurm's libpmi2 (the socket).
 */
#include <pmi2.h>
#include <stdio.h>
#include <stdlib.h>

#include "late_rank.h"

int main(int argc, char **argv)
{
    int spawned = 0, size = -1, rank = -1, appnum = -1, rc;
    long n = argc > 1 ? atol(argv[1]) : 1000, i;

    if (late_rank_wait("pmi2_fence_loop") != 0)
        return 2;
    rc = PMI2_Init(&spawned, &size, &rank, &appnum);
    if (rc != PMI2_SUCCESS) {
        fprintf(stderr, "pmi2_fence_loop: PMI2_Init failed: rc=%d\n", rc);
        return 2;
    }
    for (i = 0; i < n; i++) {
        if ((rc = PMI2_KVS_Fence()) != PMI2_SUCCESS) {
            fprintf(stderr, "pmi2_fence_loop: rank %d: fence %ld rc=%d\n", rank, i + 1, rc);
            return 3;
        }
    }
    if ((rc = PMI2_Finalize()) != PMI2_SUCCESS) {
        fprintf(stderr, "pmi2_fence_loop: rank %d: finalize rc=%d\n", rank, rc);
        return 5;
    }
    printf("fence loop ok rank %d fences %ld\n", rank, n);
    return 0;
}
