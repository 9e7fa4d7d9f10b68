//! This job's keyval space: its name and limits, `PMI_KVS_Put`,
//! `PMI_KVS_Commit`, `PMI_KVS_Get`, and `PMI_Barrier` (a PMI-2 fence).

use std::ffi::{c_char, c_int};

use fastpmi_capi::cbuf;
use fastpmi_capi::codes::*;
use fastpmi_capi::session::{current, Ctx};

use crate::{const_out, guard, name_out, own_kvs};

/// Barrier over the job (a PMI-2 fence): afterwards every put made before
/// it by any rank is visible to every rank.
#[no_mangle]
pub extern "C" fn PMI_Barrier() -> c_int {
    guard("PMI_Barrier", || {
        current()?.pmi.fence().ctx("PMI_Barrier")?;
        Ok(SUCCESS)
    })
}

/// The name of this job's keyval space (its job id).
///
/// # Safety
/// `kvsname` is NULL or valid for writing `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn PMI_KVS_Get_my_name(kvsname: *mut c_char, length: c_int) -> c_int {
    guard("PMI_KVS_Get_my_name", || {
        let s = current()?;
        // SAFETY: forwarded caller contract.
        unsafe { name_out(kvsname, length, s.pmi.job_id()) }
    })
}

/// Buffer size for a keyval space name (NUL included): 256.
///
/// # Safety
/// `length` is NULL or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn PMI_KVS_Get_name_length_max(length: *mut c_int) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { const_out("PMI_KVS_Get_name_length_max", length, MAX_NAMELEN) }
}

/// Longest key: 64.
///
/// # Safety
/// `length` is NULL or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn PMI_KVS_Get_key_length_max(length: *mut c_int) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { const_out("PMI_KVS_Get_key_length_max", length, MAX_KEYLEN) }
}

/// Longest value: 1024.
///
/// # Safety
/// `length` is NULL or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn PMI_KVS_Get_value_length_max(length: *mut c_int) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { const_out("PMI_KVS_Get_value_length_max", length, MAX_VALLEN) }
}

/// Put `key` = `value` into this job's keyval space (`kvsname` must be its
/// name); visible to all after the next `PMI_Barrier`.
///
/// # Safety
/// `kvsname`, `key` and `value` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn PMI_KVS_Put(
    kvsname: *const c_char,
    key: *const c_char,
    value: *const c_char,
) -> c_int {
    guard("PMI_KVS_Put", || {
        // SAFETY: caller contract of the three strings.
        let (s, k, v) = unsafe {
            (
                own_kvs(kvsname, "PMI_KVS_Put")?,
                cbuf::key(key)?,
                cbuf::value(value)?,
            )
        };
        s.pmi.put(k, v).ctx("PMI_KVS_Put")?;
        Ok(SUCCESS)
    })
}

/// Nothing to do: a put is complete when `PMI_KVS_Put` returns (PMI-2
/// semantics). Checks `kvsname`.
///
/// # Safety
/// `kvsname` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn PMI_KVS_Commit(kvsname: *const c_char) -> c_int {
    guard("PMI_KVS_Commit", || {
        // SAFETY: caller contract of `kvsname`.
        unsafe { own_kvs(kvsname, "PMI_KVS_Commit")? };
        Ok(SUCCESS)
    })
}

/// Get `key` from this job's keyval space into `value[length]`. Not found:
/// `PMI_FAIL`; does not fit: truncated, `PMI_ERR_INVALID_LENGTH`. Keys that
/// PMI-1 servers answer from the job (`PMI_process_mapping`, any other
/// `PMI_*` key, `universeSize`) are read as PMI-2 job attributes first.
///
/// # Safety
/// `kvsname` and `key` are NULL or NUL-terminated strings; `value` is NULL
/// or valid for writing `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn PMI_KVS_Get(
    kvsname: *const c_char,
    key: *const c_char,
    value: *mut c_char,
    length: c_int,
) -> c_int {
    guard("PMI_KVS_Get", || {
        // SAFETY: caller contract of `kvsname` and `key`.
        let (s, k) = unsafe { (own_kvs(kvsname, "PMI_KVS_Get")?, cbuf::key(key)?) };
        cbuf::non_null(value)?;
        let cap = cbuf::capacity(length)?;
        // PMI-1 clients read job attributes as keys of the KVS
        // (`PMI_process_mapping`, `universeSize`): PMI-2 job attributes.
        let attr = if k.starts_with(b"PMI_") || k == b"universeSize" {
            s.pmi.job_attr(k).ctx("PMI_KVS_Get")?
        } else {
            None
        };
        let got = match attr {
            Some(v) => Some(v),
            None => s.pmi.get(k, None).ctx("PMI_KVS_Get")?,
        };
        let Some(v) = got else {
            tracing::debug!("PMI_KVS_Get: {} not found", String::from_utf8_lossy(k));
            return Err(FAIL);
        };
        // SAFETY: non-NULL, `cap` bytes writable per the caller contract.
        let fits = unsafe { cbuf::copy_out(value, cap, &v) };
        Ok(if fits { SUCCESS } else { ERR_INVALID_LENGTH })
    })
}
