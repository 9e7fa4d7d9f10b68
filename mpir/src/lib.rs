//! The MPIR process-acquisition symbols (the de-facto debugger ABI that
//! TotalView, Linaro DDT, STAT and gdb scripts read from `mpiexec` through
//! ptrace), behind a safe API.
//!
//! Only the `fastpmi` binary depends on this crate: a `#[no_mangle]` item
//! of a crate that the C client libraries link (the `fastpmi` library,
//! `capi/core`, `pmi1`, `pmi2`) would be exported by `libpmi2.so.0` and
//! `libpmi.so.0` too. The binary forwards these functions to
//! `fastpmi::launcher::mpir`, which decides when to call them.
//!
//! The statics are written only through this API (on the launcher's event
//! loop) and by a debugger while the process is stopped, always with
//! volatile accesses; `#[used]` and those accesses keep them, and the calls
//! to `MPIR_Breakpoint`, in release builds.

#![allow(non_upper_case_globals, non_snake_case)]

use std::ffi::{c_char, c_int, CString};
use std::ptr::{addr_of, addr_of_mut};
use std::sync::Mutex;

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
    // it only while this process is stopped.
    unsafe { std::ptr::read_volatile(addr_of!(MPIR_debug_state)) }
}

/// What the published pointers point to, kept alive here.
struct Storage {
    /// Every host and executable name of the table. A `CString` owns its
    /// heap buffer, so the pointers stay valid when this vector grows.
    strings: Vec<CString>,
    /// The array `MPIR_proctable` points to.
    table: Vec<MPIR_PROCDESC>,
    /// Arrays replaced since the last breakpoint: a debugger stopped before
    /// it may still read them, so they go only once it has continued.
    retired: Vec<Vec<MPIR_PROCDESC>>,
    /// What `MPIR_debug_abort_string` points to.
    abort: Option<CString>,
}

// SAFETY: the raw pointers in the arrays point into `strings` of the same
// `Storage`, which moves only as a whole behind the mutex below.
unsafe impl Send for Storage {}

static STORAGE: Mutex<Storage> = Mutex::new(Storage {
    strings: Vec::new(),
    table: Vec::new(),
    retired: Vec::new(),
    abort: None,
});

fn storage() -> std::sync::MutexGuard<'static, Storage> {
    // The storage stays consistent at every step, so a poisoned lock is fine.
    STORAGE.lock().unwrap_or_else(|e| e.into_inner())
}

fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', "?")).unwrap_or_default()
}

/// One process for the table.
pub struct Proc<'a> {
    pub host: &'a str,
    pub executable: &'a str,
    pub pid: c_int,
}

/// Append processes to `MPIR_proctable` (the first call publishes it).
///
/// A debugger may read the table whenever the process is stopped: the new
/// array is built completely first, then the pointer is published, then the
/// (larger) size, so every (pointer, size) pair it can see is in bounds. The
/// old array is kept until the next [`breakpoint`].
pub fn append_proctable<'a>(procs: impl IntoIterator<Item = Proc<'a>>) {
    let mut st = storage();
    let st = &mut *st;
    let mut table: Vec<MPIR_PROCDESC> = Vec::with_capacity(st.table.len());
    table.extend(st.table.iter().map(|e| MPIR_PROCDESC {
        host_name: e.host_name,
        executable_name: e.executable_name,
        pid: e.pid,
    }));
    for p in procs {
        let host = c_string(p.host);
        let exe = c_string(p.executable);
        table.push(MPIR_PROCDESC {
            host_name: host.as_ptr(),
            executable_name: exe.as_ptr(),
            pid: p.pid,
        });
        st.strings.push(host);
        st.strings.push(exe);
    }
    let size = table.len() as c_int;
    // Moving a Vec (into `st.table`, later `st.retired`) keeps its buffer.
    let ptr = table.as_mut_ptr();
    st.retired.push(std::mem::replace(&mut st.table, table));
    // SAFETY: volatile writes of C statics that only this module (under the
    // storage lock) and a ptrace-stopped debugger touch. Pointer first: the
    // new array is at least as long as the old size, so no stop sees a size
    // past its array. `ptr` stays valid: the array is kept in `st.table`.
    unsafe {
        std::ptr::write_volatile(addr_of_mut!(MPIR_proctable), ptr);
        std::ptr::write_volatile(addr_of_mut!(MPIR_proctable_size), size);
    }
}

/// Set `MPIR_debug_state` ([`MPIR_DEBUG_SPAWNED`], [`MPIR_DEBUG_ABORTING`]).
pub fn set_debug_state(state: c_int) {
    // SAFETY: volatile write of an int static that only this module and a
    // ptrace-stopped debugger touch.
    unsafe { std::ptr::write_volatile(addr_of_mut!(MPIR_debug_state), state) }
}

/// Set `MPIR_debug_abort_string` (a copy is kept for the life of the process).
pub fn set_abort_string(why: &str) {
    let mut st = storage();
    let msg = c_string(why);
    let ptr = msg.as_ptr();
    // The previous string is not freed: a debugger may have read its address.
    if let Some(old) = st.abort.replace(msg) {
        std::mem::forget(old);
    }
    // SAFETY: volatile write of a pointer static that only this module
    // (under the storage lock) and a ptrace-stopped debugger touch; `ptr`
    // stays valid, its string is kept in `st.abort` or leaked.
    unsafe { std::ptr::write_volatile(addr_of_mut!(MPIR_debug_abort_string), ptr) }
}

/// Whether a debugger set `MPIR_being_debugged`.
pub fn being_debugged() -> bool {
    // SAFETY: volatile read of an int static that only a ptrace-stopped
    // debugger writes.
    unsafe { std::ptr::read_volatile(addr_of!(MPIR_being_debugged)) != 0 }
}

/// Call `MPIR_Breakpoint`, where a debugger that started or attached to
/// this process stops. Once it has continued, it has read the current
/// table: the arrays it replaced (not their strings) are freed.
pub fn breakpoint() {
    MPIR_Breakpoint();
    storage().retired.clear();
}
