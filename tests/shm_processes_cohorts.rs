//! The fence released by cohorts (`shm_layout::cohort`) between real
//! processes and real shared futexes: many generations with every rank's
//! puts visible after each, socket ranks arrived for anonymously by the
//! parent (as the launcher does), and an abort that reaches every cohort's
//! sleepers.
//!
//! Children are this test binary, run by `common::shm_children`.

mod common;

use std::time::{Duration, Instant};

use common::shm_children::{
    attach, child_args, create_segment, fail, show, wait_for, ChildArgs, Children, CHILD_TIMEOUT,
};
use fastpmi_segment::SharedFutex;
use shm_layout::{Aborted, SegmentParams};

/// Ranks of the job; the last [`SOCKET`] are arrived for by the parent.
const RANKS: u32 = 48;
const SOCKET: u32 = 2;
/// More than `COHORT_FANOUT` + 1: the release tree has two levels.
const COHORTS: u32 = 12;
const GENERATIONS: u32 = 200;

fn cohorts(n: u32) -> Vec<u32> {
    (0..n).map(|r| r % COHORTS).collect()
}

fn key(g: u32, r: u32) -> Vec<u8> {
    format!("g{g}-r{r}").into_bytes()
}

fn generations_child(args: &ChildArgs) -> i32 {
    let js = attach(args);
    let seg = js.seg();
    let me = args.rank;
    let fence = seg.fence();
    let cohort = fence.cohort_of(me);
    if cohort != Some(me % COHORTS) {
        return fail(me, 2, format_args!("cohort {cohort:?}"));
    }
    let fence = fence.for_rank_in(me, cohort).with_spin_limit(0);
    let shm_ranks = RANKS - SOCKET;
    let next = (me + 1) % shm_ranks;
    for g in 0..GENERATIONS {
        if let Err(e) = seg.kvs().put(&key(g, me), &me.to_ne_bytes(), &SharedFutex) {
            return fail(me, 3, format_args!("put in generation {g}: {e}"));
        }
        if let Err(a) = fence.fence(&SharedFutex) {
            return fail(me, 4, format_args!("fence {g}: {a:?}"));
        }
        let got = seg.kvs().get(&key(g, next));
        if got != Some(&next.to_ne_bytes()[..]) {
            return fail(
                me,
                5,
                format_args!("after fence {g}, rank {next}'s put is {}", show(got)),
            );
        }
    }
    0
}

#[test]
fn processes_fence_by_cohorts_for_200_generations_with_socket_ranks() {
    const TEST: &str = "processes_fence_by_cohorts_for_200_generations_with_socket_ranks";
    if let Some(args) = child_args(TEST) {
        std::process::exit(generations_child(&args));
    }
    let (js, id) = create_segment(&SegmentParams::for_ranks(RANKS), "shm-cohorts");
    let seg = js.seg();
    seg.fence().set_cohorts(&cohorts(RANKS));
    assert_eq!(seg.fence().cohort_count(), COHORTS);
    let mut children = Children::spawn(TEST, 0..RANKS - SOCKET, id);
    // The socket ranks: arrived for anonymously, then waited for on the
    // generation word, like the launcher's store and fence watcher.
    let deadline = Instant::now() + CHILD_TIMEOUT;
    for g in 0..GENERATIONS {
        let fence = seg.fence();
        let arrivals: Vec<_> = (0..SOCKET).map(|_| fence.arrive(&SharedFutex)).collect();
        for a in arrivals {
            assert_eq!(a.generation, g);
            let left = deadline.saturating_duration_since(Instant::now());
            let done = fence.wait_timeout(a, &SharedFutex, left).unwrap();
            assert!(
                done,
                "generation {g} never completed: {} arrived",
                fence.arrived()
            );
        }
    }
    children.expect_all(0);
    let fence = seg.fence();
    assert_eq!(fence.generation(), GENERATIONS);
    for c in 0..COHORTS {
        assert!(!fence.cohort_lead_pending(c), "cohort {c}'s lead unclaimed");
    }
}

const ABORT_CODE: i32 = 42;
const ABORT_RANK: u32 = 16;
const EXIT_WRONG_ABORT: i32 = 50;
const EXIT_FENCE_OK: i32 = 51;

fn abort_child(args: &ChildArgs) -> i32 {
    let js = attach(args);
    let seg = js.seg();
    let me = args.rank;
    let fence = seg.fence().for_rank(me).with_spin_limit(0);
    match fence.fence(&SharedFutex) {
        Ok(a) => fail(me, EXIT_FENCE_OK, format_args!("fence completed: {a:?}")),
        Err(a) if a == Aborted::new(ABORT_CODE, ABORT_RANK).into() => ABORT_CODE,
        Err(a) => fail(me, EXIT_WRONG_ABORT, format_args!("wrong abort {a:?}")),
    }
}

#[test]
fn abort_wakes_every_cohort_member() {
    const TEST: &str = "abort_wakes_every_cohort_member";
    if let Some(args) = child_args(TEST) {
        std::process::exit(abort_child(&args));
    }
    // Rank 16 never arrives: only the abort ends the fence.
    let parties = ABORT_RANK + 1;
    let (js, id) = create_segment(&SegmentParams::for_ranks(parties), "shm-cohort-abort");
    let seg = js.seg();
    seg.fence().set_cohorts(&cohorts(parties));
    let mut children = Children::spawn(TEST, 0..ABORT_RANK, id);
    assert!(
        wait_for(CHILD_TIMEOUT, || seg.fence().arrived() == ABORT_RANK),
        "children never all arrived: {}",
        seg.fence().arrived()
    );
    // Asleep on their cohorts' words, and still blocked.
    std::thread::sleep(Duration::from_millis(300));
    assert!(children.all_running(), "a child left the fence early");
    let t_abort = Instant::now();
    seg.abort(ABORT_CODE, ABORT_RANK, &SharedFutex);
    let ended = children.expect_all(ABORT_CODE);
    let slowest = ended
        .iter()
        .map(|(_, _, at)| at.duration_since(t_abort))
        .max()
        .unwrap();
    assert!(
        slowest < Duration::from_secs(2),
        "{slowest:?} after the abort"
    );
}
