//! The launcher as a PMIx server (docs/pmix.md): OpenPMIx's server library
//! ([`pmix_host`]) started at the first job with a PMIx section, each such
//! job registered as a namespace (its fastpmi job id), each of its ranks
//! registered before it starts and given the library's environment instead
//! of PMI's. Upcalls (abort, finalize) come back through the event loop.

mod clients;
pub mod detect;
// Named by path, not re-exported here: they import the launcher parts
// that import this file.
pub(super) mod dispatch;
mod env;
mod groups;
mod host;
mod leftovers;
mod names;
mod query;
pub(super) mod register;
mod remote;
mod system;

pub(super) use env::{app_env_defaults, wait_timer_slack};
pub(super) use host::PmixHost;
pub(super) use leftovers::remove_dead;
