//! A group barrier of two members for two generations: each generation has
//! one completer, nobody is released before both arrived, and a value one
//! member wrote before its arrival is visible to the other after the wait
//! (a loom cell, so a missing happens-before fails the model). A lost
//! wake-up would be a loom deadlock (`LoomFutex` ignores timeouts).
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use shm_layout::futex::LoomFutex;
use shm_layout::{AbortWord, GroupBarrier, GroupSlot};

const GENERATIONS: usize = 2;

struct Shared {
    slot: GroupSlot,
    abort: AbortWord,
    futex: LoomFutex,
    arrived: [AtomicUsize; GENERATIONS],
    completers: [AtomicUsize; GENERATIONS],
    /// Written by member 0 before generation 0, read by member 1 after it.
    put: UnsafeCell<u32>,
}

// SAFETY: `put` is only accessed in the model, ordered by the barrier; loom
// checks every access.
unsafe impl Sync for Shared {}

fn member(s: &Shared, me: usize) {
    let g = GroupBarrier::new(&s.slot, &s.abort);
    for gen in 0..GENERATIONS {
        if me == 0 && gen == 0 {
            s.put.with_mut(|p| unsafe { *p = 42 });
        }
        s.arrived[gen].fetch_add(1, Ordering::Relaxed);
        let a = g.arrive(&s.futex).unwrap();
        assert_eq!(a.generation as usize, gen);
        if a.last {
            s.completers[gen].fetch_add(1, Ordering::Relaxed);
        }
        g.wait(a, &s.futex).unwrap();
        assert_eq!(s.arrived[gen].load(Ordering::Relaxed), 2);
        if me == 1 && gen == 0 {
            assert_eq!(s.put.with(|p| unsafe { *p }), 42);
        }
    }
}

#[test]
fn group_barrier_members_see_each_others_puts() {
    loom::model(|| {
        let s = Arc::new(Shared {
            slot: GroupSlot::new(),
            abort: AbortWord::new(),
            futex: LoomFutex::new(),
            arrived: Default::default(),
            completers: Default::default(),
            put: UnsafeCell::new(0),
        });
        GroupBarrier::new(&s.slot, &s.abort).assign(1, 2);
        let ts: Vec<_> = (0..2)
            .map(|me| {
                let s = s.clone();
                thread::spawn(move || member(&s, me))
            })
            .collect();
        for t in ts {
            t.join().unwrap();
        }
        for gen in 0..GENERATIONS {
            assert_eq!(s.completers[gen].load(Ordering::Relaxed), 1);
        }
        let g = GroupBarrier::new(&s.slot, &s.abort);
        assert_eq!((g.generation() as usize, g.arrived()), (GENERATIONS, 0));
    });
}
