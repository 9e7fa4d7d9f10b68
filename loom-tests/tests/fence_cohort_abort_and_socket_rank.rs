//! Release by cohorts with a socket rank and with an abort.
//!
//! * Mixed job: ranks 0 and 1 fence through shared memory in cohorts 0 and
//!   1, rank 2 (cohort 1 by its binding) is a socket rank the launcher
//!   arrives for anonymously. An anonymous last arriver roots the release
//!   at cohort 0; a cohort whose only sleeper-to-be is the socket rank has
//!   nobody asleep, so its visitor does its duty inline. Everybody is
//!   released (no timeouts in `LoomFutex`).
//! * Abort: ranks 1 and 2 of cohort 1 wait; rank 0 aborts instead of
//!   arriving. Both waiters return the abort, whichever slept.
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use loom_tests::{fence_with_socket_ranks, tiny_params};
use shm_layout::futex::LoomFutex;
use shm_layout::heap::HeapJob;
use shm_layout::Aborted;

#[test]
fn fence_cohort_socket_rank_is_done_for_inline() {
    loom::model(|| {
        let job = Arc::new(HeapJob::with_fence_fanout(&tiny_params(3), 0));
        job.view().fence().set_cohorts(&[0, 1, 1]);
        let futex = Arc::new(LoomFutex::new());
        fence_with_socket_ranks(&job, &futex, 2);
        let fence = job.view().fence();
        assert_eq!(fence.generation(), 1);
        assert!(!fence.cohort_lead_pending(0) && !fence.cohort_lead_pending(1));
    });
}

#[test]
fn fence_cohort_abort_wakes_every_member() {
    loom::model(|| {
        let job = Arc::new(HeapJob::with_fence_fanout(&tiny_params(3), 0));
        job.view().fence().set_cohorts(&[0, 1, 1]);
        let futex = Arc::new(LoomFutex::new());
        let waiters: Vec<_> = (1..3)
            .map(|r| {
                let (job, futex) = (job.clone(), futex.clone());
                thread::spawn(move || job.view().fence().for_rank(r).fence(&*futex))
            })
            .collect();
        let aborter = {
            let (job, futex) = (job.clone(), futex.clone());
            thread::spawn(move || {
                job.view().abort(7, 0, &*futex);
            })
        };
        aborter.join().unwrap();
        for t in waiters {
            assert_eq!(t.join().unwrap(), Err(Aborted::new(7, 0).into()));
        }
    });
}
