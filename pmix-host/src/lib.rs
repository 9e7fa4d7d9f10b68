//! OpenPMIx's server library behind a safe API: what fastpmi's launcher
//! needs to serve PMIx clients (Open MPI, PMIx tools), and nothing of the
//! launcher itself. The library is loaded at run time (`libpmix.so.2`, the
//! one a program links, or Debian's), like hwloc; without it nothing here
//! is called.
//!
//! - [`abi`]: the PMIx 4.x/5.x types this crate hands the library,
//!   declared here so that it builds without the headers;
//!   `tests/layout.rs` checks them against the installed ones.
//! - [`Server`]: the handle of the running server (start, register and
//!   deregister namespaces and clients, events, finalize).
//! - [`Upcall`]: what clients ask of the host, copied off the library's
//!   progress thread and handed to the one sink given to
//!   [`Server::start`], with a completion where the answer comes later.
//! - The completions ([`OpDone`], [`QueryDone`], [`LookupDone`],
//!   [`SpawnDone`], [`ModexDone`]) answer exactly once: one dropped
//!   unanswered answers `PMIX_ERROR`.
//!
//! The library calls its host's functions without a context pointer, so
//! the sink is the one process-wide value besides the library's own
//! state: a process runs at most one server ([`PmixError::Twice`]).

pub mod abi;
mod attributes;
mod done;
mod error;
mod families;
mod guard;
pub mod keys;
mod requests;
mod server;
mod upcalls;

pub use abi::*;
pub use done::{
    LookupDone, ModexDone, NameValue, OpDone, QueryAsk, QueryDone, SpawnApp, SpawnDone,
};
pub use error::PmixError;
pub use families::*;
pub use server::Server;
pub use upcalls::Sink;
