//! An abort releases every tree waiter even when the rank that should wake
//! them died after arriving. Fan-out 1 over ranks 0..3: rank 2 arrives and
//! "dies" (never waits, so never wakes its subtree). When rank 1 arrives
//! last, the chain is 1 -> 2 -> 0: rank 2 is bumped but dead, so rank 0, if
//! it went to sleep before the completion, is released only by the
//! launcher's abort, which must reach it directly (it may also have seen
//! the completion before sleeping: every wait re-checks the generation).
//! When rank 0 arrives last (0 -> 1 -> 2), the fence completes normally and
//! the abort may or may not beat it. Either way nobody hangs (`LoomFutex`
//! ignores timeouts, so the 100 ms re-check cannot rescue anybody).
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use loom_tests::{tiny_params, Outcomes};
use shm_layout::futex::LoomFutex;
use shm_layout::heap::HeapJob;
use shm_layout::Aborted;

#[test]
fn fence_tree_abort_wakes_all_with_a_dead_subtree_root() {
    static SEEN: Outcomes = Outcomes::new();
    loom::model(|| {
        let job = Arc::new(HeapJob::with_fence_fanout(&tiny_params(3), 1));
        let futex = Arc::new(LoomFutex::new());
        // Rank 2 arrives, then dies: set up before the racing threads.
        let dead = job.view().fence().for_rank(2).arrive(&*futex);
        assert!(!dead.last);
        let rank = |r: u32| {
            let (job, futex) = (job.clone(), futex.clone());
            thread::spawn(move || {
                let fence = job.view().fence().for_rank(r);
                let arrival = fence.arrive(&*futex);
                (arrival.last, fence.wait(arrival, &*futex))
            })
        };
        let (r0, r1) = (rank(0), rank(1));
        let launcher = {
            let (job, futex) = (job.clone(), futex.clone());
            thread::spawn(move || job.view().abort(9, 2, &*futex))
        };
        let abort = Aborted::new(9, 2);
        assert_eq!(launcher.join().unwrap(), abort);
        let ((last0, res0), (last1, res1)) = (r0.join().unwrap(), r1.join().unwrap());
        assert!(last0 != last1, "exactly one last arriver");
        for res in [res0, res1] {
            assert!(res.is_ok() || res == Err(abort.into()));
        }
        SEEN.record(match (last1, res0) {
            (false, _) => "rank 0 last",
            // Rank 0's tree parent is the dead rank 2: only the abort (or
            // its own re-check before sleeping) frees it.
            (true, Err(_)) => "rank 1 last: rank 0 freed by the abort",
            (true, Ok(_)) => "rank 1 last: rank 0 saw the completion itself",
        });
    });
    SEEN.assert_all_seen(&[
        "rank 0 last",
        "rank 1 last: rank 0 freed by the abort",
        "rank 1 last: rank 0 saw the completion itself",
    ]);
}
