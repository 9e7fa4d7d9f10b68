//! The rest of `pmi.h` that fastpmi has no use for: more keyval spaces,
//! KVS iteration and PMI command-line options (refused with `PMI_FAIL`, or
//! answered with an empty list).

use std::ffi::{c_char, c_int, c_void};

use fastpmi_capi::cbuf;
use fastpmi_capi::codes::*;

use crate::{guard, PMI_keyval_t};

/// Not supported (one keyval space per job): `PMI_FAIL`.
#[no_mangle]
pub extern "C" fn PMI_KVS_Create(_kvsname: *mut c_char, _length: c_int) -> c_int {
    unsupported("PMI_KVS_Create")
}

/// Not supported (one keyval space per job): `PMI_FAIL`.
#[no_mangle]
pub extern "C" fn PMI_KVS_Destroy(_kvsname: *const c_char) -> c_int {
    unsupported("PMI_KVS_Destroy")
}

/// Not supported (the KVS is not enumerable): `PMI_FAIL`.
#[no_mangle]
pub extern "C" fn PMI_KVS_Iter_first(
    _kvsname: *const c_char,
    _key: *mut c_char,
    _key_len: c_int,
    _val: *mut c_char,
    _val_len: c_int,
) -> c_int {
    unsupported("PMI_KVS_Iter_first")
}

/// Not supported (the KVS is not enumerable): `PMI_FAIL`.
#[no_mangle]
pub extern "C" fn PMI_KVS_Iter_next(
    _kvsname: *const c_char,
    _key: *mut c_char,
    _key_len: c_int,
    _val: *mut c_char,
    _val_len: c_int,
) -> c_int {
    unsupported("PMI_KVS_Iter_next")
}

/// Not supported (no PMI command-line options): `PMI_FAIL`.
#[no_mangle]
pub extern "C" fn PMI_Parse_option(
    _num_args: c_int,
    _args: *mut *mut c_char,
    _num_parsed: *mut c_int,
    _keyvalp: *mut *mut PMI_keyval_t,
    _size: *mut c_int,
) -> c_int {
    unsupported("PMI_Parse_option")
}

/// fastpmi has no PMI command-line options: consumes nothing from
/// `*argcp`/`*argvp` and returns an empty list (`*keyvalp` NULL, `*size`
/// 0).
///
/// # Safety
/// `keyvalp` and `size` are NULL or valid for one write each.
#[no_mangle]
pub unsafe extern "C" fn PMI_Args_to_keyval(
    _argcp: *mut c_int,
    _argvp: *mut c_void,
    keyvalp: *mut *mut PMI_keyval_t,
    size: *mut c_int,
) -> c_int {
    guard("PMI_Args_to_keyval", || {
        cbuf::non_null(keyvalp)?;
        cbuf::non_null(size)?;
        // SAFETY: both checked non-NULL; caller contract for the writes.
        unsafe {
            cbuf::put(keyvalp, std::ptr::null_mut())?;
            cbuf::put(size, 0)?;
        }
        Ok(SUCCESS)
    })
}

/// Frees nothing: [`PMI_Args_to_keyval`] never allocates.
#[no_mangle]
pub extern "C" fn PMI_Free_keyvals(_keyvalp: *mut PMI_keyval_t, _size: c_int) -> c_int {
    SUCCESS
}

/// Not supported (no PMI options): `PMI_FAIL`.
#[no_mangle]
pub extern "C" fn PMI_Get_options(_str: *mut c_char, _length: *mut c_int) -> c_int {
    unsupported("PMI_Get_options")
}

fn unsupported(what: &str) -> c_int {
    tracing::debug!("{what}: not supported by fastpmi");
    FAIL
}
