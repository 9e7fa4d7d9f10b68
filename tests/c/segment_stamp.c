/* segment_stamp.c: a plain PMI-2 client (Slurm's libpmi2) that finds the job
 * segment the way any PMI-2 program may: node attribute memPoolType, then
 * memAnonMMAPfd (an fd inherited from the launcher) or memSYSVid, maps it and
 * prints the layout stamp at offset 0:
 *   rank R pool P magic=FASTPMI major=M minor=m hash=0xH size=S
 * Exit 1 with a diagnostic on any failure. */
#include <pmi2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>

#define CHECK(call) do { int rc_ = (call); if (rc_ != PMI2_SUCCESS) { \
    fprintf(stderr, "rank %d: %s failed rc=%d\n", rank, #call, rc_); return 1; } } while (0)

int main(void)
{
    int spawned, size, rank = -1, appnum, found = 0;
    char pool[64] = "", id[64] = "";
    CHECK(PMI2_Init(&spawned, &size, &rank, &appnum));
    CHECK(PMI2_Info_GetNodeAttr("memPoolType", pool, sizeof pool, &found, 0));
    if (!found) { fprintf(stderr, "rank %d: no memPoolType\n", rank); return 1; }
    const unsigned char *base = NULL;
    size_t len = 0;
    if (strcmp(pool, "anonmmap") == 0) {
        CHECK(PMI2_Info_GetNodeAttr("memAnonMMAPfd", id, sizeof id, &found, 0));
        if (!found) { fprintf(stderr, "rank %d: no memAnonMMAPfd\n", rank); return 1; }
        int fd = atoi(id);
        struct stat st;
        if (fstat(fd, &st) != 0) { perror("fstat memAnonMMAPfd"); return 1; }
        len = (size_t)st.st_size;
        base = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
        if (base == MAP_FAILED) { perror("mmap"); return 1; }
    } else if (strcmp(pool, "sysv") == 0) {
        CHECK(PMI2_Info_GetNodeAttr("memSYSVid", id, sizeof id, &found, 0));
        if (!found) { fprintf(stderr, "rank %d: no memSYSVid\n", rank); return 1; }
        struct shmid_ds ds;
        if (shmctl(atoi(id), IPC_STAT, &ds) != 0) { perror("shmctl"); return 1; }
        len = ds.shm_segsz;
        base = shmat(atoi(id), NULL, SHM_RDONLY);
        if (base == (void *)-1) { perror("shmat"); return 1; }
    } else {
        fprintf(stderr, "rank %d: unknown memPoolType %s\n", rank, pool);
        return 1;
    }
    uint16_t major, minor;
    uint64_t hash;
    memcpy(&major, base + 8, 2);
    memcpy(&minor, base + 10, 2);
    memcpy(&hash, base + 16, 8);
    char magic[9] = {0};
    memcpy(magic, base, 8);
    printf("rank %d pool %s magic=%s major=%u minor=%u hash=0x%016llx size=%zu\n", rank, pool,
           magic, major, minor, (unsigned long long)hash, len);
    fflush(stdout);
    CHECK(PMI2_Finalize());
    return 0;
}
