//! Per-rank state words: what each rank is doing and how much it did
//! through shared memory, for the launcher's supervision and diagnostics.
//! Each record has its own cache lines, since each rank writes its own.

use crate::death::DeathCause;
use crate::kvs::KEY_MAX;
use crate::sync::{fence, AtomicU32, AtomicU64, Ordering};

/// Words of the node-attribute key a waiting rank records.
const WAIT_KEY_WORDS: usize = KEY_MAX / 8;
/// Attempts of a reader of the waited key before it gives up (the rank was
/// rewriting it each time; it is only being diagnosed, never waited for).
const WAIT_KEY_READS: u32 = 4;

/// What the ranks' phase stamps ([`RankState::since_stamp`]) count, set by
/// the launcher before any rank starts. Reading `CLOCK_MONOTONIC` costs a
/// rank three pages (libc, vDSO code and data) that a fence after a context
/// switch finds cold, about a sixth of a 1024-rank fence on 2 cores; the
/// CPU's time-stamp counter is read with no memory at all. So where the
/// kernel itself keeps time by the TSC (constant and synchronised across
/// CPUs), stamps are raw TSC values, and readers convert them with the
/// pair of readings the launcher took when it created the segment.
#[derive(Debug, Default)]
#[repr(C)]
pub struct StampClock {
    /// [`STAMP_MONOTONIC`] or [`STAMP_TSC`].
    pub(crate) kind: AtomicU32,
    /// TSC and CLOCK_MONOTONIC (ns) read together by the launcher.
    pub(crate) tsc_base: AtomicU64,
    pub(crate) mono_base: AtomicU64,
}

/// Stamps are CLOCK_MONOTONIC nanoseconds (the zeroed default).
pub const STAMP_MONOTONIC: u32 = 0;
/// Stamps are raw time-stamp-counter values.
pub const STAMP_TSC: u32 = 1;

impl StampClock {
    /// Launcher only, before any rank starts: stamps are TSC values, and
    /// `tsc` was read at CLOCK_MONOTONIC `mono_ns`.
    pub fn set_tsc(&self, tsc: u64, mono_ns: u64) {
        self.tsc_base.store(tsc, Ordering::Relaxed);
        self.mono_base.store(mono_ns, Ordering::Relaxed);
        self.kind.store(STAMP_TSC, Ordering::Relaxed);
    }

    /// Whether stamps are TSC values.
    pub fn is_tsc(&self) -> bool {
        self.kind.load(Ordering::Relaxed) == STAMP_TSC
    }

    /// A stamp as CLOCK_MONOTONIC nanoseconds, given the clocks read now
    /// (`tsc_now`, `mono_now`): TSC stamps are scaled by the rate the TSC
    /// ran at since the launcher's pair of readings. 0 stays 0 (never).
    pub fn to_mono_ns(&self, stamp: u64, tsc_now: u64, mono_now: u64) -> u64 {
        if stamp == 0 || !self.is_tsc() {
            return stamp;
        }
        let (t0, m0) = (
            self.tsc_base.load(Ordering::Relaxed),
            self.mono_base.load(Ordering::Relaxed),
        );
        let (dt, dm) = (tsc_now.saturating_sub(t0), mono_now.saturating_sub(m0));
        if dt == 0 {
            return m0;
        }
        let ns = u128::from(stamp.saturating_sub(t0)) * u128::from(dm) / u128::from(dt);
        m0.saturating_add(u64::try_from(ns).unwrap_or(u64::MAX))
    }
}

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
    /// Waiting for a node attribute to appear.
    WaitingNodeAttr = 5,
    /// Inside a group fence on a segment barrier: [`RankState::group_wait`]
    /// names the group's slot and the generation the rank arrived in.
    InGroupFence = 6,
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
            5 => Self::WaitingNodeAttr,
            6 => Self::InGroupFence,
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
    /// What the rank waits in, while its phase says it waits: in
    /// [`RankPhase::InGroupFence`], the group's slot (high half) and the
    /// generation it arrived in (low half).
    pub(crate) wait_target: AtomicU64,
    pub(crate) puts: AtomicU64,
    pub(crate) gets: AtomicU64,
    pub(crate) fences: AtomicU64,
    pub(crate) node_attr_ops: AtomicU64,
    /// Stamp of the last phase change (0 = never): CLOCK_MONOTONIC
    /// nanoseconds, or TSC ticks ([`StampClock`]).
    pub(crate) since: AtomicU64,
    /// The last PMI operation the rank started ([`RankOp`] as u32).
    pub(crate) last_op: AtomicU32,
    /// Sequence word of `wait_key` (odd while the rank rewrites it), so a
    /// reader never takes a half-written key and never makes the rank wait.
    pub(crate) wait_seq: AtomicU32,
    /// The node-attribute key the rank last waited for (`fastpmi ps`), up to
    /// [`KEY_MAX`] bytes, zero-padded, native-endian words. Its own line:
    /// written once per wait, never on the fence path.
    pub(crate) wait_key: [AtomicU64; WAIT_KEY_WORDS],
    /// How the rank died (a packed [`DeathCause`]), 0 while it lives.
    /// Written once, by the launcher, in fault-tolerant jobs only.
    pub(crate) death: AtomicU64,
}

/// A group fence a rank waits in ([`RankState::group_wait`]): its barrier
/// slot, and the barrier's generation the rank arrived in (it has not seen
/// that generation complete while the barrier still shows it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupWait {
    pub slot: u32,
    pub generation: u32,
}

/// A key read back by [`RankState::wait_key`]: `bytes[..len]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitKey {
    pub bytes: [u8; KEY_MAX],
    pub len: usize,
}

impl WaitKey {
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// The last PMI operation a rank started, as kept in its state word (for
/// diagnostics: `fastpmi ps`, failure reports).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum RankOp {
    None = 0,
    Init = 1,
    Put = 2,
    Get = 3,
    Fence = 4,
    PutNodeAttr = 5,
    GetNodeAttr = 6,
    Finalize = 7,
    Other = 8,
    GroupFence = 9,
}

impl RankOp {
    /// The operation stored as `raw`, if it is one.
    pub const fn from_raw(raw: u32) -> Option<Self> {
        Some(match raw {
            0 => Self::None,
            1 => Self::Init,
            2 => Self::Put,
            3 => Self::Get,
            4 => Self::Fence,
            5 => Self::PutNodeAttr,
            6 => Self::GetNodeAttr,
            7 => Self::Finalize,
            8 => Self::Other,
            9 => Self::GroupFence,
            _ => return None,
        })
    }

    /// The PMI-2 wire name of the operation ("kvs-fence", ...).
    pub const fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Init => "fullinit",
            Self::Put => "kvs-put",
            Self::Get => "kvs-get",
            Self::Fence => "kvs-fence",
            Self::PutNodeAttr => "info-putnodeattr",
            Self::GetNodeAttr => "info-getnodeattr",
            Self::Finalize => "finalize",
            Self::Other => "other",
            Self::GroupFence => "group-fence",
        }
    }
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

    /// Records the rank's phase and when it entered it (`stamp`: of the
    /// kind the segment's [`StampClock`] says, read by the caller: this
    /// crate makes no syscalls).
    pub fn set_phase_at(&self, phase: RankPhase, stamp: u64) {
        // Diagnostics only: Relaxed, published by the Release in `set_phase`.
        self.since.store(stamp, Ordering::Relaxed);
        self.set_phase(phase)
    }

    /// The stamp of the last [`RankState::set_phase_at`] (0 = none), to
    /// convert with [`StampClock::to_mono_ns`].
    pub fn since_stamp(&self) -> u64 {
        self.since.load(Ordering::Relaxed)
    }

    /// Records the PMI operation the rank is starting.
    pub fn set_last_op(&self, op: RankOp) {
        // Diagnostics only.
        self.last_op.store(op as u32, Ordering::Relaxed)
    }

    /// The last operation recorded (`None` for a value no build writes).
    pub fn last_op(&self) -> Option<RankOp> {
        RankOp::from_raw(self.last_op.load(Ordering::Relaxed))
    }

    /// Records the node-attribute key the rank is about to wait for (only
    /// the rank itself writes its record; keys are cut at [`KEY_MAX`]
    /// bytes and may not hold NUL, which pads). Call before
    /// [`RankState::set_phase_at`] with [`RankPhase::WaitingNodeAttr`].
    pub fn set_wait_key(&self, key: &[u8]) {
        // Seqlock writer (single writer: the rank). SYNC POINT (wait key):
        // the odd value and the Release fence order it before the key words;
        // the final Release store publishes them to `wait_key`'s Acquire.
        let seq = self.wait_seq.load(Ordering::Relaxed);
        self.wait_seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        let key = &key[..key.len().min(KEY_MAX)];
        for (i, w) in self.wait_key.iter().enumerate() {
            let mut b = [0u8; 8];
            let from = (i * 8).min(key.len());
            let to = (i * 8 + 8).min(key.len());
            b[..to - from].copy_from_slice(&key[from..to]);
            w.store(u64::from_ne_bytes(b), Ordering::Relaxed);
        }
        self.wait_seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// The node-attribute key the rank last recorded with
    /// [`RankState::set_wait_key`] (`None`: none yet, or the rank was
    /// rewriting it on every attempt). Read-only: never waits or spins on
    /// the rank.
    pub fn wait_key(&self) -> Option<WaitKey> {
        for _ in 0..WAIT_KEY_READS {
            // Seqlock reader. SYNC POINT (wait key): Acquire pairs with the
            // writer's final Release; the Acquire fence orders the word
            // loads before the re-check of the sequence.
            let s1 = self.wait_seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                continue;
            }
            let mut bytes = [0u8; KEY_MAX];
            for (i, w) in self.wait_key.iter().enumerate() {
                bytes[i * 8..i * 8 + 8].copy_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
            }
            fence(Ordering::Acquire);
            if self.wait_seq.load(Ordering::Relaxed) != s1 {
                continue;
            }
            if s1 == 0 {
                return None;
            }
            let len = bytes.iter().position(|&b| b == 0).unwrap_or(KEY_MAX);
            return Some(WaitKey { bytes, len });
        }
        None
    }

    /// Records that the rank arrives at the group fence of barrier `slot`
    /// in `generation` (the barrier's generation it saw complete last), at
    /// `stamp` (as for [`RankState::set_phase_at`]). Call before arriving;
    /// set the phase back to [`RankPhase::Running`] after the fence.
    pub fn enter_group_fence(&self, slot: u32, generation: u32, stamp: u64) {
        // Diagnostics only: Relaxed, published by the Release in `set_phase`.
        self.wait_target.store(
            (u64::from(slot) << 32) | u64::from(generation),
            Ordering::Relaxed,
        );
        self.set_phase_at(RankPhase::InGroupFence, stamp);
    }

    /// The group fence the rank is in, if its phase says it is in one.
    pub fn group_wait(&self) -> Option<GroupWait> {
        if self.phase() != Ok(RankPhase::InGroupFence) {
            return None;
        }
        // After the Acquire of the phase: the target written before it.
        let t = self.wait_target.load(Ordering::Relaxed);
        Some(GroupWait {
            slot: (t >> 32) as u32,
            generation: t as u32,
        })
    }

    /// How the rank died, if the launcher recorded its death.
    pub fn death(&self) -> Option<DeathCause> {
        // SYNC POINT (death): pairs with the Release in `set_death`.
        DeathCause::unpack(self.death.load(Ordering::Acquire))
    }

    /// Records the rank's death, unless one is recorded already; true if
    /// this call recorded it. Launcher only; count it afterwards
    /// (`Segment::record_death` does both).
    #[cfg_attr(loom, allow(dead_code))] // used by `Segment`, not built under loom
    pub(crate) fn set_death(&self, cause: DeathCause) -> bool {
        // SYNC POINT (death): Release pairs with the Acquire in `death`.
        self.death
            .compare_exchange(0, cause.pack(), Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Replaces a recorded [`DeathCause::ConnectionLost`] by how the rank
    /// really ended, once the launcher reaped it (the death was counted
    /// when the connection closed). Launcher only; any other record stays.
    pub fn refine_death(&self, cause: DeathCause) {
        let lost = DeathCause::ConnectionLost.pack();
        // SYNC POINT (death): as in `set_death`.
        let _ =
            self.death
                .compare_exchange(lost, cause.pack(), Ordering::AcqRel, Ordering::Acquire);
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn tsc_stamps_convert_at_the_rate_since_the_launchers_reading() {
        let clock = StampClock::default();
        // Monotonic stamps pass through.
        assert_eq!(clock.to_mono_ns(1234, 99, 5000), 1234);
        // TSC at 3 ticks per ns, base reading (3000, 1000 ns).
        clock.set_tsc(3000, 1000);
        let (tsc_now, mono_now) = (3000 + 3 * 9000, 10_000);
        assert_eq!(clock.to_mono_ns(3000 + 3 * 4000, tsc_now, mono_now), 5000);
        assert_eq!(
            clock.to_mono_ns(0, tsc_now, mono_now),
            0,
            "never stays never"
        );
        // No time passed since the base: the base.
        assert_eq!(clock.to_mono_ns(3600, 3000, 1000), 1000);
        // A stamp from before the base (a corrupt one) saturates to it.
        assert_eq!(clock.to_mono_ns(5, tsc_now, mono_now), 1000);
    }
}
