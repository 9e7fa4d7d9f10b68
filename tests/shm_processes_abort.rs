//! An abort of the job segment shared by real processes wakes every process
//! asleep in a fence or node-attribute wait, at once.
//!
//! Children are this test binary, run by `common::shm_children`.

mod common;

use std::time::{Duration, Instant};

use common::shm_children::{
    attach, child_args, create_segment, fail, show, wait_for, ChildArgs, Children, CHILD_TIMEOUT,
};
use fastpmi_segment::SharedFutex;
use shm_layout::{Aborted, SegmentParams, WaitError};

// ---------------------------------------------------------------------------
// An abort wakes every process asleep in a fence or node-attribute wait

const FENCE_SLEEPERS: u32 = 16;
const ATTR_SLEEPERS: u32 = 4;
const ABORT_CODE: i32 = 42;
const ABORT_RANK: u32 = 7;

/// Exit statuses of an abort child other than `ABORT_CODE` (the right abort).
const EXIT_WRONG_ABORT: i32 = 50;
const EXIT_FENCE_OK: i32 = 51;
const EXIT_ATTR_OK: i32 = 52;
const EXIT_ATTR_OTHER: i32 = 53;

fn abort_child(args: &ChildArgs) -> i32 {
    let js = attach(args);
    let seg = js.seg();
    let me = args.rank;
    let check = |a: Aborted| {
        if a == Aborted::new(ABORT_CODE, ABORT_RANK) && seg.abort_status() == Some(a) {
            ABORT_CODE
        } else {
            fail(me, EXIT_WRONG_ABORT, format_args!("wrong abort {a:?}"))
        }
    };
    if me < FENCE_SLEEPERS {
        if let Some(state) = seg.rank(me) {
            state.set_phase(shm_layout::RankPhase::InFence);
        }
        match seg.fence().fence(&SharedFutex) {
            Ok(a) => fail(me, EXIT_FENCE_OK, format_args!("fence completed: {a:?}")),
            Err(shm_layout::FenceError::Aborted(a)) => check(a),
            Err(e) => fail(me, EXIT_WRONG_ABORT, format_args!("wrong error {e:?}")),
        }
    } else {
        // Tell the parent we are about to wait.
        let ready = format!("ready-{me}");
        if let Err(e) = seg.kvs().put(ready.as_bytes(), b"1", &SharedFutex) {
            return fail(me, 2, format_args!("put {ready}: {e}"));
        }
        match seg.node_attrs().get_wait(b"never", &SharedFutex, None) {
            Ok(v) => fail(
                me,
                EXIT_ATTR_OK,
                format_args!("got never = {}", show(Some(v))),
            ),
            Err(WaitError::Aborted(a)) => check(a),
            Err(e) => fail(me, EXIT_ATTR_OTHER, format_args!("get_wait: {e}")),
        }
    }
}

#[test]
fn abort_wakes_every_sleeper() {
    const TEST: &str = "abort_wakes_every_sleeper";
    if let Some(args) = child_args(TEST) {
        std::process::exit(abort_child(&args));
    }
    // One more party than will ever arrive.
    let (js, id) = create_segment(&SegmentParams::for_ranks(FENCE_SLEEPERS + 1), "shm-abort");
    let seg = js.seg();
    let mut children = Children::spawn(TEST, 0..FENCE_SLEEPERS + ATTR_SLEEPERS, id);
    let all_waiting = wait_for(CHILD_TIMEOUT, || {
        seg.fence().arrived() == FENCE_SLEEPERS
            && (FENCE_SLEEPERS..FENCE_SLEEPERS + ATTR_SLEEPERS)
                .all(|r| seg.kvs().get(format!("ready-{r}").as_bytes()).is_some())
    });
    assert!(
        all_waiting,
        "children never all waited: {} in the fence",
        seg.fence().arrived()
    );
    // Past their short spin: asleep in the futex, and still blocked.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        children.all_running(),
        "a child left its wait before the abort"
    );
    assert_eq!(seg.fence().arrived(), FENCE_SLEEPERS);

    let t_abort = Instant::now();
    let effective = seg.abort(ABORT_CODE, ABORT_RANK, &SharedFutex);
    assert_eq!(effective, Aborted::new(ABORT_CODE, ABORT_RANK));
    let ended = children.expect_all(ABORT_CODE);
    let slowest = ended
        .iter()
        .map(|(r, _, at)| (at.duration_since(t_abort), *r))
        .max()
        .unwrap();
    println!(
        "abort woke {} sleepers; the last exited {:?} after it",
        ended.len(),
        slowest.0
    );
    assert!(
        slowest.0 < Duration::from_secs(2),
        "rank {} exited {:?} after the abort",
        slowest.1,
        slowest.0
    );
    // A later abort does not replace the first.
    assert_eq!(
        seg.abort(1, 3, &SharedFutex),
        Aborted::new(ABORT_CODE, ABORT_RANK)
    );
}
