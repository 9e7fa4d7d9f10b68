//! `libpmi.so.0`: the PMI-1 C API (MPICH's `pmi.h`, plus the extensions of
//! Slurm's: clique, id, and the unimplemented-everywhere rest) on fastpmi's
//! PMI-2 client. fastpmi's header is `include/pmi.h`.
//!
//! PMI-1 on PMI-2: `PMI_KVS_Put` is a put, `PMI_KVS_Commit` does nothing
//! (a put is complete when it returns), `PMI_Barrier` is a fence, and the
//! only keyval space is this job's (its name is the job id): naming another
//! one is `PMI_ERR_INVALID_ARG`. The clique is every rank of the job on this
//! node (`localRanks`, or derived from `PMI_process_mapping`).
//!
//! Conventions: a call before `PMI_Init` (or after `PMI_Finalize`) returns
//! `PMI_ERR_INIT`; a NULL pointer `PMI_ERR_INVALID_ARG`; a key longer than
//! 64 bytes `PMI_ERR_INVALID_KEY_LENGTH`, an empty key or one with `=`,
//! `;` or a blank `PMI_ERR_INVALID_KEY`; a value longer than 1024 bytes
//! `PMI_ERR_INVALID_VAL_LENGTH`; a buffer length `<= 0` or too small for
//! the result `PMI_ERR_INVALID_LENGTH` (the result is then truncated and
//! NUL-terminated); any other failure `PMI_FAIL` (reason in the debug log,
//! `FASTPMI_LOG=debug`). No panic crosses into C.
//!
//! Every `unsafe` block dereferences pointers handed in by the C caller,
//! under the contract of the function's `# Safety` section.
#![allow(non_snake_case)]
#![deny(unsafe_op_in_unsafe_fn)]

use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

use fastpmi_capi::cbuf;
use fastpmi_capi::codes::{self, *};
use fastpmi_capi::session::{self, current, Ctx, Session};

const PMI_TRUE: c_int = 1;
const PMI_FALSE: c_int = 0;
const MAX_MSG: usize = 4096;

/// [`fastpmi_capi::guard`] with PMI-1 codes (`ERR_OTHER` becomes
/// `PMI_FAIL`).
fn guard(what: &str, f: impl FnOnce() -> Result<c_int, c_int>) -> c_int {
    codes::to_pmi1(fastpmi_capi::guard(what, FAIL, f))
}

/// The session, after checking that `kvsname` names this job's keyval space.
///
/// # Safety
/// `kvsname` is NULL or a NUL-terminated string.
unsafe fn own_kvs(kvsname: *const c_char, what: &str) -> Result<Arc<Session>, c_int> {
    let s = current()?;
    // SAFETY: caller contract of `kvsname`.
    let name = unsafe { cbuf::text(kvsname, MAX_NAMELEN) }.map_err(|_| ERR_INVALID_ARG)?;
    if !s.is_own_job(Some(name)) || name.is_empty() {
        tracing::debug!(
            "{what}: keyval space {name:?} is not this job's ({})",
            s.pmi.job_id()
        );
        return Err(ERR_INVALID_ARG);
    }
    Ok(s)
}

/// Copy a name result; too small a buffer is `PMI_ERR_INVALID_LENGTH`.
///
/// # Safety
/// `dst` is NULL or valid for writing `length` bytes.
unsafe fn name_out(dst: *mut c_char, length: c_int, src: &str) -> Result<c_int, c_int> {
    cbuf::non_null(dst)?;
    let cap = cbuf::capacity(length)?;
    // SAFETY: non-NULL and `cap` bytes writable per the caller contract.
    let fits = unsafe { cbuf::copy_out(dst, cap, src.as_bytes()) };
    Ok(if fits { SUCCESS } else { ERR_INVALID_LENGTH })
}

/// Store one `int` result of the current session.
///
/// # Safety
/// `out` is NULL or valid for writing one `int`.
unsafe fn int_out(
    what: &str,
    out: *mut c_int,
    f: impl FnOnce(&Session) -> Result<c_int, c_int>,
) -> c_int {
    guard(what, || {
        let s = current()?;
        cbuf::non_null(out)?;
        let v = f(&s)?;
        // SAFETY: caller contract of `out`, checked non-NULL.
        unsafe { cbuf::put(out, v)? };
        Ok(SUCCESS)
    })
}

/// Initialise PMI; `*spawned` is `PMI_TRUE` if this job was spawned by
/// another. Calling it again is harmless.
///
/// # Safety
/// `spawned` is NULL or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn PMI_Init(spawned: *mut c_int) -> c_int {
    guard("PMI_Init", || {
        cbuf::non_null(spawned)?;
        let s = session::init("PMI_Init").map_err(|_| FAIL)?;
        let v = if s.pmi.spawned() { PMI_TRUE } else { PMI_FALSE };
        // SAFETY: caller contract of `spawned`, checked non-NULL.
        unsafe { cbuf::put(spawned, v)? };
        Ok(SUCCESS)
    })
}

/// `*initialized` = `PMI_TRUE` between `PMI_Init` and `PMI_Finalize`.
///
/// # Safety
/// `initialized` is NULL or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn PMI_Initialized(initialized: *mut c_int) -> c_int {
    guard("PMI_Initialized", || {
        let v = if session::is_initialized() {
            PMI_TRUE
        } else {
            PMI_FALSE
        };
        // SAFETY: caller contract of `initialized` (NULL rejected by `put`).
        unsafe { cbuf::put(initialized, v)? };
        Ok(SUCCESS)
    })
}

/// Leave PMI.
#[no_mangle]
pub extern "C" fn PMI_Finalize() -> c_int {
    guard("PMI_Finalize", || {
        session::finalize("PMI_Finalize")?;
        Ok(SUCCESS)
    })
}

/// Number of processes of the job.
///
/// # Safety
/// `size` is NULL or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn PMI_Get_size(size: *mut c_int) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { int_out("PMI_Get_size", size, |s| Ok(s.size() as c_int)) }
}

/// This process's rank in the job.
///
/// # Safety
/// `rank` is NULL or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn PMI_Get_rank(rank: *mut c_int) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { int_out("PMI_Get_rank", rank, |s| Ok(s.rank() as c_int)) }
}

/// The `universeSize` job attribute (the job size if the server has none).
///
/// # Safety
/// `size` is NULL or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn PMI_Get_universe_size(size: *mut c_int) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        int_out("PMI_Get_universe_size", size, |s| {
            Ok(s.universe_size()?.min(c_int::MAX as u32) as c_int)
        })
    }
}

/// Which application of an MPMD job (`:`-separated) this process runs.
///
/// # Safety
/// `appnum` is NULL or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn PMI_Get_appnum(appnum: *mut c_int) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { int_out("PMI_Get_appnum", appnum, |s| Ok(s.pmi.appnum())) }
}

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

/// Barrier over the job (a PMI-2 fence): afterwards every put made before
/// it by any rank is visible to every rank.
#[no_mangle]
pub extern "C" fn PMI_Barrier() -> c_int {
    guard("PMI_Barrier", || {
        current()?.pmi.fence().ctx("PMI_Barrier")?;
        Ok(SUCCESS)
    })
}

/// End the whole job with `exit_code` (this process exits with it too).
/// Before `PMI_Init`, prints the message and exits.
///
/// # Safety
/// `error_msg` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn PMI_Abort(exit_code: c_int, error_msg: *const c_char) -> c_int {
    guard("PMI_Abort", || {
        // SAFETY: caller contract of `error_msg`.
        let msg = unsafe { cbuf::lossy(error_msg, MAX_MSG) };
        match current() {
            Ok(s) => {
                session::report_abort(&s, "PMI_Abort", exit_code, &msg);
                s.pmi.abort(exit_code, &msg)
            }
            Err(_) => {
                eprintln!("PMI_Abort({exit_code}) before PMI_Init: {msg}");
                std::process::exit(exit_code & 0xff)
            }
        }
    })
}

/// The name of this job's keyval space (its job id).
///
/// # Safety
/// `kvsname` is NULL or valid for writing `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn PMI_KVS_Get_my_name(kvsname: *mut c_char, length: c_int) -> c_int {
    guard("PMI_KVS_Get_my_name", || {
        let s = current()?;
        // SAFETY: forwarded caller contract.
        unsafe { name_out(kvsname, length, s.pmi.job_id()) }
    })
}

/// Store a constant length (no init needed).
///
/// # Safety
/// `out` is NULL or valid for writing one `int`.
unsafe fn const_out(what: &str, out: *mut c_int, v: usize) -> c_int {
    guard(what, || {
        // SAFETY: caller contract of `out` (NULL rejected by `put`).
        unsafe { cbuf::put(out, v as c_int)? };
        Ok(SUCCESS)
    })
}

/// Buffer size for a keyval space name (NUL included): 256.
///
/// # Safety
/// `length` is NULL or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn PMI_KVS_Get_name_length_max(length: *mut c_int) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { const_out("PMI_KVS_Get_name_length_max", length, MAX_NAMELEN) }
}

/// Longest key: 64.
///
/// # Safety
/// `length` is NULL or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn PMI_KVS_Get_key_length_max(length: *mut c_int) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { const_out("PMI_KVS_Get_key_length_max", length, MAX_KEYLEN) }
}

/// Longest value: 1024.
///
/// # Safety
/// `length` is NULL or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn PMI_KVS_Get_value_length_max(length: *mut c_int) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { const_out("PMI_KVS_Get_value_length_max", length, MAX_VALLEN) }
}

/// Put `key` = `value` into this job's keyval space (`kvsname` must be its
/// name); visible to all after the next `PMI_Barrier`.
///
/// # Safety
/// `kvsname`, `key` and `value` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn PMI_KVS_Put(
    kvsname: *const c_char,
    key: *const c_char,
    value: *const c_char,
) -> c_int {
    guard("PMI_KVS_Put", || {
        // SAFETY: caller contract of the three strings.
        let (s, k, v) = unsafe {
            (
                own_kvs(kvsname, "PMI_KVS_Put")?,
                cbuf::key(key)?,
                cbuf::value(value)?,
            )
        };
        s.pmi.put(k, v).ctx("PMI_KVS_Put")?;
        Ok(SUCCESS)
    })
}

/// Nothing to do: a put is complete when `PMI_KVS_Put` returns (PMI-2
/// semantics). Checks `kvsname`.
///
/// # Safety
/// `kvsname` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn PMI_KVS_Commit(kvsname: *const c_char) -> c_int {
    guard("PMI_KVS_Commit", || {
        // SAFETY: caller contract of `kvsname`.
        unsafe { own_kvs(kvsname, "PMI_KVS_Commit")? };
        Ok(SUCCESS)
    })
}

/// Get `key` from this job's keyval space into `value[length]`. Not found:
/// `PMI_FAIL`; does not fit: truncated, `PMI_ERR_INVALID_LENGTH`. Keys that
/// PMI-1 servers answer from the job (`PMI_process_mapping`, any other
/// `PMI_*` key, `universeSize`) are read as PMI-2 job attributes first.
///
/// # Safety
/// `kvsname` and `key` are NULL or NUL-terminated strings; `value` is NULL
/// or valid for writing `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn PMI_KVS_Get(
    kvsname: *const c_char,
    key: *const c_char,
    value: *mut c_char,
    length: c_int,
) -> c_int {
    guard("PMI_KVS_Get", || {
        // SAFETY: caller contract of `kvsname` and `key`.
        let (s, k) = unsafe { (own_kvs(kvsname, "PMI_KVS_Get")?, cbuf::key(key)?) };
        cbuf::non_null(value)?;
        let cap = cbuf::capacity(length)?;
        // PMI-1 clients read job attributes as keys of the KVS
        // (`PMI_process_mapping`, `universeSize`): PMI-2 job attributes.
        let attr = if k.starts_with(b"PMI_") || k == b"universeSize" {
            s.pmi.job_attr(k).ctx("PMI_KVS_Get")?
        } else {
            None
        };
        let got = match attr {
            Some(v) => Some(v),
            None => s.pmi.get(k, None).ctx("PMI_KVS_Get")?,
        };
        let Some(v) = got else {
            tracing::debug!("PMI_KVS_Get: {} not found", String::from_utf8_lossy(k));
            return Err(FAIL);
        };
        // SAFETY: non-NULL, `cap` bytes writable per the caller contract.
        let fits = unsafe { cbuf::copy_out(value, cap, &v) };
        Ok(if fits { SUCCESS } else { ERR_INVALID_LENGTH })
    })
}

/// Key/value pair of the spawn and option functions (`pmi.h`).
#[repr(C)]
pub struct PMI_keyval_t {
    pub key: *const c_char,
    pub val: *mut c_char,
}

/// Start a new job: `count` commands (`cmds[i]`, `maxprocs[i]` processes,
/// NULL-terminated arguments `argvs[i]`, `info_keyval_sizes[i]` info pairs
/// in `info_keyval_vectors[i]`), with `preput_keyval_size` pairs of
/// `preput_keyval_vector` in its KVS. `errors` gets one code per process
/// (0: started). Sent as PMI-2 `spawn` to this process's server.
///
/// # Safety
/// The arrays hold `count` elements, the strings are NUL-terminated,
/// `errors` has room for every process.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn PMI_Spawn_multiple(
    count: c_int,
    cmds: *const *const c_char,
    argvs: *const *const *const c_char,
    maxprocs: *const c_int,
    info_keyval_sizes: *const c_int,
    info_keyval_vectors: *const *const PMI_keyval_t,
    preput_keyval_size: c_int,
    preput_keyval_vector: *const PMI_keyval_t,
    errors: *mut c_int,
) -> c_int {
    use fastpmi_capi::spawn::{self as sp, at};
    guard("PMI_Spawn_multiple", || {
        let s = current()?;
        // SAFETY (the block and its closures): the arrays and strings follow
        // the caller contract above; `at` reads element i of a checked array.
        let cmds = unsafe {
            sp::commands(
                count,
                cmds,
                maxprocs,
                |i| {
                    let argv = if argvs.is_null() {
                        std::ptr::null()
                    } else {
                        at(argvs, i)
                    };
                    sp::args_until_null(argv)
                },
                |i| {
                    if info_keyval_sizes.is_null() || info_keyval_vectors.is_null() {
                        return Ok(Vec::new());
                    }
                    let arr = at(info_keyval_vectors, i);
                    sp::pairs(at(info_keyval_sizes, i), |j| {
                        cbuf::non_null(arr)?;
                        let kv = &*arr.add(j);
                        Ok((sp::string(kv.key)?, sp::string(kv.val)?))
                    })
                },
            )?
        };
        let preput = if preput_keyval_size > 0 {
            cbuf::non_null(preput_keyval_vector)?;
            sp::pairs(preput_keyval_size, |j| {
                // SAFETY: `preput_keyval_size` pairs (caller contract).
                unsafe {
                    let kv = &*preput_keyval_vector.add(j);
                    Ok((sp::string(kv.key)?, sp::string(kv.val)?))
                }
            })?
        } else {
            Vec::new()
        };
        let req = sp::SpawnRequest { cmds, preput };
        // SAFETY: `errors` per the caller contract; no job id out in PMI-1.
        unsafe { sp::run(&s, req, errors, std::ptr::null_mut(), 0) }
    })
}

/// The job id (Slurm: job.step; here the launcher's job id).
///
/// # Safety
/// `id_str` is NULL or valid for writing `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn PMI_Get_id(id_str: *mut c_char, length: c_int) -> c_int {
    guard("PMI_Get_id", || {
        let s = current()?;
        // SAFETY: forwarded caller contract.
        unsafe { name_out(id_str, length, s.pmi.job_id()) }
    })
}

/// Same as [`PMI_Get_id`] (one job, one keyval space domain).
///
/// # Safety
/// `id_str` is NULL or valid for writing `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn PMI_Get_kvs_domain_id(id_str: *mut c_char, length: c_int) -> c_int {
    guard("PMI_Get_kvs_domain_id", || {
        let s = current()?;
        // SAFETY: forwarded caller contract.
        unsafe { name_out(id_str, length, s.pmi.job_id()) }
    })
}

/// Buffer size for [`PMI_Get_id`] (NUL included): 256.
///
/// # Safety
/// `length` is NULL or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn PMI_Get_id_length_max(length: *mut c_int) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { const_out("PMI_Get_id_length_max", length, MAX_NAMELEN) }
}

/// Number of this job's processes on this node.
///
/// # Safety
/// `size` is NULL or valid for writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn PMI_Get_clique_size(size: *mut c_int) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        int_out("PMI_Get_clique_size", size, |s| {
            Ok(s.local_ranks().len() as c_int)
        })
    }
}

/// The ranks of this job on this node, in increasing order, into
/// `ranks[length]`; `length` smaller than the clique size is
/// `PMI_ERR_INVALID_LENGTH` (nothing written).
///
/// # Safety
/// `ranks` is NULL or valid for writing `length` ints.
#[no_mangle]
pub unsafe extern "C" fn PMI_Get_clique_ranks(ranks: *mut c_int, length: c_int) -> c_int {
    guard("PMI_Get_clique_ranks", || {
        let s = current()?;
        cbuf::non_null(ranks)?;
        let cap = cbuf::capacity(length)?;
        let local = s.local_ranks();
        if local.len() > cap {
            return Err(ERR_INVALID_LENGTH);
        }
        for (i, &r) in local.iter().enumerate() {
            // SAFETY: `i < local.len() <= cap`, inside the caller's array.
            unsafe { ranks.add(i).write(r as c_int) };
        }
        Ok(SUCCESS)
    })
}

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
