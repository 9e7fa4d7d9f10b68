//! The bytes of a value arena and the bump allocator over them.
//!
//! Records are `[len: u32][reserved: u32][value bytes]`, padded to 8 bytes.
//! A record is written once, by the put that allocated it, before its offset
//! is published; after that it is immutable, so readers may hold `&[u8]`
//! into it for as long as the segment is mapped.
//!
//! Under loom the bytes are shadowed by one `loom::cell::UnsafeCell<()>` per
//! 8-byte word: each write and read of a record registers an access there, so
//! a reader that could see a record before its writer finished (a torn
//! value) is reported by loom as a causality violation.

use core::marker::PhantomData;

use crate::sync::{AtomicU64, Ordering};

/// Bytes before the value in a record.
pub const RECORD_HEADER: u64 = 8;
/// Alignment (and size granularity) of records.
pub const RECORD_ALIGN: u64 = 8;

/// Bytes a record for a `len`-byte value takes in the arena (saturating:
/// an absurd length gives a size no arena can hold).
pub const fn record_size(len: usize) -> u64 {
    (len as u64).saturating_add(RECORD_HEADER + RECORD_ALIGN - 1) & !(RECORD_ALIGN - 1)
}

/// A borrowed arena: raw bytes plus, under loom, their access trackers.
#[derive(Clone, Copy)]
pub(crate) struct ByteRegion<'a> {
    ptr: *mut u8,
    len: usize,
    #[cfg(loom)]
    track: &'a [loom::cell::UnsafeCell<()>],
    _bytes: PhantomData<&'a [core::cell::UnsafeCell<u8>]>,
}

// SAFETY: a ByteRegion only hands out disjoint ranges for writing (through
// the allocator) and immutable published ranges for reading; the
// synchronisation is the slots' Release/Acquire pairs, as with any `&[u8]`
// shared between threads.
unsafe impl Send for ByteRegion<'_> {}
// SAFETY: as for Send.
unsafe impl Sync for ByteRegion<'_> {}

impl core::fmt::Debug for ByteRegion<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ByteRegion")
            .field("len", &self.len)
            .finish()
    }
}

impl<'a> ByteRegion<'a> {
    /// # Safety
    /// `ptr..ptr+len` is valid for reads and writes for `'a`, and is only
    /// accessed through this module's protocol (records written once, before
    /// publication).
    #[cfg(not(loom))]
    pub(crate) unsafe fn from_raw(ptr: *mut u8, len: usize) -> Self {
        Self {
            ptr,
            len,
            _bytes: PhantomData,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Copies `src` to `off`.
    ///
    /// # Safety
    /// `off + src.len() <= self.len()`, and the caller owns the range (it
    /// came from [`Arena::alloc`] and has not been published yet).
    pub(crate) unsafe fn write(&self, off: usize, src: &[u8]) {
        #[cfg(loom)]
        for w in self.words(off, src.len()) {
            self.track[w].with_mut(|_| ());
        }
        // SAFETY: in bounds and exclusively ours per the caller's contract;
        // `src` cannot overlap the arena's unpublished range.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(off), src.len()) }
    }

    /// The `n` bytes at `off`.
    ///
    /// # Safety
    /// `off + n <= self.len()`, and the range belongs to a record whose
    /// publication this thread has acquired (it will never be written again).
    pub(crate) unsafe fn read(&self, off: usize, n: usize) -> &'a [u8] {
        #[cfg(loom)]
        for w in self.words(off, n) {
            self.track[w].with(|_| ());
        }
        // SAFETY: in bounds, and immutable for 'a per the caller's contract.
        unsafe { core::slice::from_raw_parts(self.ptr.add(off), n) }
    }

    #[cfg(loom)]
    fn words(&self, off: usize, n: usize) -> core::ops::Range<usize> {
        if n == 0 {
            return 0..0;
        }
        off / RECORD_ALIGN as usize..(off + n - 1) / RECORD_ALIGN as usize + 1
    }
}

/// A value arena: bytes plus the shared bump cursor.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Arena<'a> {
    pub(crate) bytes: ByteRegion<'a>,
    pub(crate) cursor: &'a AtomicU64,
}

impl<'a> Arena<'a> {
    pub(crate) fn capacity(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// Bytes handed out so far (never more than the capacity).
    pub(crate) fn used(&self) -> u64 {
        self.cursor.load(Ordering::Relaxed).min(self.capacity())
    }

    /// Reserves `size` bytes (a multiple of [`RECORD_ALIGN`]); `None` when
    /// they do not fit.
    ///
    /// The cursor is moved with `fetch_add`, so concurrent puts never retry.
    /// A reservation that overshoots the end is handed back with a CAS that
    /// succeeds when nobody reserved after it (always, without contention),
    /// so a later smaller put can still use the tail. If the CAS loses, the
    /// tail stays unused and later puts fail cleanly: nothing is ever handed
    /// out twice. The pre-check keeps the cursor within `capacity + (number
    /// of racing puts) * (largest record)`, far from wrapping.
    pub(crate) fn alloc(&self, size: u64) -> Option<u64> {
        let cap = self.capacity();
        let seen = self.cursor.load(Ordering::Relaxed);
        if seen.checked_add(size).is_none_or(|end| end > cap) {
            return None;
        }
        // Relaxed: the reservation only has to be unique (RMW atomicity);
        // the record's bytes are published by the slot's Release, not here.
        let start = self.cursor.fetch_add(size, Ordering::Relaxed);
        if start + size > cap {
            self.release(start, size);
            return None;
        }
        Some(start)
    }

    /// Gives back the most recent reservation `[start, start + size)` if no
    /// later one was made (best effort, see [`Self::alloc`]).
    pub(crate) fn release(&self, start: u64, size: u64) {
        let _ =
            self.cursor
                .compare_exchange(start + size, start, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// Writes a record for `value` at `start` (reserved with
    /// `record_size(value.len())` bytes).
    ///
    /// # Safety
    /// `start` came from [`Self::alloc`] with that size and is unpublished.
    pub(crate) unsafe fn write_record(&self, start: u64, value: &[u8]) {
        let start = start as usize;
        let mut header = [0u8; RECORD_HEADER as usize];
        header[..4].copy_from_slice(&(value.len() as u32).to_ne_bytes());
        // SAFETY: the reservation covers header + value (record_size), and
        // is ours until published, per the caller's contract.
        unsafe {
            self.bytes.write(start, &header);
            self.bytes.write(start + RECORD_HEADER as usize, value);
        }
    }

    /// The value of the record at `off`, or `None` if the record does not
    /// lie inside the arena (only possible if the segment was corrupted by
    /// something other than this crate).
    ///
    /// # Safety
    /// If `off` is a record offset, this thread has acquired its publication.
    pub(crate) unsafe fn read_record(&self, off: u64) -> Option<&'a [u8]> {
        let cap = self.capacity();
        if off.checked_add(RECORD_HEADER).is_none_or(|end| end > cap) {
            return None;
        }
        // SAFETY: in bounds (checked above) and published (caller).
        let header = unsafe { self.bytes.read(off as usize, 4) };
        let len = u32::from_ne_bytes([header[0], header[1], header[2], header[3]]) as u64;
        if off + RECORD_HEADER + len > cap {
            return None;
        }
        // SAFETY: in bounds (checked above) and published (caller).
        Some(unsafe {
            self.bytes
                .read((off + RECORD_HEADER) as usize, len as usize)
        })
    }
}

/// Heap storage for an arena, for models and tests (`crate::heap::HeapJob`).
pub(crate) struct ArenaStorage {
    bytes: Box<[core::cell::UnsafeCell<u8>]>,
    #[cfg(loom)]
    track: Box<[loom::cell::UnsafeCell<()>]>,
}

// SAFETY: the bytes are only accessed through ByteRegion's protocol (see its
// Send/Sync justification).
unsafe impl Send for ArenaStorage {}
// SAFETY: as for Send.
unsafe impl Sync for ArenaStorage {}

impl ArenaStorage {
    pub(crate) fn new(len: usize) -> Self {
        Self {
            bytes: (0..len).map(|_| core::cell::UnsafeCell::new(0)).collect(),
            #[cfg(loom)]
            track: (0..len.div_ceil(RECORD_ALIGN as usize))
                .map(|_| loom::cell::UnsafeCell::new(()))
                .collect(),
        }
    }

    pub(crate) fn region(&self) -> ByteRegion<'_> {
        ByteRegion {
            // UnsafeCell<u8> is repr(transparent) over u8, and mutation
            // through a shared reference is what UnsafeCell permits.
            ptr: self.bytes.as_ptr() as *mut u8,
            len: self.bytes.len(),
            #[cfg(loom)]
            track: &self.track,
            _bytes: PhantomData,
        }
    }
}
