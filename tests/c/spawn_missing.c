/* spawn_missing.c: MPI_Comm_spawn of a program that does not exist must
 * come back as an error (not kill the job), and the parent job then
 * finishes normally.
 *
 * Usage: spawn_missing K   (any number of parent ranks; K processes asked)
 *        spawn_missing --child   (the control spawn below; not by hand)
 *
 * MPI_ERRORS_RETURN is set on MPI_COMM_WORLD and MPI_COMM_SELF, then every
 * rank calls MPI_Comm_spawn("<dir of this program>/fastpmi-no-such-program",
 * K, root 0, MPI_COMM_WORLD). The call must return an error, or return
 * MPI_SUCCESS with at least one errcode that is not MPI_SUCCESS (the MPI
 * standard allows either). Rank 0 prints
 *     spawn_missing ok rc_class=C errcode_class=E error="<string>"
 * with C the error class of the return code, E the class of the first
 * non-success errcode (or -1), and the string of whichever was an error.
 * Afterwards all ranks run an MPI_Allreduce on MPI_COMM_WORLD (the world
 * must still work), then, as a control (a launcher that refuses every spawn
 * must not pass), MPI_Comm_spawn one copy of this program with "--child",
 * which must succeed; the child prints `spawn_missing child ok` and both
 * sides disconnect. Rank 0's line ends in ` then_spawned=1`. Exit 0. A
 * spawn of the missing program that succeeds, or a failed control spawn,
 * prints `spawn_missing: ...` on stderr and exits 1.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    MPI_Comm inter = MPI_COMM_NULL;
    int wrank = -1, wsize = -1, k = argc > 1 ? atoi(argv[1]) : 1;
    int rc, rc_class = -1, err_class = -1, bad = -1, len = 0, failures = 0;
    int *errcodes;
    char exe[4096], exe_path[4096], missing[4200], msg[MPI_MAX_ERROR_STRING] = "";
    char *slash;
    ssize_t n;

    MPI_Init(&argc, &argv);
    if (argc > 1 && strcmp(argv[1], "--child") == 0) {
        MPI_Comm parent;
        MPI_Comm_get_parent(&parent);
        if (parent == MPI_COMM_NULL) {
            fprintf(stderr, "spawn_missing: --child without a parent\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        MPI_Comm_disconnect(&parent);
        printf("spawn_missing child ok\n");
        fflush(stdout);
        MPI_Finalize();
        return 0;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    if (k < 1)
        k = 1;

    /* An absolute path in an existing directory, so the only thing wrong
     * is that the file is not there. */
    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    memcpy(exe_path, exe, sizeof exe);
    slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    snprintf(missing, sizeof missing, "%s/fastpmi-no-such-program", slash ? exe : ".");

    errcodes = malloc(sizeof(int) * (size_t)k);
    for (int i = 0; i < k; i++)
        errcodes[i] = MPI_SUCCESS;
    rc = MPI_Comm_spawn(missing, MPI_ARGV_NULL, k, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter,
                        errcodes);
    if (rc != MPI_SUCCESS) {
        MPI_Error_class(rc, &rc_class);
        MPI_Error_string(rc, msg, &len);
    } else {
        rc_class = MPI_SUCCESS;
    }
    for (int i = 0; i < k; i++)
        if (errcodes[i] != MPI_SUCCESS) {
            bad = i;
            break;
        }
    if (bad >= 0) {
        MPI_Error_class(errcodes[bad], &err_class);
        if (rc == MPI_SUCCESS)
            MPI_Error_string(errcodes[bad], msg, &len);
    }
    if (rc == MPI_SUCCESS && bad < 0) {
        fprintf(stderr, "spawn_missing: rank %d: spawn of %s succeeded\n", wrank, missing);
        failures++;
    }
    if (inter != MPI_COMM_NULL && rc == MPI_SUCCESS)
        MPI_Comm_disconnect(&inter);
    free(errcodes);

    /* The parent world must still be usable. */
    {
        int one = 1, total = -1;
        int arc = MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (arc != MPI_SUCCESS || total != wsize) {
            fprintf(stderr, "spawn_missing: rank %d: allreduce after the failed spawn: rc %d "
                            "total %d, expected %d\n", wrank, arc, total, wsize);
            failures++;
        }
    }
    /* Control: spawning a program that exists works. */
    {
        char *child_argv[] = {"--child", NULL};
        int errcode = -1;
        MPI_Comm ctl = MPI_COMM_NULL;
        int crc = MPI_Comm_spawn(exe_path, child_argv, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &ctl,
                                 &errcode);
        if (crc != MPI_SUCCESS || errcode != MPI_SUCCESS) {
            fprintf(stderr, "spawn_missing: rank %d: control spawn of %s failed: rc %d "
                            "errcode %d\n", wrank, exe_path, crc, errcode);
            failures++;
        } else {
            MPI_Comm_disconnect(&ctl);
        }
    }
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '"')
            *p = ' ';
    if (failures == 0 && wrank == 0)
        printf("spawn_missing ok rc_class=%d errcode_class=%d error=\"%s\" then_spawned=1\n",
               rc_class, err_class, msg);
    fflush(stdout);
    MPI_Finalize();
    return failures ? 1 : 0;
}
