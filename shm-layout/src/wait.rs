//! The one waiting loop of the segment's barriers: the job fence (central
//! release) and the group barriers wait the same way. Spin a bounded number
//! of polls on a word, then sleep on it with the futex in bounded slices,
//! re-checking after every wake why the wait might have to end early (an
//! abort, a failed group member) and the caller's deadline.
//!
//! Why slices: a reason to stop that does not change the word a waiter
//! sleeps on (the job's abort word, for a group waiter) is still noticed
//! within one slice.

use std::time::{Duration, Instant};

use crate::futex::Futex;
use crate::sync::{spin_loop, spins, AtomicU32, Ordering};

/// Longest single futex sleep of a waiter: bounds how late an abort that
/// came without a wake is noticed.
pub(crate) const SLEEP_SLICE: Duration = Duration::from_millis(100);

/// Longest single sleep in the job fence. Every reason for a fence waiter
/// to wake changes and wakes the word it sleeps on (the completion: the
/// generation word or the release tree; an abort: the generation word and
/// every wake slot, see `JobView::abort`), so the slice is only a backstop.
/// A short one costs: with 1024 ranks sitting in a fence, 100 ms slices
/// wake 10,000 processes a second for nothing (measured at the start of a
/// 1024-rank job: 3,800 of its 10,500 context switches).
pub(crate) const FENCE_SLEEP_SLICE: Duration = Duration::from_secs(1);

/// How long the next sleep may last: `slice`, or what is left of the time
/// before `deadline`; `None` once the deadline has passed.
pub(crate) fn next_slice(deadline: Option<Instant>, slice: Duration) -> Option<Duration> {
    match deadline {
        None => Some(slice),
        Some(deadline) => {
            let now = Instant::now();
            (now < deadline).then(|| (deadline - now).min(slice))
        }
    }
}

/// Waits until `done(w)` holds for the value `w` of `word`: `Ok(true)`.
/// `Ok(false)` if `deadline` passed first. Before each sleep, `check(w)`
/// may end the wait with an error (a failure bit in `w`, the abort word);
/// each sleep lasts at most `slice`.
///
/// Polls `word` `spin_limit` times first (at most [`crate::sync::SPIN_LIMIT`]
/// by the callers' builders; 0 when ranks outnumber CPUs), without checks:
/// the spin is microseconds, and the sleeping loop checks before it sleeps.
///
/// `word` must be loaded with Acquire to pair with whatever Release RMW
/// changes it (the completer's bump, a failure's or an abort's flag), which
/// this does; the futex sleeps only while the word is still `w`, so a change
/// after the load cannot be slept through.
pub(crate) fn wait_word<E, F: Futex + ?Sized>(
    word: &AtomicU32,
    futex: &F,
    spin_limit: u32,
    deadline: Option<Instant>,
    slice: Duration,
    done: impl Fn(u32) -> bool,
    mut check: impl FnMut(u32) -> Result<(), E>,
) -> Result<bool, E> {
    for _ in spins().take(spin_limit as usize) {
        // SYNC POINT (fence completion) / (group completion): Acquire pairs
        // with the completer's Release bump of the word.
        if done(word.load(Ordering::Acquire)) {
            return Ok(true);
        }
        spin_loop();
    }
    loop {
        // SYNC POINT (fence completion) / (group completion) / (group
        // failure) / (abort): as above; a failure or abort flag in the word
        // was released after the words `check` reads.
        let w = word.load(Ordering::Acquire);
        if done(w) {
            return Ok(true);
        }
        check(w)?;
        let Some(slice) = next_slice(deadline, slice) else {
            return Ok(false);
        };
        futex.wait(word, w, Some(slice));
    }
}
