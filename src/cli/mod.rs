//! Command line of the launcher, mpiexec-style.
//!
//! `fastpmi [global options] [-n N] [-env K V] [-wdir D] PROG ARGS... [: -n M PROG2 ARGS...]`
//! Parsed by hand: clap cannot express MPMD `:` sections with per-section
//! options and two-value flags such as `-genv K V`.
//!
//! Modules: `usage` (the help text), `launch` (MPMD sections and their
//! options), `options` (the global options, shared with `demo`),
//! `subcommands` (`ps`, `release`, `nameserver`, `demo`). What a launch
//! holds is [`crate::config`].

mod launch;
mod options;
mod subcommands;
mod usage;

use std::path::PathBuf;

pub use crate::config::{App, LaunchConfig};
pub use launch::parse;
pub use subcommands::NAMESERVER_PORT;
pub use usage::USAGE;

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

#[cfg(test)]
mod tests;
