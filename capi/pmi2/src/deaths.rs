//! Dead ranks of a fault-tolerant job (`fastpmi --fault-tolerant`,
//! `include/fastpmi.h`): the dead set, read from the job segment without a
//! system call, and a wait for the next death.

use std::ffi::c_int;
use std::time::Duration;

use fastpmi_capi::cbuf;
use fastpmi_capi::codes::*;
use fastpmi_capi::guard;
use fastpmi_capi::session::current;

/// The job's dead ranks, ascending: up to `maxranks` in `ranks`, their
/// count in `*nranks` (`PMI2_ERR_NOMEM` when cut; `maxranks` 0: only the
/// count).
///
/// # Safety
/// `ranks` has room for `maxranks` ints; `nranks` is valid for one int.
#[no_mangle]
pub unsafe extern "C" fn FPMI_Dead_ranks(
    ranks: *mut c_int,
    maxranks: c_int,
    nranks: *mut c_int,
) -> c_int {
    guard("FPMI_Dead_ranks", ERR_OTHER, || {
        let s = current()?;
        cbuf::non_null(nranks)?;
        // 0: only the count.
        let cap = match maxranks {
            0 => 0,
            n => cbuf::capacity(n)?,
        };
        if cap > 0 {
            cbuf::non_null(ranks)?;
        }
        let dead = s
            .pmi
            .dead_ranks()
            .map_err(|e| from_client("FPMI_Dead_ranks", &e))?;
        let k = dead.len().min(cap);
        // SAFETY: checked non-NULL; `ranks` has room for `cap` ints.
        unsafe {
            cbuf::put(nranks, dead.len() as c_int)?;
            for (i, r) in dead.iter().take(k).enumerate() {
                *ranks.add(i) = *r as c_int;
            }
        }
        Ok(if k == dead.len() { SUCCESS } else { ERR_NOMEM })
    })
}

/// Waits until more than `seen` ranks died, at most `timeout_ms` (< 0: no
/// limit, 0: no wait); `*count` is the number of deaths then (`seen` or
/// less when the time passed first).
///
/// # Safety
/// `count` is valid for one int.
#[no_mangle]
pub unsafe extern "C" fn FPMI_Wait_death(
    seen: c_int,
    timeout_ms: c_int,
    count: *mut c_int,
) -> c_int {
    guard("FPMI_Wait_death", ERR_OTHER, || {
        let s = current()?;
        cbuf::non_null(count)?;
        if seen < 0 {
            return Err(ERR_INVALID_ARG);
        }
        let timeout = u64::try_from(timeout_ms).ok().map(Duration::from_millis);
        let n = match s.pmi.wait_for_death(seen as u32, timeout) {
            Ok(Some(n)) => n,
            Ok(None) => s
                .pmi
                .deaths()
                .map_err(|e| from_client("FPMI_Wait_death", &e))?,
            Err(e) => return Err(from_client("FPMI_Wait_death", &e)),
        };
        // SAFETY: checked non-NULL.
        unsafe { cbuf::put(count, n.min(c_int::MAX as u32) as c_int)? };
        Ok(SUCCESS)
    })
}
