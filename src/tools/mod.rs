//! Tools and diagnosis: what a running launcher shows to people and
//! debuggers without disturbing its jobs.
//!
//! * [`rendezvous`]: the per-launcher Unix socket (per-user directory,
//!   same-uid peers only) and its server thread.
//! * [`proto`]: the versioned query protocol spoken on it (JSON lines;
//!   documented in `docs/tools.md`).
//! * [`view`]: the per-rank state table and the who-is-missing report, built
//!   from a snapshot of the server's socket ranks and read-only loads of the
//!   shared-memory ranks' state words.
//! * [`group_view`]: the group fences in progress, who arrived and who
//!   is missing, on the server's barrier and on the job segment's.
//! * [`procfs`]: what the kernel says of a rank's process (stopped,
//!   traced, uninterruptible, zombie, and since when), read from `/proc`.
//! * [`ps`]: the client side, `fastpmi ps` and `fastpmi release`.

pub mod group_view;
mod os;
pub mod procfs;
pub mod proto;
pub mod ps;
pub mod rendezvous;
pub mod report;
pub mod view;

use std::time::Instant;

/// The nice value of the threads that answer tools, and of `fastpmi ps`,
/// where the real-time class is not allowed but this is.
const TOOLS_NICE: i32 = -20;

/// Run the calling thread ahead of the ranks, where the system allows it:
/// on a node its ranks oversubscribe, a tool's answer otherwise waits its
/// turn among hundreds of runnable ranks (docs/tools.md, "On a loaded
/// node"). First choice the lowest real-time priority (root,
/// `CAP_SYS_NICE`, `RLIMIT_RTPRIO`), which runs before every rank and
/// which its children and threads do not inherit; else nice -20 (an
/// `RLIMIT_NICE` that reaches it), which only weighs the thread 87 times a
/// rank, so with 900 runnable ranks it still gets a tenth of a CPU; else
/// nothing. Only for threads that never start ranks.
pub fn ahead_of_ranks() {
    let Err(rt) = os::realtime_thread() else {
        return;
    };
    let me = rustix::thread::gettid();
    if let Err(e) = rustix::process::setpriority_process(Some(me), TOOLS_NICE) {
        tracing::debug!("tools stay in their scheduling class ({rt}; nice: {e})");
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the clock shared-memory ranks stamp their
/// phase changes with, comparable across the processes of this node.
pub fn mono_ns() -> u64 {
    fastpmi_segment::monotonic_ns()
}

/// `i` on the [`mono_ns`] clock (std's `Instant` is CLOCK_MONOTONIC on
/// Linux, but has no accessor).
pub fn instant_ns(i: Instant) -> u64 {
    let ago = Instant::now().saturating_duration_since(i);
    mono_ns().saturating_sub(ago.as_nanos() as u64)
}

/// Seconds from `since` to `now` (both [`mono_ns`]); 0 when `since` is
/// unknown (0).
pub fn secs(now: u64, since: u64) -> f64 {
    if since == 0 {
        return 0.0;
    }
    now.saturating_sub(since) as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_agree() {
        let i = Instant::now();
        let a = mono_ns();
        let b = instant_ns(i);
        assert!(a.abs_diff(b) < 50_000_000, "{a} vs {b}");
    }
}
