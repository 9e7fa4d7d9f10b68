//! What clients ask of the host, by family: each family is served by one
//! file of the host's policy, so a new upcall touches this crate and that
//! file only.

use crate::done::*;

/// An upcall, copied off the library's progress thread.
#[derive(Debug)]
pub enum Upcall {
    Client(ClientUpcall),
    Names(NamesUpcall),
    Remote(RemoteUpcall),
    Query(QueryUpcall),
    Spawn(SpawnUpcall),
    Group(GroupUpcall),
}

/// A client's life: its connection, finalize, abort and lost connection.
#[derive(Debug)]
pub enum ClientUpcall {
    /// `PMIx_Init` of `rank` of `nspace` (its connection).
    Connected { nspace: String, rank: u32 },
    /// `PMIx_Finalize` of `rank` of `nspace`.
    Finalized { nspace: String, rank: u32 },
    /// `PMIx_Abort` by `rank` of `nspace`.
    Abort {
        nspace: String,
        rank: u32,
        status: i32,
        message: String,
        /// It named only itself (`procs` = its own name): a fault-tolerant
        /// job goes on without it.
        only_self: bool,
    },
    /// The library saw the connection of `rank` of `nspace` close before
    /// its `PMIx_Finalize` (`PMIX_ERR_LOST_CONNECTION`), and has accounted
    /// for it: the namespace's count of local processes, which a whole-job
    /// fence waits for, is lowered, so the client may now be deregistered.
    LostConnection { nspace: String, rank: u32 },
}

/// The name service.
#[derive(Debug)]
pub enum NamesUpcall {
    /// `PMIx_Publish`: `pairs` (service, value) by `rank` of `nspace`.
    Publish {
        nspace: String,
        rank: u32,
        pairs: Vec<(String, NameValue)>,
        done: OpDone,
    },
    /// `PMIx_Unpublish` of `keys` (empty: every name of the caller).
    Unpublish {
        nspace: String,
        rank: u32,
        keys: Vec<String>,
        done: OpDone,
    },
    /// `PMIx_Lookup` of `keys`; with `wait` (`PMIX_WAIT`) the answer waits
    /// until every key is published, for at most `timeout` seconds
    /// (`PMIX_TIMEOUT`; none: until the job ends).
    Lookup {
        nspace: String,
        rank: u32,
        keys: Vec<String>,
        wait: bool,
        timeout: Option<u32>,
        done: LookupDone,
    },
}

/// Processes of other servers: connecting to them, and their data.
#[derive(Debug)]
pub enum RemoteUpcall {
    /// `PMIx_Connect` of `procs` (rank `u32::MAX - 1`: all of its
    /// namespace), once the library gathered every local participant.
    Connect {
        procs: Vec<(String, u32)>,
        done: OpDone,
    },
    /// A rank asked for data of `rank` of `nspace`, which this server does
    /// not host (another launcher's job, after `PMIx_Connect`).
    Dmodex {
        nspace: String,
        rank: u32,
        done: ModexDone,
    },
    /// The data the library holds of `rank` of `nspace`, one of this
    /// server's clients (`Server::request_modex`); `None` when it has none.
    LocalModex {
        nspace: String,
        rank: u32,
        data: Option<Vec<u8>>,
    },
}

/// `PMIx_Query_info` that the library passes on (by `rank` of `nspace`, or
/// a tool).
#[derive(Debug)]
pub struct QueryUpcall {
    pub nspace: String,
    pub rank: u32,
    pub queries: Vec<QueryAsk>,
    pub done: QueryDone,
}

/// `PMIx_Spawn` by `rank` of `nspace` (Open MPI's `MPI_Comm_spawn`).
#[derive(Debug)]
pub struct SpawnUpcall {
    pub nspace: String,
    pub rank: u32,
    pub apps: Vec<SpawnApp>,
    pub done: SpawnDone,
}

/// `PMIx_Group_construct` (`construct`) or `_destruct` of group `name` of
/// `members`, once every local member called it (the library collects
/// them). `ctxid`: a context id is asked for.
#[derive(Debug)]
pub struct GroupUpcall {
    pub construct: bool,
    pub name: String,
    pub members: Vec<(String, u32)>,
    pub ctxid: bool,
    /// Built with `PMIX_GROUP_NOTIFY_TERMINATION`: a member's death is an
    /// event (`PMIX_GROUP_MEMBER_FAILED`) to the others.
    pub notify_termination: bool,
    /// The members' endpoint data the library collected
    /// (`PMIX_GROUP_ENDPT_DATA`): every member is local, so it is the whole
    /// of it and goes back as it came.
    pub endpoints: Option<Vec<u8>>,
    pub done: QueryDone,
}
