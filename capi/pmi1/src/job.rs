//! Start and end of a process's PMI life: `PMI_Init`, `PMI_Initialized`,
//! `PMI_Finalize`, `PMI_Abort`.

use std::ffi::{c_char, c_int};

use fastpmi_capi::cbuf;
use fastpmi_capi::codes::*;
use fastpmi_capi::session::{self, current};

use crate::{guard, MAX_MSG, PMI_FALSE, PMI_TRUE};

/// Initialise PMI; `*spawned` is `PMI_TRUE` if this job was spawned by
/// another. Calling it again is harmless.
///
/// # Safety
/// `spawned` is NULL or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn PMI_Init(spawned: *mut c_int) -> c_int {
    guard("PMI_Init", || {
        cbuf::non_null(spawned)?;
        let s = session::init("PMI_Init").map_err(|_| FAIL)?;
        let v = if s.pmi.spawned() { PMI_TRUE } else { PMI_FALSE };
        // SAFETY: caller contract of `spawned`, checked non-NULL.
        unsafe { cbuf::put(spawned, v)? };
        Ok(SUCCESS)
    })
}

/// `*initialized` = `PMI_TRUE` between `PMI_Init` and `PMI_Finalize`.
///
/// # Safety
/// `initialized` is NULL or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn PMI_Initialized(initialized: *mut c_int) -> c_int {
    guard("PMI_Initialized", || {
        let v = if session::is_initialized() {
            PMI_TRUE
        } else {
            PMI_FALSE
        };
        // SAFETY: caller contract of `initialized` (NULL rejected by `put`).
        unsafe { cbuf::put(initialized, v)? };
        Ok(SUCCESS)
    })
}

/// Leave PMI.
#[no_mangle]
pub extern "C" fn PMI_Finalize() -> c_int {
    guard("PMI_Finalize", || {
        session::finalize("PMI_Finalize")?;
        Ok(SUCCESS)
    })
}

/// End the whole job with `exit_code` (this process exits with it too).
/// Before `PMI_Init`, prints the message and exits.
///
/// # Safety
/// `error_msg` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn PMI_Abort(exit_code: c_int, error_msg: *const c_char) -> c_int {
    guard("PMI_Abort", || {
        // SAFETY: caller contract of `error_msg`.
        let msg = unsafe { cbuf::lossy(error_msg, MAX_MSG) };
        match current() {
            Ok(s) => {
                session::report_abort(&s, "PMI_Abort", exit_code, &msg);
                s.pmi.abort(exit_code, &msg)
            }
            Err(_) => {
                eprintln!("PMI_Abort({exit_code}) before PMI_Init: {msg}");
                std::process::exit(exit_code & 0xff)
            }
        }
    })
}
