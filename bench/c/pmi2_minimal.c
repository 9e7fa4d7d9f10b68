/* pmi2_minimal.c: the smallest PMI-2 job: PMI2_Init, one PMI2_KVS_Fence, PMI2_Finalize.
 * Measures job start-up (launch + client init), not the KVS.
 * Build: cc -O2 -I/usr/include/slurm -o pmi2_minimal pmi2_minimal.c -lpmi2
 *        (Slurm's libpmi2; the same binary runs on fastpmi's libpmi2.so.0 through
 *        LD_LIBRARY_PATH)
 * Run:   fastpmi -n 1024 ./pmi2_minimal */
#include <pmi2.h>
#include <stdio.h>

int main(void) {
    int spawned, size, rank, appnum;
    if (PMI2_Init(&spawned, &size, &rank, &appnum) != PMI2_SUCCESS) {
        fprintf(stderr, "PMI2_Init failed\n");
        return 1;
    }
    if (PMI2_KVS_Fence() != PMI2_SUCCESS) {
        fprintf(stderr, "rank %d: PMI2_KVS_Fence failed\n", rank);
        return 1;
    }
    return PMI2_Finalize() == PMI2_SUCCESS ? 0 : 1;
}
