//! `libpmi.so.0`: the PMI-1 C API (MPICH's `pmi.h`, plus the extensions of
//! Slurm's: clique, id, and the unimplemented-everywhere rest) on fastpmi's
//! PMI-2 client. fastpmi's header is `include/pmi.h`.
//!
//! PMI-1 on PMI-2: `PMI_KVS_Put` is a put, `PMI_KVS_Commit` does nothing
//! (a put is complete when it returns), `PMI_Barrier` is a fence, and the
//! only keyval space is this job's (its name is the job id): naming another
//! one is `PMI_ERR_INVALID_ARG`. The clique is every rank of the job on this
//! node (`localRanks`, or derived from `PMI_process_mapping`).
//!
//! Conventions: a call before `PMI_Init` (or after `PMI_Finalize`) returns
//! `PMI_ERR_INIT`; a NULL pointer `PMI_ERR_INVALID_ARG`; a key longer than
//! 64 bytes `PMI_ERR_INVALID_KEY_LENGTH`, an empty key or one with `=`,
//! `;` or a blank `PMI_ERR_INVALID_KEY`; a value longer than 1024 bytes
//! `PMI_ERR_INVALID_VAL_LENGTH`; a buffer length `<= 0` or too small for
//! the result `PMI_ERR_INVALID_LENGTH` (the result is then truncated and
//! NUL-terminated); any other failure `PMI_FAIL` (reason in the debug log,
//! `FASTPMI_LOG=debug`). No panic crosses into C.
//!
//! Every `unsafe` block dereferences pointers handed in by the C caller,
//! under the contract of the function's `# Safety` section.
#![allow(non_snake_case)]
#![deny(unsafe_op_in_unsafe_fn)]

mod info;
mod job;
mod kvs;
mod nameserv;
mod spawn;
mod unsupported;

pub use info::*;
pub use job::*;
pub use kvs::*;
pub use nameserv::*;
pub use spawn::*;
pub use unsupported::*;

use std::ffi::{c_char, c_int};
use std::sync::Arc;

use fastpmi_capi::cbuf;
use fastpmi_capi::codes::{self, *};
use fastpmi_capi::session::{current, Session};

const PMI_TRUE: c_int = 1;
const PMI_FALSE: c_int = 0;
const MAX_MSG: usize = 4096;

/// [`fastpmi_capi::guard`] with PMI-1 codes (`ERR_OTHER` becomes
/// `PMI_FAIL`).
fn guard(what: &str, f: impl FnOnce() -> Result<c_int, c_int>) -> c_int {
    codes::to_pmi1(fastpmi_capi::guard(what, FAIL, f))
}

/// The session, after checking that `kvsname` names this job's keyval space.
///
/// # Safety
/// `kvsname` is NULL or a NUL-terminated string.
unsafe fn own_kvs(kvsname: *const c_char, what: &str) -> Result<Arc<Session>, c_int> {
    let s = current()?;
    // SAFETY: caller contract of `kvsname`.
    let name = unsafe { cbuf::text(kvsname, MAX_NAMELEN) }.map_err(|_| ERR_INVALID_ARG)?;
    if !s.is_own_job(Some(name)) || name.is_empty() {
        tracing::debug!(
            "{what}: keyval space {name:?} is not this job's ({})",
            s.pmi.job_id()
        );
        return Err(ERR_INVALID_ARG);
    }
    Ok(s)
}

/// Copy a name result; too small a buffer is `PMI_ERR_INVALID_LENGTH`.
///
/// # Safety
/// `dst` is NULL or valid for writing `length` bytes.
unsafe fn name_out(dst: *mut c_char, length: c_int, src: &str) -> Result<c_int, c_int> {
    cbuf::non_null(dst)?;
    let cap = cbuf::capacity(length)?;
    // SAFETY: non-NULL and `cap` bytes writable per the caller contract.
    let fits = unsafe { cbuf::copy_out(dst, cap, src.as_bytes()) };
    Ok(if fits { SUCCESS } else { ERR_INVALID_LENGTH })
}

/// Store one `int` result of the current session.
///
/// # Safety
/// `out` is NULL or valid for writing one `int`.
unsafe fn int_out(
    what: &str,
    out: *mut c_int,
    f: impl FnOnce(&Session) -> Result<c_int, c_int>,
) -> c_int {
    guard(what, || {
        let s = current()?;
        cbuf::non_null(out)?;
        let v = f(&s)?;
        // SAFETY: caller contract of `out`, checked non-NULL.
        unsafe { cbuf::put(out, v)? };
        Ok(SUCCESS)
    })
}

/// Store a constant length (no init needed).
///
/// # Safety
/// `out` is NULL or valid for writing one `int`.
unsafe fn const_out(what: &str, out: *mut c_int, v: usize) -> c_int {
    guard(what, || {
        // SAFETY: caller contract of `out` (NULL rejected by `put`).
        unsafe { cbuf::put(out, v as c_int)? };
        Ok(SUCCESS)
    })
}

/// Key/value pair of the spawn and option functions (`pmi.h`).
#[repr(C)]
pub struct PMI_keyval_t {
    pub key: *const c_char,
    pub val: *mut c_char,
}

impl fastpmi_capi::spawn::Pair for PMI_keyval_t {
    fn key(&self) -> *const c_char {
        self.key
    }
    fn value(&self) -> *const c_char {
        self.val
    }
}
