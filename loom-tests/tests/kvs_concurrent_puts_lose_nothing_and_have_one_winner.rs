//! Concurrent puts of the same and of colliding keys: no insert is lost, no
//! value is torn, and a shared key ends with exactly one defined winner, the
//! last put in the swap order of the slot's value word.
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use loom_tests::{colliding_key, tiny_params, Outcomes};
use shm_layout::futex::LoomFutex;
use shm_layout::heap::HeapJob;
use shm_layout::PutOutcome;

const KEY: &[u8] = b"P0-businesscard";

/// A put's outcome, owned (it outlives the thread's view of the job).
type Owned = Option<Vec<u8>>; // None = inserted, Some(previous) = replaced

fn own(o: PutOutcome<'_>) -> Owned {
    match o {
        PutOutcome::Inserted => None,
        PutOutcome::Replaced { previous } => Some(previous.to_vec()),
    }
}

/// Each thread puts its value under KEY; returns the value a get sees after
/// all joined, having checked that the outcomes form one swap chain: one
/// insert, every other value replaced exactly once, the unreplaced value
/// being the one the get sees.
fn race_puts(values: &'static [&'static [u8]]) -> String {
    let job = Arc::new(HeapJob::new(&tiny_params(values.len() as u32)));
    let futex = Arc::new(LoomFutex::new());
    let handles: Vec<_> = values
        .iter()
        .map(|&v| {
            let (job, futex) = (job.clone(), futex.clone());
            thread::spawn(move || own(job.view().kvs().put(KEY, v, &*futex).unwrap()))
        })
        .collect();
    let outcomes: Vec<Owned> = handles.into_iter().map(|h| h.join().unwrap()).collect();

    assert_eq!(
        outcomes.iter().filter(|o| o.is_none()).count(),
        1,
        "one insert: {outcomes:?}"
    );
    let mut replaced: Vec<&[u8]> = outcomes.iter().flatten().map(Vec::as_slice).collect();
    replaced.sort();
    replaced.dedup();
    assert_eq!(
        replaced.len(),
        values.len() - 1,
        "each value replaced at most once: {outcomes:?}"
    );
    assert!(
        replaced.iter().all(|r| values.contains(r)),
        "only written values: {outcomes:?}"
    );
    let winner: Vec<&[u8]> = values
        .iter()
        .copied()
        .filter(|v| !replaced.contains(v))
        .collect();
    assert_eq!(winner.len(), 1);
    let kvs = job.view().kvs();
    assert_eq!(kvs.get(KEY), Some(winner[0]), "the last swap wins");
    assert_eq!(kvs.entries().count(), 1, "one slot per key");
    String::from_utf8_lossy(winner[0]).into_owned()
}

#[test]
fn two_puts_of_one_key_leave_one_winner() {
    static WINNERS: Outcomes = Outcomes::new();
    loom::model(|| {
        WINNERS.record(race_puts(&[
            b"value-from-rank-one-----",
            b"value-from-rank-two",
        ]))
    });
    WINNERS.assert_all_seen(&["value-from-rank-one-----", "value-from-rank-two"]);
}

#[test]
fn three_puts_of_one_key_chain_in_swap_order() {
    static WINNERS: Outcomes = Outcomes::new();
    loom::model(|| {
        WINNERS.record(race_puts(&[
            b"first-writer",
            b"second-writer-longer-one",
            b"third",
        ]))
    });
    WINNERS.assert_all_seen(&["first-writer", "second-writer-longer-one", "third"]);
}

#[test]
fn puts_of_colliding_keys_are_all_kept() {
    let other = colliding_key(KEY);
    loom::model(move || {
        let job = Arc::new(HeapJob::new(&tiny_params(2)));
        let futex = Arc::new(LoomFutex::new());
        let put_and_get = |key: Vec<u8>, value: &'static [u8]| {
            let (job, futex) = (job.clone(), futex.clone());
            thread::spawn(move || {
                let kvs = job.view().kvs();
                kvs.put(&key, value, &*futex).unwrap();
                // A thread always sees its own put, even past a slot that the
                // other thread holds claimed.
                assert_eq!(kvs.get(&key), Some(value));
            })
        };
        let a = put_and_get(KEY.to_vec(), b"shared-key-value");
        let b = put_and_get(other.clone(), b"other-value");
        a.join().unwrap();
        b.join().unwrap();
        let kvs = job.view().kvs();
        assert_eq!(kvs.get(KEY), Some(&b"shared-key-value"[..]));
        assert_eq!(kvs.get(&other), Some(&b"other-value"[..]));
        assert_eq!(kvs.entries().count(), 2);
    });
}
