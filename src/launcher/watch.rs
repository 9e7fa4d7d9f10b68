//! Threads that sleep on a job's segment (fence generation, node-attribute
//! counter) and wake the event loop when a shared-memory rank completes what
//! socket ranks wait for.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{Launcher, NO_TARGET};
use fastpmi_segment::{JobSegment, SharedFutex};

impl Launcher {
    /// Threads that sleep on the segment's fence generation and node-attribute
    /// counter and wake the event loop, so socket ranks waiting on a fence or
    /// attribute that a shared-memory rank completes are answered at once.
    pub(super) fn watch(
        &mut self,
        seg: &Arc<JobSegment>,
        stop: &Arc<AtomicBool>,
    ) -> Option<(Arc<AtomicU64>, std::thread::Thread)> {
        // The fence watcher sleeps on the generation word only while socket
        // ranks wait in a fence (`target` = the generation they arrived in):
        // waking the launcher on every shared-memory fence would cost the
        // ranks CPU time on a crowded node.
        let target = Arc::new(AtomicU64::new(NO_TARGET));
        let fence = {
            let (seg, waker, stop, target) = (
                seg.clone(),
                self.waker.clone(),
                stop.clone(),
                target.clone(),
            );
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
                        // Aborted: the event loop already knows; stop watching.
                        Err(_) => return,
                    }
                }
            }
        };
        let attrs = {
            let (seg, waker, stop) = (seg.clone(), self.waker.clone(), stop.clone());
            move || {
                let a = seg.seg().node_attrs();
                let mut seen = a.changes();
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
            Ok(h) => Some((target, h.thread().clone())),
            Err(e) => {
                tracing::warn!("cannot start the fence watcher: {e}");
                None
            }
        }
    }

    /// Point each job's fence watcher at the fence its socket ranks wait in.
    pub(super) fn update_fence_watchers(&self) {
        for (job, j) in self.jobs.iter().enumerate() {
            let Some((target, thread)) = &j.fence_watcher else {
                continue;
            };
            let want = self.server.fence_wait_generation(job).unwrap_or(NO_TARGET);
            if target.load(Ordering::Acquire) != want {
                target.store(want, Ordering::Release);
                if want != NO_TARGET {
                    thread.unpark();
                }
            }
        }
    }
}
