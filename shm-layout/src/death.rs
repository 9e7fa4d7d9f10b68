//! Deaths of ranks in a fault-tolerant job: each rank's record says whether
//! and how it died ([`RankState::death`](crate::RankState::death)), and the
//! job's death line counts the deaths, so a rank learns of one without a
//! system call and can sleep until the next one.
//!
//! A death breaks the job's fence for good (a dead rank can never arrive):
//! recording it marks the generation word as an abort does and wakes every
//! fence sleeper, whose re-check then returns [`FenceError::RanksDied`]
//! instead of waiting. The job itself goes on: the abort word, the KVS,
//! node attributes and group barriers are untouched.

use core::fmt;
use std::time::Instant;

use crate::abort::{AbortWord, Aborted};
use crate::futex::{Futex, WAKE_ALL};
use crate::sync::{AtomicU32, Ordering};
use crate::wait::{wait_word, Patience, SLEEP_SLICE};

/// Set in every recorded death word (a zero word is a live rank).
pub(crate) const DEATH_FLAG: u64 = 1 << 63;
/// Bits 32..40 of a death word: the [`DeathCause`] kind.
const KIND_SHIFT: u32 = 32;

/// How a rank died, as the launcher recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeathCause {
    /// Exited with this non-zero status (or 0 before finalize).
    Exited(i32),
    /// Killed by this signal.
    Signaled(i32),
    /// Aborted itself (`PMI2_Abort(0, ...)`, `abort isworld=FALSE`,
    /// `PMIx_Abort` of itself) with this exit code.
    Aborted(i32),
    /// Its PMI connection closed before finalize.
    ConnectionLost,
    /// Its node server (nested mode) ended before it finished: the rank
    /// died with it, or can no longer be reached.
    NodeLost,
}

impl DeathCause {
    pub(crate) const fn pack(self) -> u64 {
        let (kind, code) = match self {
            Self::Exited(c) => (1u64, c),
            Self::Signaled(s) => (2, s),
            Self::Aborted(c) => (3, c),
            Self::ConnectionLost => (4, 0),
            Self::NodeLost => (5, 0),
        };
        DEATH_FLAG | (kind << KIND_SHIFT) | (code as u32 as u64)
    }

    pub(crate) const fn unpack(word: u64) -> Option<Self> {
        if word & DEATH_FLAG == 0 {
            return None;
        }
        let code = word as u32 as i32;
        Some(match (word >> KIND_SHIFT) & 0xff {
            1 => Self::Exited(code),
            2 => Self::Signaled(code),
            3 => Self::Aborted(code),
            5 => Self::NodeLost,
            // 4, and anything no build writes: the least claiming cause.
            _ => Self::ConnectionLost,
        })
    }
}

impl fmt::Display for DeathCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exited(c) => write!(f, "exited {c}"),
            Self::Signaled(s) => write!(f, "killed by signal {s}"),
            Self::Aborted(c) => write!(f, "aborted itself with code {c}"),
            Self::ConnectionLost => f.write_str("lost its PMI connection"),
            Self::NodeLost => f.write_str("lost with its node server"),
        }
    }
}

/// Why a fence returned without completing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FenceError {
    /// The job was aborted.
    #[error(transparent)]
    Aborted(#[from] Aborted),
    /// Ranks of the job died (fault-tolerant mode): the fence can never
    /// complete. `dead` is how many had died when the fence gave up; the
    /// segment's rank records say which.
    #[error("{dead} rank(s) of the job died: the fence can never complete")]
    RanksDied { dead: u32 },
}

/// The job's death counter, on its own cache line: 0 while every rank
/// lives, bumped once per recorded death (the futex word a rank sleeps on to
/// hear of the next one).
#[derive(Debug, Default)]
#[repr(C)]
pub struct DeathLine {
    pub(crate) count: AtomicU32,
}

impl DeathLine {
    pub(crate) fn new() -> Self {
        Self {
            count: AtomicU32::new(0),
        }
    }

    /// Deaths recorded so far.
    #[inline]
    pub fn count(&self) -> u32 {
        // SYNC POINT (death): Acquire pairs with the Release bump in
        // `bump`: the dead rank's record, written before, is visible.
        self.count.load(Ordering::Acquire)
    }

    /// `Err` once any rank died.
    #[inline]
    pub(crate) fn check(&self) -> Result<(), FenceError> {
        match self.count() {
            0 => Ok(()),
            dead => Err(FenceError::RanksDied { dead }),
        }
    }

    /// Counts one death (after its record is written) and wakes whoever
    /// waits for the next. Returns the new count.
    pub(crate) fn bump<F: Futex + ?Sized>(&self, futex: &F) -> u32 {
        // SYNC POINT (death): Release publishes the record written before.
        let n = self.count.fetch_add(1, Ordering::Release) + 1;
        futex.wake(&self.count, WAKE_ALL);
        n
    }

    /// Sleeps until more than `seen` deaths are recorded (`Ok(Some(count))`),
    /// `deadline` passes (`Ok(None)`) or the job is aborted. Never spins:
    /// deaths are rare and the CPU belongs to the ranks.
    pub(crate) fn wait_after<F: Futex + ?Sized>(
        &self,
        seen: u32,
        abort: &AbortWord,
        futex: &F,
        deadline: Option<Instant>,
    ) -> Result<Option<u32>, Aborted> {
        // An abort does not change the counter: sleep in slices to see it.
        let done = wait_word(
            &self.count,
            futex,
            Patience::DEFAULT.with_spins(0),
            deadline,
            Some(SLEEP_SLICE),
            |n| n != seen,
            |_| abort.check(),
        )?;
        Ok(done.then(|| self.count()))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn causes_pack_and_zero_is_alive() {
        for c in [
            DeathCause::Exited(3),
            DeathCause::Exited(0),
            DeathCause::Signaled(9),
            DeathCause::Aborted(-1),
            DeathCause::ConnectionLost,
            DeathCause::NodeLost,
        ] {
            assert_ne!(c.pack(), 0);
            assert_eq!(DeathCause::unpack(c.pack()), Some(c));
        }
        assert_eq!(DeathCause::unpack(0), None);
        assert_eq!(DeathCause::Signaled(9).to_string(), "killed by signal 9");
    }

    #[test]
    fn the_line_counts_and_checks() {
        let line = DeathLine::new();
        assert_eq!(line.check(), Ok(()));
        let futex = crate::futex::SpinFutex;
        assert_eq!(line.bump(&futex), 1);
        assert_eq!(line.check(), Err(FenceError::RanksDied { dead: 1 }));
        let abort = AbortWord::new();
        assert_eq!(line.wait_after(0, &abort, &futex, None), Ok(Some(1)));
        let soon = Instant::now() + std::time::Duration::from_millis(5);
        assert_eq!(line.wait_after(1, &abort, &futex, Some(soon)), Ok(None));
    }
}
