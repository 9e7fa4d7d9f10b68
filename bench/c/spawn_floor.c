/* spawn_floor.c: the floor for starting a job on this machine. Starts N processes of
 * PROGRAM (default /bin/true) with posix_spawn (glibc: clone(CLONE_VM|CLONE_VFORK), no
 * fork of the caller) and reaps them all; prints the wall time in seconds.
 * Build: cc -O2 -o spawn_floor spawn_floor.c
 * Run:   ./spawn_floor N [PROGRAM [ARGS...]]
 * `fastpmi -n N PROGRAM` should be measured beside this, in the same run, at the same N. */
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s N [PROGRAM [ARGS...]]\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[1]);
    char *deflt[] = {"/bin/true", NULL};
    char **child = argc > 2 ? argv + 2 : deflt;
    double t0 = now();
    int started = 0, failed = 0;
    for (int i = 0; i < n; i++) {
        pid_t pid;
        if (posix_spawn(&pid, child[0], NULL, NULL, child, environ) == 0)
            started++;
        else
            failed++;
    }
    int status;
    while (started > 0 && wait(&status) > 0) {
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failed++;
        started--;
    }
    printf("%.4f\n", now() - t0);
    return failed ? 1 : 0;
}
