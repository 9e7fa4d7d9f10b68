//! Jobs and buffers on the heap, for loom models, tests and examples.
//!
//! [`HeapJob`] owns the same structures a segment holds and hands out the
//! same [`JobView`], so loom can model-check the real algorithms on memory
//! it allocated itself (loom's atomics cannot live in raw memory).
//! [`AlignedBuffer`] stands in for a mapping in single-process tests.
//!
//! ```
//! use shm_layout::{futex::SpinFutex, heap::HeapJob, SegmentParams};
//!
//! let job = HeapJob::new(&SegmentParams::for_ranks(1));
//! let view = job.view();
//! view.kvs().put(b"key", b"value", &SpinFutex)?;
//! view.fence().fence(&SpinFutex)?; // one party: completes at once
//! assert_eq!(view.kvs().get(b"key"), Some(&b"value"[..]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::abort::AbortWord;
use crate::arena::ArenaStorage;
use crate::job::{JobParts, JobView, SyncBlock};
use crate::kvs::Slot;
use crate::layout::SegmentParams;
use crate::wake_tree::{fanout_for, WakeSlot};

/// A job's shared structures, heap-allocated.
pub struct HeapJob {
    abort: AbortWord,
    sync: Box<SyncBlock>,
    wake: Box<[WakeSlot]>,
    kvs_slots: Box<[Slot]>,
    kvs_arena: ArenaStorage,
    nodeattr_slots: Box<[Slot]>,
    nodeattr_arena: ArenaStorage,
    max_value_len: usize,
}

impl core::fmt::Debug for HeapJob {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("HeapJob")
            .field("view", &self.view())
            .finish()
    }
}

impl HeapJob {
    /// A job sized by `params`, taken as given (no minimums: models use
    /// tiny tables); slot counts are rounded up to a power of two.
    pub fn new(params: &SegmentParams) -> Self {
        Self::with_fence_fanout(params, fanout_for(params.nranks))
    }

    /// As [`Self::new`], with the fence released by a tree of fan-out
    /// `fanout` (0: central), whatever the rank count: models and tests
    /// check both releases on a few parties.
    pub fn with_fence_fanout(params: &SegmentParams, fanout: u32) -> Self {
        let slots = |n: u32| -> Box<[Slot]> {
            (0..n.max(1).next_power_of_two())
                .map(|_| Slot::new())
                .collect()
        };
        Self {
            abort: AbortWord::new(),
            sync: Box::new(SyncBlock::new(params.nranks, fanout)),
            wake: (0..params.nranks).map(|_| WakeSlot::new()).collect(),
            kvs_slots: slots(params.kvs_slots),
            kvs_arena: ArenaStorage::new(params.kvs_arena_bytes as usize),
            nodeattr_slots: slots(params.nodeattr_slots),
            nodeattr_arena: ArenaStorage::new(params.nodeattr_arena_bytes as usize),
            max_value_len: params.max_value_len as usize,
        }
    }

    /// The job's views.
    pub fn view(&self) -> JobView<'_> {
        JobView::new(JobParts {
            abort: &self.abort,
            sync: &self.sync,
            wake: &self.wake,
            kvs_slots: &self.kvs_slots,
            kvs_arena: self.kvs_arena.region(),
            nodeattr_slots: &self.nodeattr_slots,
            nodeattr_arena: self.nodeattr_arena.region(),
            max_value_len: self.max_value_len,
        })
    }
}

#[cfg(not(loom))]
pub use self::buffer::AlignedBuffer;

#[cfg(not(loom))]
mod buffer {
    use crate::layout::SEGMENT_ALIGN;

    /// A zeroed, [`SEGMENT_ALIGN`]-aligned heap buffer (a `Vec<u64>` with the
    /// start rounded up), standing in for a mapping in tests.
    ///
    /// Take the pointer once and pass the same one to `init` and every
    /// `attach`, as processes share one mapping: each `as_mut_ptr` call
    /// reborrows the buffer mutably.
    #[derive(Debug)]
    pub struct AlignedBuffer {
        words: Vec<u64>,
        offset: usize,
        len: usize,
    }

    impl AlignedBuffer {
        /// `len` zero bytes.
        pub fn new(len: usize) -> Self {
            let words = vec![0u64; (len + SEGMENT_ALIGN).div_ceil(8)];
            let addr = words.as_ptr() as usize;
            let offset = addr.next_multiple_of(SEGMENT_ALIGN) - addr;
            Self { words, offset, len }
        }

        /// Start of the buffer (aligned to [`SEGMENT_ALIGN`]).
        pub fn as_mut_ptr(&mut self) -> *mut u8 {
            // SAFETY: `offset < SEGMENT_ALIGN` and the Vec has `len +
            // SEGMENT_ALIGN` bytes, so the result and `len` bytes after it
            // are inside the allocation.
            unsafe { self.words.as_mut_ptr().cast::<u8>().add(self.offset) }
        }

        /// Length in bytes.
        pub fn len(&self) -> usize {
            self.len
        }

        /// Whether the buffer is empty.
        pub fn is_empty(&self) -> bool {
            self.len == 0
        }
    }
}
