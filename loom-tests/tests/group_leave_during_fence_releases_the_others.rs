//! Three members; one leaves (the launcher does it on its behalf) while the
//! other two fence: whatever the interleaving, the generation completes
//! exactly once (by the last arrival or by the leave), both fencing members
//! are released, and the count word ends with two parties and no arrivals.
#![cfg(loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use shm_layout::futex::LoomFutex;
use shm_layout::{AbortWord, GroupBarrier, GroupSlot};

struct Shared {
    slot: GroupSlot,
    abort: AbortWord,
    futex: LoomFutex,
    completions: AtomicUsize,
}

#[test]
fn group_leave_during_fence_releases_the_others() {
    loom::model(|| {
        let s = Arc::new(Shared {
            slot: GroupSlot::new(),
            abort: AbortWord::new(),
            futex: LoomFutex::new(),
            completions: AtomicUsize::new(0),
        });
        GroupBarrier::new(&s.slot, &s.abort).assign(3, 3);
        let mut ts: Vec<_> = (0..2)
            .map(|_| {
                let s = s.clone();
                thread::spawn(move || {
                    let g = GroupBarrier::new(&s.slot, &s.abort);
                    let a = g.arrive(&s.futex).unwrap();
                    if a.last {
                        s.completions.fetch_add(1, Ordering::Relaxed);
                    }
                    g.wait(a, &s.futex).unwrap();
                })
            })
            .collect();
        ts.push({
            let s = s.clone();
            thread::spawn(move || {
                let g = GroupBarrier::new(&s.slot, &s.abort);
                if g.leave(&s.futex) {
                    s.completions.fetch_add(1, Ordering::Relaxed);
                }
            })
        });
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(s.completions.load(Ordering::Relaxed), 1);
        let g = GroupBarrier::new(&s.slot, &s.abort);
        assert_eq!((g.generation(), g.parties(), g.arrived()), (1, 2, 0));
    });
}
