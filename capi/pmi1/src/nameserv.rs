//! The name service: `PMI_Publish_name`, `PMI_Unpublish_name`,
//! `PMI_Lookup_name`.

use std::ffi::{c_char, c_int};

use fastpmi_capi::cbuf;
use fastpmi_capi::codes::*;
use fastpmi_capi::session::{current, Ctx};

use crate::{guard, name_out};

/// Publish `port` under `service_name` in the launcher's name service.
///
/// # Safety
/// `service_name` and `port` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn PMI_Publish_name(
    service_name: *const c_char,
    port: *const c_char,
) -> c_int {
    guard("PMI_Publish_name", || {
        let s = current()?;
        // SAFETY: caller contract of both strings.
        let (svc, p) = unsafe {
            (
                cbuf::text(service_name, MAX_VALLEN)?,
                cbuf::text(port, MAX_PORT_NAME - 1)?,
            )
        };
        s.pmi.publish(svc, p).ctx("PMI_Publish_name")?;
        Ok(SUCCESS)
    })
}

/// Remove a published service.
///
/// # Safety
/// `service_name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn PMI_Unpublish_name(service_name: *const c_char) -> c_int {
    guard("PMI_Unpublish_name", || {
        let s = current()?;
        // SAFETY: caller contract of `service_name`.
        let svc = unsafe { cbuf::text(service_name, MAX_VALLEN)? };
        s.pmi.unpublish(svc).ctx("PMI_Unpublish_name")?;
        Ok(SUCCESS)
    })
}

/// Look a service up; its port goes to `port`, a buffer of
/// `PMI_MAX_PORT_NAME` (1024) bytes. Not published: `PMI_FAIL`.
///
/// # Safety
/// `service_name` is NULL or a NUL-terminated string; `port` is NULL or
/// valid for writing `PMI_MAX_PORT_NAME` bytes.
#[no_mangle]
pub unsafe extern "C" fn PMI_Lookup_name(service_name: *const c_char, port: *mut c_char) -> c_int {
    guard("PMI_Lookup_name", || {
        let s = current()?;
        // SAFETY: caller contract of `service_name`.
        let svc = unsafe { cbuf::text(service_name, MAX_VALLEN)? };
        cbuf::non_null(port)?;
        let Some(p) = s.pmi.lookup(svc).ctx("PMI_Lookup_name")? else {
            tracing::debug!("PMI_Lookup_name: {svc} is not published");
            return Err(FAIL);
        };
        // SAFETY: caller contract of `port`: PMI_MAX_PORT_NAME bytes.
        unsafe { name_out(port, MAX_PORT_NAME as c_int, &p) }
    })
}
