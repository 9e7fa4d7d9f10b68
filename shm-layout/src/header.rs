//! The segment header at offset 0, the layout stamp, and the layout asserts.
//! Not built under loom: loom's atomics are not layout-compatible and cannot
//! live in raw memory (the algorithms are modelled on heap structures).
//!
//! The first 24 bytes are the same in every layout version, so any build can
//! read another's stamp and say precisely why it will not attach:
//!
//! | offset | field |
//! |---|---|
//! | 0 | magic `b"FASTPMI\0"` |
//! | 8 | layout major (u16, native endian) |
//! | 10 | layout minor (u16) |
//! | 12 | initialised word (u32, [`INIT_DONE`] once the header is complete) |
//! | 16 | layout hash (u64) |

use core::mem::{align_of, offset_of, size_of};

use crate::abort::{AbortWord, ABORT_FLAG, RANK_MASK};
use crate::arena::{RECORD_ALIGN, RECORD_HEADER};
use crate::barrier::{Barrier, GenerationLine, GEN_ABORTED, GEN_STEP};
use crate::cache::CachePadded;
use crate::cohort::COHORT_FANOUT;
use crate::death::{DeathLine, DEATH_FLAG};
use crate::group::{
    GroupLine, GroupSlot, FAILED_FLAG as GROUP_FAILED_FLAG, GROUP_FAILED, GROUP_SLOT_SIZE,
    PARTY as GROUP_PARTY,
};
use crate::hash::{key_hash, Fnv};
use crate::job::SyncBlock;
use crate::kvs::{Slot, SlotKey, CLAIMED, EMPTY, KEY_MAX, READY, TAG_SHIFT, WAITERS};
use crate::layout::{
    SegmentLayout, SegmentParams, TableRegion, HEADER_SIZE, JOB_ID_MAX, LAYOUT_MAJOR, LAYOUT_MINOR,
    RANK_STATE_SIZE, SLOT_SIZE, SYNC_SIZE, WAKE_SLOT_SIZE,
};
use crate::rank::{RankOp, RankPhase, RankState, StampClock, STAMP_TSC};
use crate::sync::{AtomicU32, AtomicU64};
use crate::wake_tree::{WakeSlot, MAX_FANOUT, SLEEPING as WAKE_SLEEPING};

/// The segment's first 8 bytes.
pub const MAGIC: [u8; 8] = *b"FASTPMI\0";
/// Value of the initialised word once the header is complete (not 1, so
/// that stray bytes are unlikely to look initialised).
pub const INIT_DONE: u32 = 0x4e49_4954;

/// Offset of the magic bytes.
pub const MAGIC_OFFSET: usize = 0;
/// Offset of the layout major version (u16).
pub const MAJOR_OFFSET: usize = 8;
/// Offset of the layout minor version (u16).
pub const MINOR_OFFSET: usize = 10;
/// Offset of the initialised word (u32).
pub const INIT_OFFSET: usize = 12;
/// Offset of the layout hash (u64).
pub const HASH_OFFSET: usize = 16;

/// The header, at offset 0 of the segment. Written by `Segment::init` before
/// the Release store of the initialised word and immutable afterwards,
/// except the abort word.
#[derive(Debug)]
#[repr(C, align(64))]
pub struct Header {
    pub(crate) magic: AtomicU64,
    pub(crate) major: u16,
    pub(crate) minor: u16,
    pub(crate) init_state: AtomicU32,
    pub(crate) layout_hash: u64,
    pub(crate) total_size: u64,
    pub(crate) nranks: u32,
    pub(crate) max_value_len: u32,
    pub(crate) job_id_len: u32,
    /// Slots in the group barrier pool.
    pub(crate) group_slots: u32,
    /// Nested mode: the job's rank of this segment's rank 0 (its ranks are
    /// `first_rank..first_rank + nranks` of a job spanning several node
    /// servers). Set by the launcher before any rank starts.
    pub(crate) first_rank: AtomicU32,
    /// The whole job's rank count, 0 meaning `nranks` (one node).
    pub(crate) job_size: AtomicU32,
    pub(crate) job_id: [u8; JOB_ID_MAX],
    pub(crate) sync_off: u64,
    pub(crate) ranks_off: u64,
    pub(crate) wake_off: u64,
    pub(crate) groups_off: u64,
    pub(crate) kvs: TableRegion,
    pub(crate) nodeattr: TableRegion,
    /// Its own line: read by every waiter after every wake.
    pub(crate) abort: CachePadded<AbortWord>,
}

impl Header {
    /// Layout major version found in the segment.
    pub fn major(&self) -> u16 {
        self.major
    }

    /// Layout minor version found in the segment.
    pub fn minor(&self) -> u16 {
        self.minor
    }

    /// Layout hash found in the segment.
    pub fn layout_hash(&self) -> u64 {
        self.layout_hash
    }

    /// Bytes the segment spans.
    pub fn total_size(&self) -> u64 {
        self.total_size
    }

    /// Ranks in the job.
    pub fn nranks(&self) -> u32 {
        self.nranks
    }

    /// Longest value a put accepts.
    pub fn max_value_len(&self) -> u32 {
        self.max_value_len
    }

    /// The job id (checked to be UTF-8 by `attach`).
    pub fn job_id(&self) -> &str {
        let len = (self.job_id_len as usize).min(JOB_ID_MAX);
        core::str::from_utf8(&self.job_id[..len]).unwrap_or_default()
    }

    /// The layout the segment was built with (as stored in the header).
    pub fn layout(&self) -> SegmentLayout {
        SegmentLayout {
            params: SegmentParams {
                nranks: self.nranks,
                kvs_slots: self.kvs.slots as u32,
                kvs_arena_bytes: self.kvs.arena_len,
                nodeattr_slots: self.nodeattr.slots as u32,
                nodeattr_arena_bytes: self.nodeattr.arena_len,
                max_value_len: self.max_value_len,
            },
            sync_off: self.sync_off,
            ranks_off: self.ranks_off,
            wake_off: self.wake_off,
            groups_off: self.groups_off,
            group_slots: self.group_slots,
            kvs: self.kvs,
            nodeattr: self.nodeattr,
            total_size: self.total_size,
        }
    }
}

/// The stamp this build writes at offset 0: `(magic, major, minor, layout
/// hash)`, at [`MAGIC_OFFSET`], [`MAJOR_OFFSET`], [`MINOR_OFFSET`] and
/// [`HASH_OFFSET`], native endian.
pub const fn stamp() -> ([u8; 8], u16, u16, u64) {
    (MAGIC, LAYOUT_MAJOR, LAYOUT_MINOR, LAYOUT_HASH)
}

// ---- Layout asserts: a change to any shared struct fails the build here
// ---- (and changes LAYOUT_HASH), instead of corrupting a mixed-version job.

const _: () = {
    assert!(size_of::<Header>() as u64 == HEADER_SIZE);
    assert!(align_of::<Header>() == 64);
    assert!(offset_of!(Header, magic) == MAGIC_OFFSET);
    assert!(offset_of!(Header, major) == MAJOR_OFFSET);
    assert!(offset_of!(Header, minor) == MINOR_OFFSET);
    assert!(offset_of!(Header, init_state) == INIT_OFFSET);
    assert!(offset_of!(Header, layout_hash) == HASH_OFFSET);
    assert!(offset_of!(Header, abort) % 64 == 0);
    assert!(size_of::<SyncBlock>() as u64 == SYNC_SIZE);
    assert!(align_of::<SyncBlock>() == 64);
    // The hot arrival counter and the generation word never share a line.
    assert!(offset_of!(Barrier, generation) - offset_of!(Barrier, arrived) >= 64);
    assert!(size_of::<Slot>() as u64 == SLOT_SIZE);
    assert!(align_of::<Slot>() == 64);
    // State, value offset, hash, length and the first key bytes in line 0.
    assert!(offset_of!(Slot, key) + offset_of!(SlotKey, bytes) == 32);
    assert!(size_of::<RankState>() as u64 == RANK_STATE_SIZE);
    assert!(align_of::<RankState>() == 64);
    // The waited key (written once per wait) off the line of the phase and
    // counters.
    assert!(offset_of!(RankState, wait_key) == 64);
    // Each rank's wake word alone on its line: distinct futex words.
    assert!(size_of::<WakeSlot>() as u64 == WAKE_SLOT_SIZE);
    assert!(align_of::<WakeSlot>() == 64);
    assert!(size_of::<AbortWord>() == 8);
    assert!(size_of::<TableRegion>() == 32);
    assert!(size_of::<GroupSlot>() as u64 == GROUP_SLOT_SIZE);
    assert!(align_of::<GroupSlot>() == 64);
    // The hot count word and the word waiters sleep on never share a line.
    assert!(offset_of!(GroupSlot, line) - offset_of!(GroupSlot, count) >= 64);
};

/// Feeds a struct's size, alignment and field offsets to the hasher.
macro_rules! shape {
    ($h:expr, $t:ty $(, $field:ident)*) => {
        $h.push(size_of::<$t>() as u64)
            .push(align_of::<$t>() as u64)
            $(.push(offset_of!($t, $field) as u64))*
    };
}

/// FNV-1a over the shape of every shared struct and every constant that
/// defines the meaning of shared bytes (state encodings, record format, the
/// key hash itself): any change to the format changes the stamp.
pub const LAYOUT_HASH: u64 = {
    let h = Fnv::new()
        .push(LAYOUT_MAJOR as u64)
        .push(LAYOUT_MINOR as u64);
    let h = shape!(
        h,
        Header,
        magic,
        major,
        minor,
        init_state,
        layout_hash,
        total_size,
        nranks,
        max_value_len,
        job_id_len,
        group_slots,
        first_rank,
        job_size,
        job_id,
        sync_off,
        ranks_off,
        wake_off,
        groups_off,
        kvs,
        nodeattr,
        abort
    );
    let h = shape!(h, TableRegion, slots_off, slots, arena_off, arena_len);
    let h = shape!(
        h,
        SyncBlock,
        barrier,
        node_changes,
        kvs_cursor,
        nodeattr_cursor,
        stamp_clock,
        deaths
    );
    let h = shape!(h, DeathLine, count);
    let h = shape!(h, StampClock, kind, tsc_base, mono_base);
    let h = shape!(h, Barrier, arrived, generation);
    let h = shape!(
        h,
        GenerationLine,
        word,
        parties,
        fanout,
        root,
        cohorts,
        cohort_root,
        held
    );
    let h = shape!(h, WakeSlot, word, armed, cohort, cohort_words, cohort_lead);
    let h = shape!(h, Slot, state, value, key);
    let h = shape!(h, SlotKey, hash, len, bytes);
    let h = shape!(
        h,
        RankState,
        pid,
        state,
        wait_target,
        puts,
        gets,
        fences,
        node_attr_ops,
        since,
        last_op,
        wait_seq,
        wait_key,
        death
    );
    let h = shape!(h, AbortWord);
    let h = shape!(h, GroupSlot, count, line);
    let h = shape!(h, GroupLine, word, ctxid, failed);
    let h = h
        .push(KEY_MAX as u64)
        .push(JOB_ID_MAX as u64)
        .push(RECORD_HEADER)
        .push(RECORD_ALIGN)
        .push(EMPTY as u64)
        .push(CLAIMED as u64)
        .push(READY as u64)
        .push(WAITERS as u64)
        .push(TAG_SHIFT as u64)
        .push(GEN_ABORTED as u64)
        .push(GEN_STEP as u64)
        .push(WAKE_SLEEPING as u64)
        .push(MAX_FANOUT as u64)
        .push(COHORT_FANOUT as u64)
        .push(STAMP_TSC as u64)
        .push(GROUP_FAILED as u64)
        .push(GROUP_PARTY)
        .push(GROUP_FAILED_FLAG)
        .push(ABORT_FLAG)
        .push(DEATH_FLAG)
        .push(RANK_MASK as u64)
        .push(INIT_DONE as u64)
        .push(RankPhase::InGroupFence as u64)
        .push(RankOp::GroupFence as u64)
        .push(key_hash(b"fastpmi key hash probe"));
    h.finish()
};
