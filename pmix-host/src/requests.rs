//! The upcalls about jobs rather than one client: queries, tools,
//! groups, spawn and connect (on the library's progress thread, like
//! [`crate::upcalls`]).

use std::ffi::{c_char, c_int, c_void, CStr};

use crate::abi::*;
use crate::done::*;
use crate::families::*;
use crate::upcalls::{key_list, key_text, opt_string, send};

pub(crate) unsafe extern "C" fn up_query(
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
    send(Upcall::Query(QueryUpcall {
        nspace: nspace_of(p),
        rank: p.rank,
        queries: asks,
        done: QueryDone::new(cb, cbdata),
    }));
    PMIX_SUCCESS
}

type ToolCb = Option<unsafe extern "C" fn(Status, *mut Proc, *mut c_void)>;

/// Tools served so far (each gets a namespace of its own).
static TOOLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// A tool (`pps`, `pquery`, a debugger) connects: one of this user's gets
/// a namespace of its own, `fastpmi-tool-<launcher pid>-<n>`, rank 0; one
/// of another user's is refused and logged. Answered at once: it needs
/// nothing of the launcher's jobs.
pub(crate) unsafe extern "C" fn up_tool_connected(
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
        .find(|i| key_text(&i.key) == crate::keys::PMIX_USERID && i.value.type_ == ty::UINT32)
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

pub(crate) unsafe extern "C" fn up_group(
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
        key_text(&i.key) == crate::keys::PMIX_GROUP_ASSIGN_CONTEXT_ID
            && i.value.type_ == ty::BOOL
            // SAFETY: a bool value, as its type says.
            && unsafe { i.value.data.flag }
    });
    // PMIX_GROUP_NOTIFY_TERMINATION: the members want an event when one of
    // them dies (the library keeps no membership: the host sends it).
    let notify_termination = dirs.iter().any(|i| {
        key_text(&i.key) == crate::keys::PMIX_GROUP_NOTIFY_TERMINATION
            && i.value.type_ == ty::BOOL
            // SAFETY: a bool value, as its type says.
            && unsafe { i.value.data.flag }
    });
    let endpoints = dirs
        .iter()
        .find(|i| {
            key_text(&i.key) == crate::keys::PMIX_GROUP_ENDPT_DATA
                && i.value.type_ == ty::BYTE_OBJECT
        })
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
    // A destruct is answered here: every member is local, so the launcher
    // has nothing to wait for. And OpenPMIx 5.0.11 calls the host twice
    // for one local destruct that is answered later (its
    // `pmix_server_grpdestruct` falls through to the global path),
    // completing a freed tracker and deadlocking its progress thread.
    let (cb, status) = if construct {
        (cb, PMIX_SUCCESS)
    } else {
        (None, PMIX_OPERATION_SUCCEEDED)
    };
    send(Upcall::Group(GroupUpcall {
        construct,
        name,
        members: members.iter().map(|p| (nspace_of(p), p.rank)).collect(),
        notify_termination,
        ctxid,
        endpoints,
        done: QueryDone::new(cb, cbdata),
    }));
    status
}

pub(crate) unsafe extern "C" fn up_spawn(
    p: *const Proc,
    job_info: *const Info,
    ninfo: usize,
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
    // SAFETY: the library passes `ninfo` job infos for the call.
    let job_wdir = unsafe { wdir_of(job_info, ninfo) };
    let apps = apps
        .iter()
        .map(|a| SpawnApp {
            // SAFETY: as above.
            cmd: unsafe { opt_string(a.cmd) }.unwrap_or_default(),
            // SAFETY: as above.
            argv: unsafe { key_list(a.argv) },
            // SAFETY: as above.
            env: unsafe { key_list(a.env) },
            // The app's `PMIX_WDIR` (Open MPI's `wdir` info key), as
            // PRRTE has it override the `cwd` the client library fills in
            // with the caller's; else that `cwd`; else the job's.
            // SAFETY: as above; `ninfo` infos of the app.
            cwd: unsafe { wdir_of(a.info, a.ninfo) }
                .or_else(|| unsafe { opt_string(a.cwd) })
                .or_else(|| job_wdir.clone()),
            maxprocs: a.maxprocs,
        })
        .collect();
    send(Upcall::Spawn(SpawnUpcall {
        nspace: nspace_of(p),
        rank: p.rank,
        apps,
        done: SpawnDone::new(cb, cbdata),
    }));
    PMIX_SUCCESS
}

/// `PMIX_WDIR` among `n` infos at `info`, if given as a string.
///
/// # Safety
/// `info` points to `n` valid infos (or is NULL).
unsafe fn wdir_of(info: *const Info, n: usize) -> Option<String> {
    if info.is_null() {
        return None;
    }
    // SAFETY: as the caller promises.
    let infos = unsafe { std::slice::from_raw_parts(info, n) };
    infos
        .iter()
        .find(|i| key_text(&i.key) == crate::keys::PMIX_WDIR && i.value.type_ == ty::STRING)
        // SAFETY: a string value, NUL-terminated or NULL.
        .and_then(|i| unsafe { opt_string(i.value.data.string) })
}

/// Connect: the library has collected every local participant before it
/// asks. The launcher registers the namespaces of other launchers'
/// participants (so that their data is asked of it) and offers its own
/// participants' data, then answers.
pub(crate) unsafe extern "C" fn up_connect(
    procs: *const Proc,
    nprocs: usize,
    _info: *const Info,
    _ninfo: usize,
    cb: OpCb,
    cbdata: *mut c_void,
) -> Status {
    if procs.is_null() {
        return PMIX_OPERATION_SUCCEEDED;
    }
    // SAFETY: the library passes `nprocs` procs for the call.
    let procs = unsafe { std::slice::from_raw_parts(procs, nprocs) };
    send(Upcall::Remote(RemoteUpcall::Connect {
        procs: procs.iter().map(|p| (nspace_of(p), p.rank)).collect(),
        done: OpDone::new(cb, cbdata),
    }));
    PMIX_SUCCESS
}

/// Disconnect: nothing to wait for (see `up_connect`).
pub(crate) unsafe extern "C" fn up_disconnect(
    _procs: *const Proc,
    _nprocs: usize,
    _info: *const Info,
    _ninfo: usize,
    _cb: OpCb,
    _cbdata: *mut c_void,
) -> Status {
    PMIX_OPERATION_SUCCEEDED
}

/// `PMIx_Job_control`: the library handles cleanup registrations
/// (`PMIX_REGISTER_CLEANUP`, `..._DIR`) itself and passes on the rest,
/// which this host does not serve (kill, signal, checkpoint...): refused
/// at once, so the client gets the status.
pub(crate) unsafe extern "C" fn up_job_control(
    _requestor: *const Proc,
    _targets: *const Proc,
    _ntargets: usize,
    info: *const Info,
    ninfo: usize,
    _cb: InfoCb,
    _cbdata: *mut c_void,
) -> Status {
    // SAFETY: the library passes `ninfo` directives for the call.
    let infos = unsafe {
        if info.is_null() {
            &[][..]
        } else {
            std::slice::from_raw_parts(info, ninfo)
        }
    };
    let keys: Vec<String> = infos.iter().map(|i| key_text(&i.key)).collect();
    tracing::debug!("refused a PMIx job control request: {keys:?}");
    PMIX_ERR_NOT_SUPPORTED
}
