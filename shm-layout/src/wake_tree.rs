//! Tree release of the fence: per-rank wake words, so that the last arriver
//! does not wake every sleeper itself (one `FUTEX_WAKE` of N sleepers on one
//! word, all hashed to one kernel futex bucket), but wakes `k` ranks, each
//! of which wakes `k` more, on distinct words.
//!
//! # Protocol
//!
//! Every rank has a [`WakeSlot`] (its own cache line): a wake word
//! (`counter << 1 | SLEEPING`) and an *armed* word. A rank that will wait in
//! tree mode stores `armed_mark(g)` in its armed word before its arrival
//! in generation `g` (the arrival's Release RMW publishes it to the last
//! arriver, and through the generation bump to every released waiter). Then
//! it sleeps on its own wake word, not on the generation word.
//!
//! The tree of a generation is the heap-ordered `k`-ary tree over positions
//! `0..N`, where position `p` is rank `(root + p) % N` and `root` is the last
//! arriver's rank (stored in the generation line before the bump). The last
//! arriver does position 0's duty; every waiter released in tree mode does
//! its own position's duty before it returns. A position's duty is to
//! *visit* its children; visiting child `c`:
//! * armed for `g`: bump `c`'s wake word (Release) and, if `c` said it sleeps
//!   (`SLEEPING`), `FUTEX_WAKE` it; `c` then does its own duty;
//! * armed for `g + 1`: `c` already saw `g` complete (it timed out of its
//!   sleep and re-checked) and did its duty itself: nothing to do;
//! * otherwise `c` does not wait here (a socket rank, arrived for by the
//!   launcher): the visitor does `c`'s duty itself, inline.
//!
//! So in a generation every armed rank's word is bumped exactly once (by its
//! tree parent, or by the nearest armed ancestor across non-armed ones), and
//! nobody else's. Every wait also sleeps in bounded slices and re-checks the
//! generation and abort words, so a parent that died mid-fence delays its
//! subtree by at most one slice; the launcher's abort bumps and wakes every
//! slot directly, so an abort reaches every waiter whatever the tree.

use crate::futex::{Futex, WAKE_ALL};
use crate::sync::{AtomicU32, Ordering};

/// Bit 0 of a wake word: its rank is (about to be) asleep on it, so a bump
/// must be followed by a `FUTEX_WAKE`.
pub(crate) const SLEEPING: u32 = 1;

/// Largest fan-out a segment may record (a corrupt one is rejected).
pub const MAX_FANOUT: u32 = 64;

/// Fan-out the fence uses for `nranks` ranks: 0 (central: one word, one
/// `FUTEX_WAKE` of everyone) for small jobs, where the tree's extra
/// syscalls and hops cost more than the one crowded futex bucket; a tree
/// above. Chosen from measurements on a 2-core machine (docs/fence.md).
pub const fn fanout_for(nranks: u32) -> u32 {
    if nranks < TREE_MIN_RANKS {
        0
    } else {
        TREE_FANOUT
    }
}

/// Smallest job that releases its fence by tree.
pub const TREE_MIN_RANKS: u32 = 512;
/// Children per tree node.
pub const TREE_FANOUT: u32 = 16;

/// One rank's wake slot, in shared memory. All zero: never armed.
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub struct WakeSlot {
    /// `wakes << 1 | SLEEPING`: what the rank sleeps on.
    pub(crate) word: AtomicU32,
    /// [`armed_mark`] of the generation the rank last waited in by tree.
    pub(crate) armed: AtomicU32,
    /// This rank's cohort plus one (0: none), see [`crate::cohort`]. Written
    /// by the launcher before any rank starts.
    pub(crate) cohort: AtomicU32,
    /// As the slot of cohort `i` (its index): the words the cohort's
    /// members sleep on, by the parity of the generation they wait for.
    pub(crate) cohort_words: [AtomicU32; 2],
    /// As the slot of cohort `i`: [`armed_mark`] of the generation whose
    /// lead duty for the cohort nobody has claimed yet, else 0.
    pub(crate) cohort_lead: AtomicU32,
}

impl WakeSlot {
    /// A slot never armed (for models and tests; zeroed memory is one too).
    pub fn new() -> Self {
        Self::default()
    }

    /// How many times the slot was bumped (wraps at 2^31): once per
    /// generation its rank waited in by tree, once per abort.
    pub fn wakes(&self) -> u32 {
        self.word.load(Ordering::Relaxed) >> 1
    }

    /// Bumps the wake word and wakes its sleeper if it has one.
    pub(crate) fn bump<F: Futex + ?Sized>(&self, futex: &F) {
        // SYNC POINT (fence wake): Release makes what the waker saw (the
        // completed generation, or the abort word) visible to the sleeper's
        // Acquire load of its wake word. Clears SLEEPING: `(w | 1) + 1` is
        // the next count with bit 0 clear.
        let old = self
            .word
            .fetch_update(Ordering::Release, Ordering::Relaxed, |w| {
                Some((w | SLEEPING).wrapping_add(1))
            })
            .unwrap_or_else(|w| w);
        if old & SLEEPING != 0 {
            futex.wake(&self.word, WAKE_ALL);
        }
    }
}

/// Value of an armed word for generation `g` (bit 0 set, so the zeroed
/// word is never a mark). Wraps with the generation count.
pub(crate) const fn armed_mark(g: u32) -> u32 {
    (g << 1) | 1
}

/// A heap-ordered tree laid over `n` items (ranks, or cohorts) from
/// `root`: position `p` is item `(root + p) % n`, and the children of `p`
/// are positions `k·p + 1 ..= k·p + k` below `n`. Shared by the rank tree
/// and the cohort tree ([`crate::cohort`]).
#[derive(Clone, Copy)]
pub(crate) struct HeapOrder {
    pub(crate) n: u32,
    pub(crate) root: u32,
}

impl HeapOrder {
    /// Position of `item`.
    pub(crate) fn position(&self, item: u32) -> u32 {
        let n = self.n;
        ((item % n) + n - (self.root % n)) % n
    }

    /// The item at position `pos`.
    pub(crate) fn item_at(&self, pos: u32) -> u32 {
        ((self.root as u64 + pos as u64) % self.n as u64) as u32
    }

    /// The children of position `pos` in a tree of fan-out `k`.
    pub(crate) fn children(&self, pos: u32, k: u32) -> impl Iterator<Item = u32> {
        let first = pos as u64 * k as u64 + 1;
        (first..(first + k as u64).min(self.n as u64)).map(|c| c as u32)
    }
}

/// One generation's tree: the slots, the root rank and fan-out.
#[derive(Clone, Copy)]
pub(crate) struct Tree<'a> {
    pub(crate) slots: &'a [WakeSlot],
    pub(crate) root: u32,
    pub(crate) fanout: u32,
    /// The generation being released.
    pub(crate) generation: u32,
}

impl Tree<'_> {
    fn order(&self) -> HeapOrder {
        HeapOrder {
            n: self.slots.len() as u32,
            root: self.root,
        }
    }

    /// Position of `rank` in this generation's tree.
    pub(crate) fn position(&self, rank: u32) -> u32 {
        self.order().position(rank)
    }

    /// Visits the children of position `pos`.
    pub(crate) fn duty<F: Futex + ?Sized>(&self, pos: u32, futex: &F) {
        for c in self.order().children(pos, self.fanout) {
            self.visit(c, futex);
        }
    }

    /// Wakes position `pos`, or does its duty if it does not wait here.
    pub(crate) fn visit<F: Futex + ?Sized>(&self, pos: u32, futex: &F) {
        let slot = &self.slots[self.order().item_at(pos) as usize];
        // Relaxed: an arming for this generation was published by the rank's
        // arrival, which the caller acquired through the generation word.
        let armed = slot.armed.load(Ordering::Relaxed);
        if armed == armed_mark(self.generation) {
            slot.bump(futex);
        } else if armed != armed_mark(self.generation.wrapping_add(1) & GEN_MASK) {
            self.duty(pos, futex);
        }
    }
}

/// Generation numbers wrap at 2^31 (the generation word keeps bit 0).
pub(crate) const GEN_MASK: u32 = u32::MAX >> 1;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::futex::SpinFutex;

    #[test]
    fn every_armed_rank_bumped_once_whatever_the_root() {
        for n in [1u32, 2, 5, 17, 64] {
            for k in [2u32, 3, 4] {
                for root in [0, n / 2, n - 1] {
                    let slots: Vec<WakeSlot> = (0..n).map(|_| WakeSlot::new()).collect();
                    // Every third rank is a socket rank (never armed).
                    for (r, s) in slots.iter().enumerate() {
                        if r % 3 != 1 {
                            s.armed.store(armed_mark(7), Ordering::Relaxed);
                        }
                    }
                    let t = Tree {
                        slots: &slots,
                        root,
                        fanout: k,
                        generation: 7,
                    };
                    // The root's duty, then each armed rank's (as released).
                    t.duty(0, &SpinFutex);
                    for r in 0..n {
                        if r != root && r % 3 != 1 {
                            t.duty(t.position(r), &SpinFutex);
                        }
                    }
                    for (r, s) in slots.iter().enumerate() {
                        let want = u32::from(r as u32 != root && r % 3 != 1);
                        assert_eq!(s.wakes(), want, "n={n} k={k} root={root} rank={r}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_rank_that_moved_on_is_skipped() {
        let slots: Vec<WakeSlot> = (0..3).map(|_| WakeSlot::new()).collect();
        slots[1].armed.store(armed_mark(4), Ordering::Relaxed);
        let t = Tree {
            slots: &slots,
            root: 0,
            fanout: 2,
            generation: 3,
        };
        t.duty(0, &SpinFutex);
        assert_eq!(slots[1].wakes(), 0);
        // Rank 2 is not armed: visited inline, has no children.
        assert_eq!(slots[2].wakes(), 0);
    }

    #[test]
    fn bump_clears_sleeping_and_counts() {
        let s = WakeSlot::new();
        s.word.store(SLEEPING, Ordering::Relaxed);
        s.bump(&SpinFutex);
        assert_eq!(s.word.load(Ordering::Relaxed), 2);
        s.bump(&SpinFutex);
        assert_eq!(s.word.load(Ordering::Relaxed), 4);
        assert_eq!(s.wakes(), 2);
    }
}
