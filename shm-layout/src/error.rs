//! Errors of the shared-memory operations. None of them is fatal to the
//! segment: a failed put leaves the table as it was, and the caller can hand
//! the pair to the launcher over the socket instead.

use std::time::Duration;

use crate::abort::Aborted;

/// Why a KVS or node-attribute put failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KvsError {
    /// Keys must be at least one byte.
    #[error("key is empty")]
    EmptyKey,
    /// Key longer than [`crate::KEY_MAX`].
    #[error("key is {len} bytes, the limit is {max}")]
    KeyTooLong { len: usize, max: usize },
    /// Value longer than the segment's maximum value length.
    #[error("value is {len} bytes, this segment's limit is {max}")]
    ValueTooLong { len: usize, max: usize },
    /// Every slot holds another key (the whole table was probed).
    #[error("key table full: all {slots} slots hold other keys")]
    TableFull { slots: usize },
    /// The value arena has no room for this record.
    #[error("value arena full: a {need}-byte record does not fit in the {capacity}-byte arena")]
    ArenaFull { need: u64, capacity: u64 },
    /// The job was aborted while this put waited for a concurrent put of a
    /// key with the same hash tag.
    #[error(transparent)]
    Aborted(#[from] Aborted),
}

/// Why a blocking wait (for a node attribute) returned without a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WaitError {
    /// The job was aborted.
    #[error(transparent)]
    Aborted(#[from] Aborted),
    /// The timeout passed first.
    #[error("timed out after {0:?}")]
    TimedOut(Duration),
    /// The key can never be stored (empty or too long).
    #[error("invalid key: {0}")]
    InvalidKey(KvsError),
}
