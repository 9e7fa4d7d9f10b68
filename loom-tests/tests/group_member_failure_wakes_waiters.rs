//! A member waits in a group fence that can never complete (the other
//! member died); the launcher marks the group failed: the waiter is woken
//! and gets the error naming the dead member, never a hang (a lost wake-up
//! is a loom deadlock) and never a success.
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use shm_layout::futex::LoomFutex;
use shm_layout::{AbortWord, GroupBarrier, GroupSlot, GroupWaitError};

struct Shared {
    slot: GroupSlot,
    abort: AbortWord,
    futex: LoomFutex,
}

#[test]
fn group_member_failure_wakes_waiters() {
    loom::model(|| {
        let s = Arc::new(Shared {
            slot: GroupSlot::new(),
            abort: AbortWord::new(),
            futex: LoomFutex::new(),
        });
        GroupBarrier::new(&s.slot, &s.abort).assign(5, 2);
        let waiter = {
            let s = s.clone();
            thread::spawn(move || {
                let g = GroupBarrier::new(&s.slot, &s.abort);
                match g.arrive(&s.futex) {
                    Ok(a) => g.wait(a, &s.futex),
                    Err(e) => Err(e),
                }
            })
        };
        let launcher = {
            let s = s.clone();
            thread::spawn(move || GroupBarrier::new(&s.slot, &s.abort).fail(9, &s.futex))
        };
        launcher.join().unwrap();
        assert_eq!(
            waiter.join().unwrap(),
            Err(GroupWaitError::MemberFailed { rank: 9 })
        );
    });
}
