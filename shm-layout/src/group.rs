//! Group barriers: a fixed pool of barrier slots in the job segment, one per
//! live process group whose members all use shared memory. The launcher
//! assigns a slot to a group when the group is constructed (parties = its
//! members, tagged with the group's context id) and releases it when the
//! group is destructed; the members fence on it with no socket traffic.
//!
//! ```
//! use std::sync::Arc;
//! use shm_layout::futex::CondvarFutex;
//! use shm_layout::group::GroupSlot;
//! use shm_layout::AbortWord;
//!
//! let (slot, abort) = (Arc::new(GroupSlot::new()), Arc::new(AbortWord::new()));
//! let futex = Arc::new(CondvarFutex::new());
//! // The launcher: a group of two members with context id 7.
//! shm_layout::group::GroupBarrier::new(&slot, &abort).assign(7, 2);
//! let peer = {
//!     let (slot, abort, futex) = (slot.clone(), abort.clone(), futex.clone());
//!     std::thread::spawn(move || {
//!         let g = shm_layout::group::GroupBarrier::new(&slot, &abort);
//!         g.fence(7, &*futex).unwrap();
//!     })
//! };
//! let g = shm_layout::group::GroupBarrier::new(&slot, &abort);
//! g.fence(7, &*futex)?;
//! peer.join().unwrap();
//! assert_eq!(g.generation(), 1);
//! # Ok::<(), shm_layout::group::GroupWaitError>(())
//! ```
//!
//! # Protocol
//!
//! One 64-bit count word holds `parties << 32 | arrived`, so that an arrival
//! (`fetch_add(1)`) and a member leaving (`fetch_sub(1 << 32)`) are single
//! RMWs on one word: whichever RMW first makes `arrived >= parties` (with
//! `arrived > 0`) completes the generation, exactly once. The completer
//! clears `arrived` (`fetch_and`, which keeps a concurrent leave's change of
//! `parties`), bumps the generation word (Release) and wakes all waiters.
//!
//! The generation word counts in steps of 2 like the job fence's; its bit 0
//! says the group failed (a member died): waiters then return
//! [`GroupWaitError::MemberFailed`] naming it. Waits also check the job's
//! abort word.
//!
//! **Contract**: as for the job fence, each member arrives once per
//! generation and only after it saw the previous one complete; a member
//! leaves only while it is not in a fence; [`GroupBarrier::assign`] is only
//! called on a slot nobody uses (the launcher's pool bookkeeping).

use std::time::{Duration, Instant};

use crate::abort::{AbortWord, Aborted};
use crate::barrier::{Arrival, GEN_STEP};
use crate::cache::CachePadded;
use crate::futex::{Futex, WAKE_ALL};
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::wait::{wait_word, Patience, SLEEP_SLICE};

/// Bit 0 of a group's generation word: a member failed.
pub(crate) const GROUP_FAILED: u32 = 1;
/// One party in the count word.
pub(crate) const PARTY: u64 = 1 << 32;
const ARRIVED_MASK: u64 = PARTY - 1;
/// Set in the failed-member word once a member failed.
pub(crate) const FAILED_FLAG: u64 = 1 << 63;

/// Size of one slot in the segment.
pub const GROUP_SLOT_SIZE: u64 = 128;

/// Slots in a job's pool: one per rank, at least 8, at most 4096 (a rank
/// is rarely in more than a few groups at once; a job that makes more
/// concurrent groups falls back to the launcher's barrier for the rest).
pub const fn group_slots_for(nranks: u32) -> u32 {
    if nranks < 8 {
        8
    } else if nranks > 4096 {
        4096
    } else {
        nranks
    }
}

/// One group barrier slot, in shared memory. All zero = free.
#[derive(Debug)]
#[repr(C)]
pub struct GroupSlot {
    /// `parties << 32 | arrived` (hot: every arrival RMWs it).
    pub(crate) count: CachePadded<AtomicU64>,
    /// What waiters read and sleep on, plus the slot's owner.
    pub(crate) line: CachePadded<GroupLine>,
}

#[derive(Debug)]
#[repr(C)]
pub(crate) struct GroupLine {
    /// Generation (steps of 2) | [`GROUP_FAILED`].
    pub(crate) word: AtomicU32,
    pub(crate) _pad: u32,
    /// Context id of the group using the slot; 0 = free.
    pub(crate) ctxid: AtomicU64,
    /// [`FAILED_FLAG`] | rank of the member that failed, or 0.
    pub(crate) failed: AtomicU64,
}

impl GroupSlot {
    /// A free slot (for models and tests; in a segment, zeroed memory is one).
    pub fn new() -> Self {
        Self {
            count: CachePadded::new(AtomicU64::new(0)),
            line: CachePadded::new(GroupLine {
                word: AtomicU32::new(0),
                _pad: 0,
                ctxid: AtomicU64::new(0),
                failed: AtomicU64::new(0),
            }),
        }
    }
}

impl Default for GroupSlot {
    fn default() -> Self {
        Self::new()
    }
}

/// Why a group fence did not complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GroupWaitError {
    #[error(transparent)]
    Aborted(#[from] Aborted),
    #[error("group member rank {rank} failed")]
    MemberFailed { rank: u32 },
    /// The slot does not (or no longer) belong to the caller's group.
    #[error("the group's barrier slot belongs to another group (context id {found})")]
    NotOwner { found: u64 },
}

/// A slot plus the job's abort word: what members and the launcher use.
#[derive(Debug, Clone, Copy)]
pub struct GroupBarrier<'a> {
    slot: &'a GroupSlot,
    abort: &'a AbortWord,
    patience: Patience,
}

impl<'a> GroupBarrier<'a> {
    pub fn new(slot: &'a GroupSlot, abort: &'a AbortWord) -> Self {
        Self {
            slot,
            abort,
            patience: Patience::DEFAULT,
        }
    }

    /// As [`crate::Fence::with_spin_limit`]: 0 when ranks outnumber CPUs.
    pub fn with_spin_limit(mut self, spins: u32) -> Self {
        self.patience = self.patience.with_spins(spins);
        self
    }

    /// As [`crate::Fence::with_yield_limit`].
    pub fn with_yield_limit(mut self, yields: u32) -> Self {
        self.patience = self.patience.with_yields(yields);
        self
    }

    /// Context id of the group the slot belongs to (0: free).
    pub fn ctxid(&self) -> u64 {
        // SYNC POINT (group assign): pairs with the Release store in `assign`.
        self.slot.line.ctxid.load(Ordering::Acquire)
    }

    /// Current number of parties (members that have not left).
    pub fn parties(&self) -> u32 {
        (self.slot.count.load(Ordering::Relaxed) >> 32) as u32
    }

    /// Parties arrived in the current generation (a snapshot).
    pub fn arrived(&self) -> u32 {
        (self.slot.count.load(Ordering::Relaxed) & ARRIVED_MASK) as u32
    }

    /// Completed generations since the slot was first used (wraps at 2^31).
    pub fn generation(&self) -> u32 {
        // SYNC POINT (group completion): pairs with the completer's bump.
        self.slot.line.word.load(Ordering::Acquire) >> 1
    }

    /// The member that failed, if the group is marked failed.
    pub fn failed(&self) -> Option<u32> {
        // SYNC POINT (group failure): pairs with the Release in `fail`.
        if self.slot.line.word.load(Ordering::Acquire) & GROUP_FAILED == 0 {
            return None;
        }
        let f = self.slot.line.failed.load(Ordering::Relaxed);
        (f & FAILED_FLAG != 0).then_some(f as u32)
    }

    /// Launcher: give the (free) slot to a group of `parties` members.
    pub fn assign(&self, ctxid: u64, parties: u32) {
        let l = &self.slot.line;
        self.slot
            .count
            .store((parties as u64) << 32, Ordering::Relaxed);
        l.failed.store(0, Ordering::Relaxed);
        // The generation keeps counting across owners: a stale waiter of a
        // previous owner (none by contract) could not mistake a new round.
        l.word.fetch_and(!GROUP_FAILED, Ordering::Relaxed);
        // SYNC POINT (group assign): Release publishes the reset words to a
        // member's Acquire load of the context id.
        l.ctxid.store(ctxid, Ordering::Release);
    }

    /// Launcher: the group is gone; the slot is free again.
    pub fn release(&self) {
        self.slot.line.ctxid.store(0, Ordering::Release);
    }

    /// Arrives for one member; never blocks. Fails at once on a failed
    /// group or an aborted job.
    pub fn arrive<F: Futex + ?Sized>(&self, futex: &F) -> Result<Arrival, GroupWaitError> {
        self.abort.check()?;
        if let Some(rank) = self.failed() {
            return Err(GroupWaitError::MemberFailed { rank });
        }
        // Relaxed: by the contract this member already acquired the previous
        // generation's completion (as in `Fence::arrive`).
        let generation = self.slot.line.word.load(Ordering::Relaxed) >> 1;
        // SYNC POINT (group arrival): Release hands this member's puts to
        // the completer, whose Acquire side of the same RMW chain collects
        // every member's.
        let old = self.slot.count.fetch_add(1, Ordering::AcqRel);
        let (parties, arrived) = (old >> 32, (old & ARRIVED_MASK) + 1);
        let last = arrived >= parties;
        if last {
            self.complete(futex);
        }
        Ok(Arrival { generation, last })
    }

    /// A member leaves the group (the launcher does it on its behalf): one
    /// party fewer. If every remaining member already arrived in the current
    /// generation, this completes it. Returns whether it did.
    pub fn leave<F: Futex + ?Sized>(&self, futex: &F) -> bool {
        // SYNC POINT (group arrival): AcqRel, as an arrival, so a completion
        // done here publishes the arrived members' puts.
        let old = self.slot.count.fetch_sub(PARTY, Ordering::AcqRel);
        let parties = (old >> 32).saturating_sub(1);
        let arrived = old & ARRIVED_MASK;
        if arrived > 0 && arrived >= parties {
            self.complete(futex);
            return true;
        }
        false
    }

    fn complete<F: Futex + ?Sized>(&self, futex: &F) {
        // Clear `arrived` before the bump: the next generation's arrivals
        // come after their Acquire of the bump. `fetch_and` keeps `parties`,
        // which a leave may change concurrently.
        self.slot.count.fetch_and(!ARRIVED_MASK, Ordering::Relaxed);
        // SYNC POINT (group completion): Release publishes every member's
        // puts (collected by the RMW chain) to waiters' Acquire loads.
        self.slot.line.word.fetch_add(GEN_STEP, Ordering::Release);
        futex.wake(&self.slot.line.word, WAKE_ALL);
    }

    /// Launcher: member `rank` died; every waiter returns an error naming it.
    pub fn fail<F: Futex + ?Sized>(&self, rank: u32, futex: &F) {
        let l = &self.slot.line;
        let _ = l.failed.compare_exchange(
            0,
            FAILED_FLAG | rank as u64,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        // SYNC POINT (group failure): Release orders the failed-member word
        // before the flag a waiter Acquires.
        l.word.fetch_or(GROUP_FAILED, Ordering::Release);
        futex.wake(&l.word, WAKE_ALL);
    }

    /// Whether the generation of `arrival` has completed.
    pub fn is_complete(&self, arrival: Arrival) -> bool {
        self.generation() != arrival.generation
    }

    /// Blocks until the generation of `arrival` completes, the group fails
    /// or the job aborts. Spins briefly, then sleeps in bounded slices.
    pub fn wait<F: Futex + ?Sized>(
        &self,
        arrival: Arrival,
        futex: &F,
    ) -> Result<(), GroupWaitError> {
        self.wait_until(arrival, futex, None).map(|_| ())
    }

    /// Like [`Self::wait`] for at most `timeout`: `Ok(false)` if it passed.
    pub fn wait_timeout<F: Futex + ?Sized>(
        &self,
        arrival: Arrival,
        futex: &F,
        timeout: Duration,
    ) -> Result<bool, GroupWaitError> {
        self.wait_until(arrival, futex, Instant::now().checked_add(timeout))
    }

    /// One member's whole group fence, after checking that the slot still
    /// belongs to the group with context id `ctxid`.
    pub fn fence<F: Futex + ?Sized>(
        &self,
        ctxid: u64,
        futex: &F,
    ) -> Result<Arrival, GroupWaitError> {
        let found = self.ctxid();
        if found != ctxid {
            return Err(GroupWaitError::NotOwner { found });
        }
        let arrival = self.arrive(futex)?;
        self.wait(arrival, futex)?;
        Ok(arrival)
    }

    fn wait_until<F: Futex + ?Sized>(
        &self,
        arrival: Arrival,
        futex: &F,
        deadline: Option<Instant>,
    ) -> Result<bool, GroupWaitError> {
        // The fence's waiter (crate::wait), on the group's word. A failure
        // sets its bit 0, so it wakes sleepers; a job abort does not touch
        // this word and is noticed within one slice (the launcher also fails
        // the job's groups, which does).
        wait_word(
            &self.slot.line.word,
            futex,
            self.patience,
            deadline,
            Some(SLEEP_SLICE),
            |w| w >> 1 != arrival.generation,
            |w| {
                if w & GROUP_FAILED != 0 {
                    // Relaxed: ordered before the flag by `fail`'s Release,
                    // which the waiter's Acquire load of `w` paired with.
                    let f = self.slot.line.failed.load(Ordering::Relaxed);
                    return Err(GroupWaitError::MemberFailed { rank: f as u32 });
                }
                self.abort.check()?;
                Ok(())
            },
        )
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::futex::SpinFutex;

    #[test]
    fn leave_completes_a_generation_others_wait_in() {
        let (slot, abort) = (GroupSlot::new(), AbortWord::new());
        let g = GroupBarrier::new(&slot, &abort);
        g.assign(5, 3);
        let a = g.arrive(&SpinFutex).unwrap();
        let b = g.arrive(&SpinFutex).unwrap();
        assert!(!a.last && !b.last && !g.is_complete(a));
        assert!(g.leave(&SpinFutex));
        assert!(g.is_complete(a));
        assert_eq!((g.parties(), g.arrived()), (2, 0));
        // Two parties now: the second arrival completes.
        assert!(!g.arrive(&SpinFutex).unwrap().last);
        assert!(g.arrive(&SpinFutex).unwrap().last);
        // A leave with nobody arrived completes nothing.
        assert!(!g.leave(&SpinFutex));
        assert_eq!(g.parties(), 1);
    }

    #[test]
    fn failure_names_the_member_and_reassign_clears_it() {
        let (slot, abort) = (GroupSlot::new(), AbortWord::new());
        let g = GroupBarrier::new(&slot, &abort);
        g.assign(9, 2);
        let a = g.arrive(&SpinFutex).unwrap();
        g.fail(17, &SpinFutex);
        assert_eq!(
            g.wait(a, &SpinFutex),
            Err(GroupWaitError::MemberFailed { rank: 17 })
        );
        assert_eq!(
            g.fence(9, &SpinFutex),
            Err(GroupWaitError::MemberFailed { rank: 17 })
        );
        g.release();
        assert_eq!(
            g.fence(9, &SpinFutex),
            Err(GroupWaitError::NotOwner { found: 0 })
        );
        g.assign(10, 1);
        assert_eq!(g.failed(), None);
        assert!(g.fence(10, &SpinFutex).unwrap().last);
    }

    #[test]
    fn abort_ends_waits() {
        let (slot, abort) = (GroupSlot::new(), AbortWord::new());
        let g = GroupBarrier::new(&slot, &abort);
        g.assign(1, 2);
        let a = g.arrive(&SpinFutex).unwrap();
        abort.raise(Aborted::new(3, 4));
        assert_eq!(
            g.wait(a, &SpinFutex),
            Err(GroupWaitError::Aborted(Aborted::new(3, 4)))
        );
    }

    #[test]
    fn slot_counts() {
        assert_eq!(group_slots_for(1), 8);
        assert_eq!(group_slots_for(256), 256);
        assert_eq!(group_slots_for(100_000), 4096);
    }
}
