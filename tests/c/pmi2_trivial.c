/* pmi2_trivial.c: the smallest useful PMI-2 job, for launches of many ranks
 * (Slurm's libpmi2, over the wire).
 *
 * Each rank: PMI2_Init (checks size against argv[1] and the rank range),
 * PMI2_KVS_Put("k-<rank>"), PMI2_KVS_Fence, PMI2_KVS_Get of the next rank's
 * key (one get per rank, so the job stays O(N)), PMI2_Finalize. Rank 0
 * prints `pmi2 trivial ok size=N`. Any failure: a line on stderr prefixed
 * `pmi2_trivial: rank R:` and exit status 1 (2 if PMI2_Init failed).
 *
 * Build: gcc -O2 -I/usr/include/slurm -o pmi2_trivial pmi2_trivial.c -lpmi2
 * Run:   fastpmi --mem-pool none -n 1024 ./pmi2_trivial 1024
 */
#include <pmi2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int spawned = 0, size = -1, rank = -1, appnum = -1, rc, next, vallen = 0;
    char jobid[256], key[PMI2_MAX_KEYLEN], want[64], got[PMI2_MAX_VALLEN];

    rc = PMI2_Init(&spawned, &size, &rank, &appnum);
    if (rc != PMI2_SUCCESS) {
        fprintf(stderr, "pmi2_trivial: PMI2_Init failed: rc=%d\n", rc);
        return 2;
    }
    if (argc > 1 && size != atoi(argv[1])) {
        fprintf(stderr, "pmi2_trivial: rank %d: size %d, expected %s\n", rank, size, argv[1]);
        return 1;
    }
    if (rank < 0 || rank >= size) {
        fprintf(stderr, "pmi2_trivial: rank %d out of range (size %d)\n", rank, size);
        return 1;
    }
    rc = PMI2_Job_GetId(jobid, sizeof jobid);
    if (rc != PMI2_SUCCESS) {
        fprintf(stderr, "pmi2_trivial: rank %d: PMI2_Job_GetId rc=%d\n", rank, rc);
        return 1;
    }
    snprintf(key, sizeof key, "k-%d", rank);
    snprintf(want, sizeof want, "v-%d", rank);
    if ((rc = PMI2_KVS_Put(key, want)) != PMI2_SUCCESS) {
        fprintf(stderr, "pmi2_trivial: rank %d: PMI2_KVS_Put rc=%d\n", rank, rc);
        return 1;
    }
    if ((rc = PMI2_KVS_Fence()) != PMI2_SUCCESS) {
        fprintf(stderr, "pmi2_trivial: rank %d: PMI2_KVS_Fence rc=%d\n", rank, rc);
        return 1;
    }
    next = (rank + 1) % size;
    snprintf(key, sizeof key, "k-%d", next);
    snprintf(want, sizeof want, "v-%d", next);
    rc = PMI2_KVS_Get(jobid, next, key, got, sizeof got, &vallen);
    if (rc != PMI2_SUCCESS || strcmp(got, want) != 0) {
        fprintf(stderr, "pmi2_trivial: rank %d: get %s: rc=%d value '%s'\n", rank, key, rc,
                rc == PMI2_SUCCESS ? got : "");
        return 1;
    }
    if ((rc = PMI2_Finalize()) != PMI2_SUCCESS) {
        fprintf(stderr, "pmi2_trivial: rank %d: PMI2_Finalize rc=%d\n", rank, rc);
        return 1;
    }
    if (rank == 0)
        printf("pmi2 trivial ok size=%d\n", size);
    return 0;
}
