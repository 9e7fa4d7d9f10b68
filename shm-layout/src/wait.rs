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

/// Longest single sleep in the job fence: none. Every reason for a fence
/// waiter to wake changes and wakes the word it sleeps on (the completion:
/// the generation word or the release tree; an abort: the generation word
/// and every wake slot, see `JobView::abort`; a rank killed anywhere in
/// the fence is an abort by the launcher), which the loom models check
/// with a futex that never times out. A timed sleep costs the kernel a
/// timer armed and cancelled per sleep: a bare futex barrier of 256 / 1024
/// bound processes took 10-13% / up to 10% longer with a 1 s timeout on
/// every wait (docs/fence.md). The slice was 1 s until 2026-11-23 (and
/// 100 ms before that, which woke 10,000 idle processes a second in a
/// 1024-rank fence).
pub(crate) const FENCE_SLEEP_SLICE: Option<Duration> = None;

/// How long the next sleep may last: `slice` (`None`: no limit), or what is
/// left of the time before `deadline`; `None` once the deadline has passed.
pub(crate) fn next_slice(
    deadline: Option<Instant>,
    slice: Option<Duration>,
) -> Option<Option<Duration>> {
    match deadline {
        None => Some(slice),
        Some(deadline) => {
            let now = Instant::now();
            (now < deadline).then(|| {
                let left = deadline - now;
                Some(slice.map_or(left, |s| left.min(s)))
            })
        }
    }
}

/// Waits until `done(w)` holds for the value `w` of `word`: `Ok(true)`.
/// `Ok(false)` if `deadline` passed first. Before each sleep, `check(w)`
/// may end the wait with an error (a failure bit in `w`, the abort word);
/// each sleep lasts at most `slice` (`None`: until woken or the deadline).
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
    slice: Option<Duration>,
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
        futex.wait(word, w, slice);
    }
}
