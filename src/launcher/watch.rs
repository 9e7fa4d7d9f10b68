//! Threads that sleep on a job's segment (fence generation, node-attribute
//! counter) and wake the event loop when a shared-memory rank completes what
//! socket ranks wait for.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fastpmi_segment::{JobSegment, SharedFutex};

/// Fence watcher target meaning "no socket rank waits".
const NO_TARGET: u64 = u64::MAX;

/// A job's fence watcher: the generation it waits for, and its thread.
pub(super) struct FenceWatcher {
    target: Arc<AtomicU64>,
    thread: std::thread::Thread,
}

impl FenceWatcher {
    /// Wait for fence generation `gen` (the one the job's socket ranks
    /// arrived in), or for nothing.
    pub(super) fn point_at(&self, gen: Option<u64>) {
        let want = gen.unwrap_or(NO_TARGET);
        if self.target.load(Ordering::Acquire) != want {
            self.target.store(want, Ordering::Release);
            if want != NO_TARGET {
                self.thread.unpark();
            }
        }
    }
}

/// Threads that sleep on the segment's fence generation and node-attribute
/// counter and wake the event loop, so socket ranks waiting on a fence or
/// attribute that a shared-memory rank completes are answered at once. They
/// exit once `stop` is set.
pub(super) fn start(
    seg: &Arc<JobSegment>,
    stop: &Arc<AtomicBool>,
    waker: &Arc<mio::Waker>,
) -> Option<FenceWatcher> {
    // The fence watcher sleeps on the generation word only while socket
    // ranks wait in a fence (`target` = the generation they arrived in):
    // waking the launcher on every shared-memory fence would cost the
    // ranks CPU time on a crowded node.
    let target = Arc::new(AtomicU64::new(NO_TARGET));
    let fence = {
        let (seg, waker, stop, target) = (seg.clone(), waker.clone(), stop.clone(), target.clone());
        move || {
            // The launcher never spins: the ranks need the CPU.
            let f = seg.seg().fence().with_spin_limit(0);
            while !stop.load(Ordering::Relaxed) {
                let t = target.load(Ordering::Acquire);
                if t == NO_TARGET {
                    std::thread::park_timeout(Duration::from_millis(100));
                    continue;
                }
                let arrival = shm_layout::Arrival {
                    generation: t as u32,
                    last: false,
                };
                match f.wait_timeout(arrival, &SharedFutex, Duration::from_millis(100)) {
                    Ok(true) => {
                        // Done with this target unless the loop set a new one.
                        let _ = target.compare_exchange(
                            t,
                            NO_TARGET,
                            Ordering::AcqRel,
                            Ordering::Relaxed,
                        );
                        let _ = waker.wake();
                    }
                    Ok(false) => {}
                    // Aborted, or a rank died (the fence can never complete):
                    // the event loop already knows; stop watching.
                    Err(_) => return,
                }
            }
        }
    };
    let attrs = {
        let (seg, waker, stop) = (seg.clone(), waker.clone(), stop.clone());
        move || {
            let a = seg.seg().node_attrs();
            let mut seen = a.changes();
            // Started after a socket rank began to wait: the loop looks at
            // the store once, for a change made before `seen` was read.
            let _ = waker.wake();
            while !stop.load(Ordering::Relaxed) && seg.seg().abort_status().is_none() {
                let now = a.wait_changed(seen, &SharedFutex, Duration::from_millis(100));
                if now != seen {
                    seen = now;
                    let _ = waker.wake();
                }
            }
        }
    };
    if let Err(e) = std::thread::Builder::new()
        .name("fastpmi-attr-watch".into())
        .spawn(attrs)
    {
        tracing::warn!("cannot start the node-attribute watcher: {e}");
    }
    match std::thread::Builder::new()
        .name("fastpmi-fence-watch".into())
        .spawn(fence)
    {
        Ok(h) => Some(FenceWatcher {
            target,
            thread: h.thread().clone(),
        }),
        Err(e) => {
            tracing::warn!("cannot start the fence watcher: {e}");
            None
        }
    }
}
