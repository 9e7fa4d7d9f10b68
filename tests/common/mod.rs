//! Shared helpers for the real-peer interop tests.
//!
//! * [`prog`] compiles one of the C test programs in `tests/c/` once per test
//!   binary (MPICH programs with `mpicc.mpich`, Slurm libpmi2 programs with
//!   `gcc ... -lpmi2`) into `$CARGO_TARGET_TMPDIR/interop-c/`. A missing
//!   compiler, header or library is a test failure that names the Debian
//!   package to install; nothing is ever skipped.
//! * [`launch`] builds a launcher command line; [`Cmd::run`] runs it with a
//!   timeout (on timeout the launcher and every descendant are SIGKILLed and
//!   the test fails with the output collected so far); [`Cmd::spawn`] gives a
//!   [`Job`] for tests that act while the job runs.
//! * [`heavy`] is a per-test-binary lock: every test that starts a
//!   multi-rank PMI/MPI job holds it, so one test binary never runs two such
//!   jobs at once on the 2-core CI machine (cargo runs test binaries one
//!   after another, so this bounds the whole run).
//! * [`capi_lib_dir`] builds fastpmi's C libraries (`capi/pmi2`,
//!   `capi/pmi1`) with the test binary's own profile and returns a directory
//!   where they are found under their SONAMEs (`libpmi2.so.0`,
//!   `libpmi.so.0`) and link names, for `LD_LIBRARY_PATH` and `-L`.
//! * [`processes_with_exe`] / [`assert_no_process_left`] find rank processes
//!   that survived their job (by the exact executable path, so tests copy
//!   the program to a unique path first with [`unique_copy`]).
//!
//! Submodules by concern, their items re-exported here so `common::foo`
//! names them: `programs` (the C programs, scratch directories), `capi`
//! (fastpmi's C libraries), `job` (running the launcher: [`Cmd`], [`Job`],
//! [`Outcome`]), `procs` (/proc: process trees, signals, leftover ranks);
//! and, named by their path, `nameserver`, `placement`, `plain`, `port`,
//! `shm_children`, `spawn`, `stacks`, `tools`.
//!
//! The launcher is `fastpmi` (`env!("CARGO_BIN_EXE_fastpmi")`). For
//! validating these tests themselves against an independent server, set
//! `FASTPMI_TEST_LAUNCHER=mpiexec.hydra` (or a path to it): the helper then
//! translates the few flags that differ (`--label` -> `-l`, `--pmi-port` ->
//! `-pmi-port`) and adds `-ppn <total ranks>` so Hydra reports a one-node
//! process mapping. Hydra is known to fail several of these tests (see the
//! notes next to each test); that knob exists only to check the tests.
#![allow(dead_code)]

mod capi;
pub mod halves;
mod job;
pub mod nameserver;
pub mod placement;
pub mod plain;
pub mod pmix;
pub mod port;
mod procs;
mod programs;
pub mod shm_children;
pub mod spawn;
pub mod stacks;
pub mod tools;

// Not every test binary uses every submodule.
#[allow(unused_imports)]
pub use capi::*;
#[allow(unused_imports)]
pub use job::*;
#[allow(unused_imports)]
pub use procs::*;
#[allow(unused_imports)]
pub use programs::*;
// Private to the tests but shared by the submodules (stacks.rs).
use programs::build_dir;

use std::sync::{Mutex, MutexGuard};

// ---------------------------------------------------------------------------
// Serialising heavy tests
// ---------------------------------------------------------------------------

static HEAVY: Mutex<()> = Mutex::new(());

/// Hold this for the whole of any test that starts a multi-rank PMI/MPI job.
/// A test that failed while holding it does not poison the others.
pub fn heavy() -> MutexGuard<'static, ()> {
    HEAVY.lock().unwrap_or_else(|e| e.into_inner())
}
