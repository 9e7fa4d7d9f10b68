/*
 * pmix_client.c: a PMIx client of libpmix (Debian's libpmix-dev), for the
 * PMIx host's own tests (tests/pmix_client.rs).
 *
 *   pmix_client exchange
 *     PMIx_Put of "card" = "card-R", PMIx_Commit, PMIx_Fence collecting
 *     data, then PMIx_Get of every rank's card; prints
 *     "pmix exchange ok rank R size N".
 *   pmix_client connect-stranger   (1 rank)
 *     PMIx_Connect with itself and rank 0 of "no-such-job", a namespace no
 *     launcher runs; prints "pmix connect stranger STATUS".
 *   Every mode: once PMIx_Init returns, with FASTPMI_TEST_MARK_DIR set, the
 *   rank creates <dir>/init.<rank> (for --stop-in-init tests).
 *   pmix_client exit-early
 *     PMIx_Init, then exit(0) without PMIx_Finalize.
 *   pmix_client names SERVICE PORT
 *     Rank 0 publishes SERVICE = PORT (PMIx_Publish); after a fence rank 1
 *     looks it up and checks it; after another, rank 0 unpublishes it; after
 *     a third, rank 1's lookup must fail. Rank 1 prints
 *     "pmix names ok SERVICE=PORT, gone after unpublish".
 *   pmix_client cpuset
 *     Prints "pmix cpuset rank R registered=C allowed=A locality=L":
 *     PMIX_CPUSET as the server registered it, the Cpus_allowed_list of
 *     /proc/self/status, and PMIX_LOCALITY_STRING ("none" if absent).
 *   pmix_client watch
 *     Every rank registers a handler for PMIX_EVENT_PROC_TERMINATED and
 *     fences; the last rank then exits with status 3 (without finalize),
 *     which fails the job. The others (ignoring the launcher's SIGTERM)
 *     wait for the event and print
 *     "pmix event proc-terminated rank R code C" from its affected proc
 *     and exit code.
 *   pmix_client psets
 *     PMIx_Query_info of the number and names of the process sets, the
 *     members of each named set, and the live namespaces (every query with
 *     PMIX_QUERY_REFRESH_CACHE, as Open MPI asks); prints
 *     "pmix psets rank R num=K names=A,B members:A=NS.r+NS.r members:B=...
 *     missing=S namespaces=NS", S being the status of the members query of a
 *     set nobody defined (PMIX_ERR_NOT_FOUND, -46).
 *   pmix_client groups   (6 ranks)
 *     Ranks 0, 2 and 5 construct group "g1" and ranks 1 and 3 group "g2",
 *     each asking for a context id (PMIX_GROUP_ASSIGN_CONTEXT_ID); each
 *     member fences over its group (PMIx_Fence of the members) and
 *     destructs it; every member prints "pmix group G rank R ctxid C",
 *     rank 4 "pmix group none rank 4". Then all six fence.
 *   pmix_client ptable
 *     Every rank prints "pmix pid rank R P" (its getpid()) and fences;
 *     rank 0 then queries PMIX_QUERY_PROC_TABLE of its namespace and
 *     prints one "pmix ptable rank R pid P state S exe E" per row, then
 *     all fence again.
 *   pmix_client spawn   (1 rank)
 *     PMIx_Spawn of 2 copies of this program with argument "child" into
 *     a new namespace; prints "pmix spawned NS". Each child checks
 *     PMIX_SPAWNED and PMIX_PARENT_ID, looks up with PMIX_WAIT (the
 *     parent publishes them only after 300 ms, so the lookup must wait)
 *     "parent-card" (a string), "parent-bytes" (a byte object: 00 01 fe
 *     ff then "fastpmi:") and "parent-text" (the string
 *     "fastpmi:text:not-bytes"), and prints "pmix child rank R of NS
 *     spawned 1 parent P:Q card C bytes HEX text T". The parent then
 *     unpublishes and waits for nothing more.
 *   pmix_client publish-wait SERVICE PORT FILE
 *     Publish SERVICE = PORT, wait until FILE exists (another program,
 *     maybe of PMI, looked it up and made it), unpublish, print
 *     "pmix published SERVICE until FILE".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

#include <pmix.h>

static int publish(const char *service, const char *port)
{
    pmix_info_t info;
    PMIX_INFO_LOAD(&info, service, port, PMIX_STRING);
    pmix_status_t rc = PMIx_Publish(&info, 1);
    if (rc != PMIX_SUCCESS)
        fprintf(stderr, "pmix_client: publish %s: %s\n", service, PMIx_Error_string(rc));
    return rc == PMIX_SUCCESS ? 0 : 1;
}

static int unpublish(const char *service)
{
    char *keys[2] = {(char *)service, NULL};
    pmix_status_t rc = PMIx_Unpublish(keys, NULL, 0);
    if (rc != PMIX_SUCCESS)
        fprintf(stderr, "pmix_client: unpublish %s: %s\n", service, PMIx_Error_string(rc));
    return rc == PMIX_SUCCESS ? 0 : 1;
}

/* The port of `service`, or NULL (and the status in *rc). */
static char *lookup(const char *service, pmix_status_t *rc)
{
    pmix_pdata_t pd;
    PMIX_PDATA_CONSTRUCT(&pd);
    PMIX_LOAD_KEY(pd.key, service);
    *rc = PMIx_Lookup(&pd, 1, NULL, 0);
    if (*rc != PMIX_SUCCESS || pd.value.type != PMIX_STRING)
        return NULL;
    return strdup(pd.value.data.string);
}

static int fence(void)
{
    pmix_status_t rc = PMIx_Fence(NULL, 0, NULL, 0);
    if (rc != PMIX_SUCCESS)
        fprintf(stderr, "pmix_client: fence: %s\n", PMIx_Error_string(rc));
    return rc == PMIX_SUCCESS ? 0 : 1;
}

static int names(const pmix_proc_t *me, const char *service, const char *port)
{
    pmix_status_t rc;
    int bad = 0;
    if (me->rank == 0)
        bad |= publish(service, port);
    bad |= fence();
    if (me->rank == 1) {
        char *got = lookup(service, &rc);
        if (got == NULL || strcmp(got, port) != 0) {
            fprintf(stderr, "pmix_client: lookup %s: %s\n", service,
                    got ? got : PMIx_Error_string(rc));
            bad = 1;
        }
    }
    bad |= fence();
    if (me->rank == 0)
        bad |= unpublish(service);
    bad |= fence();
    if (me->rank == 1) {
        char *got = lookup(service, &rc);
        if (got != NULL || rc == PMIX_SUCCESS) {
            fprintf(stderr, "pmix_client: %s still found after unpublish: %s\n", service,
                    got ? got : "(no value)");
            bad = 1;
        } else if (!bad) {
            printf("pmix names ok %s=%s, gone after unpublish\n", service, port);
            fflush(stdout);
        }
    }
    PMIx_Finalize(NULL, 0);
    return bad;
}

static int publish_wait(const char *service, const char *port, const char *file)
{
    if (publish(service, port) != 0)
        return 1;
    for (int i = 0; i < 6000 && access(file, F_OK) != 0; i++)
        usleep(10000);
    if (access(file, F_OK) != 0) {
        fprintf(stderr, "pmix_client: %s never appeared\n", file);
        return 1;
    }
    if (unpublish(service) != 0)
        return 1;
    printf("pmix published %s until %s\n", service, file);
    fflush(stdout);
    PMIx_Finalize(NULL, 0);
    return 0;
}

static volatile int got_event = 0, ev_rank = -1, ev_code = -1;

static void on_event(size_t id, pmix_status_t status, const pmix_proc_t *source,
                     pmix_info_t info[], size_t ninfo, pmix_info_t results[], size_t nresults,
                     pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id, (void)status, (void)source, (void)results, (void)nresults;
    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_AFFECTED_PROC) &&
            info[i].value.type == PMIX_PROC)
            ev_rank = (int)info[i].value.data.proc->rank;
        if (PMIX_CHECK_KEY(&info[i], PMIX_EXIT_CODE) && info[i].value.type == PMIX_INT)
            ev_code = info[i].value.data.integer;
    }
    got_event = 1;
    if (cbfunc)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static int watch(const pmix_proc_t *me, uint32_t size)
{
    pmix_status_t code = PMIX_EVENT_PROC_TERMINATED;
    pmix_status_t rc = PMIx_Register_event_handler(&code, 1, NULL, 0, on_event, NULL, NULL);
    if (rc < 0) {
        fprintf(stderr, "pmix_client: register handler: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    signal(SIGTERM, SIG_IGN);
    if (fence() != 0)
        return 1;
    if (me->rank == size - 1)
        exit(3);
    for (int i = 0; i < 500 && !got_event; i++)
        usleep(10000);
    if (!got_event) {
        fprintf(stderr, "pmix_client: rank %u: no event\n", me->rank);
        return 1;
    }
    printf("pmix event proc-terminated rank %d code %d\n", ev_rank, ev_code);
    fflush(stdout);
    return 0;
}

/* One query of `key` (refreshed), with the pset qualifier when `pset`. */
static pmix_status_t query(const char *key, const char *pset, pmix_info_t **info, size_t *n)
{
    pmix_query_t q;
    bool refresh = true;
    pmix_status_t rc;

    PMIX_QUERY_CONSTRUCT(&q);
    PMIX_ARGV_APPEND(rc, q.keys, key);
    PMIX_INFO_CREATE(q.qualifiers, pset ? 2 : 1);
    q.nqual = pset ? 2 : 1;
    PMIX_INFO_LOAD(&q.qualifiers[0], PMIX_QUERY_REFRESH_CACHE, &refresh, PMIX_BOOL);
    if (pset)
        PMIX_INFO_LOAD(&q.qualifiers[1], PMIX_PSET_NAME, pset, PMIX_STRING);
    *info = NULL;
    *n = 0;
    rc = PMIx_Query_info(&q, 1, info, n);
    PMIX_QUERY_DESTRUCT(&q);
    return rc;
}

static int psets(const pmix_proc_t *me)
{
    pmix_info_t *info;
    size_t n, num = 0;
    char names[1024] = "", line[4096] = "";
    pmix_status_t rc;

    if ((rc = query(PMIX_QUERY_NUM_PSETS, NULL, &info, &n)) != PMIX_SUCCESS || n != 1 ||
        info[0].value.type != PMIX_SIZE) {
        fprintf(stderr, "pmix_client: number of psets: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    num = info[0].value.data.size;
    PMIX_INFO_FREE(info, n);
    if ((rc = query(PMIX_QUERY_PSET_NAMES, NULL, &info, &n)) != PMIX_SUCCESS || n != 1 ||
        info[0].value.type != PMIX_STRING) {
        fprintf(stderr, "pmix_client: pset names: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    snprintf(names, sizeof names, "%s", info[0].value.data.string);
    PMIX_INFO_FREE(info, n);
    snprintf(line, sizeof line, "pmix psets rank %u num=%zu names=%s", me->rank, num, names);
    for (char *save = NULL, *p = strtok_r(names, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        if ((rc = query(PMIX_QUERY_PSET_MEMBERSHIP, p, &info, &n)) != PMIX_SUCCESS || n != 1 ||
            info[0].value.type != PMIX_DATA_ARRAY) {
            fprintf(stderr, "pmix_client: members of %s: %s\n", p, PMIx_Error_string(rc));
            return 1;
        }
        pmix_data_array_t *da = info[0].value.data.darray;
        pmix_proc_t *m = (pmix_proc_t *)da->array;
        snprintf(line + strlen(line), sizeof line - strlen(line), " members:%s=", p);
        for (size_t i = 0; i < da->size; i++)
            snprintf(line + strlen(line), sizeof line - strlen(line), "%s%s.%u", i ? "+" : "",
                     m[i].nspace, m[i].rank);
        PMIX_INFO_FREE(info, n);
    }
    rc = query(PMIX_QUERY_PSET_MEMBERSHIP, "no-such-pset", &info, &n);
    snprintf(line + strlen(line), sizeof line - strlen(line), " missing=%d", rc);
    if (rc == PMIX_SUCCESS)
        PMIX_INFO_FREE(info, n);
    if ((rc = query(PMIX_QUERY_NAMESPACES, NULL, &info, &n)) != PMIX_SUCCESS || n != 1 ||
        info[0].value.type != PMIX_STRING) {
        fprintf(stderr, "pmix_client: namespaces: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    snprintf(line + strlen(line), sizeof line - strlen(line), " namespaces=%s",
             info[0].value.data.string);
    PMIX_INFO_FREE(info, n);
    printf("%s\n", line);
    fflush(stdout);
    PMIx_Finalize(NULL, 0);
    return 0;
}

static int groups(const pmix_proc_t *me)
{
    static const pmix_rank_t g1[] = {0, 2, 5}, g2[] = {1, 3};
    const pmix_rank_t *mine = NULL;
    size_t n = 0;
    const char *name = "none";
    pmix_status_t rc;

    for (size_t i = 0; i < 3; i++)
        if (g1[i] == me->rank) {
            mine = g1;
            n = 3;
            name = "g1";
        }
    for (size_t i = 0; i < 2; i++)
        if (g2[i] == me->rank) {
            mine = g2;
            n = 2;
            name = "g2";
        }
    if (mine) {
        pmix_proc_t procs[3];
        pmix_info_t dir, *results = NULL;
        size_t nresults = 0, ctxid = 0;
        bool assign = true;
        for (size_t i = 0; i < n; i++)
            PMIX_LOAD_PROCID(&procs[i], me->nspace, mine[i]);
        PMIX_INFO_LOAD(&dir, PMIX_GROUP_ASSIGN_CONTEXT_ID, &assign, PMIX_BOOL);
        rc = PMIx_Group_construct(name, procs, n, &dir, 1, &results, &nresults);
        if (rc != PMIX_SUCCESS) {
            fprintf(stderr, "pmix_client: rank %u: construct %s: %s\n", me->rank, name,
                    PMIx_Error_string(rc));
            return 1;
        }
        for (size_t i = 0; i < nresults; i++)
            if (PMIX_CHECK_KEY(&results[i], PMIX_GROUP_CONTEXT_ID) &&
                results[i].value.type == PMIX_SIZE)
                ctxid = results[i].value.data.size;
        if (results)
            PMIX_INFO_FREE(results, nresults);
        if ((rc = PMIx_Fence(procs, n, NULL, 0)) != PMIX_SUCCESS) {
            fprintf(stderr, "pmix_client: rank %u: fence of %s: %s\n", me->rank, name,
                    PMIx_Error_string(rc));
            return 1;
        }
        if ((rc = PMIx_Group_destruct(name, NULL, 0)) != PMIX_SUCCESS) {
            fprintf(stderr, "pmix_client: rank %u: destruct %s: %s\n", me->rank, name,
                    PMIx_Error_string(rc));
            return 1;
        }
        printf("pmix group %s rank %u ctxid %zu\n", name, me->rank, ctxid);
    } else {
        printf("pmix group none rank %u\n", me->rank);
    }
    fflush(stdout);
    if ((rc = PMIx_Fence(NULL, 0, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_client: rank %u: fence: %s\n", me->rank, PMIx_Error_string(rc));
        return 1;
    }
    PMIx_Finalize(NULL, 0);
    return 0;
}

static int ptable(const pmix_proc_t *me)
{
    pmix_status_t rc;
    pmix_query_t q;
    pmix_info_t *info = NULL;
    size_t n = 0;

    printf("pmix pid rank %u %d\n", me->rank, (int)getpid());
    fflush(stdout);
    if ((rc = PMIx_Fence(NULL, 0, NULL, 0)) != PMIX_SUCCESS)
        return 1;
    if (me->rank == 0) {
        PMIX_QUERY_CONSTRUCT(&q);
        PMIX_ARGV_APPEND(rc, q.keys, PMIX_QUERY_PROC_TABLE);
        PMIX_INFO_CREATE(q.qualifiers, 1);
        q.nqual = 1;
        PMIX_INFO_LOAD(&q.qualifiers[0], PMIX_NSPACE, me->nspace, PMIX_STRING);
        rc = PMIx_Query_info(&q, 1, &info, &n);
        if (rc != PMIX_SUCCESS || n != 1 || info[0].value.type != PMIX_DATA_ARRAY) {
            fprintf(stderr, "pmix_client: proc table: %s\n", PMIx_Error_string(rc));
            return 1;
        }
        pmix_data_array_t *da = info[0].value.data.darray;
        pmix_proc_info_t *pi = (pmix_proc_info_t *)da->array;
        for (size_t i = 0; i < da->size; i++)
            printf("pmix ptable rank %u pid %d state %d exe %s\n", pi[i].proc.rank,
                   (int)pi[i].pid, (int)pi[i].state,
                   pi[i].executable_name ? pi[i].executable_name : "?");
        fflush(stdout);
        PMIX_INFO_FREE(info, n);
        PMIX_QUERY_DESTRUCT(&q);
    }
    if ((rc = PMIx_Fence(NULL, 0, NULL, 0)) != PMIX_SUCCESS)
        return 1;
    PMIx_Finalize(NULL, 0);
    return 0;
}

static int spawn_children(const pmix_proc_t *me, const char *self)
{
    pmix_app_t app;
    pmix_nspace_t child;
    pmix_status_t rc;

    PMIX_APP_CONSTRUCT(&app);
    app.cmd = strdup(self);
    PMIX_ARGV_APPEND(rc, app.argv, self);
    PMIX_ARGV_APPEND(rc, app.argv, "child");
    app.maxprocs = 2;
    if ((rc = PMIx_Spawn(NULL, 0, &app, 1, child)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_client: spawn: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    printf("pmix spawned %s\n", child);
    fflush(stdout);
    usleep(300 * 1000);
    /* A byte object (Open MPI's context-id exchange publishes these) and
     * a string that looks like fastpmi's own spelling of one. */
    static const char bytes[] = {0x00, 0x01, (char)0xfe, (char)0xff, 'f', 'a', 's', 't',
                                 'p', 'm', 'i', ':'};
    pmix_byte_object_t bo = {.bytes = (char *)bytes, .size = sizeof bytes};
    pmix_info_t more[2];
    PMIX_INFO_LOAD(&more[0], "parent-bytes", &bo, PMIX_BYTE_OBJECT);
    PMIX_INFO_LOAD(&more[1], "parent-text", "fastpmi:text:not-bytes", PMIX_STRING);
    if ((rc = PMIx_Publish(more, 2)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_client: publish bytes: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    if (publish("parent-card", "card-of-the-parent"))
        return 1;
    /* The children look it up and exit; give them time, then leave. */
    sleep(2);
    unpublish("parent-card");
    (void)me;
    PMIx_Finalize(NULL, 0);
    return 0;
}

static int child(const pmix_proc_t *me)
{
    pmix_proc_t wild;
    pmix_value_t *v = NULL;
    pmix_pdata_t pd[3];
    pmix_info_t wait;
    pmix_status_t rc;
    bool spawned = false;
    int all = 0;
    char parent[300] = "?";

    PMIX_LOAD_PROCID(&wild, me->nspace, PMIX_RANK_WILDCARD);
    if (PMIx_Get(&wild, PMIX_SPAWNED, NULL, 0, &v) == PMIX_SUCCESS && v->type == PMIX_BOOL)
        spawned = v->data.flag;
    if (PMIx_Get(&wild, PMIX_PARENT_ID, NULL, 0, &v) == PMIX_SUCCESS && v->type == PMIX_PROC)
        snprintf(parent, sizeof parent, "%s:%u", v->data.proc->nspace, v->data.proc->rank);
    PMIX_PDATA_CONSTRUCT(&pd[0]);
    PMIX_PDATA_CONSTRUCT(&pd[1]);
    PMIX_PDATA_CONSTRUCT(&pd[2]);
    pmix_strncpy(pd[0].key, "parent-card", PMIX_MAX_KEYLEN);
    pmix_strncpy(pd[1].key, "parent-bytes", PMIX_MAX_KEYLEN);
    pmix_strncpy(pd[2].key, "parent-text", PMIX_MAX_KEYLEN);
    PMIX_INFO_LOAD(&wait, PMIX_WAIT, &all, PMIX_INT);
    if ((rc = PMIx_Lookup(pd, 3, &wait, 1)) != PMIX_SUCCESS || pd[0].value.type != PMIX_STRING ||
        pd[1].value.type != PMIX_BYTE_OBJECT || pd[2].value.type != PMIX_STRING) {
        fprintf(stderr, "pmix_client: child lookup: %s (types %d %d %d)\n", PMIx_Error_string(rc),
                pd[0].value.type, pd[1].value.type, pd[2].value.type);
        return 1;
    }
    char hex[64] = "";
    for (size_t i = 0; i < pd[1].value.data.bo.size && 2 * i + 2 < sizeof hex; i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)pd[1].value.data.bo.bytes[i]);
    printf("pmix child rank %u of %s spawned %d parent %s card %s bytes %s text %s\n", me->rank,
           me->nspace, (int)spawned, parent, pd[0].value.data.string, hex,
           pd[2].value.data.string);
    fflush(stdout);
    PMIx_Finalize(NULL, 0);
    return 0;
}

int main(int argc, char **argv)
{
    pmix_proc_t me, wild, peer;
    pmix_value_t *v = NULL, val;
    pmix_info_t info;
    pmix_status_t rc;
    uint32_t size = 0;
    char card[64];
    bool collect = true;

    if (argc < 2) {
        fprintf(stderr, "usage: pmix_client exchange|exit-early\n");
        return 2;
    }
    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_client: PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    const char *marks = getenv("FASTPMI_TEST_MARK_DIR");
    if (marks) {
        char path[4096];
        snprintf(path, sizeof path, "%s/init.%u", marks, me.rank);
        FILE *m = fopen(path, "w");
        if (m)
            fclose(m);
    }
    if (strcmp(argv[1], "connect-stranger") == 0) {
        pmix_proc_t both[2];
        both[0] = me;
        PMIX_LOAD_PROCID(&both[1], "no-such-job", 0);
        rc = PMIx_Connect(both, 2, NULL, 0);
        printf("pmix connect stranger %s\n", rc == PMIX_SUCCESS ? "SUCCESS" : "FAILED");
        PMIx_Finalize(NULL, 0);
        return 0;
    }
    if (strcmp(argv[1], "exit-early") == 0)
        exit(0);
    if (strcmp(argv[1], "cpuset") == 0) {
        char line[512], allowed[512] = "";
        FILE *f = fopen("/proc/self/status", "r");
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, "Cpus_allowed_list: %511s", allowed) == 1)
                break;
        if (f)
            fclose(f);
        rc = PMIx_Get(&me, PMIX_CPUSET, NULL, 0, &v);
        const char *cpuset =
            rc == PMIX_SUCCESS && v->type == PMIX_STRING ? strdup(v->data.string) : "none";
        rc = PMIx_Get(&me, PMIX_LOCALITY_STRING, NULL, 0, &v);
        printf("pmix cpuset rank %u registered=%s allowed=%s locality=%s\n", me.rank, cpuset,
               allowed, rc == PMIX_SUCCESS && v->type == PMIX_STRING ? v->data.string : "none");
        PMIx_Finalize(NULL, 0);
        return 0;
    }
    if (strcmp(argv[1], "names") == 0 && argc == 4)
        return names(&me, argv[2], argv[3]);
    if (strcmp(argv[1], "psets") == 0)
        return psets(&me);
    if (strcmp(argv[1], "groups") == 0)
        return groups(&me);
    if (strcmp(argv[1], "spawn") == 0)
        return spawn_children(&me, argv[0]);
    if (strcmp(argv[1], "child") == 0)
        return child(&me);
    if (strcmp(argv[1], "ptable") == 0)
        return ptable(&me);
    if (strcmp(argv[1], "publish-wait") == 0 && argc == 5)
        return publish_wait(argv[2], argv[3], argv[4]);
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    if ((rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &v)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_client: job size: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    size = v->data.uint32;
    if (strcmp(argv[1], "watch") == 0)
        return watch(&me, size);
    snprintf(card, sizeof card, "card-%u", me.rank);
    PMIX_VALUE_LOAD(&val, card, PMIX_STRING);
    if ((rc = PMIx_Put(PMIX_GLOBAL, "card", &val)) != PMIX_SUCCESS ||
        (rc = PMIx_Commit()) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_client: put: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    if ((rc = PMIx_Fence(NULL, 0, &info, 1)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_client: fence: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    for (uint32_t r = 0; r < size; r++) {
        char want[64];
        PMIX_LOAD_PROCID(&peer, me.nspace, r);
        snprintf(want, sizeof want, "card-%u", r);
        if ((rc = PMIx_Get(&peer, "card", NULL, 0, &v)) != PMIX_SUCCESS ||
            v->type != PMIX_STRING || strcmp(v->data.string, want) != 0) {
            fprintf(stderr, "pmix_client: rank %u: card of %u: %s\n", me.rank, r,
                    rc == PMIX_SUCCESS ? "wrong value" : PMIx_Error_string(rc));
            return 1;
        }
    }
    printf("pmix exchange ok rank %u size %u\n", me.rank, size);
    fflush(stdout);
    PMIx_Finalize(NULL, 0);
    return 0;
}
