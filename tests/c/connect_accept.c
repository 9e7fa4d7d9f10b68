/* connect_accept.c: two separately started jobs meet through a name server.
 *
 * Usage: connect_accept server SERVICE   (one job, any number of ranks)
 *        connect_accept client SERVICE   (another job, started on its own)
 *
 * Server: rank 0 MPI_Open_port, MPI_Publish_name(SERVICE, port); all ranks
 *   MPI_Comm_accept(port, root 0, MPI_COMM_WORLD).
 * Client: rank 0 MPI_Lookup_name(SERVICE), retried every 100 ms for up to
 *   60 s (the server may not have published yet); all ranks
 *   MPI_Comm_connect(port, root 0, MPI_COMM_WORLD).
 * Then: the roots exchange messages over the intercommunicator (the server
 * sends "hello-from-server-<N>", the client "hello-from-client-<M>", N and
 * M the two world sizes); all ranks MPI_Intercomm_merge (server low) and
 * MPI_Allreduce(SUM) of 1, which must be N+M; the server unpublishes and
 * closes the port; both MPI_Comm_disconnect. Rank 0 of each side prints
 *     server ok clients=M merged=N+M got=hello-from-client-<M>
 *     client ok servers=N merged=N+M got=hello-from-server-<N>
 * A failed check prints `connect_accept: ...` on stderr, exit 1.
 * MPI_ERRORS_RETURN is set on MPI_COMM_WORLD and MPI_COMM_SELF.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0, wrank = -1;
static const char *role = "?";

#define CHECK_WHO "connect_accept: %s rank %d: ", role, wrank
#include "check.h"

static void fail_rc(const char *what, int rc)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    FAIL("%s rc=%d: %s", what, rc, msg);
}

int main(int argc, char **argv)
{
    char port[MPI_MAX_PORT_NAME] = "", got[128] = "", mine[128];
    MPI_Comm inter = MPI_COMM_NULL, merged;
    int wsize = -1, rsize = -1, server, rc, one = 1, total = -1;
    const char *service;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    if (argc < 3 || (strcmp(argv[1], "server") != 0 && strcmp(argv[1], "client") != 0)) {
        FAIL("usage: connect_accept server|client SERVICE");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    server = strcmp(argv[1], "server") == 0;
    role = argv[1];
    service = argv[2];

    if (server) {
        if (wrank == 0) {
            rc = MPI_Open_port(MPI_INFO_NULL, port);
            if (rc != MPI_SUCCESS)
                fail_rc("MPI_Open_port", rc);
            rc = MPI_Publish_name(service, MPI_INFO_NULL, port);
            if (rc != MPI_SUCCESS)
                fail_rc("MPI_Publish_name", rc);
        }
        rc = MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
        if (rc != MPI_SUCCESS) {
            fail_rc("MPI_Comm_accept", rc);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    } else {
        if (wrank == 0) {
            rc = MPI_ERR_NAME;
            for (int i = 0; i < 600; i++) {
                rc = MPI_Lookup_name(service, MPI_INFO_NULL, port);
                if (rc == MPI_SUCCESS)
                    break;
                usleep(100 * 1000);
            }
            if (rc != MPI_SUCCESS)
                fail_rc("MPI_Lookup_name (60 s of retries)", rc);
        }
        /* Every client rank gives up together if the lookup failed. */
        MPI_Bcast(&failures, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (failures) {
            MPI_Finalize();
            return 1;
        }
        rc = MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
        if (rc != MPI_SUCCESS) {
            fail_rc("MPI_Comm_connect", rc);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }

    MPI_Comm_remote_size(inter, &rsize);
    snprintf(mine, sizeof mine, "hello-from-%s-%d", role, wsize);
    if (wrank == 0) {
        char want[128];
        /* The server sends first, so the order cannot deadlock. */
        if (server) {
            MPI_Send(mine, (int)strlen(mine) + 1, MPI_CHAR, 0, 5, inter);
            MPI_Recv(got, sizeof got, MPI_CHAR, 0, 6, inter, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(got, sizeof got, MPI_CHAR, 0, 5, inter, MPI_STATUS_IGNORE);
            MPI_Send(mine, (int)strlen(mine) + 1, MPI_CHAR, 0, 6, inter);
        }
        snprintf(want, sizeof want, "hello-from-%s-%d", server ? "client" : "server", rsize);
        if (strcmp(got, want) != 0)
            FAIL("received \"%s\", expected \"%s\"", got, want);
    }
    MPI_Intercomm_merge(inter, server ? 0 : 1, &merged);
    MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, merged);
    if (total != wsize + rsize)
        FAIL("allreduce over the merged communicator: %d, expected %d", total, wsize + rsize);
    MPI_Comm_free(&merged);

    if (server && wrank == 0) {
        rc = MPI_Unpublish_name(service, MPI_INFO_NULL, port);
        if (rc != MPI_SUCCESS)
            fail_rc("MPI_Unpublish_name", rc);
        MPI_Close_port(port);
    }
    MPI_Comm_disconnect(&inter);
    if (failures == 0 && wrank == 0)
        printf("%s ok %s=%d merged=%d got=%s\n", role, server ? "clients" : "servers", rsize,
               wsize + rsize, got);
    fflush(stdout);
    MPI_Finalize();
    return failures ? 1 : 0;
}
