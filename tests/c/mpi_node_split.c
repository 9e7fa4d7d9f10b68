/* mpi_node_split.c: an MPI job over several node servers (docs/nested.md).
 *
 * Checks that the MPI library sees the job's nodes as PMI describes them:
 * MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) must give each rank a
 * communicator of exactly the ranks of its node server (argv[2] ranks per
 * node, ranks in blocks), and an MPI_Allreduce(SUM) over the world (which
 * crosses nodes through the library's network module) and over the node
 * must both be right. Rank 0 prints one line:
 *
 *     nodes ok size=N local=L
 *
 * argv[1]: the expected world size; argv[2]: ranks per node.
 * Exit status: 0 on success, 1 on any mismatch (diagnostic on stderr).
 *
 * Build: mpicc.mpich -O2 -o mpi_node_split mpi_node_split.c
 * Run:   fastpmi -n 2 fastpmi -n 16 ./mpi_node_split 32 16
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank = -1, size = -1, bad = 0, lrank = -1, lsize = -1;
    long sum = 0, lsum = 0, mine;
    MPI_Comm node;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int want_size = argc > 1 ? atoi(argv[1]) : size;
    int ppn = argc > 2 ? atoi(argv[2]) : size;
    if (size != want_size) {
        fprintf(stderr, "mpi_node_split: rank %d: size %d, expected %d\n", rank, size, want_size);
        bad = 1;
    }
    mine = rank;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (sum != (long)size * (size - 1) / 2) {
        fprintf(stderr, "mpi_node_split: rank %d: world sum %ld\n", rank, sum);
        bad = 1;
    }
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &lrank);
    MPI_Comm_size(node, &lsize);
    if (lsize != ppn || lrank != rank % ppn) {
        fprintf(stderr, "mpi_node_split: rank %d: node rank %d of %d, expected %d of %d\n",
                rank, lrank, lsize, rank % ppn, ppn);
        bad = 1;
    }
    MPI_Allreduce(&mine, &lsum, 1, MPI_LONG, MPI_SUM, node);
    {
        long first = rank - rank % ppn;
        long want = first * lsize + (long)lsize * (lsize - 1) / 2;
        if (lsum != want) {
            fprintf(stderr, "mpi_node_split: rank %d: node sum %ld, expected %ld\n", rank, lsum,
                    want);
            bad = 1;
        }
    }
    MPI_Comm_free(&node);
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !bad)
        printf("nodes ok size=%d local=%d\n", size, lsize);
    MPI_Finalize();
    return bad;
}
