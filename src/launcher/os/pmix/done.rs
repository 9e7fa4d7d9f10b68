//! The library's completions, handed with an upcall to the launcher and
//! called once, from the event loop: the answer of an operation, a lookup,
//! a query or a spawn.

use std::ffi::{c_char, c_void, CString};

use super::abi::*;
use super::proc_of;
use super::upcalls::{ModexCb, OpCb, ReleaseCb};

/// One query: the keys asked and its string qualifiers (others, such as
/// `PMIX_QUERY_REFRESH_CACHE`, need nothing of the launcher).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryAsk {
    pub keys: Vec<String>,
    pub quals: Vec<(String, String)>,
}

impl QueryAsk {
    /// The qualifier `key`'s value.
    pub fn qual(&self, key: &str) -> Option<&str> {
        self.quals
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

pub(super) type InfoCb =
    Option<unsafe extern "C" fn(Status, *mut Info, usize, *mut c_void, ReleaseCb, *mut c_void)>;

/// The library's completion of a query, to be called once.
pub struct QueryDone {
    pub(super) cb: InfoCb,
    pub(super) data: *mut c_void,
}

// SAFETY: as for `OpDone`.
unsafe impl Send for QueryDone {}

impl std::fmt::Debug for QueryDone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("QueryDone")
    }
}

impl QueryDone {
    /// Complete with the answers (none: not found). The list lives until
    /// the library releases it.
    pub fn complete(self, answer: InfoList) {
        let status = if answer.is_empty() {
            PMIX_ERR_NOT_FOUND
        } else {
            PMIX_SUCCESS
        };
        self.finish(status, answer);
    }

    /// Complete with `status` and what comes with it (maybe nothing).
    pub fn finish(self, status: Status, answer: InfoList) {
        let Some(cb) = self.cb else { return };
        if answer.is_empty() {
            // SAFETY: the library's callback with its own argument, once.
            unsafe {
                cb(
                    status,
                    std::ptr::null_mut(),
                    0,
                    self.data,
                    None,
                    std::ptr::null_mut(),
                )
            };
            return;
        }
        let raw = Box::into_raw(Box::new(answer));
        // SAFETY: `raw` is a live box, released by `release_infos` only.
        let (ptr, n) = unsafe { ((*raw).infos.as_mut_ptr(), (*raw).infos.len()) };
        // SAFETY: the library's callback with its own argument, once; the
        // infos stay valid until it calls `release_infos(raw)`.
        unsafe { cb(status, ptr, n, self.data, Some(release_infos), raw.cast()) };
    }
}

/// Frees a query's answer once the library is done with it.
unsafe extern "C" fn release_infos(d: *mut c_void) {
    if !d.is_null() {
        // SAFETY: `d` is the box `QueryDone::complete` leaked, released once.
        drop(unsafe { Box::from_raw(d.cast::<InfoList>()) });
    }
}

/// The library's completion of an operation, to be called once, from any
/// thread.
pub struct OpDone {
    pub(super) cb: OpCb,
    pub(super) data: *mut c_void,
}

// SAFETY: the library's callback and its opaque argument may be called from
// any thread (the PMIx server threadshifts it); `OpDone` is called once
// (`complete` takes it by value).
unsafe impl Send for OpDone {}

impl std::fmt::Debug for OpDone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OpDone")
    }
}

impl OpDone {
    /// Complete with success, or with the error of a failed operation.
    pub fn complete(self, ok: bool) {
        if let Some(cb) = self.cb {
            let status = if ok { PMIX_SUCCESS } else { PMIX_ERROR };
            // SAFETY: the library's callback with its own argument, once.
            unsafe { cb(status, self.data) };
        }
    }
}

pub(super) type LookupCb = Option<unsafe extern "C" fn(Status, *mut PData, usize, *mut c_void)>;

/// The library's completion of a lookup, to be called once.
pub struct LookupDone {
    pub(super) cb: LookupCb,
    pub(super) data: *mut c_void,
}

// SAFETY: as for `OpDone`.
unsafe impl Send for LookupDone {}

impl std::fmt::Debug for LookupDone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LookupDone")
    }
}

impl LookupDone {
    /// Complete with the names found: (service, value, publisher's nspace
    /// and rank); `None` when some key was not found.
    pub fn complete(self, found: Option<Vec<(String, NameValue, String, u32)>>) {
        let Some(cb) = self.cb else { return };
        let Some(found) = found else {
            // SAFETY: the library's callback with its own argument, once;
            // no data.
            unsafe { cb(PMIX_ERR_NOT_FOUND, std::ptr::null_mut(), 0, self.data) };
            return;
        };
        // What the values point into, alive until the callback returns.
        let texts: Vec<CString> = found
            .iter()
            .map(|(_, v, _, _)| match v {
                NameValue::Text(t) => CString::new(t.as_str()).unwrap_or_default(),
                NameValue::Bytes(_) => CString::default(),
            })
            .collect();
        let mut data: Vec<PData> = found
            .iter()
            .zip(&texts)
            .map(|((k, v, ns, r), text)| {
                let mut key = [0 as c_char; KEY_BYTES];
                for (d, s) in key.iter_mut().zip(k.bytes().take(KEY_BYTES - 1)) {
                    *d = s as c_char;
                }
                let value = match v {
                    NameValue::Text(_) => Value {
                        type_: ty::STRING,
                        data: ValueData {
                            string: text.as_ptr().cast_mut(),
                        },
                    },
                    NameValue::Bytes(b) => Value {
                        type_: ty::BYTE_OBJECT,
                        data: ValueData {
                            bo: ByteObject {
                                bytes: b.as_ptr().cast::<c_char>().cast_mut(),
                                size: b.len(),
                            },
                        },
                    },
                };
                PData {
                    proc_: proc_of(ns, *r),
                    key,
                    value,
                }
            })
            .collect();
        // SAFETY: the library's callback with its own argument, once; the
        // array, its strings and bytes live until it returns (the library
        // packs what it sends and keeps no pointer).
        unsafe { cb(PMIX_SUCCESS, data.as_mut_ptr(), data.len(), self.data) };
    }
}

/// A published value as PMIx clients give it: a string (the only kind PMI
/// clients know) or a byte object (Open MPI's context-id exchange).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameValue {
    Text(String),
    Bytes(Vec<u8>),
}

/// One application of a `PMIx_Spawn`, copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnApp {
    pub cmd: String,
    pub argv: Vec<String>,
    pub env: Vec<String>,
    pub cwd: Option<String>,
    pub maxprocs: i32,
}

pub(super) type SpawnCb = Option<unsafe extern "C" fn(Status, *mut c_char, *mut c_void)>;

/// The library's completion of a spawn, to be called once.
pub struct SpawnDone {
    pub(super) cb: SpawnCb,
    pub(super) data: *mut c_void,
}

// SAFETY: as for `OpDone`.
unsafe impl Send for SpawnDone {}

impl std::fmt::Debug for SpawnDone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SpawnDone")
    }
}

impl SpawnDone {
    /// Complete with the new job's namespace, or fail.
    pub fn complete(self, nspace: Option<&str>) {
        let Some(cb) = self.cb else { return };
        let mut ns = [0 as c_char; NSPACE_BYTES];
        if let Some(n) = nspace {
            for (d, s) in ns.iter_mut().zip(n.bytes().take(NSPACE_BYTES - 1)) {
                *d = s as c_char;
            }
        }
        let status = if nspace.is_some() {
            PMIX_SUCCESS
        } else {
            PMIX_ERROR
        };
        // SAFETY: the library's callback with its own argument, once; the
        // namespace lives until it returns.
        unsafe { cb(status, ns.as_mut_ptr(), self.data) };
    }
}

/// The library's completion of a direct-modex request (a rank asked for
/// data of a process this server does not host), to be called once.
pub struct ModexDone {
    pub(super) cb: ModexCb,
    pub(super) data: *mut c_void,
}

// SAFETY: as for `OpDone`.
unsafe impl Send for ModexDone {}

impl std::fmt::Debug for ModexDone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ModexDone")
    }
}

impl ModexDone {
    /// Complete with the process's data (the blob another server's
    /// `PMIx_server_dmodex_request` gave), or not found.
    pub fn complete(self, blob: Option<Vec<u8>>) {
        let Some(cb) = self.cb else { return };
        let Some(blob) = blob else {
            // SAFETY: the library's callback with its own argument, once.
            unsafe {
                cb(
                    PMIX_ERR_NOT_FOUND,
                    std::ptr::null(),
                    0,
                    self.data,
                    None,
                    std::ptr::null_mut(),
                )
            };
            return;
        };
        let raw = Box::into_raw(Box::new(blob));
        // SAFETY: `raw` is a live box, released by `release_bytes` only.
        let (ptr, n) = unsafe { ((*raw).as_ptr(), (*raw).len()) };
        // SAFETY: the library's callback with its own argument, once; the
        // bytes stay valid until it calls `release_bytes(raw)` (it keeps
        // the pointer until it has stored the data).
        unsafe {
            cb(
                PMIX_SUCCESS,
                ptr.cast::<c_char>(),
                n,
                self.data,
                Some(release_bytes),
                raw.cast(),
            )
        };
    }
}

/// Frees a direct-modex answer once the library is done with it.
unsafe extern "C" fn release_bytes(d: *mut c_void) {
    if !d.is_null() {
        // SAFETY: `d` is the box `ModexDone::complete` leaked, released once.
        drop(unsafe { Box::from_raw(d.cast::<Vec<u8>>()) });
    }
}
