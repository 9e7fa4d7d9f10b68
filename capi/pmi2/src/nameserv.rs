//! The name service (`PMI2_Nameserv_publish`, `_lookup`, `_unpublish`).

use std::ffi::{c_char, c_int, c_void};

use fastpmi_capi::cbuf;
use fastpmi_capi::codes::*;
use fastpmi_capi::guard;
use fastpmi_capi::session::{current, Ctx};

/// Publish `port` under `service_name` in the launcher's name service.
/// `info_ptr` is ignored.
///
/// # Safety
/// `service_name` and `port` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn PMI2_Nameserv_publish(
    service_name: *const c_char,
    _info_ptr: *const c_void,
    port: *const c_char,
) -> c_int {
    guard("PMI2_Nameserv_publish", ERR_OTHER, || {
        let s = current()?;
        // SAFETY: caller contract of `service_name` and `port`.
        let (svc, p) = unsafe {
            (
                cbuf::text(service_name, MAX_VALLEN)?,
                cbuf::text(port, MAX_VALLEN)?,
            )
        };
        s.pmi.publish(svc, p).ctx("PMI2_Nameserv_publish")?;
        Ok(SUCCESS)
    })
}

/// Look `service_name` up: its port in `port[portLen]`; not published is
/// `PMI2_ERR_OTHER`. `info_ptr` is ignored.
///
/// # Safety
/// `service_name` is NULL or a NUL-terminated string; `port` is NULL or
/// valid for writing `portLen` bytes.
#[no_mangle]
pub unsafe extern "C" fn PMI2_Nameserv_lookup(
    service_name: *const c_char,
    _info_ptr: *const c_void,
    port: *mut c_char,
    portLen: c_int,
) -> c_int {
    guard("PMI2_Nameserv_lookup", ERR_OTHER, || {
        let s = current()?;
        // SAFETY: caller contract of `service_name`.
        let svc = unsafe { cbuf::text(service_name, MAX_VALLEN)? };
        cbuf::non_null(port)?;
        let cap = cbuf::capacity(portLen)?;
        let Some(p) = s.pmi.lookup(svc).ctx("PMI2_Nameserv_lookup")? else {
            tracing::debug!("PMI2_Nameserv_lookup: {svc} is not published");
            return Err(ERR_OTHER);
        };
        // SAFETY: non-NULL, `cap` bytes writable per the caller contract.
        let fits = unsafe { cbuf::copy_out(port, cap, p.as_bytes()) };
        Ok(if fits { SUCCESS } else { ERR_NOMEM })
    })
}

/// Remove a published service. `info_ptr` is ignored.
///
/// # Safety
/// `service_name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn PMI2_Nameserv_unpublish(
    service_name: *const c_char,
    _info_ptr: *const c_void,
) -> c_int {
    guard("PMI2_Nameserv_unpublish", ERR_OTHER, || {
        let s = current()?;
        // SAFETY: caller contract of `service_name`.
        let svc = unsafe { cbuf::text(service_name, MAX_VALLEN)? };
        s.pmi.unpublish(svc).ctx("PMI2_Nameserv_unpublish")?;
        Ok(SUCCESS)
    })
}
