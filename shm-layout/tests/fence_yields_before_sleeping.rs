//! A fence or group waiter with a yield limit gives up its CPU at most that
//! many times, re-checking after each, before it sleeps: a fence that
//! completes during its yields costs it no sleep at all, one that does not
//! is slept on after exactly the limit, and without a limit (the default,
//! which the launcher's own waits keep) it never yields. Every release mode
//! of the job fence (central, tree, cohorts) and the group barrier are
//! checked, single-threaded: the scripted futex makes the other party
//! arrive from inside a yield or a sleep, so the counts are exact.
#![cfg(not(loom))]

use std::cell::{Cell, RefCell};
use std::time::Duration;

use shm_layout::heap::HeapJob;
use shm_layout::sync::AtomicU32;
use shm_layout::{AbortWord, Futex, GroupBarrier, GroupSlot, SegmentParams, MAX_YIELDS};

/// Counts yields and sleeps; runs `on_yield` at the yield numbered
/// `at_yield` (1-based) and `on_sleep` at the first sleep, each once.
#[derive(Default)]
struct Scripted<'a> {
    yields: Cell<u32>,
    sleeps: Cell<u32>,
    at_yield: u32,
    on_yield: RefCell<Option<Box<dyn FnOnce() + 'a>>>,
    on_sleep: RefCell<Option<Box<dyn FnOnce() + 'a>>>,
}

impl Futex for Scripted<'_> {
    fn wait(&self, _word: &AtomicU32, _expected: u32, _timeout: Option<Duration>) {
        self.sleeps.set(self.sleeps.get() + 1);
        // The other party's arrival stands for the wake that would end the
        // sleep; a sleep with nothing scripted would never end.
        let f = self.on_sleep.borrow_mut().take();
        f.expect("slept with nobody left to arrive")();
    }

    fn wake(&self, _word: &AtomicU32, _n: u32) -> usize {
        0
    }

    fn yield_cpu(&self) {
        self.yields.set(self.yields.get() + 1);
        if self.yields.get() == self.at_yield {
            if let Some(f) = self.on_yield.borrow_mut().take() {
                f();
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Mode {
    Central,
    Tree,
    Cohorts,
}

const MODES: [Mode; 3] = [Mode::Central, Mode::Tree, Mode::Cohorts];

fn job(mode: Mode) -> HeapJob {
    let params = SegmentParams::for_ranks(2);
    let job = HeapJob::with_fence_fanout(&params, if matches!(mode, Mode::Tree) { 2 } else { 0 });
    if matches!(mode, Mode::Cohorts) {
        job.view().fence().set_cohorts(&[0, 1]);
    }
    job
}

/// Rank 0 arrives and waits with `yields`, no spins; rank 1 arrives at
/// rank 0's yield number `at_yield` (0: at its first sleep). Returns
/// (yields, sleeps) of rank 0's wait.
fn fence_rank0(mode: Mode, yields: Option<u32>, at_yield: u32) -> (u32, u32) {
    let job = job(mode);
    let view = job.view();
    let rank = |r: u32| {
        let f = view.fence().for_rank(r).with_spin_limit(0);
        match yields {
            Some(y) => f.with_yield_limit(y),
            None => f,
        }
    };
    let arrive1 = Box::new(|| {
        let a = rank(1).arrive(&shm_layout::futex::SpinFutex);
        assert!(a.last, "{mode:?}: rank 1 is the last arriver");
    });
    let futex = Scripted {
        at_yield,
        ..Default::default()
    };
    if at_yield > 0 {
        *futex.on_yield.borrow_mut() = Some(arrive1);
    } else {
        *futex.on_sleep.borrow_mut() = Some(arrive1);
    }
    let a = rank(0).arrive(&futex);
    assert!(!a.last);
    rank(0).wait(a, &futex).unwrap();
    assert_eq!(view.fence().generation(), 1, "{mode:?}");
    (futex.yields.get(), futex.sleeps.get())
}

#[test]
fn a_fence_completed_during_the_yields_is_never_slept_on() {
    for mode in MODES {
        assert_eq!(fence_rank0(mode, Some(2), 1), (1, 0), "{mode:?}");
        assert_eq!(fence_rank0(mode, Some(2), 2), (2, 0), "{mode:?}");
    }
}

#[test]
fn a_waiter_yields_exactly_its_limit_then_sleeps() {
    for mode in MODES {
        assert_eq!(fence_rank0(mode, Some(3), 0), (3, 1), "{mode:?}");
        assert_eq!(fence_rank0(mode, Some(0), 0), (0, 1), "{mode:?}");
        // Capped: a huge limit is MAX_YIELDS switches, not a spin.
        assert_eq!(
            fence_rank0(mode, Some(u32::MAX), 0),
            (MAX_YIELDS, 1),
            "{mode:?}"
        );
    }
}

#[test]
fn without_a_limit_a_fence_waiter_never_yields() {
    for mode in MODES {
        assert_eq!(fence_rank0(mode, None, 0), (0, 1), "{mode:?}");
    }
}

#[test]
fn a_group_waiter_yields_then_sleeps_like_the_fence() {
    for (limit, at_yield, expect) in [(2, 1, (1, 0)), (2, 0, (2, 1)), (0, 0, (0, 1))] {
        let (slot, abort) = (GroupSlot::new(), AbortWord::new());
        let g = GroupBarrier::new(&slot, &abort)
            .with_spin_limit(0)
            .with_yield_limit(limit);
        g.assign(7, 2);
        let futex = Scripted {
            at_yield,
            ..Default::default()
        };
        let arrive1: Box<dyn FnOnce() + '_> = Box::new(|| {
            assert!(g.arrive(&shm_layout::futex::SpinFutex).unwrap().last);
        });
        if at_yield > 0 {
            *futex.on_yield.borrow_mut() = Some(arrive1);
        } else {
            *futex.on_sleep.borrow_mut() = Some(arrive1);
        }
        let a = g.arrive(&futex).unwrap();
        g.wait(a, &futex).unwrap();
        assert_eq!(g.generation(), 1);
        assert_eq!(
            (futex.yields.get(), futex.sleeps.get()),
            expect,
            "limit {limit}"
        );
    }
}
