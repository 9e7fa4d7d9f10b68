//! The one waiting loop of the segment's barriers: the job fence (central
//! release) and the group barriers wait the same way. Spin a bounded number
//! of polls on a word, then sleep on it with the futex in bounded slices,
//! re-checking after every wake why the wait might have to end early (an
//! abort, a failed group member) and the caller's deadline.
//!
//! Why slices: a reason to stop that does not change the word a waiter
//! sleeps on (the job's abort word, for a group waiter) is still noticed
//! within one slice.
//!
//! Before it sleeps, a waiter may also give up its CPU a few times
//! ([`Patience::yields`], `sched_yield`). When ranks outnumber CPUs, the
//! ranks a fence waits for are runnable on the waiter's own CPU: a yield
//! hands the CPU to them and returns after they ran, often with the fence
//! complete, for the price of one context switch; a sleep costs the same
//! switch plus the futex on both sides and a wake-up by the releaser, which
//! is on the fence's critical path. The yields are bounded, so a waiter
//! behind a rank that is late (computing) costs that rank a few switches,
//! then sleeps; with nobody else runnable a yield returns at once.
//! docs/fence.md has the measurements.

use std::time::{Duration, Instant};

use crate::futex::Futex;
use crate::sync::{cap_spins, spin_loop, spins, AtomicU32, Ordering, SPIN_LIMIT};

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

/// Most CPU yields a waiter makes before it sleeps: each one is a context
/// switch when other threads are runnable, so a bound keeps a late rank's
/// cost of the others' waiting small.
pub const MAX_YIELDS: u32 = 16;

/// How a waiter waits before it sleeps: polls of its word (`spins`, for when
/// every rank has a CPU), then yields of the CPU (`yields`, for when ranks
/// outnumber CPUs), re-checking after each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Patience {
    pub(crate) spins: u32,
    pub(crate) yields: u32,
}

impl Patience {
    /// [`SPIN_LIMIT`] polls, no yields.
    pub(crate) const DEFAULT: Self = Self {
        spins: SPIN_LIMIT,
        yields: 0,
    };

    pub(crate) fn with_spins(self, spins: u32) -> Self {
        Self {
            spins: cap_spins(spins),
            ..self
        }
    }

    pub(crate) fn with_yields(self, yields: u32) -> Self {
        Self {
            yields: yields.min(MAX_YIELDS),
            ..self
        }
    }

    /// Spins, then yields, until `done()`: true if it held before the
    /// caller must sleep. `done` does the Acquire loads the caller needs.
    pub(crate) fn before_sleep<F: Futex + ?Sized>(
        &self,
        futex: &F,
        done: impl Fn() -> bool,
    ) -> bool {
        for _ in spins().take(self.spins as usize) {
            if done() {
                return true;
            }
            spin_loop();
        }
        for _ in 0..self.yields {
            if done() {
                return true;
            }
            futex.yield_cpu();
        }
        false
    }
}

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
/// Polls `word` and yields the CPU as `patience` says first (spins: 0 when
/// ranks outnumber CPUs), without checks: that lasts microseconds, and the
/// sleeping loop checks before it sleeps.
///
/// `word` must be loaded with Acquire to pair with whatever Release RMW
/// changes it (the completer's bump, a failure's or an abort's flag), which
/// this does; the futex sleeps only while the word is still `w`, so a change
/// after the load cannot be slept through.
pub(crate) fn wait_word<E, F: Futex + ?Sized>(
    word: &AtomicU32,
    futex: &F,
    patience: Patience,
    deadline: Option<Instant>,
    slice: Option<Duration>,
    done: impl Fn(u32) -> bool,
    mut check: impl FnMut(u32) -> Result<(), E>,
) -> Result<bool, E> {
    // SYNC POINT (fence completion) / (group completion): Acquire pairs
    // with the completer's Release bump of the word.
    if patience.before_sleep(futex, || done(word.load(Ordering::Acquire))) {
        return Ok(true);
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
