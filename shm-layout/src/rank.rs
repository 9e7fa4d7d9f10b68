//! Per-rank state words: what each rank is doing and how much it did
//! through shared memory, for the launcher's supervision and diagnostics.
//! Each record has its own cache line, since each rank writes its own.

use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// Lifecycle of a rank, as it reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum RankPhase {
    /// Not attached yet (the zeroed initial state).
    NotStarted = 0,
    /// Attached and running.
    Running = 1,
    /// Inside a fence.
    InFence = 2,
    /// Called finalize.
    Finalized = 3,
    /// Exited (set by the launcher when it reaps the process).
    Exited = 4,
}

impl RankPhase {
    /// The phase stored as `raw`, if it is one.
    pub const fn from_raw(raw: u32) -> Option<Self> {
        Some(match raw {
            0 => Self::NotStarted,
            1 => Self::Running,
            2 => Self::InFence,
            3 => Self::Finalized,
            4 => Self::Exited,
            _ => return None,
        })
    }
}

/// A snapshot of a rank's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RankStats {
    pub puts: u64,
    pub gets: u64,
    pub fences: u64,
    pub node_attr_ops: u64,
}

/// One rank's record in the segment.
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub struct RankState {
    pub(crate) pid: AtomicU32,
    pub(crate) state: AtomicU32,
    pub(crate) fence_epoch: AtomicU64,
    pub(crate) puts: AtomicU64,
    pub(crate) gets: AtomicU64,
    pub(crate) fences: AtomicU64,
    pub(crate) node_attr_ops: AtomicU64,
}

impl RankState {
    /// Process id the rank recorded (0 = none yet).
    pub fn pid(&self) -> u32 {
        // SYNC POINT (rank state): pairs with the Release in `set_pid`.
        self.pid.load(Ordering::Acquire)
    }

    /// Records the rank's process id.
    pub fn set_pid(&self, pid: u32) {
        // SYNC POINT (rank state): Release pairs with the Acquire in `pid`.
        self.pid.store(pid, Ordering::Release)
    }

    /// The rank's phase; `Err(raw)` for a value no build of this layout
    /// writes.
    pub fn phase(&self) -> Result<RankPhase, u32> {
        let raw = self.phase_raw();
        RankPhase::from_raw(raw).ok_or(raw)
    }

    /// The raw phase word.
    pub fn phase_raw(&self) -> u32 {
        // SYNC POINT (rank state): Acquire pairs with the Release in
        // `set_phase`: what the rank did before changing phase is visible.
        self.state.load(Ordering::Acquire)
    }

    /// Records the rank's phase.
    pub fn set_phase(&self, phase: RankPhase) {
        // SYNC POINT (rank state): Release pairs with `phase_raw`.
        self.state.store(phase as u32, Ordering::Release)
    }

    /// The fence epoch the rank last entered.
    pub fn fence_epoch(&self) -> u64 {
        self.fence_epoch.load(Ordering::Relaxed)
    }

    /// Records the fence epoch the rank is entering.
    pub fn set_fence_epoch(&self, epoch: u64) {
        self.fence_epoch.store(epoch, Ordering::Relaxed)
    }

    // Counters are statistics only: Relaxed increments.

    /// Counts a put done through shared memory.
    pub fn count_put(&self) {
        self.puts.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a get done through shared memory.
    pub fn count_get(&self) {
        self.gets.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a fence done through shared memory.
    pub fn count_fence(&self) {
        self.fences.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a node-attribute put or get done through shared memory.
    pub fn count_node_attr_op(&self) {
        self.node_attr_ops.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters (each read on its own; not a consistent cut).
    pub fn stats(&self) -> RankStats {
        RankStats {
            puts: self.puts.load(Ordering::Relaxed),
            gets: self.gets.load(Ordering::Relaxed),
            fences: self.fences.load(Ordering::Relaxed),
            node_attr_ops: self.node_attr_ops.load(Ordering::Relaxed),
        }
    }
}
