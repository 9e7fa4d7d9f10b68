//! What a process learns of its job: size, rank, universe size, appnum,
//! job id, and its clique (the job's ranks on this node).

use std::ffi::{c_char, c_int};

use fastpmi_capi::cbuf;
use fastpmi_capi::codes::*;
use fastpmi_capi::session::current;

use crate::{const_out, guard, int_out, name_out};

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
