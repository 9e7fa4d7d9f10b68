//! OS glue of the tools: the scheduling class of the threads that answer
//! them. The only `unsafe` of the tools lives here.

use std::io;

/// Run the calling thread in the round-robin real-time class at the lowest
/// priority (1), so that it runs before every thread of the fair class, and
/// its children and threads start back in the fair class at nice 0
/// (`SCHED_RESET_ON_FORK`). Needs root, `CAP_SYS_NICE` or an
/// `RLIMIT_RTPRIO` of at least 1.
pub fn realtime_thread() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: `param` is a valid `sched_param` that the kernel only reads
    // during the call; pid 0 names the calling thread.
    let rc =
        unsafe { libc::sched_setscheduler(0, libc::SCHED_RR | libc::SCHED_RESET_ON_FORK, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
