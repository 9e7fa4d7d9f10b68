/* nameserv_pub.c: a spawned child publishes a name, the parent looks it up.
 *
 * Usage: nameserv_pub SERVICE   (the parent job; any number of ranks)
 *        nameserv_pub --child SERVICE   (started by the spawn)
 *
 * 1. The parent spawns one copy of /proc/self/exe with {"--child", SERVICE}.
 * 2. The child opens a port (MPI_Open_port), MPI_Publish_name(SERVICE,
 *    port), then sends the port string to parent rank 0 over the
 *    intercommunicator (tag 1).
 * 3. Parent rank 0 receives it, MPI_Lookup_name(SERVICE) must return
 *    MPI_SUCCESS and exactly that string.
 * 4. Parent rank 0 tells the child (tag 2); the child MPI_Unpublish_name's
 *    and answers (tag 3); parent rank 0's second MPI_Lookup_name(SERVICE)
 *    must now fail (MPI_ERRORS_RETURN is set on MPI_COMM_WORLD and
 *    MPI_COMM_SELF).
 * 5. Parent rank 0 prints
 *        nameserv ok service=SERVICE port_len=N unpublished=yes
 *    (the child prints `nameserv child ok published=SERVICE`).
 * A failed check prints `nameserv_pub: ...` on stderr and exits 1.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0, wrank = -1;
static const char *role = "parent";

#define CHECK_WHO "nameserv_pub: %s rank %d: ", role, wrank
#include "check.h"

int main(int argc, char **argv)
{
    MPI_Comm parent, inter;
    int flag = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Comm_get_parent(&parent);

    if (parent == MPI_COMM_NULL) {
        char exe[4096], got[MPI_MAX_PORT_NAME] = "", found[MPI_MAX_PORT_NAME] = "";
        char *child_argv[3];
        const char *service;
        int rc, errcode = -1;
        ssize_t n;

        if (argc < 2 || strcmp(argv[1], "--child") == 0) {
            FAIL("usage: nameserv_pub SERVICE");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        service = argv[1];
        n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = '\0';
        child_argv[0] = "--child";
        child_argv[1] = (char *)service;
        child_argv[2] = NULL;
        rc = MPI_Comm_spawn(exe, child_argv, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter,
                            &errcode);
        if (rc != MPI_SUCCESS || errcode != MPI_SUCCESS) {
            FAIL("MPI_Comm_spawn rc=%d errcode=%d", rc, errcode);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (wrank == 0) {
            int one = 1;
            MPI_Recv(got, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 1, inter, MPI_STATUS_IGNORE);
            rc = MPI_Lookup_name(service, MPI_INFO_NULL, found);
            if (rc != MPI_SUCCESS)
                FAIL("MPI_Lookup_name(%s) rc=%d", service, rc);
            else if (strcmp(found, got) != 0)
                FAIL("MPI_Lookup_name(%s) = \"%s\", the child published \"%s\"", service,
                     found, got);
            MPI_Send(&one, 1, MPI_INT, 0, 2, inter);
            MPI_Recv(&one, 1, MPI_INT, 0, 3, inter, MPI_STATUS_IGNORE);
            found[0] = '\0';
            rc = MPI_Lookup_name(service, MPI_INFO_NULL, found);
            if (rc == MPI_SUCCESS)
                FAIL("MPI_Lookup_name(%s) after unpublish succeeded: \"%s\"", service, found);
            if (failures == 0)
                printf("nameserv ok service=%s port_len=%zu unpublished=yes\n", service,
                       strlen(got));
        }
        MPI_Comm_disconnect(&inter);
    } else {
        char port[MPI_MAX_PORT_NAME] = "";
        const char *service = argc > 2 ? argv[2] : "";
        int rc, token = 0;

        role = "child";
        if (argc < 3 || strcmp(argv[1], "--child") != 0)
            FAIL("spawned with argc %d, expected --child SERVICE", argc);
        rc = MPI_Open_port(MPI_INFO_NULL, port);
        if (rc != MPI_SUCCESS)
            FAIL("MPI_Open_port rc=%d", rc);
        rc = MPI_Publish_name(service, MPI_INFO_NULL, port);
        if (rc != MPI_SUCCESS)
            FAIL("MPI_Publish_name(%s) rc=%d", service, rc);
        MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 1, parent);
        MPI_Recv(&token, 1, MPI_INT, 0, 2, parent, MPI_STATUS_IGNORE);
        rc = MPI_Unpublish_name(service, MPI_INFO_NULL, port);
        if (rc != MPI_SUCCESS)
            FAIL("MPI_Unpublish_name(%s) rc=%d", service, rc);
        MPI_Send(&token, 1, MPI_INT, 0, 3, parent);
        MPI_Close_port(port);
        if (failures == 0)
            printf("nameserv child ok published=%s\n", service);
        MPI_Comm_disconnect(&parent);
    }
    (void)flag;
    fflush(stdout);
    MPI_Finalize();
    return failures ? 1 : 0;
}
