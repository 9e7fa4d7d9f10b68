/* mpi_hello.c: placement check (tests/placement*.rs).
 *
 * Every rank prints one line after MPI_Init:
 *
 *     hello rank R of N cpus LIST
 *
 * where LIST is the Cpus_allowed_list of /proc/self/status (the binding the
 * rank got from its launcher, or from its MPI library's own pinning), then
 * all ranks meet in an MPI_Barrier.
 * Exit status: 0 on success, 1 if /proc/self/status has no such line.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank = -1, size = -1;
    char line[512], cpus[512] = "";

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
            const char *v = line + 18;
            while (*v == ' ' || *v == '\t')
                v++;
            snprintf(cpus, sizeof cpus, "%s", v);
            cpus[strcspn(cpus, "\n")] = 0;
        }
    }
    if (f)
        fclose(f);
    if (!cpus[0]) {
        fprintf(stderr, "mpi_hello: rank %d: no Cpus_allowed_list\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    printf("hello rank %d of %d cpus %s\n", rank, size, cpus);
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
