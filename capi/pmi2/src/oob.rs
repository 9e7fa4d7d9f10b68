//! fastpmi's out-of-band channel (`include/fastpmi.h`, docs/oob.md):
//! `FPMI_Oob_open`, `FPMI_Oob_poll` and `FPMI_Oob_close`, over the
//! client's [`OobChannel`]. One channel per process, held here.

use std::ffi::{c_char, c_int, c_longlong};
use std::os::fd::AsRawFd;
use std::sync::Mutex;
use std::time::Duration;

use fastpmi_capi::cbuf;
use fastpmi_capi::codes::*;
use fastpmi_capi::guard;
use fastpmi_capi::session::current;
use fastpmi_client::{OobChannel, OobNotice, PmiError};

use crate::groups::FPMI_ERR_NOT_SUPPORTED;

/// `FPMI_Oob_notice.kind` of an abort notice.
pub const FPMI_OOB_ABORT: c_int = 1;
/// `FPMI_Oob_notice.kind` of a checkpoint request.
pub const FPMI_OOB_CHECKPOINT: c_int = 2;
/// `FPMI_Oob_notice.kind` of a death in a fault-tolerant job (of this job
/// or of one connected to it), which goes on.
pub const FPMI_OOB_DEATH: c_int = 3;
/// Bytes of `FPMI_Oob_notice.jobid`.
pub const FPMI_OOB_JOBID_MAX: usize = 256;
/// Bytes of `FPMI_Oob_notice.message`.
pub const FPMI_OOB_MESSAGE_MAX: usize = 1024;

/// `FPMI_Oob_notice` of `fastpmi.h`.
#[repr(C)]
pub struct FpmiOobNotice {
    pub kind: c_int,
    pub rank: c_int,
    pub exitcode: c_int,
    pub seq: c_longlong,
    pub jobid: [c_char; FPMI_OOB_JOBID_MAX],
    pub message: [c_char; FPMI_OOB_MESSAGE_MAX],
}

static CHANNEL: Mutex<Option<OobChannel>> = Mutex::new(None);

fn channel() -> std::sync::MutexGuard<'static, Option<OobChannel>> {
    CHANNEL.lock().unwrap_or_else(|p| p.into_inner())
}

fn code(what: &str, e: &PmiError) -> c_int {
    match e {
        PmiError::Unsupported(_) => {
            tracing::warn!("{what}: {e}");
            FPMI_ERR_NOT_SUPPORTED
        }
        e => fastpmi_capi::codes::from_client(what, e),
    }
}

/// Open this process's out-of-band channel: the launcher then sends it an
/// abort notice before it tears the job down, and checkpoint requests
/// (`fastpmi checkpoint`), each followed by `signal` ("SIGUSR2", "USR2",
/// ...; NULL or "NONE": no signal). `*fd` (if not NULL) gets a descriptor
/// that is readable when a notice has arrived, for poll(2). Install the
/// signal's handler first; call `FPMI_Oob_poll` outside it.
/// `FPMI_ERR_NOT_SUPPORTED` under a server without the channel (Hydra,
/// slurmstepd) and as a singleton; `PMI2_ERR_INVALID_ARG` for a signal
/// the channel does not send, or when it is open already.
///
/// # Safety
/// `signal` is NULL or a NUL-terminated string; `fd` is NULL or valid for
/// writing one `int`.
#[no_mangle]
pub unsafe extern "C" fn FPMI_Oob_open(signal: *const c_char, fd: *mut c_int) -> c_int {
    guard("FPMI_Oob_open", ERR_OTHER, || {
        let s = current()?;
        // SAFETY: caller contract of `signal`.
        let signal = unsafe { cbuf::opt_text(signal, 64)? };
        let mut ch = channel();
        if ch.is_some() {
            return Err(ERR_INVALID_ARG);
        }
        let opened = s
            .pmi
            .open_oob(signal.filter(|v| !v.eq_ignore_ascii_case("NONE")))
            .map_err(|e| code("FPMI_Oob_open", &e))?;
        if !fd.is_null() {
            // SAFETY: non-NULL `fd` is writable per the caller contract.
            unsafe { cbuf::put(fd, opened.as_raw_fd())? };
        }
        *ch = Some(opened);
        Ok(SUCCESS)
    })
}

/// Take the next notice: wait up to `timeout_ms` (0: do not wait; < 0:
/// until one comes). `*received` = 1 and `*notice` filled when one came,
/// else 0. `PMI2_ERR_INIT` without an open channel; `PMI2_ERR_OTHER` when
/// the launcher closed it (the job ended).
///
/// # Safety
/// `notice` and `received` are valid for writing one `FPMI_Oob_notice`
/// and one `int`.
#[no_mangle]
pub unsafe extern "C" fn FPMI_Oob_poll(
    timeout_ms: c_int,
    notice: *mut FpmiOobNotice,
    received: *mut c_int,
) -> c_int {
    guard("FPMI_Oob_poll", ERR_OTHER, || {
        cbuf::non_null(notice)?;
        cbuf::non_null(received)?;
        let mut ch = channel();
        let ch = ch.as_mut().ok_or(ERR_INIT)?;
        let timeout = u64::try_from(timeout_ms).ok().map(Duration::from_millis);
        let got = ch
            .recv_timeout(timeout)
            .map_err(|e| code("FPMI_Oob_poll", &e))?;
        let Some(n) = got else {
            // SAFETY: checked non-NULL; writable per the caller contract.
            unsafe { cbuf::put(received, 0)? };
            return Ok(SUCCESS);
        };
        let mut out = FpmiOobNotice {
            kind: 0,
            rank: -1,
            exitcode: 0,
            seq: 0,
            jobid: [0; FPMI_OOB_JOBID_MAX],
            message: [0; FPMI_OOB_MESSAGE_MAX],
        };
        let (jobid, message) = match n {
            OobNotice::Abort {
                jobid,
                rank,
                exitcode,
                message,
            } => {
                out.kind = FPMI_OOB_ABORT;
                out.rank = rank.and_then(|r| c_int::try_from(r).ok()).unwrap_or(-1);
                out.exitcode = exitcode;
                (jobid, message)
            }
            OobNotice::Died {
                jobid,
                rank,
                exitcode,
                message,
            } => {
                out.kind = FPMI_OOB_DEATH;
                out.rank = c_int::try_from(rank).unwrap_or(-1);
                out.exitcode = exitcode;
                (jobid, message)
            }
            OobNotice::Checkpoint { jobid, seq } => {
                out.kind = FPMI_OOB_CHECKPOINT;
                out.seq = c_longlong::try_from(seq).unwrap_or(c_longlong::MAX);
                (jobid, String::new())
            }
        };
        // SAFETY: both arrays are this struct's own, of the sizes given.
        unsafe {
            cbuf::copy_out(out.jobid.as_mut_ptr(), FPMI_OOB_JOBID_MAX, jobid.as_bytes());
            cbuf::copy_out(
                out.message.as_mut_ptr(),
                FPMI_OOB_MESSAGE_MAX,
                message.as_bytes(),
            );
        }
        // SAFETY: checked non-NULL; writable per the caller contract.
        unsafe {
            cbuf::put(notice, out)?;
            cbuf::put(received, 1)?;
        }
        Ok(SUCCESS)
    })
}

/// Close the channel (the job goes on). `PMI2_ERR_INIT` when none is open.
#[no_mangle]
pub extern "C" fn FPMI_Oob_close() -> c_int {
    guard("FPMI_Oob_close", ERR_OTHER, || {
        channel().take().map(|_| SUCCESS).ok_or(ERR_INIT)
    })
}

#[cfg(test)]
mod tests {
    /// `tests/c/fpmi_oob.c` checks the C side of the same number.
    #[test]
    fn the_notice_has_the_size_of_fastpmi_h() {
        assert_eq!(std::mem::size_of::<super::FpmiOobNotice>(), 1304);
    }
}
