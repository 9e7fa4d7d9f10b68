//! The MPIR process-acquisition interface (the de-facto debugger ABI that
//! TotalView, Linaro DDT, STAT and gdb scripts read from `mpiexec`): the
//! launcher fills `MPIR_proctable` once every rank of the first job has
//! started, sets `MPIR_debug_state` and calls `MPIR_Breakpoint`, where a
//! debugger that started or attached to the launcher has a breakpoint.
//!
//! These are C symbols read and written by a debugger through ptrace, so
//! they are `#[no_mangle]` mutable statics, accessed only with volatile
//! loads and stores (this module is C ABI glue: the only unsafe code in the
//! launcher outside process spawning). `#[used]` and the volatile accesses
//! keep them, and the calls to `MPIR_Breakpoint`, in release builds.

#![allow(non_upper_case_globals, non_snake_case)]

use std::ffi::{c_char, c_int, CString};
use std::ptr::{addr_of, addr_of_mut};

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

#[no_mangle]
#[used]
pub static mut MPIR_proctable: *mut MPIR_PROCDESC = std::ptr::null_mut();
#[no_mangle]
#[used]
pub static mut MPIR_proctable_size: c_int = 0;
#[no_mangle]
#[used]
pub static mut MPIR_debug_state: c_int = 0;
/// Set by a debugger that wants the job held until it continues.
#[no_mangle]
#[used]
pub static mut MPIR_being_debugged: c_int = 0;
#[no_mangle]
#[used]
pub static mut MPIR_debug_abort_string: *const c_char = std::ptr::null();
/// Present (as in Hydra): the starter is not itself a rank.
#[no_mangle]
#[used]
pub static mut MPIR_i_am_starter: c_int = 1;
/// Present (as in Hydra): a debugger may attach to a subset of the ranks.
#[no_mangle]
#[used]
pub static mut MPIR_partial_attach_ok: c_int = 1;

/// Where a debugger sets its breakpoint. Never inlined; the volatile read
/// keeps the compiler from deciding the call does nothing.
#[no_mangle]
#[inline(never)]
pub extern "C" fn MPIR_Breakpoint() -> c_int {
    // SAFETY: a plain volatile read of an int static; a debugger may write
    // it concurrently only while this process is stopped.
    unsafe { std::ptr::read_volatile(addr_of!(MPIR_debug_state)) }
}

/// One rank for the table.
pub struct ProcEntry {
    pub host: String,
    pub executable: String,
    pub pid: u32,
}

/// Publish the proc table (once; the memory lives as long as the process),
/// announce `MPIR_DEBUG_SPAWNED` and call `MPIR_Breakpoint`. Returns whether
/// a debugger set `MPIR_being_debugged` (it has continued by now).
pub fn publish(entries: Vec<ProcEntry>) -> bool {
    let cstr = |s: String| -> *const c_char {
        let c = CString::new(s.replace('\0', "?")).unwrap_or_default();
        c.into_raw()
    };
    let table: Vec<MPIR_PROCDESC> = entries
        .into_iter()
        .map(|e| MPIR_PROCDESC {
            host_name: cstr(e.host),
            executable_name: cstr(e.executable),
            pid: e.pid as c_int,
        })
        .collect();
    let size = table.len() as c_int;
    let table: &'static mut [MPIR_PROCDESC] = Box::leak(table.into_boxed_slice());
    // SAFETY: single-threaded writes of C statics that only the event loop
    // and a ptrace-stopped debugger touch; the table is leaked, so the
    // pointer stays valid for the life of the process.
    unsafe {
        std::ptr::write_volatile(addr_of_mut!(MPIR_proctable), table.as_mut_ptr());
        std::ptr::write_volatile(addr_of_mut!(MPIR_proctable_size), size);
        std::ptr::write_volatile(addr_of_mut!(MPIR_debug_state), MPIR_DEBUG_SPAWNED);
    }
    MPIR_Breakpoint();
    being_debugged()
}

/// Whether a debugger set `MPIR_being_debugged`.
pub fn being_debugged() -> bool {
    // SAFETY: volatile read of an int static (see `MPIR_Breakpoint`).
    unsafe { std::ptr::read_volatile(addr_of!(MPIR_being_debugged)) != 0 }
}

/// The job is being aborted: tell an attached debugger.
pub fn aborting(why: &str) {
    let msg = CString::new(why.replace('\0', "?")).unwrap_or_default();
    // SAFETY: as in `publish`; the string is leaked (once, at exit).
    unsafe {
        std::ptr::write_volatile(addr_of_mut!(MPIR_debug_abort_string), msg.into_raw());
        std::ptr::write_volatile(addr_of_mut!(MPIR_debug_state), MPIR_DEBUG_ABORTING);
    }
    MPIR_Breakpoint();
}
