//! Start and end of a process's PMI life (`PMI2_Init`, `PMI2_Finalize`,
//! `PMI2_Initialized`, `PMI2_Abort`), its job id and rank, and connecting to
//! other jobs (`PMI2_Job_Connect`, `PMI2_Job_Disconnect`).

use std::ffi::{c_char, c_int, c_void};

use fastpmi_capi::cbuf;
use fastpmi_capi::codes::*;
use fastpmi_capi::guard;
use fastpmi_capi::session::{self, current, Ctx};

use crate::{MAX_JOBID, MAX_MSG};

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
                s.pmi.abort_with(1, &msg, flag != 0)
            }
            Err(_) => {
                eprintln!("PMI2_Abort before PMI2_Init: {msg}");
                std::process::exit(1)
            }
        }
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
