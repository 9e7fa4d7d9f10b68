//! The MPIR process-acquisition interface (the de-facto debugger ABI that
//! TotalView, Linaro DDT, STAT and gdb scripts read from `mpiexec`): the
//! launcher fills `MPIR_proctable` once every rank of the first job has
//! started, sets `MPIR_debug_state` and calls `MPIR_Breakpoint`, where a
//! debugger that started or attached to the launcher has a breakpoint.
//!
//! This module decides when and what; the C symbols themselves (and all
//! the raw-pointer code that touches them) are in the `fastpmi-mpir` crate
//! (`mpir/`), which only the `fastpmi` binary links: a symbol of this
//! library would also be exported by the C client libraries. The binary
//! hands this module a safe [`Symbols`] implementation with [`install`].

use std::sync::OnceLock;

/// `MPIR_debug_state` values.
pub const MPIR_DEBUG_SPAWNED: i32 = 1;
pub const MPIR_DEBUG_ABORTING: i32 = 2;

/// The MPIR symbols of the `fastpmi` binary, as safe operations.
pub trait Symbols: Send + Sync {
    /// Append ranks to `MPIR_proctable` (pointer published before the
    /// larger size, so a stopped debugger never reads out of bounds).
    fn append_proctable(&self, entries: &[ProcEntry]);
    /// Set `MPIR_debug_state`.
    fn set_debug_state(&self, state: i32);
    /// Set `MPIR_debug_abort_string`.
    fn set_abort_string(&self, why: &str);
    /// Whether a debugger set `MPIR_being_debugged`.
    fn being_debugged(&self) -> bool;
    /// Call `MPIR_Breakpoint`; returns once a debugger there has continued.
    fn breakpoint(&self);
}

static SYMBOLS: OnceLock<&'static dyn Symbols> = OnceLock::new();

/// Called once by the `fastpmi` binary with its symbols. Without it (the
/// library used elsewhere) the MPIR interface does nothing.
pub fn install(symbols: &'static dyn Symbols) {
    let _ = SYMBOLS.set(symbols);
}

/// One rank for the table.
pub struct ProcEntry {
    pub host: String,
    pub executable: String,
    pub pid: u32,
}

/// Publish the proc table of the first job, announce `MPIR_DEBUG_SPAWNED`
/// and call `MPIR_Breakpoint`. Returns whether a debugger set
/// `MPIR_being_debugged` (it has continued by now).
pub fn publish(entries: Vec<ProcEntry>) -> bool {
    extend(entries)
}

/// Append a spawned job's ranks to the proc table (as Open MPI and PRRTE do
/// on comm_spawn), announce `MPIR_DEBUG_SPAWNED` again and call
/// `MPIR_Breakpoint`, so a debugger attaches to the new processes too.
/// Returns whether a debugger set `MPIR_being_debugged`.
pub fn extend(entries: Vec<ProcEntry>) -> bool {
    let Some(sym) = SYMBOLS.get() else {
        return false;
    };
    sym.append_proctable(&entries);
    sym.set_debug_state(MPIR_DEBUG_SPAWNED);
    sym.breakpoint();
    sym.being_debugged()
}

/// Whether a debugger set `MPIR_being_debugged`.
pub fn being_debugged() -> bool {
    SYMBOLS.get().is_some_and(|sym| sym.being_debugged())
}

/// The job is being aborted: tell an attached debugger.
pub fn aborting(why: &str) {
    let Some(sym) = SYMBOLS.get() else {
        return;
    };
    sym.set_abort_string(why);
    sym.set_debug_state(MPIR_DEBUG_ABORTING);
    sym.breakpoint();
}
