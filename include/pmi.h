/* pmi.h: the PMI-1 client API of fastpmi's libpmi.so.0.
 *
 * The functions and constants of MPICH's pmi.h, plus the extensions of
 * Slurm's (clique, id, and the calls nobody implements), on fastpmi's PMI-2
 * client: the shared-memory fast path under the fastpmi launcher, the PMI-2
 * wire protocol under other process managers (Hydra), a singleton without a
 * PMI environment.
 *
 * PMI-1 on PMI-2:
 *   - the only keyval space is this job's; its name is the job id
 *     (PMI_KVS_Get_my_name). Naming another one: PMI_ERR_INVALID_ARG;
 *   - PMI_KVS_Put completes the put; PMI_KVS_Commit does nothing;
 *   - PMI_Barrier is a PMI-2 fence: afterwards every rank sees every put
 *     made before it;
 *   - the clique is every rank of this job on this node.
 *
 * Return codes: PMI_SUCCESS or one of the codes below, never a crash.
 * Common to all functions: before PMI_Init or after PMI_Finalize
 * PMI_ERR_INIT; a NULL pointer PMI_ERR_INVALID_ARG; a key longer than 64
 * bytes PMI_ERR_INVALID_KEY_LENGTH, empty or containing '=', ';' or a blank
 * PMI_ERR_INVALID_KEY; a value longer than 1024 bytes
 * PMI_ERR_INVALID_VAL_LENGTH; a buffer length <= 0, or too small for the
 * result, PMI_ERR_INVALID_LENGTH (the result is then truncated and
 * NUL-terminated); any other failure PMI_FAIL (FASTPMI_LOG=debug logs why).
 *
 * pkg-config: `pkg-config --cflags fastpmi` and
 * `pkg-config --variable=pmi1_libs fastpmi` (or link with -lpmi).
 */
#ifndef FASTPMI_PMI_H
#define FASTPMI_PMI_H

#ifndef PMI_H_INCLUDED
#define PMI_H_INCLUDED
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define PMI_VERSION    1
#define PMI_SUBVERSION 1

/* Size of the port buffer PMI_Lookup_name fills. */
#define PMI_MAX_PORT_NAME 1024

/* ---- return codes and booleans ----------------------------------------- */

#define PMI_SUCCESS                 0
#define PMI_FAIL                    -1
#define PMI_ERR_INIT                1  /* not initialised */
#define PMI_ERR_NOMEM               2
#define PMI_ERR_INVALID_ARG         3
#define PMI_ERR_INVALID_KEY         4
#define PMI_ERR_INVALID_KEY_LENGTH  5
#define PMI_ERR_INVALID_VAL         6
#define PMI_ERR_INVALID_VAL_LENGTH  7
#define PMI_ERR_INVALID_LENGTH      8
#define PMI_ERR_INVALID_NUM_ARGS    9
#define PMI_ERR_INVALID_ARGS        10
#define PMI_ERR_INVALID_NUM_PARSED  11
#define PMI_ERR_INVALID_KEYVALP     12
#define PMI_ERR_INVALID_SIZE        13

#define PMI_TRUE  1
#define PMI_FALSE 0

/* Key/value pair of PMI_Spawn_multiple and the option calls (also declared
 * by pmi2.h). */
#ifndef FASTPMI_PMI_KEYVAL_T
#define FASTPMI_PMI_KEYVAL_T
typedef struct PMI_keyval_t {
    const char *key;
    char *val;
} PMI_keyval_t;
#endif

/* ---- process group ----------------------------------------------------- */

/* Connect to the process manager (or become a singleton); *spawned is
 * PMI_TRUE if a spawn created this job. A second call is harmless. */
int PMI_Init(int *spawned);

/* *initialized: PMI_TRUE between PMI_Init and PMI_Finalize. Needs no init. */
int PMI_Initialized(int *initialized);

int PMI_Finalize(void);

int PMI_Get_size(int *size);
int PMI_Get_rank(int *rank);

/* The universeSize job attribute (the job size when there is none). */
int PMI_Get_universe_size(int *size);

/* Application number of an MPMD job (0 for the first). */
int PMI_Get_appnum(int *appnum);

/* Barrier over the job; also makes every put visible (see above). */
int PMI_Barrier(void);

/* End the whole job with exit_code; does not return. */
int PMI_Abort(int exit_code, const char error_msg[]);

/* ---- name service ------------------------------------------------------ */

/* Lookup fills port[PMI_MAX_PORT_NAME]; an unpublished name is PMI_FAIL. */
int PMI_Publish_name(const char service_name[], const char port[]);
int PMI_Unpublish_name(const char service_name[]);
int PMI_Lookup_name(const char service_name[], char port[]);

/* ---- keyval space ------------------------------------------------------ */

int PMI_KVS_Get_my_name(char kvsname[], int length);
int PMI_KVS_Get_name_length_max(int *length);  /* 256, NUL included */
int PMI_KVS_Get_key_length_max(int *length);   /* 64 */
int PMI_KVS_Get_value_length_max(int *length); /* 1024 */

int PMI_KVS_Put(const char kvsname[], const char key[], const char value[]);
int PMI_KVS_Commit(const char kvsname[]);

/* Not found: PMI_FAIL. Longer than length - 1: truncated,
 * PMI_ERR_INVALID_LENGTH. The keys PMI-1 servers answer themselves
 * (PMI_process_mapping and other PMI_* keys, universeSize) come from the
 * job's attributes. */
int PMI_KVS_Get(const char kvsname[], const char key[], char value[],
                int length);

/* ---- process creation -------------------------------------------------- */

/* Not implemented by the fastpmi launcher yet: logs an error and returns
 * PMI_FAIL without reading its arguments. */
int PMI_Spawn_multiple(int count, const char *cmds[], const char **argvs[],
                       const int maxprocs[], const int info_keyval_sizesp[],
                       const PMI_keyval_t *info_keyval_vectors[],
                       int preput_keyval_size,
                       const PMI_keyval_t preput_keyval_vector[],
                       int errors[]);

/* ---- extensions (Slurm, Open MPI) -------------------------------------- */

/* The job id (= the kvsname), and the buffer size it needs (256). */
int PMI_Get_id(char id_str[], int length);
int PMI_Get_kvs_domain_id(char id_str[], int length);
int PMI_Get_id_length_max(int *length);

/* This job's ranks on this node: how many, and which (increasing order;
 * length smaller than the clique size is PMI_ERR_INVALID_LENGTH). */
int PMI_Get_clique_size(int *size);
int PMI_Get_clique_ranks(int ranks[], int length);

/* ---- not supported: PMI_FAIL ------------------------------------------- */

int PMI_KVS_Create(char kvsname[], int length);
int PMI_KVS_Destroy(const char kvsname[]);
int PMI_KVS_Iter_first(const char kvsname[], char key[], int key_len,
                       char val[], int val_len);
int PMI_KVS_Iter_next(const char kvsname[], char key[], int key_len,
                      char val[], int val_len);
int PMI_Parse_option(int num_args, char *args[], int *num_parsed,
                     PMI_keyval_t **keyvalp, int *size);
int PMI_Get_options(char *str, int *length);

/* No PMI command-line options exist: returns an empty list (*keyvalp NULL,
 * *size 0) and leaves argc/argv alone; PMI_Free_keyvals frees nothing. */
#ifdef __cplusplus
/* C++ has no pointer to an array of unknown bound; same ABI (a pointer). */
int PMI_Args_to_keyval(int *argcp, char ***argvp, PMI_keyval_t **keyvalp,
                       int *size);
#else
int PMI_Args_to_keyval(int *argcp, char *((*argvp)[]), PMI_keyval_t **keyvalp,
                       int *size);
#endif
int PMI_Free_keyvals(PMI_keyval_t keyvalp[], int size);

#ifdef __cplusplus
}
#endif

#endif /* FASTPMI_PMI_H */
