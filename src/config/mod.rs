//! What a launch holds: its MPMD sections ([`App`]) and the launcher's
//! settings ([`LaunchConfig`]), with the option types inside them.
//!
//! Below both the CLI (which fills a [`LaunchConfig`]) and the launcher
//! (which runs one), so that neither imports the other; this module
//! imports neither.

pub mod knobs;
pub mod placement;
pub mod psets;

use std::ffi::OsString;
use std::path::PathBuf;

use fastpmi_segment::MemPool;
pub use knobs::Knobs;
use placement::PlacementOpts;

/// One MPMD section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct App {
    pub nranks: u32,
    pub program: OsString,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub wdir: Option<PathBuf>,
    /// Process sets this section's ranks belong to (`--pset`).
    pub psets: Vec<String>,
    /// Which process-management interface its ranks get (`--pmi`).
    pub personality: Personality,
}

/// The interface a section's ranks are served (`--pmi auto|pmi|pmix`,
/// docs/pmix.md): one per rank, never both (MPICH refuses to start with
/// both `PMI_SIZE` and `PMIX_NAMESPACE` in its environment).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Personality {
    /// PMIx when the program links `libpmix` or Open MPI's `libmpi.so.40`,
    /// PMI otherwise.
    #[default]
    Auto,
    Pmi,
    Pmix,
}

/// A `--pmi` value that names no personality.
#[derive(Debug, thiserror::Error)]
#[error("--pmi {0}: auto, pmi or pmix")]
pub struct UnknownPersonality(pub String);

impl std::str::FromStr for Personality {
    type Err = UnknownPersonality;
    fn from_str(s: &str) -> Result<Self, UnknownPersonality> {
        match s {
            "auto" => Ok(Personality::Auto),
            "pmi" | "pmi2" | "pmi1" => Ok(Personality::Pmi),
            "pmix" => Ok(Personality::Pmix),
            other => Err(UnknownPersonality(other.to_string())),
        }
    }
}

/// An empty section: one rank, no program yet.
impl Default for App {
    fn default() -> App {
        App {
            nranks: 1,
            program: OsString::new(),
            args: vec![],
            env: vec![],
            wdir: None,
            psets: vec![],
            personality: Personality::Auto,
        }
    }
}

/// Everything the launcher needs to run a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchConfig {
    pub apps: Vec<App>,
    pub genv: Vec<(OsString, OsString)>,
    pub label: bool,
    pub pmi_port: bool,
    /// Port mode: address to listen on (default 127.0.0.1); clients from
    /// elsewhere must authenticate.
    pub pmi_port_bind: Option<std::net::IpAddr>,
    /// Memory behind the job segment; `None`: no segment, socket only.
    pub mem_pool: Option<MemPool>,
    /// Override of the segment's KVS size in MiB.
    pub kvs_mb: Option<u64>,
    /// Print per-transport operation counts at job end.
    pub stats: bool,
    /// Address of a shared `fastpmi nameserver`.
    pub nameserver: Option<String>,
    /// A group member's death fails its groups, not its job.
    pub tolerate_group_failures: bool,
    /// Fault-tolerant jobs: a rank that dies ends alone, the others go on
    /// (`--fault-tolerant`; docs/fault-tolerance.md).
    pub fault_tolerant: bool,
    /// In a fault-tolerant job, a death still fails the exit status (the
    /// first dead rank's status) instead of only being reported.
    pub fail_on_death: bool,
    /// Hold every rank inside PMI init until released.
    pub stop_in_init: bool,
    /// Fail a job whose fence stays incomplete this long.
    pub fence_timeout: Option<std::time::Duration>,
    /// Failure details: every rank's state, last operation, fences.
    pub verbose: bool,
    /// `-bind-to`, `-map-by`, `-ppn`, `--print-bindings`.
    pub placement: PlacementOpts,
    /// Tuning knobs from the environment ([`Knobs::from_env`]).
    pub knobs: Knobs,
    /// OpenPMIx's server library (`--pmix-lib`, `FASTPMI_PMIX_LIB`); the
    /// usual names when `None`.
    pub pmix_lib: Option<PathBuf>,
    /// Started as a rank of a bigger PMI job: be its node server
    /// (`--nest`, `FASTPMI_NEST`; docs/nested.md).
    pub nest: bool,
}

impl Default for LaunchConfig {
    fn default() -> Self {
        LaunchConfig {
            apps: Vec::new(),
            genv: Vec::new(),
            label: false,
            pmi_port: false,
            pmi_port_bind: None,
            mem_pool: Some(MemPool::AnonMmap),
            kvs_mb: None,
            stats: false,
            nameserver: None,
            tolerate_group_failures: false,
            fault_tolerant: false,
            fail_on_death: false,
            stop_in_init: false,
            fence_timeout: None,
            verbose: false,
            placement: PlacementOpts::default(),
            knobs: Knobs::default(),
            pmix_lib: std::env::var_os("FASTPMI_PMIX_LIB")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            nest: std::env::var("FASTPMI_NEST").map_or(true, |v| v != "off"),
        }
    }
}

impl LaunchConfig {
    pub fn world_size(&self) -> u32 {
        self.apps.iter().map(|a| a.nranks).sum()
    }
}
