//! Shared-memory layout of a fastpmi job segment, and the lock-free
//! algorithms over it: the KVS, node attributes, the fence barrier, the
//! abort word and per-rank state. No I/O, no syscalls, no allocation in the
//! operations: the OS is reached only through the [`futex::Futex`] trait,
//! so `loom-tests` can model-check the same code.
//!
//! ```
//! use shm_layout::{futex::SpinFutex, heap::AlignedBuffer, Segment, SegmentLayout, SegmentParams};
//!
//! let params = SegmentParams::for_ranks(1);
//! let layout = SegmentLayout::plan(params)?;
//! // A real job maps a memfd here; any 64-byte aligned buffer will do.
//! let mut buf = AlignedBuffer::new(layout.total_size as usize);
//! let (base, len) = (buf.as_mut_ptr(), buf.len());
//! // SAFETY: `buf` outlives both handles and is only used through them.
//! let seg = unsafe { Segment::init(base, len, &params, "job-1")? };
//! let futex = SpinFutex; // the launcher and clients use a shared FUTEX_WAIT/WAKE
//!
//! seg.kvs().put(b"P0-businesscard", b"port=4000", &futex)?;
//! assert_eq!(seg.kvs().get(b"P0-businesscard"), Some(&b"port=4000"[..]));
//!
//! // One rank: its arrival is the last one, and the wait returns at once.
//! let fence = seg.fence();
//! let arrival = fence.arrive(&futex);
//! assert!(arrival.last);
//! fence.wait(arrival, &futex)?;
//!
//! // Another process attaches to the same bytes (mapped anywhere).
//! // SAFETY: as above.
//! let other = unsafe { Segment::attach(base, len)? };
//! assert_eq!(other.job_id(), "job-1");
//! assert_eq!(other.kvs().get(b"P0-businesscard"), Some(&b"port=4000"[..]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Memory ordering
//!
//! Every Release has a `// SYNC POINT (<name>):` comment saying what it makes
//! visible, and the Acquire that reads it carries the same name:
//! *segment init*, *slot publish*, *value swap*, *fence arrival*, *fence
//! completion*, *fence wake*, *node-attr change*, *abort*, *rank state*.
//!
//! # Loom
//!
//! Under `cfg(loom)` the atomics and cells come from loom ([`sync`]), the
//! raw-memory parts (header, `Segment`) are not built, and jobs are built
//! with [`heap::HeapJob`]. See `loom-tests/src/lib.rs` for the command.

mod abort;
mod arena;
pub mod barrier;
mod cache;
pub mod cohort;
mod death;
mod error;
pub mod futex;
pub mod group;
mod hash;
#[cfg(not(loom))]
mod header;
pub mod heap;
mod job;
pub mod kvs;
pub mod layout;
pub mod nodeattr;
mod rank;
#[cfg(not(loom))]
mod segment;
pub mod sync;
mod wait;
pub mod wake_tree;

pub use abort::{AbortWord, Aborted};
pub use arena::{record_size, RECORD_ALIGN, RECORD_HEADER};
pub use barrier::{Arrival, Barrier, Fence};
pub use cache::CachePadded;
pub use death::{DeathCause, DeathLine, FenceError};
pub use error::{KvsError, WaitError};
pub use futex::{Futex, WAKE_ALL};
pub use group::{group_slots_for, GroupBarrier, GroupSlot, GroupWaitError};
pub use hash::{fnv1a64, key_hash};
#[cfg(not(loom))]
pub use header::{
    stamp, Header, HASH_OFFSET, INIT_DONE, INIT_OFFSET, LAYOUT_HASH, MAGIC, MAGIC_OFFSET,
    MAJOR_OFFSET, MINOR_OFFSET,
};
pub use job::{JobView, SyncBlock};
pub use kvs::{check_key, Entries, Kvs, PutOutcome, Slot, KEY_MAX};
pub use layout::{
    LayoutError, SegmentLayout, SegmentParams, TableRegion, DEFAULT_MAX_VALUE_LEN, JOB_ID_MAX,
    LAYOUT_MAJOR, LAYOUT_MINOR, MAX_MAX_VALUE_LEN, MIN_MAX_VALUE_LEN, SEGMENT_ALIGN,
};
pub use nodeattr::NodeAttrs;
pub use rank::{
    GroupWait, RankOp, RankPhase, RankState, RankStats, StampClock, WaitKey, STAMP_MONOTONIC,
    STAMP_TSC,
};
#[cfg(not(loom))]
pub use segment::{AttachError, Segment, SegmentRef};
pub use wait::MAX_YIELDS;
pub use wake_tree::{fanout_for, WakeSlot};
