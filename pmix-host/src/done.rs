//! The library's completions, handed with an upcall to the launcher: the
//! answer of an operation, a lookup, a query, a spawn or a direct modex.
//! Each answers exactly once: `complete`/`finish` take it by value, and
//! one dropped unanswered answers `PMIX_ERROR` (a path that returns early
//! must not leave a client waiting forever).

use std::ffi::{c_char, c_void, CString};

use crate::abi::*;

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

/// The library's completion of a query, to be called once.
pub struct QueryDone {
    cb: InfoCb,
    data: *mut c_void,
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
    pub fn finish(mut self, status: Status, answer: InfoList) {
        let Some(cb) = self.cb.take() else { return };
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
    cb: OpCb,
    data: *mut c_void,
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
    pub fn complete(mut self, ok: bool) {
        if let Some(cb) = self.cb.take() {
            let status = if ok { PMIX_SUCCESS } else { PMIX_ERROR };
            // SAFETY: the library's callback with its own argument, once.
            unsafe { cb(status, self.data) };
        }
    }
}

/// The library's completion of a lookup, to be called once.
pub struct LookupDone {
    cb: LookupCb,
    data: *mut c_void,
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
    pub fn complete(mut self, found: Option<Vec<(String, NameValue, String, u32)>>) {
        let Some(cb) = self.cb.take() else { return };
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

/// The library's completion of a spawn, to be called once.
pub struct SpawnDone {
    cb: SpawnCb,
    data: *mut c_void,
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
    pub fn complete(mut self, nspace: Option<&str>) {
        let Some(cb) = self.cb.take() else { return };
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
    cb: ModexCb,
    data: *mut c_void,
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
    pub fn complete(mut self, blob: Option<Vec<u8>>) {
        let Some(cb) = self.cb.take() else { return };
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

/// Completions built by the upcalls, and answered with an error when
/// dropped unanswered.
macro_rules! once {
    ($name:ident, $cb:ty, |$c:ident, $d:ident| $answer:expr) => {
        impl $name {
            pub(crate) fn new(cb: $cb, data: *mut c_void) -> Self {
                $name { cb, data }
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                if let Some($c) = self.cb.take() {
                    let $d = self.data;
                    tracing::debug!(concat!(
                        stringify!($name),
                        " dropped unanswered: PMIX_ERROR"
                    ));
                    // SAFETY: the library's callback with its own argument,
                    // once (`take` above); no data comes with the error.
                    unsafe { $answer };
                }
            }
        }
    };
}

once!(QueryDone, InfoCb, |cb, d| cb(
    PMIX_ERROR,
    std::ptr::null_mut(),
    0,
    d,
    None,
    std::ptr::null_mut()
));
once!(OpDone, OpCb, |cb, d| cb(PMIX_ERROR, d));
once!(LookupDone, LookupCb, |cb, d| cb(
    PMIX_ERROR,
    std::ptr::null_mut(),
    0,
    d
));
once!(SpawnDone, SpawnCb, |cb, d| {
    let mut ns = [0 as c_char; NSPACE_BYTES];
    cb(PMIX_ERROR, ns.as_mut_ptr(), d)
});
once!(ModexDone, ModexCb, |cb, d| cb(
    PMIX_ERROR,
    std::ptr::null(),
    0,
    d,
    None,
    std::ptr::null_mut()
));

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// The statuses each test's completions answered with, by the address
    /// of the test's own record (tests run in parallel).
    type Record = Mutex<Vec<Status>>;

    fn record(d: *mut c_void) -> &'static Record {
        // SAFETY: every test passes a leaked `Record` as the callback data.
        unsafe { &*d.cast::<Record>() }
    }

    unsafe extern "C" fn op_cb(status: Status, d: *mut c_void) {
        record(d).lock().unwrap().push(status);
    }

    fn new_record() -> (&'static Record, *mut c_void) {
        let r: &'static Record = Box::leak(Box::new(Mutex::new(Vec::new())));
        (r, (r as *const Record).cast_mut().cast())
    }

    #[test]
    fn an_op_answers_once_with_its_status_or_an_error_when_dropped() {
        let (r, d) = new_record();
        OpDone::new(Some(op_cb), d).complete(true);
        assert_eq!(*r.lock().unwrap(), [PMIX_SUCCESS]);
        drop(OpDone::new(Some(op_cb), d));
        assert_eq!(*r.lock().unwrap(), [PMIX_SUCCESS, PMIX_ERROR]);
        // No callback (a destruct the library answered itself): nothing.
        drop(OpDone::new(None, d));
        assert_eq!(r.lock().unwrap().len(), 2);
    }

    unsafe extern "C" fn info_cb(
        status: Status,
        _i: *mut Info,
        _n: usize,
        d: *mut c_void,
        release: ReleaseCb,
        rd: *mut c_void,
    ) {
        record(d).lock().unwrap().push(status);
        if let Some(f) = release {
            // SAFETY: the release function handed over, with its data.
            unsafe { f(rd) };
        }
    }

    unsafe extern "C" fn lookup_cb(status: Status, _p: *mut PData, _n: usize, d: *mut c_void) {
        record(d).lock().unwrap().push(status);
    }

    unsafe extern "C" fn spawn_cb(status: Status, _ns: *mut c_char, d: *mut c_void) {
        record(d).lock().unwrap().push(status);
    }

    unsafe extern "C" fn modex_cb(
        status: Status,
        _b: *const c_char,
        _n: usize,
        d: *mut c_void,
        release: ReleaseCb,
        rd: *mut c_void,
    ) {
        record(d).lock().unwrap().push(status);
        if let Some(f) = release {
            // SAFETY: the release function handed over, with its data.
            unsafe { f(rd) };
        }
    }

    #[test]
    fn every_completion_dropped_unanswered_answers_an_error_once() {
        let (r, d) = new_record();
        drop(QueryDone::new(Some(info_cb), d));
        drop(LookupDone::new(Some(lookup_cb), d));
        drop(SpawnDone::new(Some(spawn_cb), d));
        drop(ModexDone::new(Some(modex_cb), d));
        assert_eq!(*r.lock().unwrap(), [PMIX_ERROR; 4]);
    }

    #[test]
    fn an_answered_completion_is_not_answered_again_when_dropped() {
        let (r, d) = new_record();
        QueryDone::new(Some(info_cb), d).complete(InfoList::default());
        LookupDone::new(Some(lookup_cb), d).complete(None);
        SpawnDone::new(Some(spawn_cb), d).complete(Some("ns"));
        ModexDone::new(Some(modex_cb), d).complete(Some(vec![1, 2, 3]));
        assert_eq!(
            *r.lock().unwrap(),
            [
                PMIX_ERR_NOT_FOUND,
                PMIX_ERR_NOT_FOUND,
                PMIX_SUCCESS,
                PMIX_SUCCESS
            ]
        );
    }
}
