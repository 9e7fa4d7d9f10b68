//! Every name both ends of a fastpmi job use: node and job attributes,
//! keys of the `fullinit` reply, and environment variables. The server,
//! the launcher and the clients import them from here and spell none of
//! them again (as MPICH keeps its wire names in one header shared by its
//! client and its process managers).

/// Node attributes (PMI-2 `info-getnodeattr`) and job attributes
/// (`info-getjobattr`).
pub mod attr {
    /// How the job segment is shared: `anonmmap` (memfd) or `sysv`.
    pub const MEM_POOL_TYPE: &str = "memPoolType";
    /// The memfd of the job segment, as a descriptor number in the rank.
    pub const MEM_ANON_MMAP_FD: &str = "memAnonMMAPfd";
    /// The SysV id of the job segment.
    pub const MEM_SYSV_ID: &str = "memSYSVid";
    /// The spawning job's segment, `fd:N` or `sysv:ID`.
    pub const PARENT_SEGMENT: &str = "fastpmi-parentSegment";
    /// Set once a put went to the launcher's overflow table (the segment
    /// was full): a get that misses in the segment must ask the launcher.
    pub const OVERFLOW: &str = "fastpmi-overflow";
    /// Set for a job over node servers (docs/nested.md): the launcher may
    /// find, in the outer job, a key that misses in the segment, so a get
    /// that misses must ask it.
    pub const MISS_ASKS: &str = "fastpmi-missAsks";
    /// Ranks of the job dead on other node servers (nested mode, node
    /// attribute, Hydra's range format), rewritten before each such death
    /// is counted in the segment; the segment's rank records hold the
    /// node's own dead.
    pub const DEAD_ELSEWHERE: &str = "fastpmi-deadElsewhere";
    /// Keys the node servers of a job put in the outer job's KVS start so;
    /// they are never part of the inner job's KVS.
    pub const NEST_KEY_PREFIX: &str = "fpmi-nest-";
    /// Ranks of the caller's node (node attribute, a comma list).
    pub const LOCAL_RANKS: &str = "localRanks";
    /// How many ranks the caller's node has (node attribute).
    pub const LOCAL_RANKS_COUNT: &str = "localRanksCount";
    /// The universe size (job attribute).
    pub const UNIVERSE_SIZE: &str = "universeSize";
    /// Node map of the job (job attribute), e.g. `(vector,(0,1,16))`.
    pub const PROCESS_MAPPING: &str = "PMI_process_mapping";
    /// Whether publish, unpublish and lookup work (job attribute, `TRUE`).
    pub const HAS_NAME_SERV: &str = "hasNameServ";
    /// Ranks known dead (job attribute, Hydra's format: [`crate::ranks`]);
    /// empty while none died.
    pub const DEAD_PROCESSES: &str = "PMI_dead_processes";
    /// Path of the node's topology as hwloc XML (job attribute).
    pub const HWLOC_XMLFILE: &str = "PMI_hwloc_xmlfile";
    /// Job attribute naming all process sets (comma list).
    pub const PSET_NAMES: &str = "psetNames";
    /// Prefix of the job attribute listing one process set's members.
    pub const PSET_PREFIX: &str = "pset:";
    /// Job attribute naming the calling rank's process sets.
    pub const MY_PSETS: &str = "mypsets";

    /// The [`PROCESS_MAPPING`] of `ranks` ranks all on one node, in the
    /// full form (never Hydra's wrap-around).
    pub fn single_node_mapping(ranks: u32) -> String {
        format!("(vector,(0,1,{ranks}))")
    }
}

/// Values of [`attr::MEM_POOL_TYPE`], also the kinds of [`env::SEGMENT`]
/// (`anonmmap:FD`, `sysv:ID`).
pub mod pool {
    /// An anonymous memfd ([`super::attr::MEM_ANON_MMAP_FD`]).
    pub const ANON_MMAP: &str = "anonmmap";
    /// A SysV segment ([`super::attr::MEM_SYSV_ID`]).
    pub const SYSV: &str = "sysv";
}

/// Kinds of [`attr::PARENT_SEGMENT`] and [`env::PARENT_SEGMENT`]: `fd:N`
/// or `sysv:ID`.
pub mod parent_segment {
    /// An inherited descriptor of the parent's memfd.
    pub const FD: &str = "fd";
    /// The parent's SysV segment.
    pub const SYSV: &str = super::pool::SYSV;
}

/// Keys of fastpmi's own additions to a `fullinit-response`.
pub mod fullinit {
    /// Every key fastpmi adds starts with this (other servers send none).
    pub const PREFIX: &str = "fastpmi-";
    /// The job id, which marks a reply from fastpmi's launcher.
    pub const JOBID: &str = "fastpmi-jobid";
}

/// Environment variables: the standard PMI ones a launcher hands its
/// ranks, and fastpmi's own.
pub mod env {
    /// Inherited socket to the PMI server.
    pub const PMI_FD: &str = "PMI_FD";
    /// Inherited socket of the rank's out-of-band channel (fastpmi's
    /// launcher in FD mode; docs/oob.md).
    pub const PMI_OOB_FD: &str = "PMI_OOB_FD";
    /// `host:port` of the PMI server.
    pub const PMI_PORT: &str = "PMI_PORT";
    /// The process's id on `PMI_PORT` (PMI-1).
    pub const PMI_ID: &str = "PMI_ID";
    pub const PMI_RANK: &str = "PMI_RANK";
    pub const PMI_SIZE: &str = "PMI_SIZE";
    /// The job id, sent back in `fullinit` as `pmijobid`.
    pub const PMI_JOBID: &str = "PMI_JOBID";
    /// This job was spawned by another.
    pub const PMI_SPAWNED: &str = "PMI_SPAWNED";
    /// Set for a rank started under a debugger (MPIR).
    pub const PMI_TOTALVIEW: &str = "PMI_TOTALVIEW";
    /// The job segment, `anonmmap:FD` (an inherited memfd) or `sysv:ID`.
    pub const SEGMENT: &str = "FASTPMI_SEGMENT";
    /// The rank's appnum (MPMD section or spawn command).
    pub const APPNUM: &str = "FASTPMI_APPNUM";
    /// The job id of the job that spawned this one.
    pub const SPAWNER: &str = "FASTPMI_SPAWNER";
    /// The spawning job's segment, as [`super::attr::PARENT_SEGMENT`].
    pub const PARENT_SEGMENT: &str = "FASTPMI_PARENT_SEGMENT";
    /// Port mode: the job's secret, proof of membership.
    pub const AUTH_SECRET: &str = "FASTPMI_AUTH_SECRET";
    /// CPU yields of a shared-memory fence waiter before it sleeps.
    pub const FENCE_YIELDS: &str = "FASTPMI_FENCE_YIELDS";
    /// `socket` forces the client off the segment.
    pub const TRANSPORT: &str = "FASTPMI_TRANSPORT";
    /// Log filter of the launcher and the C libraries.
    pub const LOG: &str = "FASTPMI_LOG";
}
