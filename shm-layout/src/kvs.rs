//! The lock-free key-value table: open addressing over an array of
//! [`Slot`]s, values in a bump-allocated arena. Used for the job's KVS and,
//! in its own smaller region, for node attributes.
//!
//! ```
//! use shm_layout::{futex::SpinFutex, heap::HeapJob, PutOutcome, SegmentParams};
//!
//! let job = HeapJob::new(&SegmentParams::for_ranks(4));
//! let kvs = job.view().kvs();
//! assert_eq!(kvs.put(b"P0-bc", b"tcp://10.0.0.1:4000", &SpinFutex)?, PutOutcome::Inserted);
//! assert_eq!(kvs.get(b"P0-bc"), Some(&b"tcp://10.0.0.1:4000"[..]));
//! // A second put of the same key replaces the value (last writer wins).
//! kvs.put(b"P0-bc", b"tcp://10.0.0.1:4001", &SpinFutex)?;
//! assert_eq!(kvs.get(b"P0-bc"), Some(&b"tcp://10.0.0.1:4001"[..]));
//! assert_eq!(kvs.get(b"P1-bc"), None);
//! # Ok::<(), shm_layout::KvsError>(())
//! ```
//!
//! # Protocol
//!
//! A slot's state word goes `EMPTY -> CLAIMED -> READY` and never back. The
//! claim CAS also stores a 29-bit tag of the key's hash, so a prober knows at
//! once whether a slot *may* hold its key.
//!
//! * **Put**: reserve and write the value record first, then probe. On an
//!   `EMPTY` slot, CAS it to `CLAIMED|tag`, copy key, hash and length, store
//!   the record offset, and publish with a Release swap to `READY|tag`. On a
//!   `READY` slot with the same key, swap the slot's value offset to the new
//!   record.
//! * **Get**: probe with Acquire loads; stop at `EMPTY` (no deletion, so a
//!   key is never stored past an empty slot). A slot is only read after its
//!   `READY` was acquired, so a get never sees a partial key or value.
//! * **A `CLAIMED` slot with the same tag** (the same key being inserted
//!   right now, or a 1-in-2^29 tag collision): a get spins a few times and
//!   then skips it, i.e. it answers as if it ran just before that put
//!   finished; that is linearisable, because the probing invariant keeps
//!   each key in at most one slot. A put cannot skip (it would create a
//!   second slot for the key), so it waits: spins briefly, then sets the
//!   slot's `WAITERS` bit and sleeps on the state word; the claimer's
//!   publishing swap sees the bit and wakes it. Sleeps are bounded (10 ms)
//!   and re-check the abort word, in case the claimer died mid-put.
//!
//! # Duplicate keys: last writer wins
//!
//! Every put of an existing key writes a fresh record and swaps it into the
//! slot. The winner is the **last put in the modification order of the
//! slot's value word** (the swap order); the first put's offset is stored
//! before `READY` and so precedes every swap. Readers always see one complete
//! value, old or new. Replaced records stay in the arena (it only grows).

use core::ptr::addr_of;
use std::time::Duration;

use crate::abort::{AbortWord, Aborted};
use crate::arena::{record_size, Arena};
use crate::error::KvsError;
use crate::futex::{Futex, WAKE_ALL};
use crate::hash::key_hash;
use crate::sync::{spin_loop, spins, AtomicU32, AtomicU64, Ordering, UnsafeCell};

/// Longest key, in bytes.
pub const KEY_MAX: usize = 64;

pub(crate) const PHASE_MASK: u32 = 0b11;
pub(crate) const EMPTY: u32 = 0;
pub(crate) const CLAIMED: u32 = 1;
pub(crate) const READY: u32 = 2;
/// Set on a `CLAIMED` slot by a put that sleeps until it is `READY`.
pub(crate) const WAITERS: u32 = 1 << 2;
pub(crate) const TAG_SHIFT: u32 = 3;
const TAG_MASK: u32 = !0 << TAG_SHIFT;

/// How long a put sleeps at a time while another put holds a slot claimed.
const CLAIM_WAIT_SLICE: Duration = Duration::from_millis(10);

/// The tag bits of a hash, placed as in the state word: the hash's top 29
/// bits (the slot index uses the low bits, so the two are independent).
const fn tag_bits(hash: u64) -> u32 {
    ((hash >> (32 + TAG_SHIFT)) as u32) << TAG_SHIFT
}

/// `Err` unless `key` can be stored (1..=[`KEY_MAX`] bytes).
pub fn check_key(key: &[u8]) -> Result<(), KvsError> {
    if key.is_empty() {
        Err(KvsError::EmptyKey)
    } else if key.len() > KEY_MAX {
        Err(KvsError::KeyTooLong {
            len: key.len(),
            max: KEY_MAX,
        })
    } else {
        Ok(())
    }
}

/// A key as stored in its slot (written once, by the claimer).
#[derive(Debug)]
#[repr(C)]
pub(crate) struct SlotKey {
    pub(crate) hash: u64,
    pub(crate) len: u32,
    pub(crate) _reserved: u32,
    pub(crate) bytes: [u8; KEY_MAX],
}

/// One entry of a key table, in shared memory. All-zero bytes are an empty
/// slot. The first cache line holds the state, the value offset, the hash
/// and the first 32 key bytes, so probing past a slot, or matching a short
/// key, touches one line.
#[derive(Debug)]
#[repr(C, align(64))]
pub struct Slot {
    pub(crate) state: AtomicU32,
    pub(crate) _reserved: u32,
    /// Arena offset of the current value record.
    pub(crate) value: AtomicU64,
    pub(crate) key: UnsafeCell<SlotKey>,
}

// SAFETY: `key` is written only by the put whose CAS claimed the slot, before
// its Release swap to READY, and only read after an Acquire load saw READY;
// it is never written again. Everything else is atomic.
unsafe impl Sync for Slot {}

impl Slot {
    /// An empty slot (for heap-allocated tables; in a segment, zeroed memory
    /// is already one).
    pub(crate) fn new() -> Self {
        Self {
            state: AtomicU32::new(EMPTY),
            _reserved: 0,
            value: AtomicU64::new(0),
            key: UnsafeCell::new(SlotKey {
                hash: 0,
                len: 0,
                _reserved: 0,
                bytes: [0; KEY_MAX],
            }),
        }
    }

    /// Only by the claimer, between its claim and its publication.
    fn write_key(&self, hash: u64, key: &[u8]) {
        self.key.with_mut(|k| {
            // SAFETY: we won the claim CAS, so nobody else writes the key,
            // and nobody reads it before our Release swap to READY.
            let k = unsafe { &mut *k };
            k.hash = hash;
            k.len = key.len() as u32;
            k.bytes[..key.len()].copy_from_slice(key);
        })
    }

    /// Only after an Acquire load saw READY.
    fn key_matches(&self, hash: u64, key: &[u8]) -> bool {
        self.key.with(|k| {
            // SAFETY: READY was acquired, so the key is complete and
            // immutable; `len` is compared before slicing, so it stays in
            // bounds even if the segment were corrupt.
            let k = unsafe { &*k };
            k.hash == hash && k.len as usize == key.len() && k.bytes[..key.len()] == *key
        })
    }

    /// Only after an Acquire load saw READY.
    fn key_bytes<'a>(&'a self) -> &'a [u8] {
        self.key.with(|k| {
            // SAFETY: READY was acquired, so the key is complete and immutable
            // for as long as the slot lives ('a); the length is clamped.
            unsafe {
                let len = ((*k).len as usize).min(KEY_MAX);
                core::slice::from_raw_parts::<'a, u8>(addr_of!((*k).bytes) as *const u8, len)
            }
        })
    }
}

/// What a successful put did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome<'a> {
    /// The key was new.
    Inserted,
    /// The key existed; its value was replaced. `previous` is the value this
    /// put's swap replaced (the chain of `previous` values gives the swap
    /// order of concurrent puts).
    Replaced { previous: &'a [u8] },
}

/// A key table (the KVS, or the node-attribute table) in shared memory.
#[derive(Clone, Copy)]
pub struct Kvs<'a> {
    slots: &'a [Slot],
    arena: Arena<'a>,
    max_value_len: usize,
    pub(crate) abort: &'a AbortWord,
}

impl core::fmt::Debug for Kvs<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Not the slots: there are thousands.
        f.debug_struct("Kvs")
            .field("slots", &self.slots.len())
            .field("arena_used", &self.arena.used())
            .field("arena_capacity", &self.arena.capacity())
            .field("max_value_len", &self.max_value_len)
            .finish()
    }
}

impl<'a> Kvs<'a> {
    /// `slots.len()` must be a power of two (or 0: a table that is always
    /// full).
    pub(crate) fn new(
        slots: &'a [Slot],
        arena: Arena<'a>,
        max_value_len: usize,
        abort: &'a AbortWord,
    ) -> Self {
        Self {
            slots,
            arena,
            max_value_len,
            abort,
        }
    }

    /// Number of slots (the most keys the table can hold).
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Size of the value arena, in bytes.
    pub fn arena_capacity(&self) -> u64 {
        self.arena.capacity()
    }

    /// Arena bytes used so far (including replaced values).
    pub fn arena_used(&self) -> u64 {
        self.arena.used()
    }

    /// Longest value a put accepts.
    pub fn max_value_len(&self) -> usize {
        self.max_value_len
    }

    /// Stores `value` under `key`, replacing any earlier value (last writer
    /// wins, see the module docs). Lock-free, no syscall, except when a
    /// concurrent put of a key with the same hash tag is between its claim
    /// and its publication (see the module docs); `futex` is only used then.
    ///
    /// On error nothing is stored and the table is unchanged.
    pub fn put<F: Futex + ?Sized>(
        &self,
        key: &[u8],
        value: &[u8],
        futex: &F,
    ) -> Result<PutOutcome<'a>, KvsError> {
        check_key(key)?;
        if value.len() > self.max_value_len {
            return Err(KvsError::ValueTooLong {
                len: value.len(),
                max: self.max_value_len,
            });
        }
        let size = record_size(value.len());
        let Some(record) = self.arena.alloc(size) else {
            return Err(KvsError::ArenaFull {
                need: size,
                capacity: self.arena.capacity(),
            });
        };
        // SAFETY: `record` was just reserved with `record_size(value.len())`
        // bytes and nobody else knows its offset yet.
        unsafe { self.arena.write_record(record, value) };
        match self.publish(key_hash(key), key, record, futex) {
            Ok(Some(outcome)) => Ok(outcome),
            Ok(None) => {
                self.arena.release(record, size);
                Err(KvsError::TableFull {
                    slots: self.slots.len(),
                })
            }
            Err(aborted) => {
                self.arena.release(record, size);
                Err(aborted.into())
            }
        }
    }

    /// Inserts the written record under `key`, or swaps it into the key's
    /// slot. `Ok(None)`: no slot left.
    fn publish<F: Futex + ?Sized>(
        &self,
        hash: u64,
        key: &[u8],
        record: u64,
        futex: &F,
    ) -> Result<Option<PutOutcome<'a>>, Aborted> {
        let n = self.slots.len();
        let tag = tag_bits(hash);
        for i in 0..n {
            let slot = &self.slots[(hash as usize).wrapping_add(i) & (n - 1)];
            // SYNC POINT (slot publish): Acquire pairs with the claimer's
            // Release swap to READY; a READY seen here comes with its key.
            let mut s = slot.state.load(Ordering::Acquire);
            loop {
                if s == EMPTY {
                    // Relaxed on success: the claim publishes nothing (the
                    // key is only read after READY). Acquire on failure: we
                    // may go on to read the key of the slot we lost.
                    match slot.state.compare_exchange(
                        EMPTY,
                        tag | CLAIMED,
                        Ordering::Relaxed,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => {
                            slot.write_key(hash, key);
                            slot.value.store(record, Ordering::Relaxed);
                            // SYNC POINT (slot publish): Release makes the
                            // key, hash, length, value offset and the value
                            // record visible to every Acquire load that sees
                            // READY. A swap, not a store: it returns the
                            // WAITERS bit of puts sleeping on this claim.
                            let prev = slot.state.swap(tag | READY, Ordering::Release);
                            if prev & WAITERS != 0 {
                                futex.wake(&slot.state, WAKE_ALL);
                            }
                            return Ok(Some(PutOutcome::Inserted));
                        }
                        Err(now) => {
                            s = now;
                            continue;
                        }
                    }
                }
                if s & TAG_MASK != tag {
                    break; // another key: probe on
                }
                if s & PHASE_MASK == CLAIMED {
                    s = self.wait_claimed(slot, s, futex)?;
                    continue;
                }
                if slot.key_matches(hash, key) {
                    // SYNC POINT (value swap): Release publishes our record
                    // to the readers' Acquire load of `value`; Acquire makes
                    // the record we replace readable here.
                    let prev = slot.value.swap(record, Ordering::AcqRel);
                    // SAFETY: `prev` was published by a Release we acquired
                    // (the swap above, or the READY we matched).
                    let previous = unsafe { self.arena.read_record(prev) }.unwrap_or(&[]);
                    return Ok(Some(PutOutcome::Replaced { previous }));
                }
                break; // same tag, another key: probe on
            }
        }
        Ok(None)
    }

    /// Waits until a slot claimed by another put (with our tag) is
    /// published; returns its new state (acquired).
    fn wait_claimed<F: Futex + ?Sized>(
        &self,
        slot: &Slot,
        mut s: u32,
        futex: &F,
    ) -> Result<u32, Aborted> {
        for _ in spins() {
            spin_loop();
            // SYNC POINT (slot publish): as in `publish`.
            s = slot.state.load(Ordering::Acquire);
            if s & PHASE_MASK != CLAIMED {
                return Ok(s);
            }
        }
        loop {
            self.abort.check()?;
            if s & WAITERS == 0 {
                // Both this CAS and the claimer's publishing swap are RMWs on
                // the same word: either the swap comes later and returns our
                // bit (so it wakes us), or this CAS fails and we see READY.
                match slot.state.compare_exchange(
                    s,
                    s | WAITERS,
                    Ordering::Relaxed,
                    Ordering::Acquire,
                ) {
                    Ok(_) => s |= WAITERS,
                    Err(now) => {
                        s = now;
                        if s & PHASE_MASK != CLAIMED {
                            return Ok(s);
                        }
                        continue;
                    }
                }
            }
            futex.wait(&slot.state, s, Some(CLAIM_WAIT_SLICE));
            // SYNC POINT (slot publish): as in `publish`.
            s = slot.state.load(Ordering::Acquire);
            if s & PHASE_MASK != CLAIMED {
                return Ok(s);
            }
        }
    }

    /// The value stored under `key`, borrowed from the segment (values are
    /// immutable once published). Wait-free: at most one probe of each slot,
    /// and at most a few spins on a slot that is being written. Never locks,
    /// never makes a syscall. Invalid keys are simply not found.
    pub fn get(&self, key: &[u8]) -> Option<&'a [u8]> {
        let n = self.slots.len();
        if check_key(key).is_err() || n == 0 {
            return None;
        }
        let hash = key_hash(key);
        let tag = tag_bits(hash);
        for i in 0..n {
            let slot = &self.slots[(hash as usize).wrapping_add(i) & (n - 1)];
            // SYNC POINT (slot publish): Acquire pairs with the claimer's
            // Release swap to READY.
            let s = slot.state.load(Ordering::Acquire);
            if s == EMPTY {
                return None;
            }
            if s & TAG_MASK != tag {
                continue;
            }
            if s & PHASE_MASK == CLAIMED && !Self::settle(slot) {
                // Still being written: that put has not happened yet for us.
                continue;
            }
            if slot.key_matches(hash, key) {
                // SYNC POINT (value swap): Acquire pairs with the Release swap
                // of the put that stored this offset (the first offset is
                // also covered by READY).
                let off = slot.value.load(Ordering::Acquire);
                // SAFETY: `off` is a record offset whose publication we
                // acquired just above.
                return unsafe { self.arena.read_record(off) };
            }
        }
        None
    }

    /// A reader's bounded wait for a claimed slot: true once it is READY.
    fn settle(slot: &Slot) -> bool {
        for _ in spins() {
            spin_loop();
            // SYNC POINT (slot publish): as in `get`.
            if slot.state.load(Ordering::Acquire) & PHASE_MASK != CLAIMED {
                return true;
            }
        }
        false
    }

    /// Every published `(key, value)` pair, in slot order (for PMI-1
    /// `getbyidx` and diagnostics). Entries published while iterating may or
    /// may not be seen.
    pub fn entries(&self) -> Entries<'a> {
        Entries {
            table: *self,
            next: 0,
        }
    }
}

/// Iterator over the published entries of a [`Kvs`].
#[derive(Clone)]
pub struct Entries<'a> {
    table: Kvs<'a>,
    next: usize,
}

impl core::fmt::Debug for Entries<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Entries").field("next", &self.next).finish()
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        while let Some(slot) = self.table.slots.get(self.next) {
            self.next += 1;
            // SYNC POINT (slot publish): as in `Kvs::get`.
            if slot.state.load(Ordering::Acquire) & PHASE_MASK != READY {
                continue;
            }
            // SYNC POINT (value swap): as in `Kvs::get`.
            let off = slot.value.load(Ordering::Acquire);
            // SAFETY: READY and the offset were acquired above.
            if let Some(value) = unsafe { self.table.arena.read_record(off) } {
                return Some((slot.key_bytes(), value));
            }
        }
        None
    }
}
