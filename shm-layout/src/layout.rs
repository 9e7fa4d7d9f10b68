//! Sizing and placing a job segment's regions, before anything is mapped.
//!
//! ```
//! use shm_layout::{SegmentLayout, SegmentParams};
//!
//! let params = SegmentParams::for_ranks(256);
//! assert_eq!(params.kvs_slots, 16384);
//! let layout = SegmentLayout::plan(params)?;
//! assert_eq!(layout.total_size % 4096, 0);
//! // Override: 64 MiB for the KVS (slots + values) instead of the default.
//! let bigger = SegmentLayout::plan(params.with_kvs_mb(64))?;
//! assert!(bigger.kvs.arena_len > layout.kvs.arena_len);
//! # Ok::<(), shm_layout::LayoutError>(())
//! ```
//!
//! Regions, in order: header, sync block (barrier, cursors, node-attribute
//! counter), per-rank fence wake slots, per-rank states, group barrier slots, KVS slots, node-attribute slots, KVS arena,
//! node-attribute arena. Every region starts on a 64-byte boundary; the
//! total is rounded up to 4096. The arenas come last because they are the
//! only regions `init` does not zero.

/// Layout major version: attachers require an exact match.
pub const LAYOUT_MAJOR: u16 = 1;
/// Layout minor version: attachers require an exact match too (a client
/// that does not recognise the stamp falls back to the socket, which is
/// always correct).
pub const LAYOUT_MINOR: u16 = 5;

/// Required alignment of the segment's base address (mmap gives 4096).
pub const SEGMENT_ALIGN: usize = 64;
const REGION_ALIGN: u64 = 64;
const PAGE: u64 = 4096;

/// Longest job id stored in the header, in bytes.
pub const JOB_ID_MAX: usize = 64;
/// Smallest allowed maximum value length: what every PMI client assumes.
pub const MIN_MAX_VALUE_LEN: u32 = 1024;
/// Largest allowed maximum value length.
pub const MAX_MAX_VALUE_LEN: u32 = 1 << 30;
/// Default maximum value length: 1024 through the C ABI, larger values
/// through the Rust API.
pub const DEFAULT_MAX_VALUE_LEN: u32 = 64 * 1024;
/// Most slots a table may have.
pub const MAX_SLOTS: u32 = 1 << 30;

// Sizes of the shared structs, as `plan` needs them in const context and
// identically under loom (where the real types differ); checked against
// `size_of` by the layout asserts in `header.rs`.
pub(crate) const HEADER_SIZE: u64 = 320;
pub(crate) const SYNC_SIZE: u64 = 448;
pub(crate) const RANK_STATE_SIZE: u64 = 192;
pub(crate) const WAKE_SLOT_SIZE: u64 = 64;
pub(crate) const SLOT_SIZE: u64 = 128;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

/// Sizes of a job's segment. Build with [`SegmentParams::for_ranks`] and
/// adjust; slot counts are rounded up to a power of two by [`SegmentLayout::plan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentParams {
    /// Ranks in the job (barrier parties, rank-state records).
    pub nranks: u32,
    /// KVS slots: the most distinct keys.
    pub kvs_slots: u32,
    /// KVS value arena, bytes.
    pub kvs_arena_bytes: u64,
    /// Node-attribute slots.
    pub nodeattr_slots: u32,
    /// Node-attribute value arena, bytes.
    pub nodeattr_arena_bytes: u64,
    /// Longest value a put accepts (at least [`MIN_MAX_VALUE_LEN`]).
    pub max_value_len: u32,
}

const fn max_u64(a: u64, b: u64) -> u64 {
    if a > b {
        a
    } else {
        b
    }
}

/// Power-of-two slot count >= `n`, clamped to [`MAX_SLOTS`].
const fn slots_for(n: u64) -> u32 {
    if n >= MAX_SLOTS as u64 {
        MAX_SLOTS
    } else {
        (n as u32).next_power_of_two()
    }
}

impl SegmentParams {
    /// Generous sizes for a job of `nranks` ranks.
    ///
    /// MPICH-style clients put about 3–6 keys per rank, values up to 1024
    /// bytes (business cards are 100–600). Per rank this gives:
    /// * KVS: 64 slots (a load factor under 10% at 6 keys, so probes stay
    ///   short), at least 16384; 32 KiB of values (32 full 1 KiB values), at
    ///   least 16 MiB, so small jobs with many keys per rank still fit;
    /// * node attributes: 4 slots, at least 256; 2 KiB of values, at least
    ///   256 KiB;
    /// * values up to [`DEFAULT_MAX_VALUE_LEN`] (64 KiB).
    ///
    /// The segment is mostly virtual: fresh memfd/SysV pages are zero, so
    /// slot and arena pages cost memory only once written.
    pub const fn for_ranks(nranks: u32) -> Self {
        let n = nranks as u64;
        Self {
            nranks,
            kvs_slots: slots_for(max_u64(16384, n * 64)),
            kvs_arena_bytes: max_u64(16 * MIB, n * 32 * KIB),
            nodeattr_slots: slots_for(max_u64(256, n * 4)),
            nodeattr_arena_bytes: max_u64(256 * KIB, n * 2 * KIB),
            max_value_len: DEFAULT_MAX_VALUE_LEN,
        }
    }

    /// Gives the KVS (slots and values together) `mb` MiB (at least 1): a
    /// fifth goes to slots (rounded down to a power of two, at least 1024),
    /// the rest to the value arena. The same split as [`Self::for_ranks`].
    pub const fn with_kvs_mb(mut self, mb: u64) -> Self {
        let mb = if mb == 0 { 1 } else { mb };
        let total = if mb > (1 << 40) { 1 << 60 } else { mb * MIB };
        let mut slots = total / 5 / SLOT_SIZE;
        if slots < 1024 {
            slots = 1024;
        }
        if slots > MAX_SLOTS as u64 {
            slots = MAX_SLOTS as u64;
        }
        // Round down to a power of two.
        let slots = 1u64 << (63 - slots.leading_zeros());
        self.kvs_slots = slots as u32;
        self.kvs_arena_bytes = total - slots * SLOT_SIZE;
        self
    }

    /// Sets the longest value a put accepts.
    pub const fn with_max_value_len(mut self, max_value_len: u32) -> Self {
        self.max_value_len = max_value_len;
        self
    }
}

/// Where one key table and its arena live, as offsets from the segment base
/// (also stored this way in the header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct TableRegion {
    /// Offset of the slot array.
    pub slots_off: u64,
    /// Number of slots (a power of two).
    pub slots: u64,
    /// Offset of the value arena.
    pub arena_off: u64,
    /// Length of the value arena.
    pub arena_len: u64,
}

/// Offsets and total size of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentLayout {
    /// The parameters, with slot counts rounded up to powers of two.
    pub params: SegmentParams,
    /// Offset of the sync block (barrier, arena cursors, node-attr counter).
    pub sync_off: u64,
    /// Offset of the per-rank state array (`nranks` records of 64 bytes).
    pub ranks_off: u64,
    /// Offset of the fence's per-rank wake slots (`nranks` of 64 bytes).
    pub wake_off: u64,
    /// Offset of the group barrier pool ([`crate::group::GroupSlot`]s).
    pub groups_off: u64,
    /// Slots in the group barrier pool ([`crate::group_slots_for`] the ranks).
    pub group_slots: u32,
    /// The KVS.
    pub kvs: TableRegion,
    /// The node-attribute table.
    pub nodeattr: TableRegion,
    /// Bytes to map.
    pub total_size: u64,
}

/// Why a segment could not be planned or initialised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("a job needs at least one rank")]
    ZeroRanks,
    #[error("{nranks} ranks is more than a segment can record ({max})")]
    TooManyRanks { nranks: u32, max: u32 },
    #[error("a key table needs at least one slot")]
    ZeroSlots,
    #[error("{slots} slots is more than the limit of {max}")]
    TooManySlots { slots: u32, max: u32 },
    #[error("maximum value length {len} is below the minimum of {min}")]
    MaxValueTooSmall { len: u32, min: u32 },
    #[error("maximum value length {len} is above the limit of {max}")]
    MaxValueTooLarge { len: u32, max: u32 },
    #[error("segment size overflows")]
    TooLarge,
    #[error("job id is {len} bytes, the limit is {max}")]
    JobIdTooLong { len: usize, max: usize },
    #[error("segment base {addr:#x} is not {align}-byte aligned")]
    Misaligned { addr: usize, align: usize },
    #[error("buffer of {len} bytes is smaller than the {need}-byte segment")]
    BufferTooSmall { len: usize, need: u64 },
}

/// `x` rounded up to a multiple of `a` (a power of two), or None on overflow.
const fn align_up(x: u64, a: u64) -> Option<u64> {
    match x.checked_add(a - 1) {
        Some(v) => Some(v & !(a - 1)),
        None => None,
    }
}

/// Places a region of `len` bytes at the first aligned offset >= `*cursor`.
const fn place(cursor: u64, len: Option<u64>) -> Option<(u64, u64)> {
    let (Some(start), Some(len)) = (align_up(cursor, REGION_ALIGN), len) else {
        return None;
    };
    match start.checked_add(len) {
        Some(end) => Some((start, end)),
        None => None,
    }
}

macro_rules! tri {
    ($e:expr) => {
        match $e {
            Some(v) => v,
            None => return Err(LayoutError::TooLarge),
        }
    };
}

impl SegmentLayout {
    /// Places every region; the same params always give the same layout.
    pub const fn plan(params: SegmentParams) -> Result<Self, LayoutError> {
        let p = params;
        if p.nranks == 0 {
            return Err(LayoutError::ZeroRanks);
        }
        if p.nranks > crate::abort::RANK_MASK {
            return Err(LayoutError::TooManyRanks {
                nranks: p.nranks,
                max: crate::abort::RANK_MASK,
            });
        }
        if p.max_value_len < MIN_MAX_VALUE_LEN {
            return Err(LayoutError::MaxValueTooSmall {
                len: p.max_value_len,
                min: MIN_MAX_VALUE_LEN,
            });
        }
        if p.max_value_len > MAX_MAX_VALUE_LEN {
            return Err(LayoutError::MaxValueTooLarge {
                len: p.max_value_len,
                max: MAX_MAX_VALUE_LEN,
            });
        }
        let kvs_slots = match Self::slot_count(p.kvs_slots) {
            Ok(n) => n,
            Err(e) => return Err(e),
        };
        let nodeattr_slots = match Self::slot_count(p.nodeattr_slots) {
            Ok(n) => n,
            Err(e) => return Err(e),
        };

        let (sync_off, end) = tri!(place(HEADER_SIZE, Some(SYNC_SIZE)));
        // The wake slots next to the sync block: a fence by cohorts then
        // touches one page for the abort word, the barrier and the first
        // cohorts' words (every page a rank touches after a context switch
        // costs it a TLB refill).
        let (wake_off, end) = tri!(place(end, (p.nranks as u64).checked_mul(WAKE_SLOT_SIZE)));
        let (ranks_off, end) = tri!(place(end, (p.nranks as u64).checked_mul(RANK_STATE_SIZE)));
        let group_slots = crate::group::group_slots_for(p.nranks);
        let (groups_off, end) = tri!(place(
            end,
            (group_slots as u64).checked_mul(crate::group::GROUP_SLOT_SIZE)
        ));
        let (kvs_slots_off, end) = tri!(place(end, (kvs_slots as u64).checked_mul(SLOT_SIZE)));
        let (na_slots_off, end) = tri!(place(end, (nodeattr_slots as u64).checked_mul(SLOT_SIZE)));
        let (kvs_arena_off, end) = tri!(place(end, Some(p.kvs_arena_bytes)));
        let (na_arena_off, end) = tri!(place(end, Some(p.nodeattr_arena_bytes)));
        let total_size = tri!(align_up(end, PAGE));

        let mut params = p;
        params.kvs_slots = kvs_slots;
        params.nodeattr_slots = nodeattr_slots;
        Ok(Self {
            params,
            sync_off,
            ranks_off,
            wake_off,
            groups_off,
            group_slots,
            kvs: TableRegion {
                slots_off: kvs_slots_off,
                slots: kvs_slots as u64,
                arena_off: kvs_arena_off,
                arena_len: p.kvs_arena_bytes,
            },
            nodeattr: TableRegion {
                slots_off: na_slots_off,
                slots: nodeattr_slots as u64,
                arena_off: na_arena_off,
                arena_len: p.nodeattr_arena_bytes,
            },
            total_size,
        })
    }

    const fn slot_count(n: u32) -> Result<u32, LayoutError> {
        if n == 0 {
            Err(LayoutError::ZeroSlots)
        } else if n > MAX_SLOTS {
            Err(LayoutError::TooManySlots {
                slots: n,
                max: MAX_SLOTS,
            })
        } else {
            Ok(n.next_power_of_two())
        }
    }

    /// End of the regions `init` zeroes (everything before the arenas).
    pub const fn metadata_end(&self) -> u64 {
        self.kvs.arena_off
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn for_ranks_sizes() {
        let p = SegmentParams::for_ranks(1);
        assert_eq!((p.kvs_slots, p.kvs_arena_bytes), (16384, 16 * MIB));
        assert_eq!((p.nodeattr_slots, p.nodeattr_arena_bytes), (256, 256 * KIB));
        let p = SegmentParams::for_ranks(1024);
        assert_eq!((p.kvs_slots, p.kvs_arena_bytes), (65536, 32 * MIB));
        let p = SegmentParams::for_ranks(1000);
        assert_eq!(p.kvs_slots, 65536);
        // Huge rank counts clamp instead of overflowing.
        let p = SegmentParams::for_ranks(u32::MAX);
        assert_eq!(p.kvs_slots, MAX_SLOTS);
    }

    #[test]
    fn kvs_mb_override() {
        let p = SegmentParams::for_ranks(4).with_kvs_mb(1);
        assert_eq!(p.kvs_slots, 1024);
        assert_eq!(p.kvs_slots as u64 * SLOT_SIZE + p.kvs_arena_bytes, MIB);
        let p = SegmentParams::for_ranks(4).with_kvs_mb(64);
        assert_eq!(p.kvs_slots, 65536);
        assert_eq!(p.kvs_slots as u64 * SLOT_SIZE + p.kvs_arena_bytes, 64 * MIB);
        assert_eq!(SegmentParams::for_ranks(4).with_kvs_mb(0).kvs_slots, 1024);
    }

    #[test]
    fn plan_places_disjoint_aligned_regions() {
        let l = SegmentLayout::plan(SegmentParams::for_ranks(256)).unwrap();
        let regions = [
            (0, HEADER_SIZE),
            (l.sync_off, SYNC_SIZE),
            (l.wake_off, 256 * WAKE_SLOT_SIZE),
            (l.ranks_off, 256 * RANK_STATE_SIZE),
            (l.groups_off, 256 * crate::group::GROUP_SLOT_SIZE),
            (l.kvs.slots_off, l.kvs.slots * SLOT_SIZE),
            (l.nodeattr.slots_off, l.nodeattr.slots * SLOT_SIZE),
            (l.kvs.arena_off, l.kvs.arena_len),
            (l.nodeattr.arena_off, l.nodeattr.arena_len),
        ];
        for w in regions.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0);
            assert_eq!(w[1].0 % 64, 0);
        }
        let last = regions[regions.len() - 1];
        assert!(last.0 + last.1 <= l.total_size);
        assert_eq!(l.total_size % PAGE, 0);
    }

    #[test]
    fn plan_rejects_bad_params() {
        let ok = SegmentParams::for_ranks(4);
        let plan = |p| SegmentLayout::plan(p).unwrap_err();
        assert_eq!(
            plan(SegmentParams { nranks: 0, ..ok }),
            LayoutError::ZeroRanks
        );
        assert_eq!(
            plan(SegmentParams { kvs_slots: 0, ..ok }),
            LayoutError::ZeroSlots
        );
        assert!(matches!(
            plan(ok.with_max_value_len(1023)),
            LayoutError::MaxValueTooSmall { .. }
        ));
        assert!(matches!(
            plan(SegmentParams {
                nranks: u32::MAX,
                ..ok
            }),
            LayoutError::TooManyRanks { .. }
        ));
        assert_eq!(
            plan(SegmentParams {
                kvs_arena_bytes: u64::MAX - 100,
                ..ok
            }),
            LayoutError::TooLarge
        );
        // Slot counts are rounded up, not rejected.
        let l = SegmentLayout::plan(SegmentParams {
            kvs_slots: 1000,
            ..ok
        })
        .unwrap();
        assert_eq!(l.kvs.slots, 1024);
    }
}
