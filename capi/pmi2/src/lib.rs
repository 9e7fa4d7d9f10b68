//! `libpmi2.so.0`: fastpmi's drop-in for Slurm's PMI-2 client library.
//!
//! Every function Slurm's `libpmi2.so.0` exports, with the prototypes and
//! constants of `slurm/pmi2.h` (fastpmi's own header is `include/pmi2.h`),
//! built on the Rust client: under the fastpmi launcher, put/get/fence and
//! node attributes go through the shared-memory job segment; under any other
//! PMI-2 server (Hydra, slurmstepd) or with a segment this library does not
//! know, over the wire; with no PMI environment, as a singleton.
//!
//! Conventions of every entry point:
//! * a call before `PMI2_Init` (or after `PMI2_Finalize`) returns
//!   `PMI2_ERR_INIT`; a NULL pointer argument `PMI2_ERR_INVALID_ARG`; a
//!   key longer than `PMI2_MAX_KEYLEN` `PMI2_ERR_INVALID_KEY_LENGTH`, an
//!   empty key or one with `=`, `;` or a blank `PMI2_ERR_INVALID_KEY`; a
//!   value longer than `PMI2_MAX_VALLEN` `PMI2_ERR_INVALID_VAL_LENGTH`; a
//!   buffer length `<= 0` `PMI2_ERR_INVALID_LENGTH`;
//! * a string result is copied NUL-terminated; when it does not fit it is
//!   truncated and the call returns `PMI2_ERR_NOMEM` (except
//!   `PMI2_KVS_Get`, which follows the negative-`vallen` rule);
//! * anything else that fails (connection, server refusal, aborted job) is
//!   `PMI2_ERR_OTHER`, with the reason in the debug log (`FASTPMI_LOG=debug`);
//! * no panic crosses into C ([`fastpmi_capi::guard`]).
//!
//! Every `unsafe` block dereferences pointers handed in by the C caller,
//! under the contract of the function's `# Safety` section (the one the C
//! API documents).
#![allow(non_snake_case)]
#![deny(unsafe_op_in_unsafe_fn)]

/// fastpmi's extension: `FPMI_Group_*` and `FPMI_Pset_*` (`include/fastpmi.h`).
pub mod groups;

use std::ffi::{c_char, c_int, c_void};

use fastpmi::client::TransportKind;
use fastpmi_capi::cbuf;
use fastpmi_capi::codes::*;
use fastpmi_capi::guard;
use fastpmi_capi::session::{self, current, Ctx};

/// `PMI2_ID_NULL`: no source rank hint.
const ID_NULL: c_int = -1;
/// Longest job id accepted as an argument.
const MAX_JOBID: usize = 4096;
/// Longest abort message passed on.
const MAX_MSG: usize = 4096;

/// Initialise PMI: `*spawned`, `*size`, `*rank`, `*appnum` of this process.
/// Calling it again returns the same values.
///
/// # Safety
/// Each pointer is NULL or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn PMI2_Init(
    spawned: *mut c_int,
    size: *mut c_int,
    rank: *mut c_int,
    appnum: *mut c_int,
) -> c_int {
    guard("PMI2_Init", ERR_OTHER, || {
        for p in [spawned, size, rank, appnum] {
            cbuf::non_null(p)?;
        }
        let s = session::init("PMI2_Init")?;
        // SAFETY: all four checked non-NULL; the caller passes int pointers.
        unsafe {
            cbuf::put(spawned, c_int::from(s.pmi.spawned()))?;
            cbuf::put(size, s.size() as c_int)?;
            cbuf::put(rank, s.rank() as c_int)?;
            cbuf::put(appnum, s.pmi.appnum())?;
        }
        Ok(SUCCESS)
    })
}

/// Leave PMI (the launcher then expects this process to exit).
#[no_mangle]
pub extern "C" fn PMI2_Finalize() -> c_int {
    guard("PMI2_Finalize", ERR_OTHER, || {
        session::finalize("PMI2_Finalize")?;
        Ok(SUCCESS)
    })
}

/// 1 between a successful `PMI2_Init` and `PMI2_Finalize`, else 0.
#[no_mangle]
pub extern "C" fn PMI2_Initialized() -> c_int {
    guard("PMI2_Initialized", 0, || {
        Ok(c_int::from(session::is_initialized()))
    })
}

/// End the whole job (fastpmi ends the job whatever `flag` says); the
/// process exits with status 1. Before `PMI2_Init`, prints `msg` and exits.
///
/// # Safety
/// `msg` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn PMI2_Abort(flag: c_int, msg: *const c_char) -> c_int {
    guard("PMI2_Abort", ERR_OTHER, || {
        // SAFETY: caller contract of `msg`.
        let msg = unsafe { cbuf::lossy(msg, MAX_MSG) };
        match current() {
            Ok(s) => {
                tracing::debug!("PMI2_Abort(flag={flag})");
                session::report_abort(&s, "PMI2_Abort", 1, &msg);
                s.pmi.abort(1, &msg)
            }
            Err(_) => {
                eprintln!("PMI2_Abort before PMI2_Init: {msg}");
                std::process::exit(1)
            }
        }
    })
}

/// Start a new job: `count` commands (`cmds[i]`, `maxprocs[i]` processes,
/// `argcs[i]` arguments in `argvs[i]`, `info_keyval_sizes[i]` info pairs in
/// the `MPID_Info` array `info_keyval_vectors[i]`), with the pre-put pairs
/// `*preput_keyval_vector[j]` in its KVS. `errors` gets one code per
/// process (0: started); `jobId` the new job's id. Sent as PMI-2 `spawn` to
/// whichever server this process talks to. A singleton has no server and
/// gets `PMI2_ERR_OTHER`.
///
/// # Safety
/// The arrays hold `count` elements (`preput_keyval_size` for the pre-put
/// vector), the strings are NUL-terminated, `errors` has room for every
/// process, `jobId` is NULL or valid for `jobIdSize` bytes.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn PMI2_Job_Spawn(
    count: c_int,
    cmds: *const *const c_char,
    argcs: *mut c_int,
    argvs: *const *const *const c_char,
    maxprocs: *const c_int,
    info_keyval_sizes: *const c_int,
    info_keyval_vectors: *const *const c_void,
    preput_keyval_size: c_int,
    preput_keyval_vector: *const *const c_void,
    job_id: *mut c_char,
    job_id_size: c_int,
    errors: *mut c_int,
) -> c_int {
    use fastpmi_capi::spawn::{self as sp, at, MpidInfo};
    guard("PMI2_Job_Spawn", ERR_OTHER, || {
        let s = current()?;
        let info = info_keyval_vectors.cast::<*const MpidInfo>();
        let preput = preput_keyval_vector.cast::<*const MpidInfo>();
        // SAFETY (all blocks below): the arrays and strings follow the
        // caller contract above; `at` reads element i of a checked array.
        let cmds = unsafe {
            sp::commands(
                count,
                cmds,
                maxprocs,
                |i| {
                    let n = if argcs.is_null() {
                        0
                    } else {
                        at(argcs.cast_const(), i)
                    };
                    let n = sp::count(n, sp::SPAWN_MAX_ARGS, "argc")?;
                    let argv = if argvs.is_null() {
                        std::ptr::null()
                    } else {
                        at(argvs, i)
                    };
                    sp::args(argv, n)
                },
                |i| {
                    if info_keyval_sizes.is_null() || info.is_null() {
                        return Ok(Vec::new());
                    }
                    let arr = at(info, i);
                    sp::pairs(at(info_keyval_sizes, i), |j| {
                        cbuf::non_null(arr)?;
                        let kv = &*arr.add(j);
                        Ok((sp::string(kv.key)?, sp::string(kv.value)?))
                    })
                },
            )?
        };
        let preput = if preput_keyval_size > 0 {
            cbuf::non_null(preput)?;
            sp::pairs(preput_keyval_size, |j| {
                // SAFETY: `preput` holds `preput_keyval_size` pointers to
                // `MPID_Info` (caller contract); each is checked non-NULL.
                unsafe {
                    let kv = at(preput, j);
                    cbuf::non_null(kv)?;
                    Ok((sp::string((*kv).key)?, sp::string((*kv).value)?))
                }
            })?
        } else {
            Vec::new()
        };
        let req = sp::SpawnRequest { cmds, preput };
        // SAFETY: output pointers per the caller contract.
        unsafe { sp::run(&s, req, errors, job_id, job_id_size) }
    })
}

/// This job's id, NUL-terminated in `jobid[jobid_size]`.
///
/// # Safety
/// `jobid` is NULL or valid for writing `jobid_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn PMI2_Job_GetId(jobid: *mut c_char, jobid_size: c_int) -> c_int {
    guard("PMI2_Job_GetId", ERR_OTHER, || {
        let s = current()?;
        cbuf::non_null(jobid)?;
        let cap = cbuf::capacity(jobid_size)?;
        // SAFETY: non-NULL and `cap` bytes writable per the caller contract.
        let fits = unsafe { cbuf::copy_out(jobid, cap, s.pmi.job_id().as_bytes()) };
        Ok(if fits { SUCCESS } else { ERR_NOMEM })
    })
}

/// This process's rank in the job.
///
/// # Safety
/// `rank` is NULL or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn PMI2_Job_GetRank(rank: *mut c_int) -> c_int {
    guard("PMI2_Job_GetRank", ERR_OTHER, || {
        let s = current()?;
        // SAFETY: caller contract of `rank` (NULL is rejected by `put`).
        unsafe { cbuf::put(rank, s.rank() as c_int)? };
        Ok(SUCCESS)
    })
}

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

/// Connect to another job of the same launcher (its KVS is then read with
/// `PMI2_KVS_Get(jobid, ...)`). `conn` is not used (no known server asks for
/// a KVS copy) and may be NULL.
///
/// # Safety
/// `jobid` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn PMI2_Job_Connect(jobid: *const c_char, _conn: *mut c_void) -> c_int {
    guard("PMI2_Job_Connect", ERR_OTHER, || {
        let s = current()?;
        // SAFETY: caller contract of `jobid`.
        let j = unsafe { cbuf::text(jobid, MAX_JOBID)? };
        s.pmi.job_connect(j).ctx("PMI2_Job_Connect")?;
        Ok(SUCCESS)
    })
}

/// Disconnect from a job connected with `PMI2_Job_Connect`.
///
/// # Safety
/// `jobid` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn PMI2_Job_Disconnect(jobid: *const c_char) -> c_int {
    guard("PMI2_Job_Disconnect", ERR_OTHER, || {
        let s = current()?;
        // SAFETY: caller contract of `jobid`.
        let j = unsafe { cbuf::text(jobid, MAX_JOBID)? };
        s.pmi.job_disconnect(j).ctx("PMI2_Job_Disconnect")?;
        Ok(SUCCESS)
    })
}

/// Put `key` = `value` into this job's KVS; visible to every rank after the
/// next `PMI2_KVS_Fence`. A key put twice keeps the last value.
///
/// # Safety
/// `key` and `value` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn PMI2_KVS_Put(key: *const c_char, value: *const c_char) -> c_int {
    guard("PMI2_KVS_Put", ERR_OTHER, || {
        let s = current()?;
        // SAFETY: caller contract of `key` and `value`.
        let (k, v) = unsafe { (cbuf::key(key)?, cbuf::value(value)?) };
        s.pmi.put(k, v).ctx("PMI2_KVS_Put")?;
        Ok(SUCCESS)
    })
}

/// Barrier over the job; afterwards every put made before any rank's fence
/// is visible to every rank.
#[no_mangle]
pub extern "C" fn PMI2_KVS_Fence() -> c_int {
    guard("PMI2_KVS_Fence", ERR_OTHER, || {
        let s = current()?;
        s.pmi.fence().ctx("PMI2_KVS_Fence")?;
        Ok(SUCCESS)
    })
}

/// Get `key` from job `jobid` (NULL, empty or this job's id: this job);
/// `src_pmi_id` is the putting rank if known, else `PMI2_ID_NULL`.
///
/// Found: the value is copied NUL-terminated into `value[maxvalue]` and
/// `*vallen` is its length; if it does not fit it is truncated to
/// `maxvalue - 1` bytes and `*vallen` is minus its length (as Slurm's and
/// MPICH's clients do), still `PMI2_SUCCESS`. Not found: `PMI2_ERR_OTHER`
/// (as Slurm's client), `value` empty and `*vallen` 0.
///
/// # Safety
/// `jobid` and `key` are NULL or NUL-terminated strings; `value` is NULL or
/// valid for writing `maxvalue` bytes; `vallen` is NULL or valid for writing
/// one `int`.
#[no_mangle]
pub unsafe extern "C" fn PMI2_KVS_Get(
    jobid: *const c_char,
    src_pmi_id: c_int,
    key: *const c_char,
    value: *mut c_char,
    maxvalue: c_int,
    vallen: *mut c_int,
) -> c_int {
    guard("PMI2_KVS_Get", ERR_OTHER, || {
        let s = current()?;
        // SAFETY: caller contract of `jobid` and `key`.
        let (job, k) = unsafe { (cbuf::opt_text(jobid, MAX_JOBID)?, cbuf::key(key)?) };
        cbuf::non_null(value)?;
        cbuf::non_null(vallen)?;
        let cap = cbuf::capacity(maxvalue)?;
        let src = (src_pmi_id != ID_NULL && src_pmi_id >= 0).then_some(src_pmi_id as u32);
        // Fills the caller's buffer straight from the segment (no copy in
        // between): the get/fence hot path of every PMI-2 program.
        let fill = |got: Option<&[u8]>| -> Result<c_int, c_int> {
            // SAFETY: `value` (non-NULL, `cap` bytes) and `vallen` (non-NULL)
            // are writable per the caller contract.
            unsafe {
                match got {
                    Some(v) => {
                        let len = v.len().min(c_int::MAX as usize) as c_int;
                        let fits = cbuf::copy_out(value, cap, v);
                        cbuf::put(vallen, if fits { len } else { -len })?;
                        Ok(SUCCESS)
                    }
                    None => {
                        tracing::debug!("PMI2_KVS_Get: {} not found", String::from_utf8_lossy(k));
                        cbuf::copy_out(value, cap, b"");
                        cbuf::put(vallen, 0)?;
                        Err(ERR_OTHER)
                    }
                }
            }
        };
        if s.is_own_job(job) {
            s.pmi.get_with(None, k, src, fill).ctx("PMI2_KVS_Get")?
        } else if s.pmi.transport() == TransportKind::Singleton {
            // A singleton has no other jobs (its client store has one KVS).
            fill(None)
        } else {
            s.pmi.get_with(job, k, src, fill).ctx("PMI2_KVS_Get")?
        }
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

/// Shared by the integer-array getters: up to `arraylen` elements of the
/// comma-separated attribute (more are cut, as in MPICH's client).
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
) -> Result<c_int, c_int> {
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
    guard("PMI2_Info_GetNodeAttrIntArray", ERR_OTHER, || {
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
    })
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
    guard("PMI2_Info_GetJobAttrIntArray", ERR_OTHER, || {
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
    })
}

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

/// Ring exchange: every rank of the job calls it with its `value` (shorter
/// than `maxvalue` and than `PMI2_MAX_VALLEN`); each gets its rank and the
/// job size, and the values of rank - 1 (`left`) and rank + 1 (`right`),
/// modulo the size. Done over the KVS: put, fence, two gets. A neighbour's
/// value that does not fit `maxvalue` is truncated (`PMI2_ERR_NOMEM`).
///
/// # Safety
/// `value` is NULL or a NUL-terminated string; `rank` and `ranks` are NULL
/// or valid for writing one `int`; `left` and `right` are NULL or valid
/// for writing `maxvalue` bytes.
#[no_mangle]
pub unsafe extern "C" fn PMIX_Ring(
    value: *const c_char,
    rank: *mut c_int,
    ranks: *mut c_int,
    left: *mut c_char,
    right: *mut c_char,
    maxvalue: c_int,
) -> c_int {
    guard("PMIX_Ring", ERR_OTHER, || {
        let s = current()?;
        cbuf::non_null(rank)?;
        cbuf::non_null(ranks)?;
        cbuf::non_null(left)?;
        cbuf::non_null(right)?;
        let cap = cbuf::capacity(maxvalue)?;
        // The stored value carries a one-byte prefix: at most
        // MAX_VALLEN - 1 bytes of the caller's, and shorter than `cap`.
        let max = (cap - 1).min(MAX_VALLEN - 1);
        // SAFETY: caller contract of `value`.
        let v = unsafe { cbuf::bounded(value, max) }.map_err(|long| {
            if long {
                ERR_INVALID_VAL_LENGTH
            } else {
                ERR_INVALID_ARG
            }
        })?;
        if v.contains(&b'\n') {
            return Err(ERR_INVALID_VAL);
        }
        let (l, r) = s.ring(v)?;
        // SAFETY: all four outputs checked non-NULL; `left` and `right`
        // hold `cap` writable bytes per the caller contract.
        unsafe {
            cbuf::put(rank, s.rank() as c_int)?;
            cbuf::put(ranks, s.size() as c_int)?;
            let fits_l = cbuf::copy_out(left, cap, &l);
            let fits_r = cbuf::copy_out(right, cap, &r);
            Ok(if fits_l && fits_r { SUCCESS } else { ERR_NOMEM })
        }
    })
}
