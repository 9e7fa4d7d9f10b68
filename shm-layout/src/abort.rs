//! The job's abort word: 0 while the job runs; once set, the exit code and
//! the rank that ended the job. Every blocking call re-checks it.

use core::fmt;

use crate::sync::{AtomicU64, Ordering};

/// Set in every non-zero abort word, so "code 0 from rank 0" is not 0.
pub(crate) const ABORT_FLAG: u64 = 1 << 63;
/// Rank field width: bits 32..63.
pub(crate) const RANK_MASK: u32 = 0x7FFF_FFFF;

/// Why a blocking call gave up: the job was aborted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Aborted {
    /// Exit code the job ends with.
    pub code: i32,
    /// Rank that caused the abort, or [`Aborted::LAUNCHER`].
    pub rank: u32,
}

impl Aborted {
    /// `rank` of an abort that no rank caused (Ctrl-C, launcher error). Ranks
    /// at or above it cannot be recorded and are stored as this value.
    pub const LAUNCHER: u32 = RANK_MASK;

    /// An abort with `code` caused by `rank` (clamped to [`Self::LAUNCHER`]).
    pub const fn new(code: i32, rank: u32) -> Self {
        let rank = if rank > RANK_MASK { RANK_MASK } else { rank };
        Self { code, rank }
    }

    pub(crate) const fn pack(self) -> u64 {
        ABORT_FLAG | ((self.rank as u64 & RANK_MASK as u64) << 32) | (self.code as u32 as u64)
    }

    pub(crate) const fn unpack(word: u64) -> Option<Self> {
        if word & ABORT_FLAG == 0 {
            return None;
        }
        Some(Self {
            code: word as u32 as i32,
            rank: (word >> 32) as u32 & RANK_MASK,
        })
    }
}

impl fmt::Display for Aborted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.rank == Self::LAUNCHER {
            write!(
                f,
                "job aborted by the launcher with exit code {}",
                self.code
            )
        } else {
            write!(
                f,
                "job aborted by rank {} with exit code {}",
                self.rank, self.code
            )
        }
    }
}

impl std::error::Error for Aborted {}

/// The abort word (`AtomicU64`): 0 = running, else a packed [`Aborted`].
/// Set once; the first abort wins.
#[derive(Debug, Default)]
#[repr(transparent)]
pub struct AbortWord(AtomicU64);

impl AbortWord {
    /// A word saying "running" (for heap-allocated models; in a segment the
    /// zeroed memory is already that).
    pub fn new() -> Self {
        Self(AtomicU64::new(0))
    }

    /// The abort in effect, if any.
    #[inline]
    pub fn get(&self) -> Option<Aborted> {
        // SYNC POINT (abort word): pairs with the Release CAS in `raise`; the
        // word carries code and rank itself, so this only orders what the
        // aborting process did before aborting.
        Aborted::unpack(self.0.load(Ordering::Acquire))
    }

    /// `Err` with the abort in effect, if any.
    #[inline]
    pub fn check(&self) -> Result<(), Aborted> {
        match self.get() {
            Some(a) => Err(a),
            None => Ok(()),
        }
    }

    /// Records `abort` unless an earlier one is already recorded; returns the
    /// abort in effect afterwards (ours, or the earlier one, which wins).
    ///
    /// This does not wake anybody: use [`crate::JobView::abort`], which also
    /// wakes every futex word a process may sleep on.
    pub fn raise(&self, abort: Aborted) -> Aborted {
        // SYNC POINT (abort word): Release pairs with the Acquire in `get`.
        match self
            .0
            .compare_exchange(0, abort.pack(), Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => abort,
            // Anything non-zero is a packed abort (only `raise` writes here).
            Err(current) => Aborted::unpack(current).unwrap_or(abort),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn pack_roundtrip_and_zero_is_distinct() {
        for a in [
            Aborted::new(0, 0),
            Aborted::new(-1, 17),
            Aborted::new(i32::MIN, 1023),
            Aborted::new(i32::MAX, Aborted::LAUNCHER),
        ] {
            assert_ne!(a.pack(), 0);
            assert_eq!(Aborted::unpack(a.pack()), Some(a));
        }
        assert_eq!(Aborted::unpack(0), None);
        assert_eq!(Aborted::new(1, u32::MAX).rank, Aborted::LAUNCHER);
    }

    #[test]
    fn first_abort_wins() {
        let w = AbortWord::new();
        assert_eq!(w.get(), None);
        assert_eq!(w.raise(Aborted::new(3, 5)), Aborted::new(3, 5));
        assert_eq!(w.raise(Aborted::new(9, 1)), Aborted::new(3, 5));
        assert_eq!(w.check(), Err(Aborted::new(3, 5)));
        assert_eq!(
            Aborted::new(3, 5).to_string(),
            "job aborted by rank 5 with exit code 3"
        );
    }
}
