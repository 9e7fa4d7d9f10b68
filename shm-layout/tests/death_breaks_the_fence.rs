//! A recorded death (fault-tolerant jobs) releases every rank blocked in
//! the job's fence with `RanksDied`, whatever the release mode (central,
//! tree, cohorts), promptly and only by the wake; every later fence fails
//! at once without counting an arrival; the job is not aborted and its KVS
//! works on; the dead set reads back with each rank's cause; a rank
//! waiting for the next death wakes; a fence that completed before the
//! death stays complete.
#![cfg(not(loom))]

mod common;

use std::time::{Duration, Instant};

use shm_layout::futex::CondvarFutex;
use shm_layout::{DeathCause, FenceError, Futex, SegmentParams, SegmentRef};

const RANKS: u32 = 8;

/// Puts ranks 0..RANKS-1 except `dead` in a fence, records `dead`'s death,
/// and returns how long after it the last fencer returned.
fn break_fence(seg: SegmentRef<'_>, futex: &(impl Futex + Sync), dead: u32) -> Duration {
    std::thread::scope(|s| {
        let fences: Vec<_> = (0..RANKS)
            .filter(|&r| r != dead)
            .map(|r| s.spawn(move || (seg.fence().for_rank(r).fence(futex), Instant::now())))
            .collect();
        let watcher = s.spawn(move || seg.wait_death(0, futex, None));
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(seg.fence().arrived(), RANKS - 1);
        let died_at = Instant::now();
        assert_eq!(
            seg.record_death(dead, DeathCause::Signaled(9), futex),
            Some(1)
        );
        let mut latest = died_at;
        for h in fences {
            let (r, at) = h.join().unwrap();
            assert_eq!(r, Err(FenceError::RanksDied { dead: 1 }));
            latest = latest.max(at);
        }
        assert_eq!(watcher.join().unwrap(), Ok(Some(1)));
        latest - died_at
    })
}

fn check_mode(set_up: impl Fn(SegmentRef<'_>)) {
    let params = SegmentParams::for_ranks(RANKS);
    let mut buf = common::buffer(&params);
    let seg = common::init(&mut buf, &params);
    set_up(seg);
    // Sleeps last 10 s unless woken: returning within 2 s proves the wake.
    let late = break_fence(seg, &common::WakeOnlyFutex::default(), 3);
    assert!(late < Duration::from_secs(2), "{late:?}");
    assert_eq!(seg.abort_status(), None, "a death is not an abort");
    assert_eq!(
        seg.dead_ranks().collect::<Vec<_>>(),
        vec![(3, DeathCause::Signaled(9))]
    );
    // Every later fence fails at once, and its arrival does not count.
    let futex = CondvarFutex::new();
    let before = seg.fence().arrived();
    assert_eq!(
        seg.fence().for_rank(0).fence(&futex),
        Err(FenceError::RanksDied { dead: 1 })
    );
    assert_eq!(seg.fence().arrived(), before);
    // The job goes on: the KVS works.
    seg.kvs().put(b"after", b"death", &futex).unwrap();
    assert_eq!(seg.kvs().get(b"after"), Some(&b"death"[..]));
    // A second record of the same rank changes nothing; another death counts.
    assert_eq!(seg.record_death(3, DeathCause::Exited(1), &futex), None);
    assert_eq!(seg.record_death(RANKS, DeathCause::Exited(1), &futex), None);
    assert_eq!(seg.record_death(5, DeathCause::Aborted(2), &futex), Some(2));
    assert_eq!(
        seg.dead_ranks().collect::<Vec<_>>(),
        vec![(3, DeathCause::Signaled(9)), (5, DeathCause::Aborted(2))]
    );
    assert_eq!(
        seg.fence().fence(&futex),
        Err(FenceError::RanksDied { dead: 2 })
    );
}

#[test]
fn a_death_releases_a_central_fence() {
    check_mode(|seg| seg.fence().set_fanout(0));
}

#[test]
fn a_death_releases_a_tree_fence() {
    check_mode(|seg| seg.fence().set_fanout(2));
}

#[test]
fn a_death_releases_a_fence_by_cohorts() {
    check_mode(|seg| seg.fence().set_cohorts(&[0, 0, 0, 0, 1, 1, 1, 1]));
}

#[test]
fn a_completed_fence_stays_complete_and_no_death_means_no_dead() {
    let params = SegmentParams::for_ranks(2);
    let mut buf = common::buffer(&params);
    let seg = common::init(&mut buf, &params);
    let futex = CondvarFutex::new();
    assert_eq!(seg.deaths(), 0);
    assert_eq!(seg.dead_ranks().count(), 0);
    let fence = seg.fence();
    let a = fence.arrive(&futex);
    let b = fence.arrive(&futex);
    assert!(b.last);
    // Rank 1 dies after its arrival completed the fence: rank 0's wait
    // still returns the completion.
    seg.record_death(1, DeathCause::Exited(3), &futex);
    assert_eq!(fence.wait(a, &futex), Ok(()));
    // A waiter for the next death times out when none comes.
    let soon = Instant::now() + Duration::from_millis(20);
    assert_eq!(seg.wait_death(1, &futex, Some(soon)), Ok(None));
    // An abort wakes it with the abort.
    std::thread::scope(|s| {
        let h = s.spawn(|| seg.wait_death(1, &futex, None));
        std::thread::sleep(Duration::from_millis(50));
        seg.abort(7, 0, &futex);
        assert_eq!(h.join().unwrap(), Err(shm_layout::Aborted::new(7, 0)));
    });
}
