/* check.h: failure reporting shared by the C test programs.
 *
 * Before including it, a program defines CHECK_WHO, the printf format and
 * arguments that name the failing process, and has an `int failures` in
 * scope (its exit status is based on it):
 *
 *     static int rank = -1, failures = 0;
 *     #define CHECK_WHO "pmi1_kvs: rank %d: ", rank
 *     #include "check.h"
 *
 * FAIL(fmt, ...) prints one line on stderr and counts a failure;
 * EXPECT_RC(call, want) fails unless `call` returns `want`.
 */
#ifndef FASTPMI_TEST_CHECK_H
#define FASTPMI_TEST_CHECK_H

#include <stdio.h>

#define FAIL(...)                         \
    do {                                  \
        fprintf(stderr, CHECK_WHO);       \
        fprintf(stderr, __VA_ARGS__);     \
        fputc('\n', stderr);              \
        failures++;                       \
    } while (0)

#define EXPECT_RC(call, want)                                            \
    do {                                                                 \
        int rc_ = (call);                                                \
        if (rc_ != (want))                                               \
            FAIL("line %d: %s returned %d, expected %d (%s)", __LINE__,  \
                 #call, rc_, (want), #want);                             \
    } while (0)

#endif
