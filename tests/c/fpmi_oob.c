/*
 * fastpmi's out-of-band channel (include/fastpmi.h: FPMI_Oob_open,
 * FPMI_Oob_poll, FPMI_Oob_close) through fastpmi's libpmi2.so.0.
 *
 *   fpmi_oob abort SIGNAL|NONE
 *     Every rank opens its channel asking for SIGNAL, fences, and the last
 *     rank calls PMI2_Abort ("disk full"). The others wait for the abort
 *     notice and print
 *       "oob abort rank R from=F exitcode=C signal=S before=B message=M"
 *     where S = 1 if SIGNAL arrived and B = 1 if the notice was already
 *     readable on the channel when it did (SIGNAL is blocked and taken with
 *     sigtimedwait before the channel is read). The launcher's SIGTERM is
 *     caught, so each rank reports before it exits.
 *   fpmi_oob checkpoint SIGNAL|NONE K
 *     Every rank opens its channel, fences, creates the file
 *     $FASTPMI_TEST_MARK_DIR/ready.R and waits for K checkpoint requests,
 *     printing "oob checkpoint rank R seq=Q job=J signal=S" for each; then
 *     closes the channel, fences and finalizes.
 *   fpmi_oob misuse
 *     Error codes: poll before open, a signal the channel does not send,
 *     opening twice, close twice. Prints "oob misuse ok rank R" (also as a
 *     singleton, where open is FPMI_ERR_NOT_SUPPORTED).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fastpmi.h"
#include "pmi2.h"

static int rank = -1, failures = 0;
#define CHECK_WHO "fpmi_oob: rank %d: ", rank
#include "check.h"

static int oob_fd = -1;
static volatile sig_atomic_t got_signal = 0, readable_at_signal = 0;

static void on_signal(int sig) {
    (void)sig;
    got_signal = 1;
}

static void on_term(int sig) { (void)sig; }

static int signal_number(const char *name) {
    if (strcmp(name, "SIGUSR1") == 0) return SIGUSR1;
    if (strcmp(name, "SIGUSR2") == 0) return SIGUSR2;
    if (strcmp(name, "SIGALRM") == 0) return SIGALRM;
    return 0;
}

static void catch(int sig, void (*fn)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

/* Wait up to ms for the signal flag. */
static void wait_signal(int ms) {
    struct timespec t = {0, 10 * 1000 * 1000};
    for (int i = 0; i < ms / 10 && !got_signal; i++) nanosleep(&t, NULL);
}

static int do_abort(const char *signame, int size) {
    int sig = signal_number(signame);
    sigset_t set;
    sigemptyset(&set);
    if (sig) {
        sigaddset(&set, sig);
        sigprocmask(SIG_BLOCK, &set, NULL);
    }
    catch(SIGTERM, on_term);
    EXPECT_RC(FPMI_Oob_open(strcmp(signame, "NONE") ? signame : NULL, &oob_fd), PMI2_SUCCESS);
    if (oob_fd < 0) FAIL("no descriptor from FPMI_Oob_open");
    EXPECT_RC(PMI2_KVS_Fence(), PMI2_SUCCESS);
    if (rank == size - 1) {
        PMI2_Abort(1, "disk full");
        return 1; /* not reached */
    }
    if (sig) {
        /* The signal first, the channel unread: the notice must be there. */
        struct timespec limit = {10, 0};
        for (int i = 0; i < 100 && !got_signal; i++) {
            if (sigtimedwait(&set, NULL, &limit) == sig) got_signal = 1;
            else if (errno != EINTR) break;
        }
        char c;
        if (got_signal && recv(oob_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 1)
            readable_at_signal = 1;
    }
    FPMI_Oob_notice n;
    int got = 0;
    /* The launcher's SIGTERM may interrupt the wait: go on waiting. */
    for (int i = 0; i < 100 && !got; i++) {
        int rc = FPMI_Oob_poll(100, &n, &got);
        if (rc != PMI2_SUCCESS) {
            FAIL("FPMI_Oob_poll returned %d", rc);
            break;
        }
    }
    if (!got) {
        FAIL("no abort notice within 10 s");
        return 1;
    }
    if (n.kind != FPMI_OOB_ABORT) FAIL("kind %d, want FPMI_OOB_ABORT", n.kind);
    printf("oob abort rank %d from=%d exitcode=%d signal=%d before=%d message=%s\n", rank, n.rank,
           n.exitcode, (int)got_signal, (int)readable_at_signal, n.message);
    fflush(stdout);
    return failures ? 1 : 0;
}

static int do_checkpoint(const char *signame, int want) {
    int sig = signal_number(signame);
    if (sig) catch(sig, on_signal);
    EXPECT_RC(FPMI_Oob_open(strcmp(signame, "NONE") ? signame : NULL, &oob_fd), PMI2_SUCCESS);
    EXPECT_RC(PMI2_KVS_Fence(), PMI2_SUCCESS);
    const char *dir = getenv("FASTPMI_TEST_MARK_DIR");
    if (dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/ready.%d", dir, rank);
        FILE *f = fopen(path, "w");
        if (f) fclose(f);
    }
    for (int k = 1; k <= want; k++) {
        FPMI_Oob_notice n;
        int got = 0;
        /* Also wake on the descriptor, as an event loop would. */
        struct pollfd p = {oob_fd, POLLIN, 0};
        if (poll(&p, 1, 60000) <= 0 && errno != EINTR) FAIL("descriptor never readable");
        EXPECT_RC(FPMI_Oob_poll(60000, &n, &got), PMI2_SUCCESS);
        if (!got) {
            FAIL("checkpoint %d did not come", k);
            break;
        }
        if (n.kind != FPMI_OOB_CHECKPOINT) FAIL("kind %d, want FPMI_OOB_CHECKPOINT", n.kind);
        if (sig) wait_signal(5000);
        printf("oob checkpoint rank %d seq=%lld job=%s signal=%d\n", rank, n.seq, n.jobid,
               (int)got_signal);
        fflush(stdout);
        got_signal = 0;
    }
    EXPECT_RC(FPMI_Oob_close(), PMI2_SUCCESS);
    EXPECT_RC(PMI2_KVS_Fence(), PMI2_SUCCESS);
    return failures ? 1 : 0;
}

static int do_misuse(void) {
    FPMI_Oob_notice n;
    int got = 7, fd = -1;
    if (sizeof(FPMI_Oob_notice) != 1304)
        FAIL("sizeof(FPMI_Oob_notice) = %zu, the library's is 1304", sizeof(FPMI_Oob_notice));
    EXPECT_RC(FPMI_Oob_poll(0, &n, &got), PMI2_ERR_INIT);
    EXPECT_RC(FPMI_Oob_close(), PMI2_ERR_INIT);
    EXPECT_RC(FPMI_Oob_open("SIGKILL", &fd), PMI2_ERR_INVALID_ARG);
    EXPECT_RC(FPMI_Oob_open("nonsense", &fd), PMI2_ERR_INVALID_ARG);
    if (getenv("PMI_FD") == NULL && getenv("PMI_PORT") == NULL) {
        EXPECT_RC(FPMI_Oob_open(NULL, &fd), FPMI_ERR_NOT_SUPPORTED);
    } else {
        EXPECT_RC(FPMI_Oob_open("NONE", &fd), PMI2_SUCCESS);
        EXPECT_RC(FPMI_Oob_open("NONE", &fd), PMI2_ERR_INVALID_ARG);
        EXPECT_RC(FPMI_Oob_poll(0, &n, &got), PMI2_SUCCESS);
        if (got != 0) FAIL("a notice from nowhere");
        EXPECT_RC(FPMI_Oob_poll(0, NULL, &got), PMI2_ERR_INVALID_ARG);
        EXPECT_RC(FPMI_Oob_close(), PMI2_SUCCESS);
        EXPECT_RC(FPMI_Oob_close(), PMI2_ERR_INIT);
    }
    EXPECT_RC(PMI2_KVS_Fence(), PMI2_SUCCESS);
    if (!failures) printf("oob misuse ok rank %d\n", rank);
    return failures ? 1 : 0;
}

int main(int argc, char **argv) {
    int spawned, size, appnum, rc;
    if (argc < 2) {
        fprintf(stderr, "usage: fpmi_oob abort|checkpoint|misuse ...\n");
        return 2;
    }
    if (PMI2_Init(&spawned, &size, &rank, &appnum) != PMI2_SUCCESS) {
        fprintf(stderr, "fpmi_oob: PMI2_Init failed\n");
        return 1;
    }
    if (strcmp(argv[1], "abort") == 0 && argc == 3)
        rc = do_abort(argv[2], size);
    else if (strcmp(argv[1], "checkpoint") == 0 && argc == 4)
        rc = do_checkpoint(argv[2], atoi(argv[3]));
    else if (strcmp(argv[1], "misuse") == 0)
        rc = do_misuse();
    else {
        fprintf(stderr, "fpmi_oob: bad arguments\n");
        return 2;
    }
    PMI2_Finalize();
    return rc;
}
