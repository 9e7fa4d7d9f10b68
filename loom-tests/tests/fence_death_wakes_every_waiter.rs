//! A death recorded by the launcher (fault-tolerant jobs) releases every
//! fence waiter, in tree and in cohort mode, with `RanksDied`: three
//! parties, rank 2 never arrives (it died); ranks 0 and 1 arrive and wait
//! while the launcher records the death. Whether a rank had gone to sleep,
//! was about to, or had not arrived yet, it returns the error and nobody
//! hangs (`LoomFutex` ignores timeouts, so only the wakes can free a
//! sleeper). A waiter for the next death sees it too.
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use loom_tests::tiny_params;
use shm_layout::futex::LoomFutex;
use shm_layout::heap::HeapJob;
use shm_layout::FenceError;

fn model(job: impl Fn() -> HeapJob + Sync + Send + 'static) {
    loom::model(move || {
        let job = Arc::new(job());
        let futex = Arc::new(LoomFutex::new());
        let rank = |r: u32| {
            let (job, futex) = (job.clone(), futex.clone());
            thread::spawn(move || job.view().fence().for_rank(r).fence(&*futex))
        };
        let (r0, r1) = (rank(0), rank(1));
        let launcher = {
            let (job, futex) = (job.clone(), futex.clone());
            thread::spawn(move || job.view().count_death(&*futex))
        };
        assert_eq!(launcher.join().unwrap(), 1);
        let dead = Err(FenceError::RanksDied { dead: 1 });
        let (a, b) = (r0.join().unwrap(), r1.join().unwrap());
        assert_eq!(a, dead);
        assert_eq!(b, dead);
        assert_eq!(job.view().wait_death(0, &*futex, None), Ok(Some(1)));
    });
}

#[test]
fn fence_death_wakes_every_tree_waiter() {
    model(|| HeapJob::with_fence_fanout(&tiny_params(3), 1));
}

#[test]
fn fence_death_wakes_every_cohort_waiter() {
    model(|| {
        let job = HeapJob::new(&tiny_params(3));
        job.view().fence().set_cohorts(&[0, 0, 1]);
        job
    });
}
