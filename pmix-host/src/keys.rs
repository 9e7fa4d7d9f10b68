//! The PMIx attribute keys the launcher and this crate name: one place,
//! each under its name in OpenPMIx's `pmix_common.h` (checked against the
//! installed header by `tests/keys.rs`). OpenPMIx names attributes by these
//! strings on the wire and in its dictionary, so a typo is a key nobody
//! reads.

pub const PMIX_APPLDR: &str = "pmix.aldr";
pub const PMIX_APPNUM: &str = "pmix.appnum";
pub const PMIX_APP_INFO_ARRAY: &str = "pmix.app.arr";
pub const PMIX_APP_RANK: &str = "pmix.apprank";
pub const PMIX_APP_SIZE: &str = "pmix.app.size";
pub const PMIX_CPUSET: &str = "pmix.cpuset";
pub const PMIX_DEBUG_STOP_IN_INIT: &str = "pmix.dbg.init";
pub const PMIX_EVENT_AFFECTED_PROC: &str = "pmix.evproc";
pub const PMIX_EVENT_CUSTOM_RANGE: &str = "pmix.evrange";
pub const PMIX_EVENT_NON_DEFAULT: &str = "pmix.evnondef";
pub const PMIX_EXIT_CODE: &str = "pmix.exit.code";
pub const PMIX_GLOBAL_RANK: &str = "pmix.grank";
pub const PMIX_GROUP_ASSIGN_CONTEXT_ID: &str = "pmix.grp.actxid";
pub const PMIX_GROUP_CONTEXT_ID: &str = "pmix.grp.ctxid";
pub const PMIX_GROUP_ENDPT_DATA: &str = "pmix.grp.endpt";
pub const PMIX_GROUP_ID: &str = "pmix.grp.id";
pub const PMIX_GROUP_MEMBERSHIP: &str = "pmix.grp.mbrs";
pub const PMIX_GROUP_NOTIFY_TERMINATION: &str = "pmix.grp.notterm";
pub const PMIX_HOSTNAME: &str = "pmix.hname";
/// Not in `pmix_common.h`: OpenPMIx's own key for a topology in
/// hwloc 2's XML, which Open MPI asks for when nothing better is offered.
pub const PMIX_HWLOC_XML_V2: &str = "pmix.hwlocxml2";
pub const PMIX_JOBID: &str = "pmix.jobid";
pub const PMIX_JOB_NUM_APPS: &str = "pmix.job.napps";
pub const PMIX_JOB_SIZE: &str = "pmix.job.size";
pub const PMIX_LOCALITY_STRING: &str = "pmix.locstr";
pub const PMIX_LOCALLDR: &str = "pmix.lldr";
pub const PMIX_LOCAL_PEERS: &str = "pmix.lpeers";
pub const PMIX_LOCAL_RANK: &str = "pmix.lrank";
pub const PMIX_LOCAL_SIZE: &str = "pmix.local.size";
pub const PMIX_MAX_PROCS: &str = "pmix.max.size";
pub const PMIX_NODEID: &str = "pmix.nodeid";
pub const PMIX_NODE_INFO_ARRAY: &str = "pmix.node.arr";
pub const PMIX_NODE_MAP: &str = "pmix.nmap";
pub const PMIX_NODE_OVERSUBSCRIBED: &str = "pmix.ndosub";
pub const PMIX_NODE_RANK: &str = "pmix.nrank";
pub const PMIX_NODE_SIZE: &str = "pmix.node.size";
pub const PMIX_NSDIR: &str = "pmix.nsdir";
pub const PMIX_NSPACE: &str = "pmix.nspace";
pub const PMIX_NUM_NODES: &str = "pmix.num.nodes";
pub const PMIX_PARENT_ID: &str = "pmix.parent";
pub const PMIX_PROCDIR: &str = "pmix.pdir";
pub const PMIX_PROCID: &str = "pmix.procid";
pub const PMIX_PROC_INFO_ARRAY: &str = "pmix.pdata";
pub const PMIX_PROC_MAP: &str = "pmix.pmap";
pub const PMIX_PSET_NAME: &str = "pmix.pset.nm";
pub const PMIX_QUERY_ATTRIBUTE_SUPPORT: &str = "pmix.qry.attrs";
pub const PMIX_QUERY_GROUP_MEMBERSHIP: &str = "pmix.qry.pgrpmems";
pub const PMIX_QUERY_GROUP_NAMES: &str = "pmix.qry.pgrp";
pub const PMIX_QUERY_LOCAL_PROC_TABLE: &str = "pmix.qry.lptable";
pub const PMIX_QUERY_NAMESPACES: &str = "pmix.qry.ns";
pub const PMIX_QUERY_NUM_GROUPS: &str = "pmix.qry.pgrpnum";
pub const PMIX_QUERY_NUM_PSETS: &str = "pmix.qry.psetnum";
pub const PMIX_QUERY_PROC_TABLE: &str = "pmix.qry.ptable";
pub const PMIX_QUERY_PSET_MEMBERSHIP: &str = "pmix.qry.pmems";
pub const PMIX_QUERY_PSET_NAMES: &str = "pmix.qry.psets";
pub const PMIX_RANK: &str = "pmix.rank";
pub const PMIX_SERVER_TMPDIR: &str = "pmix.srvr.tmpdir";
pub const PMIX_SERVER_TOOL_SUPPORT: &str = "pmix.srvr.tool";
pub const PMIX_SPAWNED: &str = "pmix.spawned";
pub const PMIX_SYSTEM_TMPDIR: &str = "pmix.sys.tmpdir";
pub const PMIX_TIMEOUT: &str = "pmix.timeout";
pub const PMIX_TMPDIR: &str = "pmix.tmpdir";
pub const PMIX_UNIV_SIZE: &str = "pmix.univ.size";
pub const PMIX_USERID: &str = "pmix.euid";
pub const PMIX_WAIT: &str = "pmix.wait";
pub const PMIX_WDIR: &str = "pmix.wdir";

/// Every key above, by its name in `pmix_common.h`.
pub const ALL: &[(&str, &str)] = &[
    ("PMIX_APPLDR", PMIX_APPLDR),
    ("PMIX_APPNUM", PMIX_APPNUM),
    ("PMIX_APP_INFO_ARRAY", PMIX_APP_INFO_ARRAY),
    ("PMIX_APP_RANK", PMIX_APP_RANK),
    ("PMIX_APP_SIZE", PMIX_APP_SIZE),
    ("PMIX_CPUSET", PMIX_CPUSET),
    ("PMIX_DEBUG_STOP_IN_INIT", PMIX_DEBUG_STOP_IN_INIT),
    ("PMIX_EVENT_AFFECTED_PROC", PMIX_EVENT_AFFECTED_PROC),
    ("PMIX_EVENT_CUSTOM_RANGE", PMIX_EVENT_CUSTOM_RANGE),
    ("PMIX_EVENT_NON_DEFAULT", PMIX_EVENT_NON_DEFAULT),
    ("PMIX_EXIT_CODE", PMIX_EXIT_CODE),
    ("PMIX_GLOBAL_RANK", PMIX_GLOBAL_RANK),
    ("PMIX_GROUP_ASSIGN_CONTEXT_ID", PMIX_GROUP_ASSIGN_CONTEXT_ID),
    ("PMIX_GROUP_CONTEXT_ID", PMIX_GROUP_CONTEXT_ID),
    ("PMIX_GROUP_ENDPT_DATA", PMIX_GROUP_ENDPT_DATA),
    ("PMIX_GROUP_ID", PMIX_GROUP_ID),
    ("PMIX_GROUP_MEMBERSHIP", PMIX_GROUP_MEMBERSHIP),
    (
        "PMIX_GROUP_NOTIFY_TERMINATION",
        PMIX_GROUP_NOTIFY_TERMINATION,
    ),
    ("PMIX_HOSTNAME", PMIX_HOSTNAME),
    ("PMIX_HWLOC_XML_V2", PMIX_HWLOC_XML_V2),
    ("PMIX_JOBID", PMIX_JOBID),
    ("PMIX_JOB_NUM_APPS", PMIX_JOB_NUM_APPS),
    ("PMIX_JOB_SIZE", PMIX_JOB_SIZE),
    ("PMIX_LOCALITY_STRING", PMIX_LOCALITY_STRING),
    ("PMIX_LOCALLDR", PMIX_LOCALLDR),
    ("PMIX_LOCAL_PEERS", PMIX_LOCAL_PEERS),
    ("PMIX_LOCAL_RANK", PMIX_LOCAL_RANK),
    ("PMIX_LOCAL_SIZE", PMIX_LOCAL_SIZE),
    ("PMIX_MAX_PROCS", PMIX_MAX_PROCS),
    ("PMIX_NODEID", PMIX_NODEID),
    ("PMIX_NODE_INFO_ARRAY", PMIX_NODE_INFO_ARRAY),
    ("PMIX_NODE_MAP", PMIX_NODE_MAP),
    ("PMIX_NODE_OVERSUBSCRIBED", PMIX_NODE_OVERSUBSCRIBED),
    ("PMIX_NODE_RANK", PMIX_NODE_RANK),
    ("PMIX_NODE_SIZE", PMIX_NODE_SIZE),
    ("PMIX_NSDIR", PMIX_NSDIR),
    ("PMIX_NSPACE", PMIX_NSPACE),
    ("PMIX_NUM_NODES", PMIX_NUM_NODES),
    ("PMIX_PARENT_ID", PMIX_PARENT_ID),
    ("PMIX_PROCDIR", PMIX_PROCDIR),
    ("PMIX_PROCID", PMIX_PROCID),
    ("PMIX_PROC_INFO_ARRAY", PMIX_PROC_INFO_ARRAY),
    ("PMIX_PROC_MAP", PMIX_PROC_MAP),
    ("PMIX_PSET_NAME", PMIX_PSET_NAME),
    ("PMIX_QUERY_ATTRIBUTE_SUPPORT", PMIX_QUERY_ATTRIBUTE_SUPPORT),
    ("PMIX_QUERY_GROUP_MEMBERSHIP", PMIX_QUERY_GROUP_MEMBERSHIP),
    ("PMIX_QUERY_GROUP_NAMES", PMIX_QUERY_GROUP_NAMES),
    ("PMIX_QUERY_LOCAL_PROC_TABLE", PMIX_QUERY_LOCAL_PROC_TABLE),
    ("PMIX_QUERY_NAMESPACES", PMIX_QUERY_NAMESPACES),
    ("PMIX_QUERY_NUM_GROUPS", PMIX_QUERY_NUM_GROUPS),
    ("PMIX_QUERY_NUM_PSETS", PMIX_QUERY_NUM_PSETS),
    ("PMIX_QUERY_PROC_TABLE", PMIX_QUERY_PROC_TABLE),
    ("PMIX_QUERY_PSET_MEMBERSHIP", PMIX_QUERY_PSET_MEMBERSHIP),
    ("PMIX_QUERY_PSET_NAMES", PMIX_QUERY_PSET_NAMES),
    ("PMIX_RANK", PMIX_RANK),
    ("PMIX_SERVER_TMPDIR", PMIX_SERVER_TMPDIR),
    ("PMIX_SERVER_TOOL_SUPPORT", PMIX_SERVER_TOOL_SUPPORT),
    ("PMIX_SPAWNED", PMIX_SPAWNED),
    ("PMIX_SYSTEM_TMPDIR", PMIX_SYSTEM_TMPDIR),
    ("PMIX_TIMEOUT", PMIX_TIMEOUT),
    ("PMIX_TMPDIR", PMIX_TMPDIR),
    ("PMIX_UNIV_SIZE", PMIX_UNIV_SIZE),
    ("PMIX_USERID", PMIX_USERID),
    ("PMIX_WAIT", PMIX_WAIT),
    ("PMIX_WDIR", PMIX_WDIR),
];
