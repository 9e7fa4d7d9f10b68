//! The job's key-value store: `PMI2_KVS_Put`, `PMI2_KVS_Fence`,
//! `PMI2_KVS_Get`, and the ring exchange built on it (`PMIX_Ring`).

use std::ffi::{c_char, c_int};

use fastpmi_capi::cbuf;
use fastpmi_capi::codes::*;
use fastpmi_capi::guard;
use fastpmi_capi::session::{current, Ctx};
use fastpmi_client::TransportKind;

use crate::{ID_NULL, MAX_JOBID};

/// Put `key` = `value` into this job's KVS; visible to every rank after the
/// next `PMI2_KVS_Fence`. A key put twice keeps the last value.
///
/// # Safety
/// `key` and `value` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn PMI2_KVS_Put(key: *const c_char, value: *const c_char) -> c_int {
    guard("PMI2_KVS_Put", ERR_OTHER, || {
        let s = current()?;
        // SAFETY: caller contract of `key` and `value`.
        let (k, v) = unsafe { (cbuf::key(key)?, cbuf::value(value)?) };
        s.pmi.put(k, v).ctx("PMI2_KVS_Put")?;
        Ok(SUCCESS)
    })
}

/// Barrier over the job; afterwards every put made before any rank's fence
/// is visible to every rank.
#[no_mangle]
pub extern "C" fn PMI2_KVS_Fence() -> c_int {
    guard("PMI2_KVS_Fence", ERR_OTHER, || {
        let s = current()?;
        s.pmi.fence().ctx("PMI2_KVS_Fence")?;
        Ok(SUCCESS)
    })
}

/// Get `key` from job `jobid` (NULL, empty or this job's id: this job);
/// `src_pmi_id` is the putting rank if known, else `PMI2_ID_NULL`.
///
/// Found: the value is copied NUL-terminated into `value[maxvalue]` and
/// `*vallen` is its length; if it does not fit it is truncated to
/// `maxvalue - 1` bytes and `*vallen` is minus its length (as Slurm's and
/// MPICH's clients do), still `PMI2_SUCCESS`. Not found: `PMI2_ERR_OTHER`
/// (as Slurm's client), `value` empty and `*vallen` 0.
///
/// # Safety
/// `jobid` and `key` are NULL or NUL-terminated strings; `value` is NULL or
/// valid for writing `maxvalue` bytes; `vallen` is NULL or valid for writing
/// one `int`.
#[no_mangle]
pub unsafe extern "C" fn PMI2_KVS_Get(
    jobid: *const c_char,
    src_pmi_id: c_int,
    key: *const c_char,
    value: *mut c_char,
    maxvalue: c_int,
    vallen: *mut c_int,
) -> c_int {
    guard("PMI2_KVS_Get", ERR_OTHER, || {
        let s = current()?;
        // SAFETY: caller contract of `jobid` and `key`.
        let (job, k) = unsafe { (cbuf::opt_text(jobid, MAX_JOBID)?, cbuf::key(key)?) };
        cbuf::non_null(value)?;
        cbuf::non_null(vallen)?;
        let cap = cbuf::capacity(maxvalue)?;
        let src = (src_pmi_id != ID_NULL && src_pmi_id >= 0).then_some(src_pmi_id as u32);
        // Fills the caller's buffer straight from the segment (no copy in
        // between): the get/fence hot path of every PMI-2 program.
        let fill = |got: Option<&[u8]>| -> Result<c_int, c_int> {
            // SAFETY: `value` (non-NULL, `cap` bytes) and `vallen` (non-NULL)
            // are writable per the caller contract.
            unsafe {
                match got {
                    Some(v) => {
                        let len = v.len().min(c_int::MAX as usize) as c_int;
                        let fits = cbuf::copy_out(value, cap, v);
                        cbuf::put(vallen, if fits { len } else { -len })?;
                        Ok(SUCCESS)
                    }
                    None => {
                        tracing::debug!("PMI2_KVS_Get: {} not found", String::from_utf8_lossy(k));
                        cbuf::copy_out(value, cap, b"");
                        cbuf::put(vallen, 0)?;
                        Err(ERR_OTHER)
                    }
                }
            }
        };
        if s.is_own_job(job) {
            s.pmi.get_with(None, k, src, fill).ctx("PMI2_KVS_Get")?
        } else if s.pmi.transport() == TransportKind::Singleton {
            // A singleton has no other jobs (its client store has one KVS).
            fill(None)
        } else {
            s.pmi.get_with(job, k, src, fill).ctx("PMI2_KVS_Get")?
        }
    })
}

/// Ring exchange: every rank of the job calls it with its `value` (shorter
/// than `maxvalue` and than `PMI2_MAX_VALLEN`); each gets its rank and the
/// job size, and the values of rank - 1 (`left`) and rank + 1 (`right`),
/// modulo the size. Done over the KVS: put, fence, two gets. A neighbour's
/// value that does not fit `maxvalue` is truncated (`PMI2_ERR_NOMEM`).
///
/// # Safety
/// `value` is NULL or a NUL-terminated string; `rank` and `ranks` are NULL
/// or valid for writing one `int`; `left` and `right` are NULL or valid
/// for writing `maxvalue` bytes.
#[no_mangle]
pub unsafe extern "C" fn PMIX_Ring(
    value: *const c_char,
    rank: *mut c_int,
    ranks: *mut c_int,
    left: *mut c_char,
    right: *mut c_char,
    maxvalue: c_int,
) -> c_int {
    guard("PMIX_Ring", ERR_OTHER, || {
        let s = current()?;
        cbuf::non_null(rank)?;
        cbuf::non_null(ranks)?;
        cbuf::non_null(left)?;
        cbuf::non_null(right)?;
        let cap = cbuf::capacity(maxvalue)?;
        // The stored value carries a one-byte prefix: at most
        // MAX_VALLEN - 1 bytes of the caller's, and shorter than `cap`.
        let max = (cap - 1).min(MAX_VALLEN - 1);
        // SAFETY: caller contract of `value`.
        let v = unsafe { cbuf::value_max(value, max)? };
        let (l, r) = s.ring(v)?;
        // SAFETY: all four outputs checked non-NULL; `left` and `right`
        // hold `cap` writable bytes per the caller contract.
        unsafe {
            cbuf::put(rank, s.rank() as c_int)?;
            cbuf::put(ranks, s.size() as c_int)?;
            let fits_l = cbuf::copy_out(left, cap, &l);
            let fits_r = cbuf::copy_out(right, cap, &r);
            Ok(if fits_l && fits_r { SUCCESS } else { ERR_NOMEM })
        }
    })
}
