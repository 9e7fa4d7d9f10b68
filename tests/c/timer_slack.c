/* Prints this process's timer slack in nanoseconds ("slack N"), as the
 * launcher left it (tests/pmix_oversubscribed.rs). */
#include <stdio.h>
#include <sys/prctl.h>

int main(void) {
    printf("slack %d\n", prctl(PR_GET_TIMERSLACK));
    return 0;
}
