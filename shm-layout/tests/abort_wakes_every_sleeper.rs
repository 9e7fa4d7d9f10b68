//! An abort releases every rank blocked in a fence or in a node-attribute
//! wait with the abort error, promptly; a node-attribute wait notices an
//! abort that came without a wake within its sleep slice, while a fence
//! sleeps until woken (every abort wakes it; there is no timer on its
//! sleeps); and waits without an abort end at their timeout.
#![cfg(not(loom))]

mod common;

use std::time::{Duration, Instant};

use shm_layout::futex::CondvarFutex;
use shm_layout::{Aborted, Futex, SegmentParams, SegmentRef, WaitError};

const RANKS: u32 = 8;

/// Puts `fencers` threads in a fence that cannot complete and 3 in
/// node-attribute waits, aborts, and returns how long after the abort the
/// last one returned.
fn abort_sleepers(seg: SegmentRef<'_>, futex: &(impl Futex + Sync), fencers: u32) -> Duration {
    std::thread::scope(|s| {
        let fences: Vec<_> = (0..fencers)
            .map(|_| s.spawn(move || (seg.fence().fence(futex), Instant::now())))
            .collect();
        let attrs: Vec<_> = (0..3)
            .map(|_| {
                s.spawn(move || {
                    let r = seg.node_attrs().get_wait(b"never", futex, None).map(|_| ());
                    (r, Instant::now())
                })
            })
            .collect();
        // Let them get to sleep.
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(seg.fence().arrived(), fencers);
        let aborted_at = Instant::now();
        assert_eq!(seg.abort(42, 5, futex), Aborted::new(42, 5));
        let mut latest = aborted_at;
        for h in fences {
            let (r, at) = h.join().unwrap();
            assert_eq!(r, Err(Aborted::new(42, 5).into()));
            latest = latest.max(at);
        }
        for h in attrs {
            let (r, at) = h.join().unwrap();
            assert_eq!(r, Err(WaitError::Aborted(Aborted::new(42, 5))));
            latest = latest.max(at);
        }
        latest - aborted_at
    })
}

#[test]
fn abort_wakes_every_sleeper_at_once() {
    let params = SegmentParams::for_ranks(RANKS);
    let mut buf = common::buffer(&params);
    let seg = common::init(&mut buf, &params);
    // Sleeps last 10 s unless woken: returning within 2 s proves the wake.
    let late = abort_sleepers(seg, &common::WakeOnlyFutex::default(), 4);
    assert!(late < Duration::from_secs(2), "{late:?}");
    assert_eq!(seg.abort_status(), Some(Aborted::new(42, 5)));
    // Later aborts do not replace the first.
    assert_eq!(seg.abort(1, 0, &CondvarFutex::new()), Aborted::new(42, 5));
}

#[test]
fn abort_without_wake_is_noticed_by_node_attribute_waits_within_a_slice() {
    let params = SegmentParams::for_ranks(RANKS);
    let mut buf = common::buffer(&params);
    let seg = common::init(&mut buf, &params);
    // Nobody is woken: the 100 ms sleep slices notice the abort word. (No
    // fencer: a fence sleep has no timer, it ends only when woken.)
    let late = abort_sleepers(seg, &common::NoWakeFutex, 0);
    assert!(late < Duration::from_secs(1), "{late:?}");
}

/// A fence sleep has no timeout: with a futex that never wakes, a waiter
/// asks for an unbounded sleep (what makes every wake-up in the fence one
/// that the completion or the abort made).
#[test]
fn a_fence_sleep_has_no_timer() {
    let params = SegmentParams::for_ranks(2);
    let mut buf = common::buffer(&params);
    let seg = common::init(&mut buf, &params);
    let futex = common::RecordingFutex::default();
    std::thread::scope(|s| {
        let h = s.spawn(|| seg.fence().fence(&futex));
        while futex.waits().is_empty() {
            std::thread::sleep(Duration::from_millis(10));
        }
        let waits = futex.waits();
        assert!(waits.iter().all(Option::is_none), "{waits:?}");
        seg.fence().fence(&futex).unwrap();
        h.join().unwrap().unwrap();
    });
}

#[test]
fn waits_end_at_their_timeout() {
    let params = SegmentParams::for_ranks(2);
    let mut buf = common::buffer(&params);
    let seg = common::init(&mut buf, &params);
    let futex = CondvarFutex::new();
    let start = Instant::now();
    assert_eq!(
        seg.node_attrs()
            .get_wait(b"absent", &futex, Some(Duration::from_millis(150))),
        Err(WaitError::TimedOut(Duration::from_millis(150)))
    );
    assert!(start.elapsed() >= Duration::from_millis(150));
    let fence = seg.fence();
    let arrival = fence.arrive(&futex);
    assert!(!arrival.last);
    assert_eq!(
        fence.wait_timeout(arrival, &futex, Duration::from_millis(50)),
        Ok(false)
    );
    assert!(!fence.is_complete(arrival));
    // The other party arrives (e.g. the launcher, for a socket rank).
    let other = fence.arrive(&futex);
    assert!(other.last);
    assert!(fence.is_complete(arrival));
    assert_eq!(
        fence.wait_timeout(arrival, &futex, Duration::from_millis(50)),
        Ok(true)
    );
    assert_eq!(
        seg.node_attrs().get_wait(b"", &futex, None),
        Err(WaitError::InvalidKey(shm_layout::KvsError::EmptyKey))
    );
}
