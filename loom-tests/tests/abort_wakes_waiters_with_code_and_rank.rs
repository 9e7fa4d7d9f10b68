//! An abort releases a rank blocked in a fence or in a node-attribute wait
//! with the abort's code and rank. `LoomFutex` never times out, so the
//! models prove the abort's wake cannot be missed, even by a waiter that
//! checked the abort word just before it was set.
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use loom_tests::{tiny_params, Outcomes};
use shm_layout::futex::LoomFutex;
use shm_layout::heap::HeapJob;
use shm_layout::{Aborted, WaitError};

#[test]
fn abort_wakes_fence_waiter() {
    loom::model(|| {
        // Two parties, one of which never arrives: only the abort ends it.
        let job = Arc::new(HeapJob::new(&tiny_params(2)));
        let futex = Arc::new(LoomFutex::new());
        let waiter = {
            let (job, futex) = (job.clone(), futex.clone());
            thread::spawn(move || job.view().fence().fence(&*futex))
        };
        let aborter = {
            let (job, futex) = (job.clone(), futex.clone());
            thread::spawn(move || job.view().abort(7, 1, &*futex))
        };
        assert_eq!(aborter.join().unwrap(), Aborted::new(7, 1));
        assert_eq!(waiter.join().unwrap(), Err(Aborted::new(7, 1).into()));
    });
}

#[test]
fn abort_wakes_node_attr_waiter() {
    loom::model(|| {
        let job = Arc::new(HeapJob::new(&tiny_params(2)));
        let futex = Arc::new(LoomFutex::new());
        let waiter = {
            let (job, futex) = (job.clone(), futex.clone());
            thread::spawn(move || {
                job.view()
                    .node_attrs()
                    .get_wait(b"never-put", &*futex, None)
                    .map(<[u8]>::to_vec)
            })
        };
        let aborter = {
            let (job, futex) = (job.clone(), futex.clone());
            thread::spawn(move || job.view().abort(-3, 0, &*futex))
        };
        aborter.join().unwrap();
        assert_eq!(
            waiter.join().unwrap(),
            Err(WaitError::Aborted(Aborted::new(-3, 0)))
        );
    });
}

#[test]
fn first_of_two_aborts_wins_everywhere() {
    static WINNERS: Outcomes = Outcomes::new();
    loom::model(|| {
        let job = Arc::new(HeapJob::new(&tiny_params(2)));
        let futex = Arc::new(LoomFutex::new());
        let waiter = {
            let (job, futex) = (job.clone(), futex.clone());
            thread::spawn(move || job.view().fence().fence(&*futex))
        };
        let abort = |code, rank| {
            let (job, futex) = (job.clone(), futex.clone());
            thread::spawn(move || job.view().abort(code, rank, &*futex))
        };
        let (a, b) = (abort(9, 1), abort(5, Aborted::LAUNCHER));
        let (theirs, mine) = (a.join().unwrap(), b.join().unwrap());
        assert_eq!(mine, theirs, "both aborters report the same winner");
        assert!(mine == Aborted::new(9, 1) || mine == Aborted::new(5, Aborted::LAUNCHER));
        assert_eq!(waiter.join().unwrap(), Err(mine.into()));
        assert_eq!(job.view().abort_status(), Some(mine));
        WINNERS.record(mine.to_string());
    });
    WINNERS.assert_all_seen(&[
        "job aborted by rank 1 with exit code 9",
        "job aborted by the launcher with exit code 5",
    ]);
}
