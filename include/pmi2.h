/* pmi2.h: the PMI-2 client API of fastpmi's libpmi2.so.0.
 *
 * Binary-compatible with Slurm's libpmi2.so.0 (same SONAME, same exported
 * functions, prototypes and constants as slurm/pmi2.h), so a program built
 * against Slurm's library runs on fastpmi's by LD_LIBRARY_PATH alone, and a
 * program written for MPICH's or Slurm's pmi2.h compiles against this one.
 *
 * Under the fastpmi launcher the KVS, fence and node attributes go through
 * the job's shared-memory segment; under any other PMI-2 server (Hydra,
 * slurmstepd) or another node, over the PMI-2 wire protocol; without a PMI
 * environment the process is a singleton (rank 0 of 1).
 *
 * Return codes: PMI2_SUCCESS or one of the PMI2_ERR_* values below, never a
 * crash. Common to all functions:
 *   - before PMI2_Init or after PMI2_Finalize: PMI2_ERR_INIT;
 *   - a NULL pointer argument: PMI2_ERR_INVALID_ARG;
 *   - a key (or attribute name) longer than PMI2_MAX_KEYLEN bytes:
 *     PMI2_ERR_INVALID_KEY_LENGTH; empty or containing '=', ';' or a blank:
 *     PMI2_ERR_INVALID_KEY;
 *   - a value longer than PMI2_MAX_VALLEN bytes: PMI2_ERR_INVALID_VAL_LENGTH;
 *     containing a newline: PMI2_ERR_INVALID_VAL;
 *   - a buffer length <= 0: PMI2_ERR_INVALID_LENGTH;
 *   - a string result longer than its buffer is truncated, NUL-terminated,
 *     and the call returns PMI2_ERR_NOMEM (PMI2_KVS_Get instead reports it
 *     through a negative *vallen, see there);
 *   - any other failure (lost connection, refused by the server, job
 *     aborted): PMI2_ERR_OTHER. FASTPMI_LOG=debug logs the reason on stderr.
 *
 * pkg-config: `pkg-config --cflags --libs fastpmi`.
 */
#ifndef FASTPMI_PMI2_H
#define FASTPMI_PMI2_H

/* Slurm's and MPICH's headers use these guards; defining them keeps one of
 * theirs from being mixed with this one. */
#ifndef PMI2_H_INCLUDED
#define PMI2_H_INCLUDED
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- limits ------------------------------------------------------------ */

#define PMI2_MAX_KEYLEN    64   /* longest key, in bytes */
#define PMI2_MAX_VALLEN    1024 /* longest value, in bytes */
#define PMI2_MAX_ATTRVALUE 1024 /* longest attribute value, in bytes */
#define PMI2_ID_NULL       -1   /* "source rank unknown" for PMI2_KVS_Get */

/* ---- return codes ------------------------------------------------------ */

#define PMI2_SUCCESS                0
#define PMI2_FAIL                   -1
#define PMI2_ERR_INIT               1  /* not initialised */
#define PMI2_ERR_NOMEM              2  /* output buffer too small */
#define PMI2_ERR_INVALID_ARG        3
#define PMI2_ERR_INVALID_KEY        4
#define PMI2_ERR_INVALID_KEY_LENGTH 5
#define PMI2_ERR_INVALID_VAL        6
#define PMI2_ERR_INVALID_VAL_LENGTH 7
#define PMI2_ERR_INVALID_LENGTH     8
#define PMI2_ERR_INVALID_NUM_ARGS   9
#define PMI2_ERR_INVALID_ARGS       10
#define PMI2_ERR_INVALID_NUM_PARSED 11
#define PMI2_ERR_INVALID_KEYVALP    12
#define PMI2_ERR_INVALID_SIZE       13
#define PMI2_ERR_OTHER              14 /* anything else */

/* ---- types ------------------------------------------------------------- */

/* Connection to another job's leader (PMI2_Job_Connect). fastpmi never
 * uses it: the launcher serves every job's KVS itself. */
typedef struct PMI2_Connect_comm {
    int (*read)(void *buf, int maxlen, void *ctx);
    int (*write)(const void *buf, int len, void *ctx);
    void *ctx;
    int isMaster;
} PMI2_Connect_comm_t;

/* Info object of the spawn and name-service calls, laid out as in Slurm's
 * header. fastpmi ignores info arguments. */
typedef struct MPID_Info {
    int handle;
    int pobj_mutex;
    int ref_count;
    struct MPID_Info *next;
    char *key;
    char *value;
} MPID_Info;
#define PMI2U_Info MPID_Info

/* Key/value pair (MPICH's PMI-2 name). */
typedef struct PMI2_keyval_t {
    const char *key;
    char *val;
} PMI2_keyval_t;

/* The PMI-1 pair, also declared by Slurm's pmi2.h (and by pmi.h). */
#ifndef FASTPMI_PMI_KEYVAL_T
#define FASTPMI_PMI_KEYVAL_T
typedef struct PMI_keyval_t {
    const char *key;
    char *val;
} PMI_keyval_t;
#endif

/* ---- initialisation ---------------------------------------------------- */

/* Connect to the process manager (or become a singleton). Outputs: whether
 * this job was spawned by another (0/1), the job size, this rank, and the
 * application number of an MPMD job. A second call returns the same. */
int PMI2_Init(int *spawned, int *size, int *rank, int *appnum);

/* Leave PMI; the process is expected to exit afterwards. */
int PMI2_Finalize(void);

/* 1 between a successful PMI2_Init and PMI2_Finalize, else 0. */
int PMI2_Initialized(void);

/* End the whole job (whatever flag says); does not return: the process
 * exits with status 1. msg (may be NULL) is passed to the launcher. */
int PMI2_Abort(int flag, const char msg[]);

/* ---- jobs -------------------------------------------------------------- */

/* Not implemented by the fastpmi launcher yet: logs an error and returns
 * PMI2_ERR_OTHER without reading its arguments. */
int PMI2_Job_Spawn(int count, const char *cmds[], int argcs[],
                   const char **argvs[], const int maxprocs[],
                   const int info_keyval_sizes[],
                   const struct MPID_Info *info_keyval_vectors[],
                   int preput_keyval_size,
                   const struct MPID_Info *preput_keyval_vector[],
                   char jobId[], int jobIdSize, int errors[]);

/* This job's id, NUL-terminated in jobid[jobid_size]. */
int PMI2_Job_GetId(char jobid[], int jobid_size);

/* This process's rank (as PMI2_Init). */
int PMI2_Job_GetRank(int *rank);

/* Number of this job's processes on this node. */
int PMI2_Info_GetSize(int *size);

/* Register job jobid so that PMI2_KVS_Get(jobid, ...) reads its KVS. conn
 * is not used and may be NULL. */
int PMI2_Job_Connect(const char jobid[], PMI2_Connect_comm_t *conn);
int PMI2_Job_Disconnect(const char jobid[]);

/* ---- key-value space --------------------------------------------------- */

/* Put key=value into this job's KVS; visible to every rank after the next
 * PMI2_KVS_Fence. A key put twice keeps the last value. */
int PMI2_KVS_Put(const char key[], const char value[]);

/* Collective over the job, and a barrier: once it returns, every put made
 * by any rank before its fence is visible to every rank. */
int PMI2_KVS_Fence(void);

/* Get key from the KVS of job jobid (NULL, "" or this job's id: this job).
 * src_pmi_id: the rank that put it, or PMI2_ID_NULL.
 * Found: the value goes NUL-terminated into value[maxvalue] and *vallen is
 * its length; if it does not fit, it is truncated to maxvalue - 1 bytes and
 * *vallen is minus its full length (the call still succeeds).
 * Not found: PMI2_ERR_OTHER, value "" and *vallen 0. */
int PMI2_KVS_Get(const char *jobid, int src_pmi_id, const char key[],
                 char value[], int maxvalue, int *vallen);

/* ---- node and job attributes ------------------------------------------ */

/* Node attribute name: *found = 1 and its value in value[valuelen], or
 * *found = 0. With waitfor != 0, waits until a rank of this node puts it
 * (then never returns *found = 0). Predefined: memPoolType, memSYSVid,
 * memAnonMMAPfd (the fastpmi job segment), localRanksCount, localRanks. */
int PMI2_Info_GetNodeAttr(const char name[], char value[], int valuelen,
                          int *found, int waitfor);

/* Node attribute name as a comma-separated list of ints (localRanksCount,
 * localRanks): *found, and *outlen elements in array[arraylen] (a longer
 * list is cut at arraylen). Never waits. Not a list of ints: PMI2_ERR_OTHER. */
int PMI2_Info_GetNodeAttrIntArray(const char name[], int array[], int arraylen,
                                  int *outlen, int *found);

/* Put node attribute name=value for the ranks of this node. */
int PMI2_Info_PutNodeAttr(const char name[], const char value[]);

/* Job attribute name (PMI_process_mapping, universeSize, ...): *found and
 * the value in value[valuelen]. */
int PMI2_Info_GetJobAttr(const char name[], char value[], int valuelen,
                         int *found);

/* Job attribute name as a list of ints (universeSize), as
 * PMI2_Info_GetNodeAttrIntArray. PMI_process_mapping is not one. */
int PMI2_Info_GetJobAttrIntArray(const char name[], int array[], int arraylen,
                                 int *outlen, int *found);

/* ---- name service (shared by the jobs of one launcher) ----------------- */

/* info_ptr is ignored and may be NULL. lookup of an unpublished name:
 * PMI2_ERR_OTHER. A singleton has no name service (PMI2_ERR_OTHER). */
int PMI2_Nameserv_publish(const char service_name[],
                          const struct MPID_Info *info_ptr, const char port[]);
int PMI2_Nameserv_lookup(const char service_name[],
                         const struct MPID_Info *info_ptr, char port[],
                         int portLen);
int PMI2_Nameserv_unpublish(const char service_name[],
                            const struct MPID_Info *info_ptr);

/* ---- ring exchange ----------------------------------------------------- */

/* Collective over the job: each rank passes value (shorter than maxvalue
 * and than PMI2_MAX_VALLEN) and gets its rank, the number of ranks, and in
 * left[maxvalue] / right[maxvalue] the values of ranks rank-1 and rank+1
 * (modulo ranks). One rank alone gets its own value on both sides. */
#define HAVE_PMIX_RING 1
int PMIX_Ring(const char value[], int *rank, int *ranks, char left[],
              char right[], int maxvalue);

#ifdef __cplusplus
}
#endif

#endif /* FASTPMI_PMI2_H */
