//! Release of the fence by cohorts: ranks that share a CPU binding (a
//! *cohort*, assigned by the launcher) sleep on one word of their cohort,
//! and each cohort is woken by one of its own members.
//!
//! Why: when ranks outnumber cores, every rank bound to a core has to run
//! once per fence on that core, and the release is the critical path. A
//! central release has the last arriver wake every sleeper of every core by
//! itself, most of them across CPUs; a per-rank tree adds a wake syscall
//! per rank. Here the last arriver wakes *one* sleeper of each other cohort
//! (one cross-CPU wake per core), and that sleeper wakes the rest of its
//! cohort with one `FUTEX_WAKE`, on its own core, while the other cores do
//! the same: a bare barrier of this kind in C took 0.45x-0.55x the time of
//! the central floor at 256 and 1024 processes on 2 cores
//! (docs/fence.md).
//!
//! # Protocol
//!
//! Cohort `c` uses the [`WakeSlot`] of index `c` for two sleeping words (one
//! per parity of the generation waited for, so a wake of generation `g`
//! never wakes a member already asleep for `g + 1`) and a *lead* word. A
//! member waiting for generation `g` sleeps on `words[g & 1]` of its cohort.
//!
//! The cohorts of a generation form a heap-ordered tree of fan-out
//! [`COHORT_FANOUT`] over positions, position `p` being cohort
//! `(root + p) % n` with `root` the last arriver's cohort (stored in the
//! generation line before the bump). The last arriver bumps the generation,
//! then does position 0's *duty*: *visit* each child position, then bump its
//! own cohort's word and wake all of it. Visiting cohort `h` for generation
//! `g`: store `armed_mark(g)` in `h`'s lead word, bump `h`'s word (Release),
//! `FUTEX_WAKE` one sleeper. Any member of `h` that sees `g` complete (woken
//! or not) claims the lead by a CAS from `armed_mark(g)` to 0, and the one
//! that wins does `h`'s duty: its children, then a wake of all of `h`. If
//! the wake found nobody asleep, the visitor claims the lead itself and does
//! the duty inline (nobody of `h` sleeps for `g` any more, but `h`'s
//! children must still be visited).
//!
//! Every duty of generation `g` is done by a rank still inside its fence of
//! `g` (the last arriver, a visitor, or a member of `g` that claimed), so
//! `g + 1` cannot complete, and the root and lead words cannot be
//! overwritten, before all of `g`'s duties are done. An abort bumps and
//! wakes both words of every cohort.

use crate::futex::{Futex, WAKE_ALL};
use crate::sync::Ordering;
use crate::wake_tree::{armed_mark, HeapOrder, WakeSlot};

/// Fewest ranks per cohort, on average, for which the launcher releases a
/// fence by cohorts: the release costs one more hop (the woken leader) than
/// a central wake, which pays only with enough ranks per core. Measured on
/// 2 cores, 100-fence loops, medians: 16 ranks 44 us by cohorts against
/// 38 us central; 32 ranks 79 against 81 us; 64 ranks 145 against 163 us.
pub const COHORT_MIN_MEMBERS: u32 = 16;

/// Children per cohort in the release tree: the last arriver wakes up to
/// this many cohorts' leaders itself.
pub const COHORT_FANOUT: u32 = 8;

/// One generation's cohort tree.
#[derive(Clone, Copy)]
pub(crate) struct CohortTree<'a> {
    /// The job's wake slots; cohort `c` uses slot `c`.
    pub(crate) slots: &'a [WakeSlot],
    /// Number of cohorts (`1..=slots.len()`).
    pub(crate) n: u32,
    /// The cohort at position 0.
    pub(crate) root: u32,
    /// The generation being released (the generation word shifted right
    /// by one: 31 bits, so its parity alternates across the wrap).
    pub(crate) generation: u32,
}

impl CohortTree<'_> {
    fn order(&self) -> HeapOrder {
        HeapOrder {
            n: self.n,
            root: self.root,
        }
    }

    /// Position of cohort `c` in this generation's tree.
    pub(crate) fn position(&self, c: u32) -> u32 {
        self.order().position(c)
    }

    fn word(&self, c: u32) -> &crate::sync::AtomicU32 {
        &self.slots[c as usize].cohort_words[(self.generation & 1) as usize]
    }

    /// The duty of position `pos`: visit its children, then wake every
    /// member of its cohort. `bump`: the cohort's word was not bumped by a
    /// visitor (position 0).
    pub(crate) fn duty<F: Futex + ?Sized>(&self, pos: u32, bump: bool, futex: &F) {
        for c in self.order().children(pos, COHORT_FANOUT) {
            self.visit(c, futex);
        }
        let word = self.word(self.order().item_at(pos));
        if bump {
            // SYNC POINT (fence wake): Release hands the completed
            // generation (which this rank acquired or made) to members that
            // Acquire the word before re-checking the generation.
            word.fetch_add(1, Ordering::Release);
        }
        futex.wake(word, WAKE_ALL);
    }

    /// Wakes one member of position `pos` to do its duty, or does it here if
    /// none was asleep and nobody claimed it.
    pub(crate) fn visit<F: Futex + ?Sized>(&self, pos: u32, futex: &F) {
        let c = self.order().item_at(pos);
        let slot = &self.slots[c as usize];
        let mark = armed_mark(self.generation);
        // Relaxed: published by the Release bump below.
        slot.cohort_lead.store(mark, Ordering::Relaxed);
        let word = self.word(c);
        // SYNC POINT (fence wake): Release publishes the lead mark and the
        // completed generation to members that Acquire the word.
        word.fetch_add(1, Ordering::Release);
        if futex.wake(word, 1) == 0 && self.claim(c) {
            self.duty(pos, false, futex);
        }
    }

    /// Claims cohort `c`'s lead duty of this generation; true if this caller
    /// must do it.
    pub(crate) fn claim(&self, c: u32) -> bool {
        let lead = &self.slots[c as usize].cohort_lead;
        let mark = armed_mark(self.generation);
        // Relaxed: the mark was published by the word bump the caller
        // acquired (or stored by the caller itself); the winner of the CAS
        // is the one duty holder.
        lead.load(Ordering::Relaxed) == mark
            && lead
                .compare_exchange(mark, 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}
