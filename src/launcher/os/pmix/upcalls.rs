//! The upcalls of OpenPMIx's server library, on its progress thread: each
//! copies what it needs and hands it to the launcher ([`Upcall`], with the
//! library's completion where the answer comes later), or answers at once
//! where the answer needs nothing of the launcher.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

use super::abi::*;
use super::{nspace_of, proc_of};

pub(super) type OpCb = Option<unsafe extern "C" fn(Status, *mut c_void)>;
pub(super) type ReleaseCb = Option<unsafe extern "C" fn(*mut c_void)>;
pub(super) type ModexCb =
    Option<unsafe extern "C" fn(Status, *const c_char, usize, *mut c_void, ReleaseCb, *mut c_void)>;

/// What a client asked of the launcher, from the progress thread.
#[derive(Debug)]
pub enum Upcall {
    /// `PMIx_Abort` by `rank` of `nspace`.
    Abort {
        nspace: String,
        rank: u32,
        status: i32,
        message: String,
    },
    /// `PMIx_Init` of `rank` of `nspace` (its connection).
    Connected { nspace: String, rank: u32 },
    /// `PMIx_Finalize` of `rank` of `nspace`.
    Finalized { nspace: String, rank: u32 },
    /// `PMIx_Publish`: `pairs` (service, port) by `rank` of `nspace`.
    Publish {
        nspace: String,
        rank: u32,
        pairs: Vec<(String, String)>,
        done: OpDone,
    },
    /// `PMIx_Unpublish` of `keys` (empty: every name of the caller).
    Unpublish {
        nspace: String,
        rank: u32,
        keys: Vec<String>,
        done: OpDone,
    },
    /// `PMIx_Lookup` of `keys`; with `wait` (`PMIX_WAIT`) the answer waits
    /// until every key is published, for at most `timeout` seconds
    /// (`PMIX_TIMEOUT`; none: until the job ends).
    Lookup {
        nspace: String,
        rank: u32,
        keys: Vec<String>,
        wait: bool,
        timeout: Option<u32>,
        done: LookupDone,
    },
    /// `PMIx_Query_info` that the library passes on (by `rank` of
    /// `nspace`, or a tool).
    Query {
        nspace: String,
        rank: u32,
        queries: Vec<QueryAsk>,
        done: QueryDone,
    },
    /// `PMIx_Spawn` by `rank` of `nspace` (Open MPI's `MPI_Comm_spawn`).
    Spawn {
        nspace: String,
        rank: u32,
        apps: Vec<SpawnApp>,
        done: SpawnDone,
    },
    /// `PMIx_Group_construct` (`construct`) or `_destruct` of group
    /// `name` of `members`, once every local member called it (the
    /// library collects them). `ctxid`: a context id is asked for.
    Group {
        construct: bool,
        name: String,
        members: Vec<(String, u32)>,
        ctxid: bool,
        /// The members' endpoint data the library collected
        /// (`PMIX_GROUP_ENDPT_DATA`): every member is local, so it is the
        /// whole of it and goes back as it came.
        endpoints: Option<Vec<u8>>,
        done: QueryDone,
    },
}

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

type InfoCb =
    Option<unsafe extern "C" fn(Status, *mut Info, usize, *mut c_void, ReleaseCb, *mut c_void)>;

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
    pub fn complete(self, ok: bool) {
        if let Some(cb) = self.cb {
            let status = if ok { PMIX_SUCCESS } else { PMIX_ERROR };
            // SAFETY: the library's callback with its own argument, once.
            unsafe { cb(status, self.data) };
        }
    }
}

type LookupCb = Option<unsafe extern "C" fn(Status, *mut PData, usize, *mut c_void)>;

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
    /// Complete with the names found: (service, port, publisher's nspace
    /// and rank); `None` when some key was not found.
    pub fn complete(self, found: Option<Vec<(String, String, String, u32)>>) {
        let Some(cb) = self.cb else { return };
        let Some(found) = found else {
            // SAFETY: the library's callback with its own argument, once;
            // no data.
            unsafe { cb(PMIX_ERR_NOT_FOUND, std::ptr::null_mut(), 0, self.data) };
            return;
        };
        let ports: Vec<CString> = found
            .iter()
            .map(|(_, p, _, _)| CString::new(p.as_str()).unwrap_or_default())
            .collect();
        let mut data: Vec<PData> = found
            .iter()
            .zip(&ports)
            .map(|((k, _, ns, r), port)| {
                let mut key = [0 as c_char; KEY_BYTES];
                for (d, s) in key.iter_mut().zip(k.bytes().take(KEY_BYTES - 1)) {
                    *d = s as c_char;
                }
                PData {
                    proc_: proc_of(ns, *r),
                    key,
                    value: Value {
                        type_: ty::STRING,
                        data: ValueData {
                            string: port.as_ptr().cast_mut(),
                        },
                    },
                }
            })
            .collect();
        // SAFETY: the library's callback with its own argument, once; the
        // array and its strings live until it returns (the library copies
        // what it keeps).
        unsafe { cb(PMIX_SUCCESS, data.as_mut_ptr(), data.len(), self.data) };
    }
}

/// Where upcalls go (one server per process).
pub(super) type Sink = Box<dyn Fn(Upcall) + Send + Sync>;
pub(super) static SINK: OnceLock<Sink> = OnceLock::new();

fn send(u: Upcall) {
    if let Some(s) = SINK.get() {
        s(u);
    }
}

// --- upcalls (the library's progress thread) ---

pub(super) unsafe extern "C" fn up_connected(
    p: *const Proc,
    _o: *mut c_void,
    _cb: OpCb,
    _d: *mut c_void,
) -> Status {
    // SAFETY: the library passes a valid proc for the call's duration.
    if let Some(p) = unsafe { p.as_ref() } {
        send(Upcall::Connected {
            nspace: nspace_of(p),
            rank: p.rank,
        });
    }
    PMIX_OPERATION_SUCCEEDED
}

pub(super) unsafe extern "C" fn up_finalized(
    p: *const Proc,
    _o: *mut c_void,
    _cb: OpCb,
    _d: *mut c_void,
) -> Status {
    // SAFETY: the library passes a valid proc for the call's duration.
    if let Some(p) = unsafe { p.as_ref() } {
        send(Upcall::Finalized {
            nspace: nspace_of(p),
            rank: p.rank,
        });
    }
    PMIX_OPERATION_SUCCEEDED
}

pub(super) unsafe extern "C" fn up_abort(
    p: *const Proc,
    _o: *mut c_void,
    status: c_int,
    msg: *const c_char,
    _procs: *mut Proc,
    _nprocs: usize,
    _cb: OpCb,
    _d: *mut c_void,
) -> Status {
    // SAFETY: the library passes a valid proc and a NUL-terminated message
    // (or NULL) for the call's duration.
    let (proc_, message) = unsafe {
        (
            p.as_ref(),
            if msg.is_null() {
                String::new()
            } else {
                CStr::from_ptr(msg).to_string_lossy().into_owned()
            },
        )
    };
    if let Some(p) = proc_ {
        send(Upcall::Abort {
            nspace: nspace_of(p),
            rank: p.rank,
            status,
            message,
        });
    }
    PMIX_OPERATION_SUCCEEDED
}

/// One node: every participant is local, so the collected data is the
/// whole answer.
pub(super) unsafe extern "C" fn up_fence(
    _procs: *const Proc,
    _nprocs: usize,
    _info: *const Info,
    _ninfo: usize,
    data: *mut c_char,
    ndata: usize,
    cb: ModexCb,
    cbdata: *mut c_void,
) -> Status {
    if let Some(cb) = cb {
        // SAFETY: the library's own callback with the data it handed in,
        // valid for this call; it copies what it keeps.
        unsafe {
            cb(
                PMIX_SUCCESS,
                data,
                ndata,
                cbdata,
                None,
                std::ptr::null_mut(),
            )
        };
    }
    PMIX_SUCCESS
}

/// The keys of a NULL-terminated `char **`.
///
/// # Safety
/// `keys` is NULL or a NULL-terminated array of NUL-terminated strings,
/// valid for the call.
unsafe fn key_list(keys: *mut *mut c_char) -> Vec<String> {
    let mut out = Vec::new();
    if keys.is_null() {
        return out;
    }
    let mut i = 0;
    loop {
        // SAFETY: per the caller's contract, up to the NULL entry.
        let k = unsafe { *keys.add(i) };
        if k.is_null() {
            break;
        }
        // SAFETY: a NUL-terminated string of the array.
        out.push(unsafe { CStr::from_ptr(k) }.to_string_lossy().into_owned());
        i += 1;
    }
    out
}

pub(super) unsafe extern "C" fn up_publish(
    p: *const Proc,
    info: *const Info,
    ninfo: usize,
    cb: OpCb,
    cbdata: *mut c_void,
) -> Status {
    // SAFETY: the library passes a valid proc and `ninfo` infos for the
    // call's duration.
    let (Some(p), infos) = (unsafe { p.as_ref() }, unsafe {
        if info.is_null() {
            &[][..]
        } else {
            std::slice::from_raw_parts(info, ninfo)
        }
    }) else {
        return PMIX_ERR_BAD_PARAM;
    };
    let mut pairs = Vec::new();
    for i in infos {
        let key = key_text(&i.key);
        // Directives (range, persistence, ...) are the library's keys.
        if key.starts_with("pmix.") {
            continue;
        }
        if i.value.type_ != ty::STRING {
            return PMIX_ERR_BAD_PARAM;
        }
        // SAFETY: a string value's pointer, NUL-terminated or NULL.
        let v = unsafe { i.value.data.string };
        let port = if v.is_null() {
            String::new()
        } else {
            // SAFETY: as above.
            unsafe { CStr::from_ptr(v) }.to_string_lossy().into_owned()
        };
        pairs.push((key, port));
    }
    send(Upcall::Publish {
        nspace: nspace_of(p),
        rank: p.rank,
        pairs,
        done: OpDone { cb, data: cbdata },
    });
    PMIX_SUCCESS
}

pub(super) unsafe extern "C" fn up_unpublish(
    p: *const Proc,
    keys: *mut *mut c_char,
    _info: *const Info,
    _ninfo: usize,
    cb: OpCb,
    cbdata: *mut c_void,
) -> Status {
    // SAFETY: the library passes a valid proc and a NULL-terminated key
    // list (or NULL) for the call's duration.
    let (Some(p), keys) = (unsafe { p.as_ref() }, unsafe { key_list(keys) }) else {
        return PMIX_ERR_BAD_PARAM;
    };
    send(Upcall::Unpublish {
        nspace: nspace_of(p),
        rank: p.rank,
        keys,
        done: OpDone { cb, data: cbdata },
    });
    PMIX_SUCCESS
}

pub(super) unsafe extern "C" fn up_lookup(
    p: *const Proc,
    keys: *mut *mut c_char,
    info: *const Info,
    ninfo: usize,
    cb: LookupCb,
    cbdata: *mut c_void,
) -> Status {
    // SAFETY: as in `up_unpublish`.
    let (Some(p), keys) = (unsafe { p.as_ref() }, unsafe { key_list(keys) }) else {
        return PMIX_ERR_BAD_PARAM;
    };
    // SAFETY: the library passes `ninfo` directives for the call.
    let infos = unsafe {
        if info.is_null() {
            &[][..]
        } else {
            std::slice::from_raw_parts(info, ninfo)
        }
    };
    let wait = infos.iter().any(|i| key_text(&i.key) == "pmix.wait");
    let timeout = infos
        .iter()
        .find(|i| key_text(&i.key) == "pmix.timeout" && i.value.type_ == ty::INT)
        // SAFETY: an int value, as its type says.
        .map(|i| unsafe { i.value.data.int })
        .filter(|&t| t > 0)
        .map(|t| t as u32);
    send(Upcall::Lookup {
        nspace: nspace_of(p),
        rank: p.rank,
        keys,
        wait,
        timeout,
        done: LookupDone { cb, data: cbdata },
    });
    PMIX_SUCCESS
}

fn key_text(k: &[c_char; KEY_BYTES]) -> String {
    let end = k.iter().position(|&c| c == 0).unwrap_or(KEY_BYTES);
    k[..end].iter().map(|&c| c as u8 as char).collect()
}

/// Every process of a job is on this node: nothing to ask elsewhere.
pub(super) unsafe extern "C" fn up_dmodex(
    p: *const Proc,
    _i: *const Info,
    _n: usize,
    _cb: ModexCb,
    _d: *mut c_void,
) -> Status {
    // SAFETY: the library passes a valid proc for the call's duration.
    if let Some(p) = unsafe { p.as_ref() } {
        tracing::debug!(
            "PMIx direct modex for {}:{}: not found",
            nspace_of(p),
            p.rank
        );
    }
    PMIX_ERR_NOT_FOUND
}

pub(super) unsafe extern "C" fn up_query(
    p: *mut Proc,
    queries: *mut Query,
    nqueries: usize,
    cb: InfoCb,
    cbdata: *mut c_void,
) -> Status {
    // SAFETY: the library passes a valid proc and `nqueries` queries, each
    // with a NULL-terminated key list and `nqual` qualifiers, for the
    // call's duration.
    let (Some(p), qs) = (unsafe { p.as_ref() }, unsafe {
        if queries.is_null() {
            &[][..]
        } else {
            std::slice::from_raw_parts(queries, nqueries)
        }
    }) else {
        return PMIX_ERR_BAD_PARAM;
    };
    let mut asks = Vec::with_capacity(qs.len());
    for q in qs {
        // SAFETY: as above.
        let keys = unsafe { key_list(q.keys) };
        let quals = if q.qualifiers.is_null() {
            &[][..]
        } else {
            // SAFETY: as above.
            unsafe { std::slice::from_raw_parts(q.qualifiers, q.nqual) }
        };
        let quals = quals
            .iter()
            .filter(|i| i.value.type_ == ty::STRING)
            .filter_map(|i| {
                // SAFETY: a string value's pointer, NUL-terminated or NULL.
                let v = unsafe { i.value.data.string };
                // SAFETY: as above.
                (!v.is_null())
                    .then(|| unsafe { CStr::from_ptr(v) }.to_string_lossy().into_owned())
                    .map(|v| (key_text(&i.key), v))
            })
            .collect();
        asks.push(QueryAsk { keys, quals });
    }
    send(Upcall::Query {
        nspace: nspace_of(p),
        rank: p.rank,
        queries: asks,
        done: QueryDone { cb, data: cbdata },
    });
    PMIX_SUCCESS
}

type ToolCb = Option<unsafe extern "C" fn(Status, *mut Proc, *mut c_void)>;

/// Tools served so far (each gets a namespace of its own).
static TOOLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// A tool (`pps`, `pquery`, a debugger) connects: one of this user's gets
/// a namespace of its own, `fastpmi-tool-<launcher pid>-<n>`, rank 0; one
/// of another user's is refused and logged. Answered at once: it needs
/// nothing of the launcher's jobs.
pub(super) unsafe extern "C" fn up_tool_connected(
    info: *mut Info,
    ninfo: usize,
    cb: ToolCb,
    cbdata: *mut c_void,
) {
    // SAFETY: the library passes `ninfo` infos for the call's duration.
    let infos = unsafe {
        if info.is_null() {
            &[][..]
        } else {
            std::slice::from_raw_parts(info, ninfo)
        }
    };
    let me = rustix::process::geteuid().as_raw();
    let uid = infos
        .iter()
        .find(|i| key_text(&i.key) == "pmix.euid" && i.value.type_ == ty::UINT32)
        // SAFETY: a uint32 value, as its type says.
        .map(|i| unsafe { i.value.data.uint32 });
    let Some(cb) = cb else { return };
    if uid.is_some_and(|u| u != me) {
        tracing::warn!(
            "refused a PMIx tool of uid {} (this launcher serves uid {me} only)",
            uid.unwrap_or_default()
        );
        // SAFETY: the library's callback with its own argument, once.
        unsafe { cb(PMIX_ERR_NO_PERMISSIONS, std::ptr::null_mut(), cbdata) };
        return;
    }
    let n = TOOLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut p = proc_of(&format!("fastpmi-tool-{}-{n}", std::process::id()), 0);
    tracing::debug!("PMIx tool {n} connected");
    // SAFETY: the library's callback with its own argument, once; it copies
    // the proc.
    unsafe { cb(PMIX_SUCCESS, &mut p, cbdata) };
}

pub(super) unsafe extern "C" fn up_group(
    op: c_int,
    grp: *mut c_char,
    procs: *const Proc,
    nprocs: usize,
    directives: *const Info,
    ndirs: usize,
    cb: InfoCb,
    cbdata: *mut c_void,
) -> Status {
    // SAFETY: the library passes a NUL-terminated group id, `nprocs`
    // procs and `ndirs` directives, valid for the call.
    let (name, members, dirs) = unsafe {
        (
            if grp.is_null() {
                String::new()
            } else {
                CStr::from_ptr(grp).to_string_lossy().into_owned()
            },
            if procs.is_null() {
                &[][..]
            } else {
                std::slice::from_raw_parts(procs, nprocs)
            },
            if directives.is_null() {
                &[][..]
            } else {
                std::slice::from_raw_parts(directives, ndirs)
            },
        )
    };
    let construct = match op {
        PMIX_GROUP_CONSTRUCT => true,
        PMIX_GROUP_DESTRUCT => false,
        _ => return PMIX_ERR_BAD_PARAM,
    };
    let ctxid = dirs.iter().any(|i| {
        key_text(&i.key) == "pmix.grp.actxid"
            && i.value.type_ == ty::BOOL
            // SAFETY: a bool value, as its type says.
            && unsafe { i.value.data.flag }
    });
    let endpoints = dirs
        .iter()
        .find(|i| key_text(&i.key) == "pmix.grp.endpt" && i.value.type_ == ty::BYTE_OBJECT)
        .map(|i| {
            // SAFETY: a byte object, as its type says: `size` bytes at
            // `bytes` (or none), valid for the call.
            let bo = unsafe { i.value.data.bo };
            if bo.bytes.is_null() {
                Vec::new()
            } else {
                // SAFETY: as above.
                unsafe { std::slice::from_raw_parts(bo.bytes.cast::<u8>(), bo.size) }.to_vec()
            }
        });
    send(Upcall::Group {
        construct,
        name,
        members: members.iter().map(|p| (nspace_of(p), p.rank)).collect(),
        ctxid,
        endpoints,
        done: QueryDone { cb, data: cbdata },
    });
    PMIX_SUCCESS
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

type SpawnCb = Option<unsafe extern "C" fn(Status, *mut c_char, *mut c_void)>;

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

/// A NUL-terminated string, or None.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string valid for the call.
unsafe fn opt_string(p: *const c_char) -> Option<String> {
    // SAFETY: per the contract.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

pub(super) unsafe extern "C" fn up_spawn(
    p: *const Proc,
    _job_info: *const Info,
    _ninfo: usize,
    apps: *const App,
    napps: usize,
    cb: SpawnCb,
    cbdata: *mut c_void,
) -> Status {
    // SAFETY: the library passes a valid proc and `napps` apps, each with
    // NUL-terminated strings and NULL-terminated lists, for the call.
    let (Some(p), apps) = (unsafe { p.as_ref() }, unsafe {
        if apps.is_null() {
            &[][..]
        } else {
            std::slice::from_raw_parts(apps, napps)
        }
    }) else {
        return PMIX_ERR_BAD_PARAM;
    };
    let apps = apps
        .iter()
        .map(|a| SpawnApp {
            // SAFETY: as above.
            cmd: unsafe { opt_string(a.cmd) }.unwrap_or_default(),
            // SAFETY: as above.
            argv: unsafe { key_list(a.argv) },
            // SAFETY: as above.
            env: unsafe { key_list(a.env) },
            // SAFETY: as above.
            cwd: unsafe { opt_string(a.cwd) },
            maxprocs: a.maxprocs,
        })
        .collect();
    send(Upcall::Spawn {
        nspace: nspace_of(p),
        rank: p.rank,
        apps,
        done: SpawnDone { cb, data: cbdata },
    });
    PMIX_SUCCESS
}

/// Connect and disconnect: every process is local, and the library has
/// collected every participant before it asks: nothing is left to wait
/// for.
pub(super) unsafe extern "C" fn up_connect(
    _procs: *const Proc,
    _nprocs: usize,
    _info: *const Info,
    _ninfo: usize,
    _cb: OpCb,
    _cbdata: *mut c_void,
) -> Status {
    PMIX_OPERATION_SUCCEEDED
}
