//! The fence barrier: an arrival counter and a generation word on separate
//! cache lines.
//!
//! ```
//! use std::sync::Arc;
//! use shm_layout::{futex::CondvarFutex, heap::HeapJob, SegmentParams};
//!
//! let job = Arc::new(HeapJob::new(&SegmentParams::for_ranks(2)));
//! let futex = Arc::new(CondvarFutex::new());
//! let peer = {
//!     let (job, futex) = (job.clone(), futex.clone());
//!     std::thread::spawn(move || {
//!         job.view().kvs().put(b"P1-bc", b"hello", &*futex).unwrap();
//!         job.view().fence().fence(&*futex).unwrap();
//!     })
//! };
//! let fence = job.view().fence();
//! let arrival = fence.arrive(&*futex);
//! fence.wait(arrival, &*futex)?;
//! // Every put made before the fence is visible after it.
//! assert_eq!(job.view().kvs().get(b"P1-bc"), Some(&b"hello"[..]));
//! peer.join().unwrap();
//! # Ok::<(), shm_layout::FenceError>(())
//! ```
//!
//! # Protocol
//!
//! `arrive` reads the current generation, then `fetch_add`s the counter. The
//! party that brings it to `parties` is the last arriver: it resets the
//! counter, bumps the generation (Release) and wakes every sleeper. `wait`
//! spins briefly on the generation word, then sleeps on it with the futex in
//! bounded slices, re-checking the abort word after every wake.
//!
//! The generation word counts in steps of 2; its bit 0 is set by an abort or
//! a rank's death ([`crate::death`]), so that either always changes the word
//! a waiter sleeps on (a waiter that checked the abort word and the death
//! count just before they were set cannot then sleep through the wake).
//!
//! # Central or tree release
//!
//! The barrier records a fan-out at init ([`crate::wake_tree::fanout_for`]
//! the rank count). 0 is the central release above. With a fan-out `k >= 1`,
//! a fence of a known rank ([`Fence::for_rank`]) sleeps on the rank's own
//! wake word instead, and the release runs down a `k`-ary tree rooted at the
//! last arriver (see [`crate::wake_tree`]). Either way the last arriver bumps
//! the generation word and wakes whoever sleeps on it, so anonymous waiters
//! (the launcher's fence watcher) and [`Fence::is_complete`] work unchanged.
//!
//! # Release by cohorts
//!
//! When the launcher records cohorts ([`Fence::set_cohorts`]: ranks bound
//! to the same CPUs), they take precedence over the tree: a rank with a
//! cohort sleeps on its cohort's word, and the release wakes one member per
//! cohort, which wakes the rest of it (see [`crate::cohort`]).
//!
//! # The server party
//!
//! A node server of a job spanning several nodes ([`Fence::set_server_party`])
//! must add the other nodes' pairs before its ranks are released. The barrier
//! then counts one party more than the ranks: the rank arrival that makes
//! all ranks arrived wakes whoever sleeps on the arrival counter
//! ([`Fence::wait_ranks`]); the server trades pairs, writes the others'
//! into the KVS and arrives last (anonymously), which releases everybody as
//! above. Without a server party nothing sleeps on the counter and no
//! arrival wakes it.
//!
//! **Contract**: each of the `parties` arrives once per generation, and
//! arrives for the next generation only after it has seen the previous one
//! complete (its `wait` returned, [`Arrival::last`] was true, or
//! [`Fence::is_complete`] returned true). This is what makes the
//! generation read in `arrive` exact and the counter reset safe.
//!
//! **Arriving for someone else** (the launcher, for ranks on the socket):
//! call [`Fence::arrive`] once per rank when its fence request comes in, keep
//! the returned [`Arrival`], and learn completion later without blocking via
//! [`Fence::is_complete`] / [`Fence::generation`] (polled from the event
//! loop, or from a helper thread sleeping in [`Fence::wait_timeout`]). If an
//! `arrive` returns `last: true`, the generation is already complete.

use std::time::{Duration, Instant};

use crate::abort::AbortWord;
use crate::cache::CachePadded;
use crate::cohort::CohortTree;
use crate::death::{DeathLine, FenceError};
use crate::futex::{Futex, WAKE_ALL};
use crate::sync::{AtomicU32, Ordering};
use crate::wait::{next_slice, wait_word, Patience, FENCE_SLEEP_SLICE, SLEEP_SLICE};
use crate::wake_tree::{armed_mark, Tree, WakeSlot, GEN_MASK, SLEEPING};

/// Bit 0 of the generation word: the job was aborted or a rank died.
pub(crate) const GEN_ABORTED: u32 = 1;
/// A completed generation adds this to the word.
pub(crate) const GEN_STEP: u32 = 2;

/// The barrier's words, in shared memory.
#[derive(Debug)]
#[repr(C)]
pub struct Barrier {
    /// Parties arrived in the current generation (hot: every arrival RMWs).
    pub(crate) arrived: CachePadded<AtomicU32>,
    /// What waiters read and sleep on.
    pub(crate) generation: CachePadded<GenerationLine>,
}

#[derive(Debug)]
#[repr(C)]
pub(crate) struct GenerationLine {
    pub(crate) word: AtomicU32,
    /// Immutable after init.
    pub(crate) parties: u32,
    /// Tree fan-out, 0 = central release. Set before any party arrives.
    pub(crate) fanout: AtomicU32,
    /// Rank of the last arriver of the latest generation (the tree's root),
    /// written before the bump that publishes it.
    pub(crate) root: AtomicU32,
    /// Number of cohorts, 0 = release without cohorts (see
    /// [`crate::cohort`]). Set before any party arrives.
    pub(crate) cohorts: AtomicU32,
    /// Cohort of the last arriver of the latest generation (the cohort
    /// tree's root), written before the bump that publishes it.
    pub(crate) cohort_root: AtomicU32,
    /// 1 when a server party completes every generation after the ranks
    /// (nested mode, see "The server party" above), else 0. Set before any
    /// party arrives.
    pub(crate) held: AtomicU32,
}

impl Barrier {
    pub(crate) fn new(parties: u32, fanout: u32) -> Self {
        Self {
            arrived: CachePadded::new(AtomicU32::new(0)),
            generation: CachePadded::new(GenerationLine {
                word: AtomicU32::new(0),
                parties,
                fanout: AtomicU32::new(fanout),
                root: AtomicU32::new(0),
                cohorts: AtomicU32::new(0),
                cohort_root: AtomicU32::new(0),
                held: AtomicU32::new(0),
            }),
        }
    }

    pub(crate) fn fanout(&self) -> u32 {
        self.generation.fanout.load(Ordering::Relaxed)
    }

    /// Extra parties after the ranks: 0, or 1 with a server party.
    fn held(&self) -> u32 {
        // Relaxed: written by the launcher before any party arrived.
        self.generation.held.load(Ordering::Relaxed).min(1)
    }

    /// Number of cohorts as recorded (unchecked).
    pub(crate) fn cohorts(&self) -> u32 {
        self.generation.cohorts.load(Ordering::Relaxed)
    }

    /// Marks the generation word as stopped, after an abort or a death was
    /// recorded (see the module docs).
    pub(crate) fn mark_stopped(&self) -> &AtomicU32 {
        // SYNC POINT (abort) / (death): Release orders the abort word or the
        // death count, set before this, before the flag; a waiter that
        // Acquires the flagged word sees it.
        self.generation
            .word
            .fetch_or(GEN_ABORTED, Ordering::Release);
        &self.generation.word
    }
}

/// What [`Fence::arrive`] returns: the generation the party arrived in, and
/// whether it was the last arriver (which completed that generation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Generation arrived in (wraps at 2^31).
    pub generation: u32,
    /// This arrival completed the generation.
    pub last: bool,
}

/// The job's fence: the barrier plus the abort word and death count its
/// waits check.
#[derive(Debug, Clone, Copy)]
pub struct Fence<'a> {
    barrier: &'a Barrier,
    abort: &'a AbortWord,
    deaths: &'a DeathLine,
    /// One per party (empty: no tree possible).
    slots: &'a [WakeSlot],
    /// The party this handle fences for, if known (tree mode needs it).
    rank: Option<u32>,
    /// Its cohort, if the release is by cohorts and it has one.
    cohort: Option<u32>,
    patience: Patience,
}

impl<'a> Fence<'a> {
    pub(crate) fn new(
        barrier: &'a Barrier,
        abort: &'a AbortWord,
        deaths: &'a DeathLine,
        slots: &'a [WakeSlot],
    ) -> Self {
        Self {
            barrier,
            abort,
            deaths,
            slots,
            rank: None,
            cohort: None,
            patience: Patience::DEFAULT,
        }
    }

    /// This handle arrives and waits as rank `rank`: in tree mode it sleeps
    /// on the rank's own wake word and, once released, wakes its children.
    /// At most one fence per rank at a time. Without it (the launcher
    /// arriving for socket ranks, its watcher) the handle is anonymous and
    /// sleeps on the generation word. A rank outside the job is ignored.
    pub fn for_rank(self, rank: u32) -> Self {
        let cohort = self.cohort_of(rank);
        self.for_rank_in(rank, cohort)
    }

    /// As [`Self::for_rank`], with the rank's cohort as [`Self::cohort_of`]
    /// gave it earlier (a client reads it once: the rank's own slot may be
    /// the only line of its page the fence would touch).
    pub fn for_rank_in(mut self, rank: u32, cohort: Option<u32>) -> Self {
        self.rank = (rank < self.parties()).then_some(rank);
        self.cohort = cohort.filter(|&c| self.rank.is_some() && c < self.cohort_count());
        self
    }

    /// The cohort `rank` sleeps with, if the fence releases by cohorts.
    pub fn cohort_of(&self, rank: u32) -> Option<u32> {
        let n = self.cohort_count();
        // Relaxed: written by the launcher before any rank started.
        let c = self
            .slots
            .get(rank as usize)?
            .cohort
            .load(Ordering::Relaxed)
            .checked_sub(1)?;
        (n > 0 && c < n).then_some(c)
    }

    /// Number of cohorts the fence releases by (0: none). A recorded count
    /// larger than the slots (a corrupt segment) counts as none.
    pub fn cohort_count(&self) -> u32 {
        let n = self.barrier.cohorts();
        if n as usize <= self.slots.len() && self.slots.len() == self.parties() as usize {
            n
        } else {
            0
        }
    }

    /// Whether cohort `c` has a lead duty nobody claimed (diagnostics and
    /// models: between fences it is always false).
    pub fn cohort_lead_pending(&self, c: u32) -> bool {
        self.slots
            .get(c as usize)
            .is_some_and(|s| s.cohort_lead.load(Ordering::Relaxed) != 0)
    }

    /// Launcher only, before any party arrives: release by cohorts,
    /// `of_rank[r]` being rank `r`'s cohort (ranks bound to the same CPUs).
    /// Cohort numbers must be below the rank count; an empty slice, or one
    /// of the wrong length, turns cohorts off.
    pub fn set_cohorts(&self, of_rank: &[u32]) {
        let ok = of_rank.len() == self.parties() as usize
            && self.slots.len() == of_rank.len()
            && of_rank.iter().all(|&c| c < self.parties());
        let n = if ok {
            of_rank.iter().max().map_or(0, |&m| m + 1)
        } else {
            0
        };
        for (slot, &c) in self.slots.iter().zip(of_rank) {
            slot.cohort
                .store(if ok { c + 1 } else { 0 }, Ordering::Relaxed);
        }
        self.barrier.generation.cohorts.store(n, Ordering::Relaxed);
    }

    /// Launcher only, before any party arrives: a server party completes
    /// every generation after the ranks (see "The server party").
    pub fn set_server_party(&self, on: bool) {
        self.barrier
            .generation
            .held
            .store(u32::from(on), Ordering::Relaxed);
    }

    /// Whether a server party completes every generation.
    pub fn has_server_party(&self) -> bool {
        self.barrier.held() > 0
    }

    /// The server party: whether every rank has arrived in the current
    /// generation (true: the server may trade, then [`Self::arrive`] to
    /// release them). Acquires every rank's puts before its arrival.
    pub fn ranks_arrived(&self) -> bool {
        // SYNC POINT (fence arrival): Acquire of the arrival counter, the
        // end of every rank's Release RMW on it, collects their puts.
        self.barrier.arrived.load(Ordering::Acquire) >= self.parties()
    }

    /// The server party: sleeps until every rank has arrived in the current
    /// generation (`Ok(true)`), `timeout` passes (`Ok(false)`) or the job
    /// is aborted. Never spins: it is the launcher, and the ranks need the
    /// CPU.
    pub fn wait_ranks<F: Futex + ?Sized>(
        &self,
        futex: &F,
        timeout: Duration,
    ) -> Result<bool, FenceError> {
        let parties = self.parties();
        // An abort does not change the counter: sleep in slices to see it.
        wait_word(
            &self.barrier.arrived,
            futex,
            Patience::DEFAULT.with_spins(0),
            Instant::now().checked_add(timeout),
            Some(SLEEP_SLICE),
            |n| n >= parties,
            |_| self.stopped(),
        )
    }

    /// Tree fan-out of the release (0: central).
    pub fn fanout(&self) -> u32 {
        self.barrier.fanout()
    }

    /// Launcher only, before any party arrives: release by a tree of
    /// fan-out `k` (0: central; 1: a chain, for models; capped at
    /// [`crate::wake_tree::MAX_FANOUT`]). For measurements; the default
    /// comes from the rank count.
    pub fn set_fanout(&self, k: u32) {
        let k = if k < 2 {
            0
        } else {
            k.min(crate::wake_tree::MAX_FANOUT)
        };
        self.barrier.generation.fanout.store(k, Ordering::Relaxed);
    }

    /// How many times `rank`'s wake word was bumped (diagnostics, models).
    pub fn wakes(&self, rank: u32) -> Option<u32> {
        self.slots.get(rank as usize).map(WakeSlot::wakes)
    }

    /// The fan-out if this barrier releases by tree (and has every slot).
    fn tree_fanout(&self) -> Option<u32> {
        let k = self.barrier.fanout();
        (k >= 1 && self.slots.len() == self.parties() as usize && self.cohort_count() == 0)
            .then_some(k)
    }

    /// This handle's slot, if it waits by tree.
    fn my_slot(&self) -> Option<(u32, &'a WakeSlot)> {
        self.tree_fanout()?;
        let r = self.rank?;
        Some((r, &self.slots[r as usize]))
    }

    /// How many times `wait` polls the generation word before it sleeps
    /// (default 100, capped there). A process that knows the job has more
    /// ranks than CPUs should pass 0: the ranks still to arrive need the CPU
    /// it would spin on, so spinning only delays the fence.
    pub fn with_spin_limit(mut self, spins: u32) -> Self {
        self.patience = self.patience.with_spins(spins);
        self
    }

    /// How many times `wait` gives up the CPU (`sched_yield`, re-checking
    /// after each) before it sleeps, after its spins (default 0, capped at
    /// [`crate::MAX_YIELDS`]). When ranks outnumber CPUs the ranks
    /// still to arrive are runnable on this CPU: a yield lets them run and
    /// often returns with the fence complete, which is cheaper than a
    /// sleep and a wake (docs/fence.md, "Yield before sleeping").
    pub fn with_yield_limit(mut self, yields: u32) -> Self {
        self.patience = self.patience.with_yields(yields);
        self
    }

    /// Number of parties (the job's rank count).
    pub fn parties(&self) -> u32 {
        self.barrier.generation.parties
    }

    /// Parties arrived so far in the current generation (a snapshot).
    pub fn arrived(&self) -> u32 {
        self.barrier.arrived.load(Ordering::Relaxed)
    }

    /// The number of completed generations (wraps at 2^31).
    pub fn generation(&self) -> u32 {
        // SYNC POINT (fence completion): Acquire pairs with the last
        // arriver's Release bump, like the load in `wait`.
        self.barrier.generation.word.load(Ordering::Acquire) >> 1
    }

    /// Whether the generation of `arrival` has completed. True means every
    /// party's puts before that fence are visible to this thread.
    pub fn is_complete(&self, arrival: Arrival) -> bool {
        self.generation() != arrival.generation
    }

    /// Arrives for one party; never blocks. The last arriver completes the
    /// generation and wakes all waiters (one `futex.wake`).
    pub fn arrive<F: Futex + ?Sized>(&self, futex: &F) -> Arrival {
        let b = self.barrier;
        // Relaxed: by the contract this party already acquired the previous
        // generation's completion, so this reads the current one exactly,
        // and it cannot complete before our own arrival below.
        let generation = b.generation.word.load(Ordering::Relaxed) >> 1;
        if let Some((_, slot)) = self.my_slot() {
            // Relaxed: published by the arrival's Release below.
            slot.armed.store(armed_mark(generation), Ordering::Relaxed);
        }
        // SYNC POINT (fence arrival): Release hands this party's earlier
        // writes (its puts) to the last arriver, whose Acquire side of the
        // same RMW chain collects every party's.
        let n = b.arrived.fetch_add(1, Ordering::AcqRel) + 1;
        let held = b.held();
        // The arrival that reaches `parties` (plus the server party) is the
        // last (tested as `>=`, so a corrupt `parties` of 0 cannot hang
        // anybody).
        if n < b.generation.parties.saturating_add(held) {
            if held > 0 && n == b.generation.parties {
                // Every rank is in: the server party may trade now.
                futex.wake(&b.arrived, WAKE_ALL);
            }
            return Arrival {
                generation,
                last: false,
            };
        }
        // Reset before the bump: the next generation's arrivals come after
        // their Acquire of the bump, so they count from 0.
        b.arrived.store(0, Ordering::Relaxed);
        let tree = self.tree_fanout();
        let cohorts = self.cohort_count();
        if cohorts > 0 {
            // Relaxed: published by the bump below. An anonymous last
            // arriver visits cohort 0 as the root (below).
            b.generation
                .cohort_root
                .store(self.cohort.unwrap_or(0), Ordering::Relaxed);
        }
        if tree.is_some() {
            // Relaxed: published by the bump below. An anonymous last
            // arriver roots the tree at rank 0 and visits it (below).
            b.generation
                .root
                .store(self.rank.unwrap_or(0), Ordering::Relaxed);
        }
        // SYNC POINT (fence completion): Release publishes every party's
        // puts (collected above) to waiters' Acquire load of the generation.
        // fetch_add keeps the abort bit.
        b.generation.word.fetch_add(GEN_STEP, Ordering::Release);
        if cohorts > 0 {
            let t = CohortTree {
                slots: self.slots,
                n: cohorts,
                root: self.cohort.unwrap_or(0),
                generation,
            };
            match self.cohort {
                Some(_) => t.duty(0, true, futex),
                None => t.visit(0, futex),
            }
        }
        if let Some(fanout) = tree {
            let t = Tree {
                slots: self.slots,
                root: self.rank.unwrap_or(0),
                fanout,
                generation,
            };
            match self.rank {
                Some(_) => t.duty(0, futex),
                None => t.visit(0, futex),
            }
        }
        // Anonymous sleepers (all of them in central mode; the launcher's
        // watcher in tree mode).
        futex.wake(&b.generation.word, WAKE_ALL);
        Arrival {
            generation,
            last: true,
        }
    }

    /// Blocks until the generation of `arrival` completes, or the job is
    /// aborted. Spins at most a few microseconds, then sleeps.
    pub fn wait<F: Futex + ?Sized>(&self, arrival: Arrival, futex: &F) -> Result<(), FenceError> {
        self.wait_until(arrival, futex, None).map(|_| ())
    }

    /// Like [`Self::wait`], for at most `timeout`: `Ok(true)` if the
    /// generation completed, `Ok(false)` if the timeout passed first.
    pub fn wait_timeout<F: Futex + ?Sized>(
        &self,
        arrival: Arrival,
        futex: &F,
        timeout: Duration,
    ) -> Result<bool, FenceError> {
        self.wait_until(arrival, futex, Instant::now().checked_add(timeout))
    }

    /// `arrive` then `wait`: one rank's whole fence.
    pub fn fence<F: Futex + ?Sized>(&self, futex: &F) -> Result<Arrival, FenceError> {
        // After an abort an arrival must not count: a rank retrying its
        // fence would be counted twice and could complete a round alone.
        // After a death no generation can complete any more.
        self.stopped()?;
        let arrival = self.arrive(futex);
        self.wait(arrival, futex)?;
        Ok(arrival)
    }

    /// `Err` once the job is aborted or a rank died: the fence then can
    /// never complete.
    fn stopped(&self) -> Result<(), FenceError> {
        self.abort.check()?;
        self.deaths.check()
    }

    fn wait_until<F: Futex + ?Sized>(
        &self,
        arrival: Arrival,
        futex: &F,
        deadline: Option<Instant>,
    ) -> Result<bool, FenceError> {
        if let Some(c) = self.cohort {
            return self.wait_cohort(arrival, c, futex, deadline);
        }
        if let Some((rank, slot)) = self.my_slot() {
            return self.wait_tree(arrival, rank, slot, futex, deadline);
        }
        // Short spin (with few ranks per core the last arrival is often
        // microseconds away), then bounded sleeps on the generation word.
        // An abort sets its bit 0 (after the abort word), so it always
        // changes the word slept on.
        wait_word(
            &self.barrier.generation.word,
            futex,
            self.patience,
            deadline,
            FENCE_SLEEP_SLICE,
            |w| w >> 1 != arrival.generation,
            |_| self.stopped(),
        )
    }

    /// `wait_until` of a rank in tree mode: sleeps on its own wake word;
    /// once the generation is complete, wakes its children (unless it was
    /// the last arriver, which already did the root's duty).
    fn wait_tree<F: Futex + ?Sized>(
        &self,
        arrival: Arrival,
        rank: u32,
        slot: &WakeSlot,
        futex: &F,
        deadline: Option<Instant>,
    ) -> Result<bool, FenceError> {
        let gen = &self.barrier.generation;
        let done = |w: u32| w >> 1 != arrival.generation;
        let released = || {
            if !arrival.last {
                let t = Tree {
                    slots: self.slots,
                    // Relaxed: published by the bump our caller acquired;
                    // not yet overwritten, as the next generation needs our
                    // own arrival.
                    root: gen.root.load(Ordering::Relaxed),
                    fanout: self.barrier.fanout(),
                    generation: arrival.generation & GEN_MASK,
                };
                t.duty(t.position(rank), futex);
            }
            Ok(true)
        };
        // SYNC POINT (fence completion): Acquire pairs with the last
        // arriver's Release bump.
        if self
            .patience
            .before_sleep(futex, || done(gen.word.load(Ordering::Acquire)))
        {
            return released();
        }
        loop {
            // SYNC POINT (fence wake): Acquire pairs with the Release bump
            // of our wake word by a waker that saw the generation complete
            // (or by an aborter that set the abort word): read before the
            // generation, so a bump seen here means the completion (or
            // abort) is seen below.
            let w = slot.word.load(Ordering::Acquire);
            // SYNC POINT (fence completion): as in `crate::wait::wait_word`.
            if done(gen.word.load(Ordering::Acquire)) {
                return released();
            }
            self.stopped()?;
            let Some(slice) = next_slice(deadline, FENCE_SLEEP_SLICE) else {
                return Ok(false);
            };
            // Say we sleep, so the waker calls FUTEX_WAKE. Relaxed: the
            // waker's bump is an RMW on this word, so it either sees the flag
            // or makes this CAS (or the futex's compare) fail.
            if w & SLEEPING == 0
                && slot
                    .word
                    .compare_exchange(w, w | SLEEPING, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
            {
                continue;
            }
            // Sleeps only while the word is unchanged: a bump after our load
            // (release or abort) cannot be slept through.
            futex.wait(&slot.word, w | SLEEPING, slice);
        }
    }

    /// `wait_until` of a member of cohort `c`: sleeps on the cohort's word
    /// for this generation's parity; once the generation is complete,
    /// claims the cohort's lead duty if a visitor left it (see
    /// [`crate::cohort`]).
    fn wait_cohort<F: Futex + ?Sized>(
        &self,
        arrival: Arrival,
        c: u32,
        futex: &F,
        deadline: Option<Instant>,
    ) -> Result<bool, FenceError> {
        let gen = &self.barrier.generation;
        let done = |w: u32| w >> 1 != arrival.generation;
        let released = || {
            if !arrival.last {
                let t = CohortTree {
                    slots: self.slots,
                    n: self.cohort_count(),
                    // Relaxed: published by the bump our caller acquired;
                    // not yet overwritten, as the next generation needs our
                    // own arrival.
                    root: gen.cohort_root.load(Ordering::Relaxed),
                    generation: arrival.generation,
                };
                if t.claim(c) {
                    t.duty(t.position(c), false, futex);
                }
            }
            Ok(true)
        };
        let word = &self.slots[c as usize].cohort_words[(arrival.generation & 1) as usize];
        // The cohort's word is loaded (Acquire) before the generation word
        // in every check, so a visitor's or aborter's bump seen on it means
        // the completion or the abort is seen too; the futex sleeps only
        // while the word is unchanged.
        let completed = wait_word(
            word,
            futex,
            self.patience,
            deadline,
            FENCE_SLEEP_SLICE,
            // SYNC POINT (fence completion): as in `crate::wait::wait_word`.
            |_| done(gen.word.load(Ordering::Acquire)),
            |_| self.stopped(),
        )?;
        if completed {
            released()
        } else {
            Ok(false)
        }
    }
}
