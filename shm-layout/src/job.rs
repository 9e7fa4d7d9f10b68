//! The per-job synchronisation block and [`JobView`], the set of views the
//! launcher and the clients work with (the same whether the job lives in a
//! mapped segment or, for models and tests, on the heap).

use crate::abort::{AbortWord, Aborted};
use crate::arena::Arena;
use crate::barrier::{Barrier, Fence};
use crate::cache::CachePadded;
use crate::death::DeathLine;
use crate::futex::{Futex, WAKE_ALL};
use crate::kvs::{Kvs, Slot};
use crate::nodeattr::NodeAttrs;
use crate::rank::StampClock;
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::wake_tree::WakeSlot;

/// Runtime words of a job, each written hot by different processes and so
/// each on its own cache line. All zero except the barrier's party count.
#[derive(Debug)]
#[repr(C)]
pub struct SyncBlock {
    pub(crate) barrier: Barrier,
    /// Bumped after every node-attribute put (and by an abort).
    pub(crate) node_changes: CachePadded<AtomicU32>,
    /// Bump cursor of the KVS value arena.
    pub(crate) kvs_cursor: CachePadded<AtomicU64>,
    /// Bump cursor of the node-attribute value arena.
    pub(crate) nodeattr_cursor: CachePadded<AtomicU64>,
    /// What the ranks' phase stamps count.
    pub(crate) stamp_clock: CachePadded<StampClock>,
    /// Deaths of ranks recorded (fault-tolerant jobs; see [`crate::death`]).
    pub(crate) deaths: CachePadded<DeathLine>,
}

impl SyncBlock {
    /// A block for `parties` ranks whose fence releases with `fanout`
    /// ([`crate::wake_tree::fanout_for`] the parties by default).
    pub(crate) fn new(parties: u32, fanout: u32) -> Self {
        Self {
            barrier: Barrier::new(parties, fanout),
            node_changes: CachePadded::new(AtomicU32::new(0)),
            kvs_cursor: CachePadded::new(AtomicU64::new(0)),
            nodeattr_cursor: CachePadded::new(AtomicU64::new(0)),
            stamp_clock: CachePadded::new(StampClock::default()),
            deaths: CachePadded::new(DeathLine::new()),
        }
    }
}

/// Everything shared about one job: KVS, node attributes, fence, abort word.
/// Cheap to copy; every method works through shared references.
#[derive(Debug, Clone, Copy)]
pub struct JobView<'a> {
    abort: &'a AbortWord,
    sync: &'a SyncBlock,
    wake: &'a [WakeSlot],
    kvs: Kvs<'a>,
    node_attrs: NodeAttrs<'a>,
}

/// The pieces of a job, wherever they live.
pub(crate) struct JobParts<'a> {
    pub(crate) abort: &'a AbortWord,
    pub(crate) sync: &'a SyncBlock,
    /// The fence's per-rank wake slots (one per party).
    pub(crate) wake: &'a [WakeSlot],
    pub(crate) kvs_slots: &'a [Slot],
    pub(crate) kvs_arena: crate::arena::ByteRegion<'a>,
    pub(crate) nodeattr_slots: &'a [Slot],
    pub(crate) nodeattr_arena: crate::arena::ByteRegion<'a>,
    pub(crate) max_value_len: usize,
}

impl<'a> JobView<'a> {
    pub(crate) fn new(p: JobParts<'a>) -> Self {
        let kvs = Kvs::new(
            p.kvs_slots,
            Arena {
                bytes: p.kvs_arena,
                cursor: &p.sync.kvs_cursor,
            },
            p.max_value_len,
            p.abort,
        );
        let node_table = Kvs::new(
            p.nodeattr_slots,
            Arena {
                bytes: p.nodeattr_arena,
                cursor: &p.sync.nodeattr_cursor,
            },
            p.max_value_len,
            p.abort,
        );
        Self {
            abort: p.abort,
            sync: p.sync,
            wake: p.wake,
            kvs,
            node_attrs: NodeAttrs::new(node_table, &p.sync.node_changes),
        }
    }

    /// The job's key-value store.
    pub fn kvs(&self) -> Kvs<'a> {
        self.kvs
    }

    /// The node-attribute table.
    pub fn node_attrs(&self) -> NodeAttrs<'a> {
        self.node_attrs
    }

    /// The fence barrier.
    pub fn fence(&self) -> Fence<'a> {
        Fence::new(&self.sync.barrier, self.abort, &self.sync.deaths, self.wake)
    }

    /// What the ranks' phase stamps count.
    pub fn stamp_clock(&self) -> &'a StampClock {
        &self.sync.stamp_clock
    }

    /// The abort in effect, if the job was aborted.
    pub fn abort_status(&self) -> Option<Aborted> {
        self.abort.get()
    }

    /// Aborts the job: records `code` and `rank` unless an earlier abort is
    /// recorded (the first wins), then changes and wakes every futex word
    /// anyone may sleep on (fence generation, node-attribute counter), so
    /// every blocked fence and node-attribute wait returns the abort error.
    /// Every rank's fence wake word is bumped and woken directly, not
    /// through the release tree, whose inner ranks may be dead.
    /// Returns the abort in effect. Safe to call repeatedly, from any
    /// process; later calls just wake everybody again.
    pub fn abort<F: Futex + ?Sized>(&self, code: i32, rank: u32, futex: &F) -> Aborted {
        let effective = self.abort.raise(Aborted::new(code, rank));
        // SYNC POINT (abort): Release orders the abort word before the
        // counter bump a node-attribute waiter Acquires.
        self.sync.node_changes.fetch_add(1, Ordering::Release);
        futex.wake(&self.sync.node_changes, WAKE_ALL);
        // A waiter for the next death re-checks the abort word when woken.
        futex.wake(&self.sync.deaths.count, WAKE_ALL);
        self.wake_fence_sleepers(futex);
        effective
    }

    /// Deaths recorded in the job so far (0: every rank lives).
    pub fn deaths(&self) -> &'a DeathLine {
        &self.sync.deaths
    }

    /// Counts the death of a rank (whose record the caller wrote first, see
    /// `Segment::record_death`): the job's fence is broken for good, every
    /// rank in it wakes and returns [`crate::FenceError::RanksDied`], and
    /// waiters for the next death wake. Returns the new death count.
    pub fn count_death<F: Futex + ?Sized>(&self, futex: &F) -> u32 {
        let n = self.sync.deaths.bump(futex);
        self.wake_fence_sleepers(futex);
        n
    }

    /// Sleeps until more than `seen` deaths are recorded (`Ok(Some(n))`),
    /// `deadline` passes (`Ok(None)`) or the job is aborted.
    pub fn wait_death<F: Futex + ?Sized>(
        &self,
        seen: u32,
        futex: &F,
        deadline: Option<std::time::Instant>,
    ) -> Result<Option<u32>, Aborted> {
        self.sync
            .deaths
            .wait_after(seen, self.abort, futex, deadline)
    }

    /// Changes and wakes every word a fence sleeper may sleep on, after the
    /// abort word or a death was recorded (which its re-check then sees).
    /// Every rank's fence wake word is bumped and woken directly, not
    /// through the release tree, whose inner ranks may be dead.
    fn wake_fence_sleepers<F: Futex + ?Sized>(&self, futex: &F) {
        let generation = self.sync.barrier.mark_stopped();
        futex.wake(generation, WAKE_ALL);
        for slot in self.wake {
            slot.bump(futex);
        }
        // Cohort members sleep on their cohort's words (both parities: a
        // member may be a generation ahead of the others).
        let cohorts = self.fence().cohort_count() as usize;
        for slot in &self.wake[..cohorts] {
            for word in &slot.cohort_words {
                // SYNC POINT (abort) / (death): as for the generation word.
                word.fetch_add(1, Ordering::Release);
                futex.wake(word, WAKE_ALL);
            }
        }
    }
}
