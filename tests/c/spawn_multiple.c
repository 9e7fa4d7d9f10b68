/* spawn_multiple.c: MPI_Comm_spawn_multiple with two commands; the
 * children report their MPI_APPNUM and arguments back to the parent.
 *
 * Usage: spawn_multiple A B   (parent: A copies of command 0, B of command 1)
 *        spawn_multiple --child TAG   (started by the spawn; not by hand)
 *
 * Parent: MPI_Comm_spawn_multiple over MPI_COMM_WORLD, root 0, of two
 * commands, both /proc/self/exe: command 0 with argv {"--child", "first"},
 * no info and A processes; command 1 with argv {"--child", "second", D},
 * info `wdir` = D and B processes, where D is the directory of the
 * executable (run the parent elsewhere to make the check mean something).
 * Every errcode must be MPI_SUCCESS and the remote size A+B.
 * Parent rank 0 then receives one int pair {appnum, tag} from each child
 * rank c over the intercommunicator and checks appnum 0 and tag "first"
 * (0) for c < A, appnum 1 and tag "second" (1) for c >= A, and prints
 *     spawn_multiple ok children=A+B appnums=0,0,1,...
 * Child: MPI_APPNUM attribute of MPI_COMM_WORLD must exist; world size
 * A+B; a "second" child's working directory must be D; sends {appnum,
 * tag} to parent rank 0 and prints
 *     child rank R appnum N tag T
 * A failed check prints `spawn_multiple: ...` on stderr, exit 1.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0, wrank = -1;
static const char *role = "parent";

#define CHECK_WHO "spawn_multiple: %s rank %d: ", role, wrank
#include "check.h"

int main(int argc, char **argv)
{
    MPI_Comm parent, inter;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_get_parent(&parent);

    if (parent == MPI_COMM_NULL) {
        char exe[4096], dir[4096];
        char *cmds[2];
        char *argv0[] = {"--child", "first", NULL};
        char *argv1[] = {"--child", "second", dir, NULL};
        char **argvs[2] = {argv0, argv1};
        int a = argc > 2 ? atoi(argv[1]) : 0, b = argc > 2 ? atoi(argv[2]) : 0;
        int maxprocs[2], rsize = -1, *errcodes;
        MPI_Info infos[2] = {MPI_INFO_NULL, MPI_INFO_NULL};
        ssize_t n;

        if (a < 1 || b < 1) {
            FAIL("usage: spawn_multiple A B (A, B >= 1)");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0) {
            FAIL("readlink /proc/self/exe failed");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        exe[n] = '\0';
        memcpy(dir, exe, (size_t)n + 1);
        *strrchr(dir, '/') = '\0';
        MPI_Info_create(&infos[1]);
        MPI_Info_set(infos[1], "wdir", dir);
        cmds[0] = exe;
        cmds[1] = exe;
        maxprocs[0] = a;
        maxprocs[1] = b;
        errcodes = malloc(sizeof(int) * (size_t)(a + b));
        for (int i = 0; i < a + b; i++)
            errcodes[i] = -1;
        int rc = MPI_Comm_spawn_multiple(2, cmds, argvs, maxprocs, infos, 0, MPI_COMM_WORLD,
                                         &inter, errcodes);
        if (rc != MPI_SUCCESS)
            FAIL("MPI_Comm_spawn_multiple rc=%d", rc);
        for (int i = 0; i < a + b; i++)
            if (errcodes[i] != MPI_SUCCESS)
                FAIL("errcodes[%d] = %d", i, errcodes[i]);
        free(errcodes);
        MPI_Info_free(&infos[1]);
        MPI_Comm_remote_size(inter, &rsize);
        if (rsize != a + b)
            FAIL("remote size %d, expected %d", rsize, a + b);
        if (wrank == 0 && rsize == a + b) {
            char list[4096] = "";
            size_t used = 0;
            for (int c = 0; c < rsize; c++) {
                int got[2] = {-1, -1};
                int want_app = c < a ? 0 : 1;
                MPI_Recv(got, 2, MPI_INT, c, 17, inter, MPI_STATUS_IGNORE);
                if (got[0] != want_app)
                    FAIL("child %d has appnum %d, expected %d", c, got[0], want_app);
                if (got[1] != want_app)
                    FAIL("child %d got the arguments of command %d, expected command %d", c,
                         got[1], want_app);
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%d",
                                         c ? "," : "", got[0]);
            }
            if (failures == 0)
                printf("spawn_multiple ok children=%d appnums=%s\n", rsize, list);
        }
        MPI_Comm_disconnect(&inter);
    } else {
        int flag = 0, *appnum = NULL, wsize = -1, msg[2] = {-1, -1};

        role = "child";
        MPI_Comm_size(MPI_COMM_WORLD, &wsize);
        MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &appnum, &flag);
        if (!flag || !appnum)
            FAIL("MPI_APPNUM attribute not set");
        else
            msg[0] = *appnum;
        if (argc < 3 || strcmp(argv[1], "--child") != 0)
            FAIL("spawned with argc %d, expected --child TAG", argc);
        else if (strcmp(argv[2], "first") == 0)
            msg[1] = 0;
        else if (strcmp(argv[2], "second") == 0) {
            char cwd[4096] = "";
            msg[1] = 1;
            if (argc < 4 || !getcwd(cwd, sizeof cwd) || strcmp(cwd, argv[3]) != 0) {
                FAIL("working directory \"%s\", expected \"%s\" (info key wdir)", cwd,
                     argc > 3 ? argv[3] : "?");
                msg[1] = -1;
            }
        }
        else
            FAIL("unknown tag argument \"%s\"", argv[2]);
        printf("child rank %d appnum %d tag %s\n", wrank, msg[0], argc > 2 ? argv[2] : "none");
        fflush(stdout);
        MPI_Send(msg, 2, MPI_INT, 0, 17, parent);
        MPI_Comm_disconnect(&parent);
    }
    fflush(stdout);
    MPI_Finalize();
    return failures ? 1 : 0;
}
