/* late_rank.h: the "late rank" of the C test programs that stop or delay
 * one rank before its first PMI call (pmi2_late.c, pmi2_fence_loop.c).
 *
 * late_rank_wait(prog): if this process is the late rank (env
 * FASTPMI_TEST_LATE_RANK, compared with PMI_RANK or PMI_ID) and
 * FASTPMI_TEST_GO names a file, write this process's pid to
 * <FASTPMI_TEST_MARK_DIR>/pid.<rank> (when that is set; written under a
 * temporary name and renamed, so a reader never sees half of it), then
 * wait until the FASTPMI_TEST_GO file exists, polled every 20 ms for at
 * most 120 s. Returns 0, or 2 after printing why the pid file failed.
 */
#ifndef FASTPMI_TEST_LATE_RANK_H
#define FASTPMI_TEST_LATE_RANK_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int env_int(const char *name, int dflt)
{
    const char *s = getenv(name);
    return (s && *s) ? atoi(s) : dflt;
}

static int late_rank_wait(const char *prog)
{
    int me = env_int("PMI_RANK", env_int("PMI_ID", -2));
    int late = env_int("FASTPMI_TEST_LATE_RANK", -1);
    const char *go = getenv("FASTPMI_TEST_GO"), *dir = getenv("FASTPMI_TEST_MARK_DIR");
    struct timespec t = {0, 20 * 1000 * 1000};
    int k;

    if (me != late || !go)
        return 0;
    if (dir) {
        char path[4096], tmp[4096];
        FILE *f;
        snprintf(tmp, sizeof tmp, "%s/.pid.%d", dir, me);
        snprintf(path, sizeof path, "%s/pid.%d", dir, me);
        f = fopen(tmp, "w");
        if (!f || fprintf(f, "%ld\n", (long)getpid()) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
            fprintf(stderr, "%s: ", prog);
            perror("pid file");
            return 2;
        }
    }
    for (k = 0; k < 6000 && access(go, F_OK) != 0; k++)
        nanosleep(&t, NULL);
    return 0;
}

#endif
