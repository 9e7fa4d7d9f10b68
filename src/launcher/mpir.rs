//! The MPIR process-acquisition interface (the de-facto debugger ABI that
//! TotalView, Linaro DDT, STAT and gdb scripts read from `mpiexec`): the
//! launcher fills `MPIR_proctable` once every rank of the first job has
//! started, sets `MPIR_debug_state` and calls `MPIR_Breakpoint`, where a
//! debugger that started or attached to the launcher has a breakpoint.
//!
//! These are C symbols read and written by a debugger through ptrace, so
//! they are `#[no_mangle]` mutable statics, accessed only with volatile
//! loads and stores (C ABI glue). They live in the `fastpmi` binary
//! (`src/mpir_symbols.rs`), which hands their addresses to [`install`]: a
//! library symbol would also be exported by the C client libraries.

#![allow(non_upper_case_globals, non_snake_case)]

use std::ffi::{c_char, c_int, CString};

/// `MPIR_debug_state` values.
pub const MPIR_DEBUG_SPAWNED: c_int = 1;
pub const MPIR_DEBUG_ABORTING: c_int = 2;

/// One entry of `MPIR_proctable` (layout fixed by the MPIR specification).
#[repr(C)]
pub struct MPIR_PROCDESC {
    pub host_name: *const c_char,
    pub executable_name: *const c_char,
    pub pid: c_int,
}

/// Where the `fastpmi` binary keeps the MPIR symbols. They are defined in
/// the binary (`src/mpir_symbols.rs`), not in this library, so that the C
/// client libraries built on the library do not export them.
pub struct MpirSymbols {
    pub proctable: *mut *mut MPIR_PROCDESC,
    pub proctable_size: *mut c_int,
    pub debug_state: *mut c_int,
    pub being_debugged: *mut c_int,
    pub debug_abort_string: *mut *const c_char,
    pub breakpoint: extern "C" fn() -> c_int,
}

// SAFETY: the pointers name process-wide statics; they are only written by
// the launcher's event loop (and read or written by a debugger while the
// process is stopped), so sharing the addresses between threads is sound.
unsafe impl Send for MpirSymbols {}
// SAFETY: as above: the struct holds addresses, never dereferenced concurrently.
unsafe impl Sync for MpirSymbols {}

static SYMBOLS: std::sync::OnceLock<MpirSymbols> = std::sync::OnceLock::new();

/// Called once by the `fastpmi` binary with its symbols. Without it (the
/// library used elsewhere) the MPIR interface does nothing.
///
/// # Safety
/// Every pointer is valid for the life of the process, suitably aligned,
/// and written by nobody but this module and a ptrace-stopped debugger.
pub unsafe fn install(symbols: MpirSymbols) {
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
///
/// A debugger may read the table whenever the launcher is stopped: the new
/// array is built completely first, then the pointer is published, then the
/// (larger) size, so every (pointer, size) pair it can see is in bounds.
pub fn extend(entries: Vec<ProcEntry>) -> bool {
    let Some(sym) = SYMBOLS.get() else {
        return false;
    };
    let cstr = |s: String| -> *const c_char {
        let c = CString::new(s.replace('\0', "?")).unwrap_or_default();
        c.into_raw()
    };
    // SAFETY: volatile reads of the statics (see `install`); only this
    // module writes them outside a ptrace stop, and it runs on one thread.
    let (old, old_size) = unsafe {
        (
            std::ptr::read_volatile(sym.proctable),
            std::ptr::read_volatile(sym.proctable_size).max(0) as usize,
        )
    };
    let mut table: Vec<MPIR_PROCDESC> = Vec::with_capacity(old_size + entries.len());
    if !old.is_null() {
        // SAFETY: `old` is the array this module published with `old_size`
        // entries (a leaked boxed slice, see below); the strings it points
        // to are leaked too and stay shared by the new array.
        let prev = unsafe { std::slice::from_raw_parts(old, old_size) };
        table.extend(prev.iter().map(|e| MPIR_PROCDESC {
            host_name: e.host_name,
            executable_name: e.executable_name,
            pid: e.pid,
        }));
    }
    table.extend(entries.into_iter().map(|e| MPIR_PROCDESC {
        host_name: cstr(e.host),
        executable_name: cstr(e.executable),
        pid: e.pid as c_int,
    }));
    let size = table.len() as c_int;
    let table: &'static mut [MPIR_PROCDESC] = Box::leak(table.into_boxed_slice());
    // SAFETY: single-threaded writes of C statics that only this module and
    // a ptrace-stopped debugger touch. Pointer first: the new array is at
    // least as long as the old size, so no stop sees a size past its array.
    unsafe {
        std::ptr::write_volatile(sym.proctable, table.as_mut_ptr());
        std::ptr::write_volatile(sym.proctable_size, size);
        std::ptr::write_volatile(sym.debug_state, MPIR_DEBUG_SPAWNED);
    }
    (sym.breakpoint)();
    if !old.is_null() {
        // The debugger has continued from the breakpoint, where it read the
        // new table: the old array (not its strings) can go.
        // SAFETY: `old` came from `Box::leak` of a boxed slice of exactly
        // `old_size` entries and nothing refers to it any more.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(old, old_size)) });
    }
    being_debugged()
}

/// Whether a debugger set `MPIR_being_debugged`.
pub fn being_debugged() -> bool {
    let Some(sym) = SYMBOLS.get() else {
        return false;
    };
    // SAFETY: volatile read of an int static (see `install`).
    unsafe { std::ptr::read_volatile(sym.being_debugged) != 0 }
}

/// The job is being aborted: tell an attached debugger.
pub fn aborting(why: &str) {
    let Some(sym) = SYMBOLS.get() else {
        return;
    };
    let msg = CString::new(why.replace('\0', "?")).unwrap_or_default();
    // SAFETY: as in `publish`; the string is leaked (once, at exit).
    unsafe {
        std::ptr::write_volatile(sym.debug_abort_string, msg.into_raw());
        std::ptr::write_volatile(sym.debug_state, MPIR_DEBUG_ABORTING);
    }
    (sym.breakpoint)();
}
