//! What a command line parses to: the [`Command`], the error a bad one
//! gets, and the largest job a launcher accepts.

use std::path::PathBuf;

use crate::config::LaunchConfig;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Run(LaunchConfig),
    Demo {
        nranks: u32,
        cfg: LaunchConfig,
    },
    /// Internal: a rank of `fastpmi demo`.
    DemoRank,
    /// A name server shared by launchers.
    NameServer {
        bind: String,
        port: u16,
    },
    /// `fastpmi ps [PID|JOBID] [--json] [--socket PATH]`.
    Ps {
        target: Option<String>,
        json: bool,
        socket: Option<PathBuf>,
    },
    /// `fastpmi release PID|JOBID [--socket PATH]`.
    Release {
        target: String,
        socket: Option<PathBuf>,
    },
    /// `fastpmi checkpoint PID|JOBID [--socket PATH]`.
    Checkpoint {
        target: String,
        socket: Option<PathBuf>,
    },
    Help,
    Version,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CliError(pub String);

/// Largest job a single launcher accepts (fds and memory grow with it).
pub const MAX_RANKS: u32 = 65536;
