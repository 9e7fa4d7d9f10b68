//! A guard against a crash inside OpenPMIx 4.2's server: the library asks
//! itself `PMIx_Query_info_nb` for every query a client or tool sends;
//! for an attribute-support query (`pattrs --host`,
//! `PMIX_QUERY_ATTRIBUTE_SUPPORT`) its `pmix_attrs_query_support` then
//! completes the server's callback with its own caddy instead of the
//! server's (`cd->cbfunc(..., cd, ...)`, src/common/pmix_attributes.c),
//! and the launcher dies of SIGSEGV on the library's thread. The library
//! calls `PMIx_Query_info_nb` through its PLT, so this definition, which
//! the launcher's binary exports (`build.rs`), takes the call: an
//! attribute query to a 4.x library is refused with
//! `PMIX_ERR_NOT_SUPPORTED` (the client gets that status), everything
//! else goes to the library's own function. 5.x libraries take every
//! query.

use std::ffi::{c_void, CStr};
use std::sync::OnceLock;

use crate::abi::*;

pub(crate) type QueryNb = unsafe extern "C" fn(*mut Query, usize, InfoCb, *mut c_void) -> Status;

/// The library's own `PMIx_Query_info_nb`, and whether its attribute path
/// is the one that crashes (OpenPMIx before 5).
static REAL: OnceLock<(QueryNb, bool)> = OnceLock::new();

/// Route queries to `real`, the loaded library's function, of version
/// `version` (`PMIx_Get_version`'s text).
pub(crate) fn install(real: QueryNb, version: &str) {
    let _ = REAL.set((real, crashes_on_attributes(version)));
    // Keep the definition in the binary (it is reached only through the
    // dynamic linker).
    std::hint::black_box(PMIx_Query_info_nb as QueryNb);
}

/// OpenPMIx 4.x (e.g. "OpenPMIx 4.2.2rc2, repo rev: ...") has the bug.
fn crashes_on_attributes(version: &str) -> bool {
    let major = version
        .split(|c: char| !c.is_ascii_digit())
        .find(|s| !s.is_empty())
        .and_then(|s| s.parse::<u32>().ok());
    major.is_some_and(|m| m < 5)
}

/// [`crate::keys::PMIX_QUERY_ATTRIBUTE_SUPPORT`], as a C string.
const ATTRIBUTE_SUPPORT: &CStr = c"pmix.qry.attrs";

/// See the module docs. Named as the library's, so that the dynamic
/// linker gives the library's own calls to this one.
///
/// # Safety
/// As `PMIx_Query_info_nb`: `nqueries` queries, each with a
/// NULL-terminated key list.
#[allow(non_snake_case)]
#[no_mangle]
pub unsafe extern "C" fn PMIx_Query_info_nb(
    queries: *mut Query,
    nqueries: usize,
    cbfunc: InfoCb,
    cbdata: *mut c_void,
) -> Status {
    let Some(&(real, broken)) = REAL.get() else {
        return PMIX_ERR_NOT_SUPPORTED;
    };
    if broken && !queries.is_null() {
        // SAFETY: the caller passes `nqueries` queries, each with a
        // NULL-terminated list of NUL-terminated keys (or none).
        let qs = unsafe { std::slice::from_raw_parts(queries, nqueries) };
        let asks_attributes = qs.iter().any(|q| {
            // SAFETY: as above; the first key, when there is one.
            !q.keys.is_null()
                && unsafe { !(*q.keys).is_null() && CStr::from_ptr(*q.keys) == ATTRIBUTE_SUPPORT }
        });
        if asks_attributes {
            tracing::debug!("refused an attribute-support query (OpenPMIx 4 crashes on it)");
            return PMIX_ERR_NOT_SUPPORTED;
        }
    }
    // SAFETY: the library's own function, with the caller's arguments.
    unsafe { real(queries, nqueries, cbfunc, cbdata) }
}

#[cfg(test)]
mod tests {
    use super::crashes_on_attributes;

    #[test]
    fn the_attribute_support_key_is_the_tables() {
        assert_eq!(
            super::ATTRIBUTE_SUPPORT.to_str(),
            Ok(crate::keys::PMIX_QUERY_ATTRIBUTE_SUPPORT)
        );
    }

    #[test]
    fn only_openpmix_4_is_guarded() {
        assert!(crashes_on_attributes(
            "OpenPMIx 4.2.2rc2, repo rev: v4.2.2rc2"
        ));
        assert!(!crashes_on_attributes("OpenPMIx 5.0.11, repo rev: v5.0.11"));
        assert!(!crashes_on_attributes("OpenPMIx 6.0.0"));
        assert!(!crashes_on_attributes("unknown"));
    }
}
