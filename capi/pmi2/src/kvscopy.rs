//! fastpmi's extension for a job's whole KVS in one exchange
//! (`include/fastpmi.h`): `FPMI_KVS_Getall` and `FPMI_KVS_Putall`, over
//! the client's `kvs_getall` and `kvs_putall` (docs/dynamic-jobs.md).

use std::ffi::{c_char, c_int, c_void};

use fastpmi_capi::cbuf;
use fastpmi_capi::codes::*;
use fastpmi_capi::guard;
use fastpmi_capi::session::{current, Ctx};

use crate::MAX_JOBID;

/// What `FPMI_KVS_Getall` calls for each pair: the key and the value
/// (each NUL-terminated, valid during the call), the value's length, and
/// the caller's `arg`; a non-zero return stops the walk.
pub type FpmiPairFn = Option<
    unsafe extern "C" fn(
        key: *const c_char,
        value: *const c_char,
        vallen: c_int,
        arg: *mut c_void,
    ) -> c_int,
>;

/// Every pair of this job's KVS (`jobid` NULL, empty or this job's id) or
/// of a job connected to it, as the server holds them now: `f` is called
/// once per pair, in no particular order; `*npairs` (if not NULL) gets the
/// number of pairs. A non-zero return of `f` stops the walk and is
/// returned. `PMI2_ERR_OTHER` where the server has no `kvs-getall`
/// (Hydra, slurmstepd) or the job is not connected.
///
/// # Safety
/// `jobid` is NULL or a NUL-terminated string; `f` is a function of the
/// [`FpmiPairFn`] type; `npairs` is NULL or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn FPMI_KVS_Getall(
    jobid: *const c_char,
    f: FpmiPairFn,
    arg: *mut c_void,
    npairs: *mut c_int,
) -> c_int {
    guard("FPMI_KVS_Getall", ERR_OTHER, || {
        let s = current()?;
        // SAFETY: caller contract of `jobid`.
        let job = unsafe { cbuf::opt_text(jobid, MAX_JOBID)? };
        let f = f.ok_or(ERR_INVALID_ARG)?;
        let job = if s.is_own_job(job) { None } else { job };
        let pairs = s.pmi.kvs_getall(job).ctx("FPMI_KVS_Getall")?;
        let n = c_int::try_from(pairs.len()).map_err(|_| ERR_NOMEM)?;
        if !npairs.is_null() {
            // SAFETY: non-NULL `npairs` is writable per the caller contract.
            unsafe { cbuf::put(npairs, n)? };
        }
        for (k, v) in pairs {
            let vallen = c_int::try_from(v.len()).map_err(|_| ERR_NOMEM)?;
            // NUL-terminated copies (a value put through the Rust API may
            // hold a NUL: `vallen` is its whole length).
            let (mut k, mut v) = (k, v);
            k.push(0);
            v.push(0);
            // SAFETY: `f` is the caller's function of this type; both
            // buffers are NUL-terminated and outlive the call.
            let rc = unsafe { f(k.as_ptr().cast(), v.as_ptr().cast(), vallen, arg) };
            if rc != 0 {
                return Ok(rc);
            }
        }
        Ok(SUCCESS)
    })
}

/// Put `keys[i]` = `values[i]` for every `i < n` into this job's KVS in one
/// exchange: the server checks every pair before it puts any (a bad pair:
/// none is put). Visible to every rank after the next `PMI2_KVS_Fence`, as
/// `PMI2_KVS_Put`'s. Each key and value as `PMI2_KVS_Put` takes them.
///
/// # Safety
/// With `n > 0`, `keys` and `values` are valid for reading `n` pointers,
/// each NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn FPMI_KVS_Putall(
    keys: *const *const c_char,
    values: *const *const c_char,
    n: c_int,
) -> c_int {
    guard("FPMI_KVS_Putall", ERR_OTHER, || {
        let s = current()?;
        let n = usize::try_from(n).map_err(|_| ERR_INVALID_ARG)?;
        let mut pairs = Vec::with_capacity(n);
        if n > 0 {
            cbuf::non_null(keys)?;
            cbuf::non_null(values)?;
            for i in 0..n {
                // SAFETY: `keys` and `values` hold `n` pointers, each NULL
                // or a NUL-terminated string (caller contract).
                let (k, v) = unsafe { (cbuf::key(*keys.add(i))?, cbuf::value(*values.add(i))?) };
                pairs.push((k, v));
            }
        }
        s.pmi.kvs_putall(&pairs).ctx("FPMI_KVS_Putall")?;
        Ok(SUCCESS)
    })
}
