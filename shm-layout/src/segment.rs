//! Creating ([`Segment::init`]) and attaching to ([`Segment::attach`]) a job
//! segment in a raw byte region: a mapped memfd or SysV segment in real
//! jobs, any 64-byte aligned buffer in tests. Everything in the segment is
//! addressed by offsets from its base, so every process may map it at a
//! different address. Not built under loom (raw memory).

use core::ptr::addr_of;
use core::slice;

use crate::abort::{AbortWord, Aborted, RANK_MASK};
use crate::arena::ByteRegion;
use crate::barrier::Fence;
use crate::cache::CachePadded;
use crate::death::DeathCause;
use crate::futex::Futex;
use crate::group::{GroupBarrier, GroupSlot};
use crate::header::{Header, INIT_DONE, MAGIC};
use crate::job::{JobParts, JobView, SyncBlock};
use crate::kvs::{Kvs, Slot};
use crate::layout::{
    LayoutError, SegmentLayout, SegmentParams, TableRegion, HEADER_SIZE, JOB_ID_MAX, LAYOUT_MAJOR,
    LAYOUT_MINOR, MAX_MAX_VALUE_LEN, MIN_MAX_VALUE_LEN, RANK_STATE_SIZE, SEGMENT_ALIGN, SLOT_SIZE,
    SYNC_SIZE, WAKE_SLOT_SIZE,
};
use crate::nodeattr::NodeAttrs;
use crate::rank::RankState;
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::wake_tree::WakeSlot;
use crate::LAYOUT_HASH;

/// Why a process did not attach to a segment (it then uses the socket).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AttachError {
    #[error("segment base {addr:#x} is not {align}-byte aligned")]
    Misaligned { addr: usize, align: usize },
    #[error("mapping of {len} bytes is shorter than the {need}-byte segment")]
    TooShort { len: usize, need: u64 },
    #[error("segment is not initialised (yet)")]
    Uninitialised,
    #[error("bad magic {found:02x?}: not a fastpmi segment")]
    BadMagic { found: [u8; 8] },
    #[error("segment layout version {found_major}.{found_minor}, this build knows {expected_major}.{expected_minor}")]
    VersionMismatch {
        found_major: u16,
        found_minor: u16,
        expected_major: u16,
        expected_minor: u16,
    },
    #[error("segment layout hash {found:#018x}, this build's is {expected:#018x}")]
    LayoutHashMismatch { found: u64, expected: u64 },
    #[error("corrupt segment header: {0}")]
    Corrupt(&'static str),
}

/// Namespace for creating and attaching to segments.
#[derive(Debug)]
pub enum Segment {}

impl Segment {
    /// Builds a segment for `params` in `base..base+len`: zeroes the header,
    /// sync block, rank states and slot arrays (the arenas are left as they
    /// are: no byte of them is read before it is written), writes the header
    /// and publishes it by storing the initialised word last, with Release.
    ///
    /// # Safety
    /// * `base..base+len` is valid for reads and writes for `'a` and stays
    ///   mapped while any `SegmentRef` from it is used;
    /// * nobody else uses the region until this returns (other processes
    ///   may have it mapped, but only attach after the launcher tells them);
    /// * for `'a`, the region is only accessed through this crate (or
    ///   treated as opaque bytes by nobody writing into it).
    pub unsafe fn init<'a>(
        base: *mut u8,
        len: usize,
        params: &SegmentParams,
        job_id: &str,
    ) -> Result<SegmentRef<'a>, LayoutError> {
        // SAFETY: the caller upholds `init`'s contract, which is this one's.
        unsafe { Self::build(base, len, params, job_id, true) }
    }

    /// [`Segment::init`] for memory that is already all zero bytes (a fresh
    /// memfd or SysV segment): skips zeroing the slot arrays, so their pages
    /// are only allocated once a slot is used.
    ///
    /// # Safety
    /// As for [`Segment::init`], and every byte of `base..base+len` is 0.
    pub unsafe fn init_zeroed<'a>(
        base: *mut u8,
        len: usize,
        params: &SegmentParams,
        job_id: &str,
    ) -> Result<SegmentRef<'a>, LayoutError> {
        // SAFETY: the caller upholds this function's contract.
        unsafe { Self::build(base, len, params, job_id, false) }
    }

    /// # Safety
    /// As for [`Segment::init`]; with `zero == false` the region is all zero.
    unsafe fn build<'a>(
        base: *mut u8,
        len: usize,
        params: &SegmentParams,
        job_id: &str,
        zero: bool,
    ) -> Result<SegmentRef<'a>, LayoutError> {
        let layout = SegmentLayout::plan(*params)?;
        if job_id.len() > JOB_ID_MAX {
            return Err(LayoutError::JobIdTooLong {
                len: job_id.len(),
                max: JOB_ID_MAX,
            });
        }
        if base.is_null() || base as usize % SEGMENT_ALIGN != 0 {
            return Err(LayoutError::Misaligned {
                addr: base as usize,
                align: SEGMENT_ALIGN,
            });
        }
        if (len as u64) < layout.total_size {
            return Err(LayoutError::BufferTooSmall {
                len,
                need: layout.total_size,
            });
        }
        let p = layout.params;
        let mut id = [0u8; JOB_ID_MAX];
        id[..job_id.len()].copy_from_slice(job_id.as_bytes());
        let header = Header {
            magic: AtomicU64::new(0),
            major: LAYOUT_MAJOR,
            minor: LAYOUT_MINOR,
            init_state: AtomicU32::new(0),
            layout_hash: LAYOUT_HASH,
            total_size: layout.total_size,
            nranks: p.nranks,
            max_value_len: p.max_value_len,
            job_id_len: job_id.len() as u32,
            group_slots: layout.group_slots,
            first_rank: AtomicU32::new(0),
            job_size: AtomicU32::new(0),
            job_id: id,
            sync_off: layout.sync_off,
            ranks_off: layout.ranks_off,
            wake_off: layout.wake_off,
            groups_off: layout.groups_off,
            kvs: layout.kvs,
            nodeattr: layout.nodeattr,
            abort: CachePadded::new(AbortWord::new()),
        };
        // SAFETY: the region is ours alone (caller), `metadata_end <=
        // total_size <= len`, and base and every region offset are 64-byte
        // aligned, as Header and SyncBlock require. Zero bytes are a valid
        // empty Slot, a NotStarted RankState and a free GroupSlot.
        let header = unsafe {
            if zero {
                core::ptr::write_bytes(base, 0, layout.metadata_end() as usize);
            }
            core::ptr::write(base.cast::<Header>(), header);
            core::ptr::write(
                base.add(layout.sync_off as usize).cast::<SyncBlock>(),
                SyncBlock::new(p.nranks, crate::wake_tree::fanout_for(p.nranks)),
            );
            &*base.cast::<Header>()
        };
        header
            .magic
            .store(u64::from_ne_bytes(MAGIC), Ordering::Relaxed);
        // SYNC POINT (segment init): Release makes the header fields and the
        // zeroed regions visible to an attacher's Acquire load of this word.
        header.init_state.store(INIT_DONE, Ordering::Release);
        // SAFETY: the layout was just planned and written; the region
        // outlives 'a (caller).
        Ok(unsafe { SegmentRef::build(base, header, &layout) })
    }

    /// Attaches to a segment that `init` built (possibly in another process,
    /// mapped at another address). Checks, in order: alignment, length,
    /// magic, initialised word, layout version, layout hash, total size and
    /// the region table, and names the first mismatch.
    ///
    /// # Safety
    /// `base..base+len` is valid for reads and writes for `'a` (a mapping of
    /// the segment, or of something else: any bytes are checked before they
    /// are trusted), and for `'a` it is only written through this crate.
    pub unsafe fn attach<'a>(base: *mut u8, len: usize) -> Result<SegmentRef<'a>, AttachError> {
        if base.is_null() || base as usize % SEGMENT_ALIGN != 0 {
            return Err(AttachError::Misaligned {
                addr: base as usize,
                align: SEGMENT_ALIGN,
            });
        }
        if (len as u64) < HEADER_SIZE {
            return Err(AttachError::TooShort {
                len,
                need: HEADER_SIZE,
            });
        }
        let hp = base.cast::<Header>().cast_const();
        // Until the initialised word is acquired the header may still be
        // being written, so only its atomic words are read, through raw
        // pointers (no `&Header` yet).
        // SAFETY: at least HEADER_SIZE readable, aligned bytes (checked).
        let (magic, init) = unsafe {
            (
                (*addr_of!((*hp).magic)).load(Ordering::Relaxed),
                // SYNC POINT (segment init): Acquire pairs with the Release
                // store in `init`; the rest of the header is complete.
                (*addr_of!((*hp).init_state)).load(Ordering::Acquire),
            )
        };
        if magic == 0 {
            return Err(AttachError::Uninitialised);
        }
        if magic != u64::from_ne_bytes(MAGIC) {
            return Err(AttachError::BadMagic {
                found: magic.to_ne_bytes(),
            });
        }
        if init != INIT_DONE {
            return Err(AttachError::Uninitialised);
        }
        // SAFETY: initialised (acquired above): from now on the header's
        // plain fields are immutable.
        let header = unsafe { &*hp };
        if (header.major, header.minor) != (LAYOUT_MAJOR, LAYOUT_MINOR) {
            return Err(AttachError::VersionMismatch {
                found_major: header.major,
                found_minor: header.minor,
                expected_major: LAYOUT_MAJOR,
                expected_minor: LAYOUT_MINOR,
            });
        }
        if header.layout_hash != LAYOUT_HASH {
            return Err(AttachError::LayoutHashMismatch {
                found: header.layout_hash,
                expected: LAYOUT_HASH,
            });
        }
        if header.total_size > len as u64 {
            return Err(AttachError::TooShort {
                len,
                need: header.total_size,
            });
        }
        let layout = check_header(header)?;
        // SAFETY: every region lies inside total_size <= len, aligned, and
        // disjoint from the others (checked).
        let seg = unsafe { SegmentRef::build(base, header, &layout) };
        if seg.fence().parties() != header.nranks {
            return Err(AttachError::Corrupt("barrier party count"));
        }
        if seg.fence().fanout() > crate::wake_tree::MAX_FANOUT {
            return Err(AttachError::Corrupt("fence fan-out"));
        }
        Ok(seg)
    }

    /// This build's stamp; see [`crate::stamp`].
    pub const fn stamp() -> ([u8; 8], u16, u16, u64) {
        crate::header::stamp()
    }
}

/// Checks that the header's numbers describe a sane segment: every region
/// aligned, inside `total_size` and disjoint from the others.
fn check_header(h: &Header) -> Result<SegmentLayout, AttachError> {
    use AttachError::Corrupt;
    if h.nranks == 0 || h.nranks > RANK_MASK {
        return Err(Corrupt("rank count"));
    }
    if !(MIN_MAX_VALUE_LEN..=MAX_MAX_VALUE_LEN).contains(&h.max_value_len) {
        return Err(Corrupt("maximum value length"));
    }
    let id_len = h.job_id_len as usize;
    if id_len > JOB_ID_MAX || core::str::from_utf8(&h.job_id[..id_len]).is_err() {
        return Err(Corrupt("job id"));
    }
    let table = |t: &TableRegion| -> Result<[(u64, Option<u64>); 2], AttachError> {
        if !t.slots.is_power_of_two() {
            return Err(Corrupt("slot count"));
        }
        Ok([
            (t.slots_off, t.slots.checked_mul(SLOT_SIZE)),
            (t.arena_off, Some(t.arena_len)),
        ])
    };
    let [kvs_slots, kvs_arena] = table(&h.kvs)?;
    let [na_slots, na_arena] = table(&h.nodeattr)?;
    let mut regions = [
        (0, Some(HEADER_SIZE)),
        (h.sync_off, Some(SYNC_SIZE)),
        (h.ranks_off, (h.nranks as u64).checked_mul(RANK_STATE_SIZE)),
        (h.wake_off, (h.nranks as u64).checked_mul(WAKE_SLOT_SIZE)),
        (
            h.groups_off,
            (h.group_slots as u64).checked_mul(crate::group::GROUP_SLOT_SIZE),
        ),
        kvs_slots,
        na_slots,
        kvs_arena,
        na_arena,
    ]
    .map(|(start, len)| (start, len.and_then(|l| start.checked_add(l))));
    regions.sort_unstable_by_key(|r| r.0);
    let mut prev_end = 0;
    for (start, end) in regions {
        let Some(end) = end else {
            return Err(Corrupt("region size"));
        };
        if start % 64 != 0 || start < prev_end || end > h.total_size {
            return Err(Corrupt("region table"));
        }
        prev_end = end;
    }
    Ok(h.layout())
}

/// A process's handle on a job segment. Cheap to copy; all operations take
/// `&self` and are safe to call from any thread of any attached process.
#[derive(Clone, Copy)]
pub struct SegmentRef<'a> {
    header: &'a Header,
    job: JobView<'a>,
    ranks: &'a [RankState],
    groups: &'a [GroupSlot],
}

// Send + Sync through its fields (ByteRegion and Slot carry the
// justification for their raw parts); checked here so a change that loses
// it fails to build.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<SegmentRef<'static>>();
};

impl core::fmt::Debug for SegmentRef<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SegmentRef")
            .field("job_id", &self.job_id())
            .field("nranks", &self.nranks())
            .field("total_size", &self.header.total_size)
            .field("job", &self.job)
            .finish()
    }
}

impl<'a> SegmentRef<'a> {
    /// # Safety
    /// `header` is at `base`, initialised, and `layout`'s regions lie inside
    /// the valid, 64-byte aligned region at `base` for `'a`, disjoint.
    unsafe fn build(base: *mut u8, header: &'a Header, layout: &SegmentLayout) -> Self {
        // SAFETY: (whole block) in bounds, aligned and initialised per the
        // caller; every type placed here is valid for any bit pattern (atomics
        // and integers), so even bytes written by a buggy peer are no UB.
        unsafe {
            let at = |off: u64| base.add(off as usize);
            let slots = |t: &TableRegion| {
                slice::from_raw_parts(
                    at(t.slots_off).cast::<Slot>().cast_const(),
                    t.slots as usize,
                )
            };
            let arena =
                |t: &TableRegion| ByteRegion::from_raw(at(t.arena_off), t.arena_len as usize);
            let sync = &*at(layout.sync_off).cast::<SyncBlock>();
            let wake = slice::from_raw_parts(
                at(layout.wake_off).cast::<WakeSlot>().cast_const(),
                layout.params.nranks as usize,
            );
            let job = JobView::new(JobParts {
                abort: &header.abort,
                sync,
                wake,
                kvs_slots: slots(&layout.kvs),
                kvs_arena: arena(&layout.kvs),
                nodeattr_slots: slots(&layout.nodeattr),
                nodeattr_arena: arena(&layout.nodeattr),
                max_value_len: layout.params.max_value_len as usize,
            });
            let ranks = slice::from_raw_parts(
                at(layout.ranks_off).cast::<RankState>().cast_const(),
                layout.params.nranks as usize,
            );
            let groups = slice::from_raw_parts(
                at(layout.groups_off).cast::<GroupSlot>().cast_const(),
                layout.group_slots as usize,
            );
            Self {
                header,
                job,
                ranks,
                groups,
            }
        }
    }

    /// The header (stamp, sizes, job id).
    pub fn header(&self) -> &'a Header {
        self.header
    }

    /// The job id recorded by `init`.
    pub fn job_id(&self) -> &'a str {
        self.header.job_id()
    }

    /// Ranks in the job.
    pub fn nranks(&self) -> u32 {
        self.header.nranks
    }

    /// The job's rank of this segment's rank 0: 0 unless the segment is
    /// one node's part of a job spanning several node servers.
    pub fn first_rank(&self) -> u32 {
        // Relaxed: written by the launcher before any rank started.
        self.header.first_rank.load(Ordering::Relaxed)
    }

    /// Ranks in the whole job (more than [`Self::nranks`] when the job spans
    /// several node servers).
    pub fn job_size(&self) -> u32 {
        // Relaxed: as above.
        match self.header.job_size.load(Ordering::Relaxed) {
            0 => self.nranks(),
            n => n,
        }
    }

    /// This segment's index of the job's rank `rank`, if it is on this node.
    pub fn slot_of(&self, rank: u32) -> Option<u32> {
        rank.checked_sub(self.first_rank())
            .filter(|&i| i < self.nranks())
    }

    /// Launcher only, before any rank starts: the segment holds ranks
    /// `first_rank..first_rank + nranks` of a job of `job_size` ranks.
    /// A place that does not contain the segment's ranks is ignored.
    pub fn set_place(&self, first_rank: u32, job_size: u32) {
        let fits = first_rank
            .checked_add(self.nranks())
            .is_some_and(|end| end <= job_size);
        if fits {
            self.header.first_rank.store(first_rank, Ordering::Relaxed);
            self.header.job_size.store(job_size, Ordering::Relaxed);
        }
    }

    /// All the job's views (KVS, node attributes, fence, abort).
    pub fn job(&self) -> JobView<'a> {
        self.job
    }

    /// The job's KVS.
    pub fn kvs(&self) -> Kvs<'a> {
        self.job.kvs()
    }

    /// The node-attribute table.
    pub fn node_attrs(&self) -> NodeAttrs<'a> {
        self.job.node_attrs()
    }

    /// The fence barrier.
    pub fn fence(&self) -> Fence<'a> {
        self.job.fence()
    }

    /// Aborts the job and wakes every sleeper; see [`JobView::abort`].
    pub fn abort<F: Futex + ?Sized>(&self, code: i32, rank: u32, futex: &F) -> Aborted {
        let a = self.job.abort(code, rank, futex);
        // Group fences sleep on their slots' words: wake them to re-check the
        // abort word now (one missed by a race still sees it within a slice).
        for s in self.groups {
            if s.line.ctxid.load(crate::sync::Ordering::Relaxed) != 0 {
                futex.wake(&s.line.word, crate::futex::WAKE_ALL);
            }
        }
        a
    }

    /// Records that `rank` died of `cause` (fault-tolerant jobs; launcher
    /// only): its record says how, the death count grows, the job's fence
    /// is broken for good and every waiter wakes (see [`crate::death`]).
    /// Returns the death count, or `None` when `rank` is not in the segment
    /// or its death was recorded already (nothing changes then).
    pub fn record_death<F: Futex + ?Sized>(
        &self,
        rank: u32,
        cause: DeathCause,
        futex: &F,
    ) -> Option<u32> {
        let state = self.ranks.get(rank as usize)?;
        if !state.set_death(cause) {
            return None;
        }
        Some(self.job.count_death(futex))
    }

    /// Deaths recorded in the job so far (0: every rank lives).
    pub fn deaths(&self) -> u32 {
        self.job.deaths().count()
    }

    /// The dead ranks (segment-local) with how each died, in rank order:
    /// one read of each rank's record, no system call.
    pub fn dead_ranks(&self) -> impl Iterator<Item = (u32, DeathCause)> + 'a {
        let none = self.deaths() == 0;
        let ranks = if none { &[][..] } else { self.ranks };
        ranks
            .iter()
            .enumerate()
            .filter_map(|(r, s)| Some((r as u32, s.death()?)))
    }

    /// Sleeps until more than `seen` deaths are recorded (`Ok(Some(n))`),
    /// `deadline` passes (`Ok(None)`) or the job is aborted.
    pub fn wait_death<F: Futex + ?Sized>(
        &self,
        seen: u32,
        futex: &F,
        deadline: Option<std::time::Instant>,
    ) -> Result<Option<u32>, Aborted> {
        self.job.wait_death(seen, futex, deadline)
    }

    /// The abort in effect, if any.
    pub fn abort_status(&self) -> Option<Aborted> {
        self.job.abort_status()
    }

    /// Every rank's state record.
    pub fn ranks(&self) -> &'a [RankState] {
        self.ranks
    }

    /// One rank's state record.
    pub fn rank(&self, rank: u32) -> Option<&'a RankState> {
        self.ranks.get(rank as usize)
    }

    /// Slots in the group barrier pool.
    pub fn group_slots(&self) -> u32 {
        self.groups.len() as u32
    }

    /// Group barrier slot `slot` with the job's abort word, if it exists.
    pub fn group(&self, slot: u32) -> Option<GroupBarrier<'a>> {
        let s = self.groups.get(slot as usize)?;
        Some(GroupBarrier::new(s, &self.header.abort))
    }
}

#[cfg(test)]
mod tests {
    use core::mem::offset_of;

    use super::*;
    use crate::heap::AlignedBuffer;

    /// Builds a segment, applies `corrupt` to its header, attaches.
    fn attach_corrupted(corrupt: impl FnOnce(*mut Header)) -> Result<(), AttachError> {
        let params = SegmentParams::for_ranks(4);
        let mut buf = AlignedBuffer::new(SegmentLayout::plan(params).unwrap().total_size as usize);
        let (base, len) = (buf.as_mut_ptr(), buf.len());
        // SAFETY: `buf` outlives every use; no handle is used after the
        // header is modified through the raw pointer.
        unsafe {
            Segment::init(base, len, &params, "job").unwrap();
            corrupt(base.cast::<Header>());
            Segment::attach(base, len).map(|_| ())
        }
    }

    fn poke_u64(h: *mut Header, off: usize, v: u64) {
        // SAFETY: `off` is a u64 field offset inside the header.
        unsafe { h.cast::<u8>().add(off).cast::<u64>().write(v) }
    }

    fn poke_u32(h: *mut Header, off: usize, v: u32) {
        // SAFETY: `off` is a u32 field offset inside the header.
        unsafe { h.cast::<u8>().add(off).cast::<u32>().write(v) }
    }

    #[test]
    fn attach_rejects_inconsistent_region_tables() {
        let kvs = offset_of!(Header, kvs);
        let corrupt = |e: Result<(), AttachError>| match e {
            Err(AttachError::Corrupt(what)) => what,
            other => panic!("expected Corrupt, got {other:?}"),
        };
        assert_eq!(attach_corrupted(|_| ()), Ok(()));
        let slots = kvs + offset_of!(TableRegion, slots);
        assert_eq!(
            corrupt(attach_corrupted(|h| poke_u64(h, slots, 1000))),
            "slot count"
        );
        let arena_off = kvs + offset_of!(TableRegion, arena_off);
        assert_eq!(
            corrupt(attach_corrupted(|h| poke_u64(h, arena_off, 1 << 40))),
            "region table"
        );
        assert_eq!(
            corrupt(attach_corrupted(|h| poke_u64(h, arena_off, 64))),
            "region table"
        );
        assert_eq!(
            corrupt(attach_corrupted(|h| poke_u64(h, arena_off, u64::MAX - 8))),
            "region size"
        );
        let nranks = offset_of!(Header, nranks);
        assert_eq!(
            corrupt(attach_corrupted(|h| poke_u32(h, nranks, 0))),
            "rank count"
        );
        // More ranks than the barrier was built for: the rank array would
        // also run into the KVS slots.
        assert_eq!(
            corrupt(attach_corrupted(|h| poke_u32(h, nranks, 100_000))),
            "region table"
        );
        let id_len = offset_of!(Header, job_id_len);
        assert_eq!(
            corrupt(attach_corrupted(|h| poke_u32(h, id_len, 65))),
            "job id"
        );
        let id = offset_of!(Header, job_id);
        assert_eq!(
            corrupt(attach_corrupted(|h| poke_u32(h, id, 0xffff_ffff))),
            "job id"
        );
        let max = offset_of!(Header, max_value_len);
        assert_eq!(
            corrupt(attach_corrupted(|h| poke_u32(h, max, 10))),
            "maximum value length"
        );
    }

    #[test]
    fn barrier_parties_must_match_rank_count() {
        let nranks = offset_of!(Header, nranks);
        // 3 ranks still fit the region table, but the barrier has 4 parties.
        assert_eq!(
            attach_corrupted(|h| poke_u32(h, nranks, 3)),
            Err(AttachError::Corrupt("barrier party count"))
        );
    }
}
