//! Command line of the launcher, mpiexec-style.
//!
//! `fastpmi [global options] [-n N] [-env K V] [-wdir D] PROG ARGS... [: -n M PROG2 ARGS...]`
//! Parsed by hand: clap cannot express MPMD `:` sections with per-section
//! options and two-value flags such as `-genv K V`.
//!
//! Modules: `command` (what a command line parses to), `usage` (the help
//! text), `launch` (MPMD sections and their options), `options` (the global
//! options, shared with `demo`), `subcommands` (`ps`, `release`,
//! `nameserver`, `demo`). What a launch holds is [`crate::config`].

mod command;
mod launch;
mod options;
mod subcommands;
mod usage;

pub use crate::config::{App, LaunchConfig};
pub use command::{CliError, Command, MAX_RANKS};
pub use launch::parse;
pub use subcommands::NAMESERVER_PORT;
pub use usage::USAGE;

#[cfg(test)]
mod tests;
