/*
 * Process sets read through Slurm's unmodified libpmi2 (PMI2_Info_GetJobAttr
 * over the wire): "rank R names=... mine=... ocean=... ice=..." ("-" for a
 * missing attribute).
 */
#include <pmi2.h>
#include <stdio.h>
#include <stdlib.h>

static void attr(const char *key, char *out, int len) {
    int found = 0;
    if (PMI2_Info_GetJobAttr(key, out, len, &found) != PMI2_SUCCESS) {
        fprintf(stderr, "PMI2_Info_GetJobAttr(%s) failed\n", key);
        exit(1);
    }
    if (!found)
        snprintf(out, len, "-");
}

int main(void) {
    int spawned, size, rank, appnum;
    char names[PMI2_MAX_VALLEN], mine[PMI2_MAX_VALLEN], ocean[PMI2_MAX_VALLEN],
        ice[PMI2_MAX_VALLEN];
    if (PMI2_Init(&spawned, &size, &rank, &appnum) != PMI2_SUCCESS)
        return 1;
    attr("psetNames", names, sizeof names);
    attr("mypsets", mine, sizeof mine);
    attr("pset:ocean", ocean, sizeof ocean);
    attr("pset:ice", ice, sizeof ice);
    printf("rank %d names=%s mine=%s ocean=%s ice=%s\n", rank, names, mine, ocean, ice);
    PMI2_Finalize();
    return 0;
}
