/*
 * fastpmi.h: fastpmi's extension of libpmi2.so.0 -- process groups (PMIx
 * RFC0033) and process sets (`fastpmi --pset NAME`), see docs/groups.md;
 * a job's whole KVS in one exchange, see docs/dynamic-jobs.md; the
 * out-of-band channel (abort notices, checkpoint requests), see docs/oob.md;
 * the dead ranks of a fault-tolerant job, see docs/fault-tolerance.md.
 *
 * Link with -lpmi2 (fastpmi's libpmi2.so.0; pkg-config --libs fastpmi).
 * Call PMI2_Init first. Return codes are the PMI2_* codes of pmi2.h plus
 * FPMI_ERR_NOT_SUPPORTED (the PMI server, e.g. Hydra or slurmstepd, has no
 * group extension; no group command was sent to it) and FPMI_ERR_PARTIAL.
 */
#ifndef FASTPMI_H_INCLUDED
#define FASTPMI_H_INCLUDED

#include <stdint.h>

#if defined(__cplusplus)
extern "C" {
#endif

#define FPMI_SUCCESS 0
/* The PMI server does not implement fastpmi's group extension. */
#define FPMI_ERR_NOT_SUPPORTED 20
/* FPMI_Group_invite: some invitee declined or did not answer in time; the
 * group was built from the leader and those who accepted. */
#define FPMI_ERR_PARTIAL 21
/* Longest group id, in bytes. */
#define FPMI_MAX_GROUP_ID 256

/* Build group `id` of ranks[0..n) of this job, collectively: every member
 * calls it with the same list. Returns this process's group rank (its
 * position in the list), the group size and a 64-bit context id unique
 * among every group the launcher made. */
int FPMI_Group_construct(const char *id, const int *ranks, int n, int *group_rank,
                         int *group_size, uint64_t *ctxid);
/* Destruct group `id`, collectively over its members. */
int FPMI_Group_destruct(const char *id);
/* Barrier over the members of `id`; afterwards every member's puts made
 * before it (PMI2_KVS_Put) are visible to PMI2_KVS_Get. An error names a
 * member that died. */
int FPMI_Group_fence(const char *id);
/* Invite ranks[0..n) into group `id` led by the caller and wait until each
 * answered or timeout_ms passed. members[0..*nmembers) (room for n + 1)
 * gets the members in group-rank order (the leader first). */
int FPMI_Group_invite(const char *id, const int *ranks, int n, int timeout_ms, int *members,
                      int *nmembers, int *group_rank, int *group_size, uint64_t *ctxid);
/* Answer an invitation to `id` from rank `leader`, waiting up to timeout_ms
 * for it. accept != 0: returns once the group is built; accept == 0:
 * returns at once with *group_rank = -1. */
int FPMI_Group_join(const char *id, int leader, int accept, int timeout_ms, int *group_rank,
                    int *group_size, uint64_t *ctxid);
/* Leave group `id`; the other members go on without the caller. */
int FPMI_Group_leave(const char *id);

/* A job's whole KVS in one exchange (docs/dynamic-jobs.md). */
typedef int (*FPMI_Pair_fn)(const char *key, const char *value, int vallen, void *arg);
/* Every pair of this job's KVS (jobid NULL or "") or of a job connected to
 * it, as the server holds them now: fn(key, value, vallen, arg) once per
 * pair, in no order (the strings are valid during the call); *npairs (if
 * not NULL) gets the count. A non-zero return of fn stops the walk and is
 * returned. PMI2_ERR_OTHER where the server has no kvs-getall (Hydra,
 * slurmstepd) or the job is not connected. */
int FPMI_KVS_Getall(const char *jobid, FPMI_Pair_fn fn, void *arg, int *npairs);
/* Put keys[i] = values[i], i < n, into this job's KVS in one exchange: the
 * server checks every pair before it puts any. Visible to every rank after
 * the next PMI2_KVS_Fence, like PMI2_KVS_Put's. */
int FPMI_KVS_Putall(const char *const *keys, const char *const *values, int n);

/* The out-of-band channel (docs/oob.md): notices the launcher sends unasked,
 * each followed by the signal chosen at FPMI_Oob_open. */
#define FPMI_OOB_ABORT 1      /* the job is being torn down */
#define FPMI_OOB_CHECKPOINT 2 /* `fastpmi checkpoint` asks for a checkpoint */
#define FPMI_OOB_DEATH 3      /* a rank of this job or of a connected one (parent,
                               * spawned) died; the fault-tolerant job goes on */
typedef struct {
    int kind;           /* FPMI_OOB_ABORT, FPMI_OOB_CHECKPOINT or FPMI_OOB_DEATH */
    int rank;           /* abort: the rank that failed; -1 when the launcher
                         * ended the job or a connected job failed;
                         * death: the rank that died (of job jobid) */
    int exitcode;       /* abort: the exit code the job ends with; death: the
                         * dead rank's status (128 + signal when killed) */
    long long seq;      /* checkpoint: the request's number in the job, from 1 */
    char jobid[256];    /* the job's id */
    char message[1024]; /* abort: why; death: how it died */
} FPMI_Oob_notice;
/* Open this process's channel; signal: "SIGUSR2", "USR2", ... or NULL /
 * "NONE" for no signal (install its handler first). *fd (if not NULL) is
 * readable when a notice has arrived. FPMI_ERR_NOT_SUPPORTED under a server
 * without the channel (Hydra, slurmstepd) and as a singleton. */
int FPMI_Oob_open(const char *signal, int *fd);
/* The next notice, waiting up to timeout_ms (0: no wait, < 0: until one
 * comes): *received = 1 and *notice filled, or *received = 0. Not from a
 * signal handler. PMI2_ERR_OTHER once the launcher closed the channel. */
int FPMI_Oob_poll(int timeout_ms, FPMI_Oob_notice *notice, int *received);
/* Close the channel; the job goes on. */
int FPMI_Oob_close(void);

/* Process sets: names of all sets, comma-separated ("" for none). */
int FPMI_Pset_names(char *names, int len);
/* The sets the caller is in, comma-separated ("" for none). */
int FPMI_Pset_mine(char *names, int len);
/* Ranks of set `name`: *found = 0 if there is no such set; else up to
 * maxranks ranks and their total in *nranks (PMI2_ERR_NOMEM if cut). */
int FPMI_Pset_members(const char *name, int *ranks, int maxranks, int *nranks, int *found);

/* Fault-tolerant jobs (fastpmi --fault-tolerant): the job's dead ranks,
 * ascending, up to maxranks in ranks, their count in *nranks
 * (PMI2_ERR_NOMEM if cut; maxranks 0: only the count). On shared memory
 * this reads the job segment, without a system call. Empty outside
 * fault-tolerant jobs (there a death ends the job). */
int FPMI_Dead_ranks(int *ranks, int maxranks, int *nranks);
/* Wait until more than `seen` ranks died, at most timeout_ms (< 0: no
 * limit, 0: no wait); *count is the number of deaths then. Once a rank
 * died, PMI2_KVS_Fence fails at once (the dead can never join it): fence
 * over the survivors with FPMI_Group_construct and FPMI_Group_fence. */
int FPMI_Wait_death(int seen, int timeout_ms, int *count);

#if defined(__cplusplus)
}
#endif

#endif /* FASTPMI_H_INCLUDED */
