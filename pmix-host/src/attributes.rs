//! What the launcher tells the library it serves, for tools and clients
//! that ask (`PMIx_Register_attributes`; `pattrs --host`).

/// The PMIx calls this host serves (through the upcalls registered in
/// `Server::start`) and the attributes it honours in each. A call that
/// honours none has an empty list: PRRTE's "NONE" and "N/A" are names no
/// dictionary knows, and OpenPMIx (4.2, 5.0) then answers a query for
/// every function's attributes with nothing at all.
pub(crate) const HOST_ATTRIBUTES: &[(&str, &[&str])] = &[
    ("PMIx_Abort", &[]),
    ("PMIx_Fence", &[]),
    ("PMIx_Fence_nb", &[]),
    ("PMIx_Publish", &[]),
    ("PMIx_Publish_nb", &[]),
    ("PMIx_Lookup", &["PMIX_WAIT", "PMIX_TIMEOUT"]),
    ("PMIx_Lookup_nb", &["PMIX_WAIT", "PMIX_TIMEOUT"]),
    ("PMIx_Unpublish", &[]),
    ("PMIx_Unpublish_nb", &[]),
    ("PMIx_Spawn", &["PMIX_WDIR"]),
    ("PMIx_Spawn_nb", &["PMIX_WDIR"]),
    ("PMIx_Connect", &[]),
    ("PMIx_Connect_nb", &[]),
    ("PMIx_Disconnect", &[]),
    ("PMIx_Disconnect_nb", &[]),
    ("PMIx_Query_info", QUERY_KEYS),
    ("PMIx_Query_info_nb", QUERY_KEYS),
    ("PMIx_Group_construct", &["PMIX_GROUP_ASSIGN_CONTEXT_ID"]),
    ("PMIx_Group_construct_nb", &["PMIX_GROUP_ASSIGN_CONTEXT_ID"]),
    ("PMIx_Group_destruct", &[]),
    ("PMIx_Group_destruct_nb", &[]),
    ("PMIx_tool_init", &[]),
];

/// The query keys the launcher answers (`src/launcher/pmix/query.rs`).
const QUERY_KEYS: &[&str] = &[
    "PMIX_QUERY_NAMESPACES",
    "PMIX_QUERY_NUM_PSETS",
    "PMIX_QUERY_PSET_NAMES",
    "PMIX_QUERY_PSET_MEMBERSHIP",
    "PMIX_QUERY_PROC_TABLE",
    "PMIX_QUERY_LOCAL_PROC_TABLE",
    "PMIX_QUERY_NUM_GROUPS",
    "PMIX_QUERY_GROUP_NAMES",
    "PMIX_QUERY_GROUP_MEMBERSHIP",
];
