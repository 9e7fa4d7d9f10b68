//! The upcalls of OpenPMIx's server library, on its progress thread: each
//! copies what it needs and hands it to the launcher ([`Upcall`], with the
//! library's completion where the answer comes later), or answers at once
//! where the answer needs nothing of the launcher.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

use crate::abi::*;
use crate::done::*;
use crate::families::*;

/// Where upcalls go: the host's receiver, called on the library's
/// progress thread (one server per process).
pub type Sink = Box<dyn Fn(Upcall) + Send + Sync>;
pub(crate) static SINK: OnceLock<Sink> = OnceLock::new();

pub(crate) fn send(u: Upcall) {
    if let Some(s) = SINK.get() {
        s(u);
    }
}

// --- upcalls (the library's progress thread) ---

pub(crate) unsafe extern "C" fn up_connected(
    p: *const Proc,
    _o: *mut c_void,
    _cb: OpCb,
    _d: *mut c_void,
) -> Status {
    // SAFETY: the library passes a valid proc for the call's duration.
    if let Some(p) = unsafe { p.as_ref() } {
        send(Upcall::Client(ClientUpcall::Connected {
            nspace: nspace_of(p),
            rank: p.rank,
        }));
    }
    PMIX_OPERATION_SUCCEEDED
}

pub(crate) unsafe extern "C" fn up_finalized(
    p: *const Proc,
    _o: *mut c_void,
    _cb: OpCb,
    _d: *mut c_void,
) -> Status {
    // SAFETY: the library passes a valid proc for the call's duration.
    if let Some(p) = unsafe { p.as_ref() } {
        send(Upcall::Client(ClientUpcall::Finalized {
            nspace: nspace_of(p),
            rank: p.rank,
        }));
    }
    PMIX_OPERATION_SUCCEEDED
}

pub(crate) unsafe extern "C" fn up_abort(
    p: *const Proc,
    _o: *mut c_void,
    status: c_int,
    msg: *const c_char,
    procs: *mut Proc,
    nprocs: usize,
    _cb: OpCb,
    _d: *mut c_void,
) -> Status {
    let targets: &[Proc] = if procs.is_null() || nprocs == 0 {
        &[]
    } else {
        // SAFETY: the library passes `nprocs` procs at `procs` (NULL: the
        // whole namespace), valid for the call's duration.
        unsafe { std::slice::from_raw_parts(procs, nprocs) }
    };
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
        let only_self = matches!(targets, [t] if t.rank == p.rank && nspace_of(t) == nspace_of(p));
        send(Upcall::Client(ClientUpcall::Abort {
            nspace: nspace_of(p),
            rank: p.rank,
            status,
            message,
            only_self,
        }));
    }
    PMIX_OPERATION_SUCCEEDED
}

/// One node: every participant is local, so the collected data is the
/// whole answer.
pub(crate) unsafe extern "C" fn up_fence(
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
pub(crate) unsafe fn key_list(keys: *mut *mut c_char) -> Vec<String> {
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

pub(crate) unsafe extern "C" fn up_publish(
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
        let value = match i.value.type_ {
            ty::STRING => {
                // SAFETY: a string value's pointer, NUL-terminated or NULL.
                let v = unsafe { i.value.data.string };
                NameValue::Text(if v.is_null() {
                    String::new()
                } else {
                    // SAFETY: as above.
                    unsafe { CStr::from_ptr(v) }.to_string_lossy().into_owned()
                })
            }
            ty::BYTE_OBJECT => {
                // SAFETY: a byte object, as its type says: `size` bytes at
                // `bytes` (or none), valid for the call.
                let bo = unsafe { i.value.data.bo };
                NameValue::Bytes(if bo.bytes.is_null() {
                    Vec::new()
                } else {
                    // SAFETY: as above.
                    unsafe { std::slice::from_raw_parts(bo.bytes.cast::<u8>(), bo.size) }.to_vec()
                })
            }
            _ => return PMIX_ERR_BAD_PARAM,
        };
        pairs.push((key, value));
    }
    send(Upcall::Names(NamesUpcall::Publish {
        nspace: nspace_of(p),
        rank: p.rank,
        pairs,
        done: OpDone::new(cb, cbdata),
    }));
    PMIX_SUCCESS
}

pub(crate) unsafe extern "C" fn up_unpublish(
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
    send(Upcall::Names(NamesUpcall::Unpublish {
        nspace: nspace_of(p),
        rank: p.rank,
        keys,
        done: OpDone::new(cb, cbdata),
    }));
    PMIX_SUCCESS
}

pub(crate) unsafe extern "C" fn up_lookup(
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
    let wait = infos
        .iter()
        .any(|i| key_text(&i.key) == crate::keys::PMIX_WAIT);
    let timeout = infos
        .iter()
        .find(|i| key_text(&i.key) == crate::keys::PMIX_TIMEOUT && i.value.type_ == ty::INT)
        // SAFETY: an int value, as its type says.
        .map(|i| unsafe { i.value.data.int })
        .filter(|&t| t > 0)
        .map(|t| t as u32);
    send(Upcall::Names(NamesUpcall::Lookup {
        nspace: nspace_of(p),
        rank: p.rank,
        keys,
        wait,
        timeout,
        done: LookupDone::new(cb, cbdata),
    }));
    PMIX_SUCCESS
}

pub(crate) fn key_text(k: &[c_char; KEY_BYTES]) -> String {
    let end = k.iter().position(|&c| c == 0).unwrap_or(KEY_BYTES);
    k[..end].iter().map(|&c| c as u8 as char).collect()
}

/// Every process of a job is on this node: nothing to ask elsewhere.
pub(crate) unsafe extern "C" fn up_dmodex(
    p: *const Proc,
    _i: *const Info,
    _n: usize,
    cb: ModexCb,
    d: *mut c_void,
) -> Status {
    // SAFETY: the library passes a valid proc for the call's duration.
    let Some(p) = (unsafe { p.as_ref() }) else {
        return PMIX_ERR_BAD_PARAM;
    };
    send(Upcall::Remote(RemoteUpcall::Dmodex {
        nspace: nspace_of(p),
        rank: p.rank,
        done: ModexDone::new(cb, d),
    }));
    PMIX_SUCCESS
}

/// A NUL-terminated string, or None.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string valid for the call.
pub(crate) unsafe fn opt_string(p: *const c_char) -> Option<String> {
    // SAFETY: per the contract.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

// --- event handlers (the library's progress thread) ---

/// `PMIX_ERR_LOST_CONNECTION`, which the library's `lost_connection()`
/// (src/mca/ptl/base/ptl_base_sendrecv.c) raises in the server for a
/// client that closed its connection before `PMIx_Finalize`, once it has
/// lowered the namespace's count of local processes. Its source is the
/// client; losses within the library's event window come as one event,
/// each after the first as a `PMIX_PROCID` value. The chain is always
/// completed: the library holds the event until its handlers answer.
pub(crate) unsafe extern "C" fn ev_lost_connection(
    _id: usize,
    status: Status,
    source: *const Proc,
    info: *mut Info,
    ninfo: usize,
    _results: *mut Info,
    _nresults: usize,
    cbfunc: EventDoneCb,
    cbdata: *mut c_void,
) {
    // Nothing may unwind into the library (a panicking sink, say): the
    // chain is completed all the same.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if status != PMIX_ERR_LOST_CONNECTION {
            return;
        }
        // SAFETY: the library passes the event's source and `ninfo` infos,
        // valid for the call.
        for (nspace, rank) in unsafe { lost_procs(source, info, ninfo) } {
            send(Upcall::Client(ClientUpcall::LostConnection {
                nspace,
                rank,
            }));
        }
    }));
    if let Some(cb) = cbfunc {
        // SAFETY: the library's continuation of this chain, called once
        // with its own `cbdata`, and no results.
        unsafe {
            cb(
                PMIX_EVENT_ACTION_COMPLETE,
                std::ptr::null_mut(),
                0,
                None,
                std::ptr::null_mut(),
                cbdata,
            )
        };
    }
}

/// The clients an event of lost connections names: its source, then the
/// `PMIX_PROCID` values of the losses the library aggregated with it.
///
/// # Safety
/// `source` is NULL or a valid proc; `info` is NULL or `ninfo` infos, both
/// valid for the call.
unsafe fn lost_procs(source: *const Proc, info: *const Info, ninfo: usize) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    // SAFETY: per the contract.
    if let Some(p) = unsafe { source.as_ref() } {
        out.push((nspace_of(p), p.rank));
    }
    let infos = if info.is_null() || ninfo == 0 {
        &[][..]
    } else {
        // SAFETY: per the contract.
        unsafe { std::slice::from_raw_parts(info, ninfo) }
    };
    for i in infos {
        if i.value.type_ != ty::PROC || key_text(&i.key) != crate::keys::PMIX_PROCID {
            continue;
        }
        // SAFETY: a PMIX_PROC value, as its type says: a proc, or NULL.
        if let Some(p) = unsafe { i.value.data.proc_.as_ref() } {
            let who = (nspace_of(p), p.rank);
            if !out.contains(&who) {
                out.push(who);
            }
        }
    }
    out
}
