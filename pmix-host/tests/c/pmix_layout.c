/*
 * pmix_layout.c: the sizes and offsets of OpenPMIx's types that fastpmi's
 * FFI (pmix-host/src/abi.rs, `LAYOUT`) declares itself, from the
 * installed headers (libpmix-dev), one "name = value" per line.
 */
#include <stddef.h>
#include <stdio.h>

#include <pmix_server.h>

int main(void)
{
    printf("sizeof(pmix_info_t) = %zu\n", sizeof(pmix_info_t));
    printf("sizeof(pmix_value_t) = %zu\n", sizeof(pmix_value_t));
    printf("sizeof(pmix_proc_t) = %zu\n", sizeof(pmix_proc_t));
    printf("sizeof(pmix_data_array_t) = %zu\n", sizeof(pmix_data_array_t));
    printf("offsetof(pmix_info_t, flags) = %zu\n", offsetof(pmix_info_t, flags));
    printf("offsetof(pmix_info_t, value) = %zu\n", offsetof(pmix_info_t, value));
    printf("offsetof(pmix_value_t, data) = %zu\n", offsetof(pmix_value_t, data));
    printf("sizeof(pmix_server_module_t) = %zu\n", sizeof(pmix_server_module_t));
    printf("offsetof(pmix_server_module_t, fence_nb) = %zu\n",
           offsetof(pmix_server_module_t, fence_nb));
    printf("offsetof(pmix_server_module_t, publish) = %zu\n",
           offsetof(pmix_server_module_t, publish));
    printf("sizeof(pmix_pdata_t) = %zu\n", sizeof(pmix_pdata_t));
    printf("offsetof(pmix_pdata_t, value) = %zu\n", offsetof(pmix_pdata_t, value));
    printf("PMIX_UINT32 = %d\n", PMIX_UINT32);
    printf("PMIX_INT = %d\n", PMIX_INT);
    printf("PMIX_PROC = %d\n", PMIX_PROC);
    printf("PMIX_EVENT_PROC_TERMINATED = %d\n", PMIX_EVENT_PROC_TERMINATED);
    printf("PMIX_RANGE_NAMESPACE = %d\n", PMIX_RANGE_NAMESPACE);
    printf("PMIX_ERR_PROC_TERM_WO_SYNC = %d\n", PMIX_ERR_PROC_TERM_WO_SYNC);
    printf("PMIX_ERR_PROC_ABORTED_BY_SIG = %d\n", PMIX_ERR_PROC_ABORTED_BY_SIG);
    printf("PMIX_ERR_PROC_ABORTED = %d\n", PMIX_ERR_PROC_ABORTED);
    printf("PMIX_PROC_TERMINATED = %d\n", PMIX_PROC_TERMINATED);
    printf("PMIX_GROUP_MEMBER_FAILED = %d\n", PMIX_GROUP_MEMBER_FAILED);
    printf("PMIX_DATA_ARRAY = %d\n", PMIX_DATA_ARRAY);
    printf("PMIX_OPERATION_SUCCEEDED = %d\n", PMIX_OPERATION_SUCCEEDED);
    printf("PMIX_SIZE = %d\n", PMIX_SIZE);
    printf("PMIX_ERR_NO_PERMISSIONS = %d\n", PMIX_ERR_NO_PERMISSIONS);
    printf("PMIX_ERR_TIMEOUT = %d\n", PMIX_ERR_TIMEOUT);
    printf("PMIX_DEBUGGER_RELEASE = %d\n", PMIX_DEBUGGER_RELEASE);
    printf("PMIX_RANGE_CUSTOM = %d\n", PMIX_RANGE_CUSTOM);
    printf("PMIX_RANK_WILDCARD = %lld\n", (long long)PMIX_RANK_WILDCARD);
    printf("offsetof(pmix_server_module_t, group) = %zu\n", offsetof(pmix_server_module_t, group));
    printf("offsetof(pmix_server_module_t, job_control) = %zu\n",
           offsetof(pmix_server_module_t, job_control));
    printf("PMIX_GROUP_CONSTRUCT = %d\n", PMIX_GROUP_CONSTRUCT);
    printf("PMIX_BYTE_OBJECT = %d\n", PMIX_BYTE_OBJECT);
    printf("PMIX_PROC_INFO = %d\n", PMIX_PROC_INFO);
    printf("sizeof(pmix_app_t) = %zu\n", sizeof(pmix_app_t));
    printf("sizeof(pmix_cpuset_t) = %zu\n", sizeof(pmix_cpuset_t));
    printf("offsetof(pmix_app_t, maxprocs) = %zu\n", offsetof(pmix_app_t, maxprocs));
    printf("offsetof(pmix_server_module_t, spawn) = %zu\n", offsetof(pmix_server_module_t, spawn));
    printf("offsetof(pmix_server_module_t, connect) = %zu\n",
           offsetof(pmix_server_module_t, connect));
    printf("sizeof(pmix_proc_info_t) = %zu\n", sizeof(pmix_proc_info_t));
    printf("offsetof(pmix_proc_info_t, pid) = %zu\n", offsetof(pmix_proc_info_t, pid));
    printf("offsetof(pmix_proc_info_t, state) = %zu\n", offsetof(pmix_proc_info_t, state));
    printf("PMIX_PROC_STATE_RUNNING = %d\n", PMIX_PROC_STATE_RUNNING);
    printf("PMIX_PROC_STATE_CONNECTED = %d\n", PMIX_PROC_STATE_CONNECTED);
    printf("PMIX_PROC_STATE_TERMINATED = %d\n", PMIX_PROC_STATE_TERMINATED);
    printf("sizeof(pmix_byte_object_t) = %zu\n", sizeof(pmix_byte_object_t));
    printf("PMIX_GROUP_DESTRUCT = %d\n", PMIX_GROUP_DESTRUCT);
    printf("offsetof(pmix_server_module_t, tool_connected) = %zu\n",
           offsetof(pmix_server_module_t, tool_connected));
    printf("PMIX_ERR_NOT_SUPPORTED = %d\n", PMIX_ERR_NOT_SUPPORTED);
    printf("sizeof(pmix_query_t) = %zu\n", sizeof(pmix_query_t));
    printf("offsetof(pmix_query_t, qualifiers) = %zu\n", offsetof(pmix_query_t, qualifiers));
    printf("offsetof(pmix_query_t, nqual) = %zu\n", offsetof(pmix_query_t, nqual));
    printf("offsetof(pmix_server_module_t, query) = %zu\n",
           offsetof(pmix_server_module_t, query));
    printf("PMIX_ERR_LOST_CONNECTION = %d\n", PMIX_ERR_LOST_CONNECTION);
    printf("PMIX_EVENT_ACTION_COMPLETE = %d\n", PMIX_EVENT_ACTION_COMPLETE);
    return 0;
}
