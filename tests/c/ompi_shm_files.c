/* An Open MPI program that says on stderr which files in /dev/shm it maps
 * once MPI_Init is done ("shm RANK PATH" per file, then "mapped RANK"),
 * then allreduces and finalizes. Arguments: the seconds to sleep between
 * the report and the allreduce (default 0), and a rank that kills itself
 * with SIGKILL after the report (default none), and a file to map before
 * the report (one that existed before the job). tests/pmix_cleanup.rs. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int pause = argc > 1 ? atoi(argv[1]) : 0;
    int victim = argc > 2 ? atoi(argv[2]) : -1;
    if (argc > 3) {
        int fd = open(argv[3], O_RDONLY);
        if (fd < 0 || mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED) {
            perror(argv[3]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        close(fd);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    FILE *maps = fopen("/proc/self/maps", "r");
    char line[4096], last[4096] = "";
    while (maps && fgets(line, sizeof line, maps)) {
        char *path = strstr(line, "/dev/shm/");
        if (!path) {
            continue;
        }
        path[strcspn(path, "\n")] = 0;
        if (strstr(path, " (deleted)") || strcmp(path, last) == 0) {
            continue;
        }
        snprintf(last, sizeof last, "%s", path);
        fprintf(stderr, "shm %d %s\n", rank, path);
    }
    if (maps) {
        fclose(maps);
    }
    fprintf(stderr, "mapped %d\n", rank);
    fflush(stderr);
    /* Every rank has reported before the victim dies. */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == victim) {
        raise(SIGKILL);
    }
    sleep(pause);

    int one = 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("allreduce ok size=%d sum=%d\n", size, sum);
    }
    MPI_Finalize();
    return 0;
}
