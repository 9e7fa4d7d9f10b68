/*
 * fastpmi's group and process-set extension (include/fastpmi.h) through
 * fastpmi's libpmi2.so.0.
 *
 *   fpmi_groups fence ITERS   four disjoint groups of size/4 ranks plus a
 *                             group of every 4th rank; each fenced ITERS
 *                             times with put visibility checks; rank 0
 *                             prints "fpmi groups ok size=N iters=I"
 *   fpmi_groups pset          "rank R mine=A,B names=... ocean=0-3"
 *   fpmi_groups unsupported   (singleton, Hydra) every FPMI call returns
 *                             FPMI_ERR_NOT_SUPPORTED: "fpmi unsupported ok"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fastpmi.h"
#include "pmi2.h"

static int rank, size;

#define CHECK(call)                                                                   \
    do {                                                                              \
        int rc_ = (call);                                                             \
        if (rc_ != PMI2_SUCCESS) {                                                    \
            fprintf(stderr, "rank %d: %s failed: rc=%d (line %d)\n", rank, #call, rc_, \
                    __LINE__);                                                        \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

/* Put my key of group `g`, fence it, check a neighbour's key. */
static void fence_loop(const char *g, const int *members, int n, int me, int iters) {
    char key[64], val[64], got[PMI2_MAX_VALLEN + 1];
    int len;
    int peer = members[(me + 1) % n];
    for (int i = 0; i < iters; i++) {
        snprintf(key, sizeof key, "%s-%d", g, rank);
        snprintf(val, sizeof val, "%d", i);
        CHECK(PMI2_KVS_Put(key, val));
        CHECK(FPMI_Group_fence(g));
        snprintf(key, sizeof key, "%s-%d", g, peer);
        CHECK(PMI2_KVS_Get(NULL, peer, key, got, sizeof got, &len));
        /* The peer may already have put the next round's value. */
        int v = atoi(got);
        if (len <= 0 || (v != i && v != i + 1)) {
            fprintf(stderr, "rank %d: group %s round %d: %s = '%s' (len %d)\n", rank, g, i,
                    key, got, len);
            exit(1);
        }
    }
}

static void fence_mode(int iters) {
    int q = size / 4, nq = 0, ne = 0;
    int *quarter = malloc(sizeof(int) * q), *every4 = malloc(sizeof(int) * size);
    for (int r = (rank / q) * q; r < (rank / q + 1) * q; r++)
        quarter[nq++] = r;
    for (int r = 0; r < size; r += 4)
        every4[ne++] = r;
    char qid[32];
    snprintf(qid, sizeof qid, "quarter%d", rank / q);
    int gr, gs;
    uint64_t cq, ce = 0;
    CHECK(FPMI_Group_construct(qid, quarter, nq, &gr, &gs, &cq));
    if (gr != rank % q || gs != q) {
        fprintf(stderr, "rank %d: %s rank %d size %d\n", rank, qid, gr, gs);
        exit(1);
    }
    int in4 = rank % 4 == 0;
    if (in4) {
        CHECK(FPMI_Group_construct("every4", every4, ne, &gr, &gs, &ce));
        if (gr != rank / 4 || gs != ne || ce == cq) {
            fprintf(stderr, "rank %d: every4 rank %d size %d ctx %llu/%llu\n", rank, gr, gs,
                    (unsigned long long)ce, (unsigned long long)cq);
            exit(1);
        }
    }
    fence_loop(qid, quarter, nq, rank % q, iters);
    if (in4)
        fence_loop("every4", every4, ne, rank / 4, iters);
    CHECK(FPMI_Group_destruct(qid));
    if (in4)
        CHECK(FPMI_Group_destruct("every4"));
    if (rank == 0)
        printf("fpmi groups ok size=%d iters=%d\n", size, iters);
}

static void pset_mode(void) {
    char mine[256], names[256], list[256];
    int ranks[64], n, found;
    CHECK(FPMI_Pset_mine(mine, sizeof mine));
    CHECK(FPMI_Pset_names(names, sizeof names));
    CHECK(FPMI_Pset_members("ocean", ranks, 64, &n, &found));
    list[0] = 0;
    for (int i = 0; i < n; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", i ? "," : "", ranks[i]);
    int nf;
    CHECK(FPMI_Pset_members("nosuchset", ranks, 64, &n, &nf));
    printf("rank %d mine=%s names=%s ocean=%s found=%d nosuch=%d\n", rank, mine, names, list,
           found, nf);
}

static void unsupported_mode(void) {
    int r = 0, gr, gs, members[2], nm;
    uint64_t c;
    int rcs[] = {
        FPMI_Group_construct("g", &r, 1, &gr, &gs, &c),
        FPMI_Group_fence("g"),
        FPMI_Group_destruct("g"),
        FPMI_Group_invite("g", &r, 0, 10, members, &nm, &gr, &gs, &c),
        FPMI_Group_join("g", 0, 1, 10, &gr, &gs, &c),
        FPMI_Group_leave("g"),
    };
    for (unsigned i = 0; i < sizeof rcs / sizeof rcs[0]; i++) {
        if (rcs[i] != FPMI_ERR_NOT_SUPPORTED) {
            fprintf(stderr, "rank %d: group call %u returned %d, not FPMI_ERR_NOT_SUPPORTED\n",
                    rank, i, rcs[i]);
            exit(1);
        }
    }
    /* The job goes on: an ordinary fence still works. */
    CHECK(PMI2_KVS_Fence());
    if (rank == 0)
        printf("fpmi unsupported ok\n");
}

int main(int argc, char **argv) {
    int spawned, appnum;
    CHECK(PMI2_Init(&spawned, &size, &rank, &appnum));
    const char *mode = argc > 1 ? argv[argc > 2 && strcmp(argv[1], "fence") ? argc - 1 : 1] : "";
    if (!strcmp(mode, "fence"))
        fence_mode(argc > 2 ? atoi(argv[2]) : 10);
    else if (!strcmp(mode, "pset"))
        pset_mode();
    else if (!strcmp(mode, "unsupported") || !strcmp(mode, "singleton"))
        unsupported_mode();
    else {
        fprintf(stderr, "usage: fpmi_groups fence ITERS | pset | unsupported\n");
        return 2;
    }
    CHECK(PMI2_Finalize());
    return 0;
}
