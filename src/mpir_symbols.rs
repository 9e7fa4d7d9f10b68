//! The MPIR symbols of the `fastpmi` binary (see `fastpmi::launcher::mpir`):
//! defined here, in the binary, so that only the launcher exports them.
//! `#[used]` and the volatile accesses keep them, and the calls to
//! `MPIR_Breakpoint`, in release builds.

#![allow(non_upper_case_globals, non_snake_case)]

use std::ffi::{c_char, c_int};
use std::ptr::{addr_of, addr_of_mut};

use fastpmi::launcher::mpir::{self, MPIR_PROCDESC};

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

/// Hand the symbols' addresses to the launcher.
pub fn install() {
    // SAFETY: the addresses are of this binary's statics (valid for the
    // life of the process); only the launcher's event loop and a stopped
    // debugger write them.
    unsafe {
        mpir::install(mpir::MpirSymbols {
            proctable: addr_of_mut!(MPIR_proctable),
            proctable_size: addr_of_mut!(MPIR_proctable_size),
            debug_state: addr_of_mut!(MPIR_debug_state),
            being_debugged: addr_of_mut!(MPIR_being_debugged),
            debug_abort_string: addr_of_mut!(MPIR_debug_abort_string),
            breakpoint: MPIR_Breakpoint,
        });
    }
}
