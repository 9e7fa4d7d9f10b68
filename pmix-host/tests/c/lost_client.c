/* A PMIx client for pmix-host/tests/lost_connection.rs: connects, says
 * "ready <rank>", then either finalizes and exits ("finalize") or waits
 * to be killed. */
#include <pmix.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    pmix_proc_t me;
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    if (PMIX_SUCCESS != rc) {
        printf("PMIx_Init %d\n", rc);
        return 1;
    }
    printf("ready %u\n", me.rank);
    fflush(stdout);
    if (argc > 1 && 0 == strcmp(argv[1], "finalize")) {
        rc = PMIx_Finalize(NULL, 0);
        printf("PMIx_Finalize %d\n", rc);
        return PMIX_SUCCESS == rc ? 0 : 1;
    }
    for (;;) {
        pause();
    }
}
