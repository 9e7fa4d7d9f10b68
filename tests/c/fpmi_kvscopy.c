/*
 * fastpmi's whole-KVS extension (include/fastpmi.h: FPMI_KVS_Getall,
 * FPMI_KVS_Putall) through fastpmi's libpmi2.so.0.
 *
 * Every rank puts card-R, fences, and reads the whole KVS with
 * FPMI_KVS_Getall: each rank's card exactly once. Rank 0 then puts two
 * pairs with FPMI_KVS_Putall, and tries a putall with a bad key (refused,
 * nothing put); after a fence every rank reads the two and not the third.
 * Prints "fpmi kvscopy ok rank R size N".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fastpmi.h"
#include "pmi2.h"

static int rank = -1, failures = 0;
#define CHECK_WHO "fpmi_kvscopy: rank %d: ", rank
#include "check.h"

struct seen {
    int size;
    int *count; /* times each card-R was seen */
    int others;
    int stop_after;
};

static int on_pair(const char *key, const char *value, int vallen, void *arg) {
    struct seen *s = arg;
    int r;
    char want[64];
    if (sscanf(key, "card-%d", &r) == 1 && r >= 0 && r < s->size) {
        snprintf(want, sizeof want, "value-%d", r);
        if (vallen != (int)strlen(want) || strcmp(value, want) != 0)
            FAIL("%s = %s (%d bytes), want %s", key, value, vallen, want);
        s->count[r]++;
    } else {
        s->others++;
    }
    return s->stop_after > 0 && --s->stop_after == 0 ? 7 : 0;
}

int main(void) {
    int spawned, appnum, n = -1;
    char key[64], val[64], got[PMI2_MAX_VALLEN + 1];
    int len;
    EXPECT_RC(PMI2_Init(&spawned, &n, &rank, &appnum), PMI2_SUCCESS);
    snprintf(key, sizeof key, "card-%d", rank);
    snprintf(val, sizeof val, "value-%d", rank);
    EXPECT_RC(PMI2_KVS_Put(key, val), PMI2_SUCCESS);
    EXPECT_RC(PMI2_KVS_Fence(), PMI2_SUCCESS);

    struct seen s = {.size = n, .count = calloc(n, sizeof(int))};
    int npairs = -1;
    EXPECT_RC(FPMI_KVS_Getall(NULL, on_pair, &s, &npairs), PMI2_SUCCESS);
    if (npairs != n) FAIL("getall: %d pairs, want %d", npairs, n);
    for (int r = 0; r < n; r++)
        if (s.count[r] != 1) FAIL("card-%d seen %d times", r, s.count[r]);
    if (s.others != 0) FAIL("getall: %d other pairs", s.others);
    /* The callback stops the walk with its return value. */
    s.stop_after = 1;
    EXPECT_RC(FPMI_KVS_Getall("", on_pair, &s, NULL), 7);
    EXPECT_RC(FPMI_KVS_Getall(NULL, NULL, NULL, NULL), PMI2_ERR_INVALID_ARG);
    EXPECT_RC(PMI2_KVS_Fence(), PMI2_SUCCESS);

    if (rank == 0) {
        const char *keys[] = {"copied-a", "copied-b"};
        const char *values[] = {"1", "two"};
        EXPECT_RC(FPMI_KVS_Putall(keys, values, 2), PMI2_SUCCESS);
        EXPECT_RC(FPMI_KVS_Putall(NULL, NULL, 0), PMI2_SUCCESS);
        const char *bad_keys[] = {"never", "bad key"};
        EXPECT_RC(FPMI_KVS_Putall(bad_keys, values, 2), PMI2_ERR_INVALID_KEY);
        EXPECT_RC(FPMI_KVS_Putall(keys, values, -1), PMI2_ERR_INVALID_ARG);
    }
    EXPECT_RC(PMI2_KVS_Fence(), PMI2_SUCCESS);
    EXPECT_RC(PMI2_KVS_Get(NULL, 0, "copied-a", got, sizeof got, &len), PMI2_SUCCESS);
    if (strcmp(got, "1") != 0) FAIL("copied-a = %s", got);
    EXPECT_RC(PMI2_KVS_Get(NULL, 0, "copied-b", got, sizeof got, &len), PMI2_SUCCESS);
    if (strcmp(got, "two") != 0) FAIL("copied-b = %s", got);
    EXPECT_RC(PMI2_KVS_Get(NULL, 0, "never", got, sizeof got, &len), PMI2_ERR_OTHER);
    EXPECT_RC(PMI2_Finalize(), PMI2_SUCCESS);
    free(s.count);
    if (failures) return 1;
    printf("fpmi kvscopy ok rank %d size %d\n", rank, n);
    return 0;
}
