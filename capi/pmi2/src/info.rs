//! Node and job attributes (`PMI2_Info_*`): the node's size, string and
//! integer-array getters, and node attribute puts.

use std::ffi::{c_char, c_int};

use fastpmi_capi::cbuf;
use fastpmi_capi::codes::*;
use fastpmi_capi::guard;
use fastpmi_capi::session::{current, Ctx};

/// Number of this job's processes on this node.
///
/// # Safety
/// `size` is NULL or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn PMI2_Info_GetSize(size: *mut c_int) -> c_int {
    guard("PMI2_Info_GetSize", ERR_OTHER, || {
        let s = current()?;
        cbuf::non_null(size)?;
        let n = s.local_ranks().len() as c_int;
        // SAFETY: caller contract of `size`, checked non-NULL.
        unsafe { cbuf::put(size, n)? };
        Ok(SUCCESS)
    })
}

/// Shared by the node and job attribute string getters.
///
/// # Safety
/// As [`PMI2_Info_GetNodeAttr`].
unsafe fn attr_out(
    got: Option<Vec<u8>>,
    value: *mut c_char,
    cap: usize,
    found: *mut c_int,
) -> Result<c_int, c_int> {
    // SAFETY: the callers checked both pointers non-NULL; `value` holds
    // `cap` writable bytes per their caller contract.
    unsafe {
        match got {
            Some(v) => {
                cbuf::put(found, 1)?;
                Ok(if cbuf::copy_out(value, cap, &v) {
                    SUCCESS
                } else {
                    ERR_NOMEM
                })
            }
            None => {
                cbuf::put(found, 0)?;
                Ok(SUCCESS)
            }
        }
    }
}

/// Node attribute `name`: `*found` 1 and the value in `value[valuelen]`
/// (truncated: `PMI2_ERR_NOMEM`), or `*found` 0. With `waitfor` non-zero,
/// waits until some rank of the node puts it (never returns found 0).
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `value` is NULL or valid for
/// writing `valuelen` bytes; `found` is NULL or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn PMI2_Info_GetNodeAttr(
    name: *const c_char,
    value: *mut c_char,
    valuelen: c_int,
    found: *mut c_int,
    waitfor: c_int,
) -> c_int {
    guard("PMI2_Info_GetNodeAttr", ERR_OTHER, || {
        let s = current()?;
        // SAFETY: caller contract of `name`.
        let k = unsafe { cbuf::key(name)? };
        cbuf::non_null(value)?;
        cbuf::non_null(found)?;
        let cap = cbuf::capacity(valuelen)?;
        let got = s
            .pmi
            .get_node_attr(k, waitfor != 0)
            .ctx("PMI2_Info_GetNodeAttr")?;
        // SAFETY: forwarded caller contract (pointers checked above).
        unsafe { attr_out(got, value, cap, found) }
    })
}

/// The integer-array getters (node attribute if `node`, else job), guard
/// included: up to `arraylen` elements of the comma-separated attribute
/// (more are cut, as in MPICH's client).
///
/// # Safety
/// As [`PMI2_Info_GetNodeAttrIntArray`].
unsafe fn int_array(
    node: bool,
    what: &str,
    name: *const c_char,
    array: *mut c_int,
    arraylen: c_int,
    outlen: *mut c_int,
    found: *mut c_int,
) -> c_int {
    guard(what, ERR_OTHER, || {
        let s = current()?;
        // SAFETY: caller contract of `name`.
        let k = unsafe { cbuf::key(name)? };
        cbuf::non_null(array)?;
        cbuf::non_null(outlen)?;
        cbuf::non_null(found)?;
        let cap = cbuf::capacity(arraylen)?;
        let got = s.int_array(node, k, what);
        // SAFETY: `array` holds `cap` ints, `outlen` and `found` one each, all
        // non-NULL and writable per the caller contract.
        unsafe {
            match got? {
                Some(v) => {
                    let n = v.len().min(cap);
                    std::ptr::copy_nonoverlapping(v.as_ptr(), array, n);
                    cbuf::put(outlen, n as c_int)?;
                    cbuf::put(found, 1)?;
                }
                None => {
                    cbuf::put(outlen, 0)?;
                    cbuf::put(found, 0)?;
                }
            }
        }
        Ok(SUCCESS)
    })
}

/// Node attribute `name` as an array of ints (`localRanksCount`,
/// `localRanks`): `*found`, and `*outlen` elements in `array[arraylen]`.
/// Never waits. A value that is not a comma-separated list of ints is
/// `PMI2_ERR_OTHER`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `array` is NULL or valid for
/// writing `arraylen` ints; `outlen` and `found` are NULL or valid for
/// writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn PMI2_Info_GetNodeAttrIntArray(
    name: *const c_char,
    array: *mut c_int,
    arraylen: c_int,
    outlen: *mut c_int,
    found: *mut c_int,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        int_array(
            true,
            "PMI2_Info_GetNodeAttrIntArray",
            name,
            array,
            arraylen,
            outlen,
            found,
        )
    }
}

/// Put node attribute `name` = `value`, for the ranks on this node.
///
/// # Safety
/// `name` and `value` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn PMI2_Info_PutNodeAttr(name: *const c_char, value: *const c_char) -> c_int {
    guard("PMI2_Info_PutNodeAttr", ERR_OTHER, || {
        let s = current()?;
        // SAFETY: caller contract of `name` and `value`.
        let (k, v) = unsafe { (cbuf::key(name)?, cbuf::value(value)?) };
        s.pmi.put_node_attr(k, v).ctx("PMI2_Info_PutNodeAttr")?;
        Ok(SUCCESS)
    })
}

/// Job attribute `name` (`PMI_process_mapping`, `universeSize`, ...):
/// `*found` and the value as for [`PMI2_Info_GetNodeAttr`].
///
/// # Safety
/// As [`PMI2_Info_GetNodeAttr`].
#[no_mangle]
pub unsafe extern "C" fn PMI2_Info_GetJobAttr(
    name: *const c_char,
    value: *mut c_char,
    valuelen: c_int,
    found: *mut c_int,
) -> c_int {
    guard("PMI2_Info_GetJobAttr", ERR_OTHER, || {
        let s = current()?;
        // SAFETY: caller contract of `name`.
        let k = unsafe { cbuf::key(name)? };
        cbuf::non_null(value)?;
        cbuf::non_null(found)?;
        let cap = cbuf::capacity(valuelen)?;
        let got = s.pmi.job_attr(k).ctx("PMI2_Info_GetJobAttr")?;
        // SAFETY: forwarded caller contract (pointers checked above).
        unsafe { attr_out(got, value, cap, found) }
    })
}

/// Job attribute `name` as an array of ints (`universeSize`), as
/// [`PMI2_Info_GetNodeAttrIntArray`]. `PMI_process_mapping` is not an int
/// array (`PMI2_ERR_OTHER`).
///
/// # Safety
/// As [`PMI2_Info_GetNodeAttrIntArray`].
#[no_mangle]
pub unsafe extern "C" fn PMI2_Info_GetJobAttrIntArray(
    name: *const c_char,
    array: *mut c_int,
    arraylen: c_int,
    outlen: *mut c_int,
    found: *mut c_int,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        int_array(
            false,
            "PMI2_Info_GetJobAttrIntArray",
            name,
            array,
            arraylen,
            outlen,
            found,
        )
    }
}
