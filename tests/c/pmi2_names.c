/* pmi2_names.c: the name service from both ends of a job (Slurm's
 * libpmi2), for jobs over several node servers (docs/nested.md).
 *
 * Usage: pmi2_names SERVICE
 *
 * Rank 0 publishes SERVICE with port "port-of-<jobid>"; after a fence the
 * last rank looks it up (must find exactly that port), unpublishes it;
 * after a second fence rank 0's lookup must fail. Rank 0 prints
 *     names ok service=SERVICE
 * A failed check prints `pmi2_names: rank R: ...` and exits 1.
 */
#include <pmi2.h>
#include <stdio.h>
#include <string.h>

static int rank = -1, failures = 0;

#define CHECK_WHO "pmi2_names: rank %d: ", rank
#include "check.h"

int main(int argc, char **argv)
{
    int spawned, size, appnum, rc;
    char jobid[256] = "", port[256], got[256] = "";
    const char *service = argc > 1 ? argv[1] : "fastpmi-names";

    if (PMI2_Init(&spawned, &size, &rank, &appnum) != PMI2_SUCCESS) {
        fprintf(stderr, "pmi2_names: PMI2_Init failed\n");
        return 2;
    }
    PMI2_Job_GetId(jobid, sizeof jobid);
    snprintf(port, sizeof port, "port-of-%s", jobid);
    if (rank == 0) {
        rc = PMI2_Nameserv_publish(service, NULL, port);
        if (rc != PMI2_SUCCESS)
            FAIL("PMI2_Nameserv_publish(%s) rc=%d", service, rc);
    }
    if (PMI2_KVS_Fence() != PMI2_SUCCESS)
        FAIL("PMI2_KVS_Fence failed");
    if (rank == size - 1) {
        rc = PMI2_Nameserv_lookup(service, NULL, got, sizeof got);
        if (rc != PMI2_SUCCESS)
            FAIL("PMI2_Nameserv_lookup(%s) rc=%d", service, rc);
        else if (strcmp(got, port) != 0)
            FAIL("PMI2_Nameserv_lookup(%s) = \"%s\", expected \"%s\"", service, got, port);
        rc = PMI2_Nameserv_unpublish(service, NULL);
        if (rc != PMI2_SUCCESS)
            FAIL("PMI2_Nameserv_unpublish(%s) rc=%d", service, rc);
    }
    if (PMI2_KVS_Fence() != PMI2_SUCCESS)
        FAIL("PMI2_KVS_Fence failed");
    if (rank == 0) {
        got[0] = '\0';
        rc = PMI2_Nameserv_lookup(service, NULL, got, sizeof got);
        if (rc == PMI2_SUCCESS)
            FAIL("PMI2_Nameserv_lookup(%s) after unpublish found \"%s\"", service, got);
    }
    PMI2_Finalize();
    if (failures)
        return 1;
    if (rank == 0)
        printf("names ok service=%s\n", service);
    return 0;
}
