//! The store's interface: the [`Store`] trait both backings implement
//! (`MemStore` in the launcher's memory, `ShmStore` on the job segment),
//! its error and its fence ticket.

/// Why a store operation failed. Each maps to one wire error reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("key of {len} bytes exceeds the limit of {max}")]
    KeyTooLong { len: usize, max: usize },
    #[error("empty key")]
    EmptyKey,
    #[error("value of {len} bytes exceeds the limit of {max}")]
    ValueTooLong { len: usize, max: usize },
    #[error("the job's key-value store is full ({0})")]
    Full(String),
    #[error("the job was aborted by rank {rank} with code {code}")]
    Aborted { code: i32, rank: u32 },
}

/// A rank's place in the fence sequence, handed back to [`Store::fence_done`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FenceTicket {
    pub generation: u64,
}

/// The operations the protocol handlers need from a job's storage.
///
/// Puts are last-writer-wins. `get` returns a copy because socket replies
/// are built from it anyway.
pub trait Store: Send {
    /// Largest value accepted by `put` and `put_node_attr`.
    fn max_value(&self) -> usize;
    fn put(&mut self, rank: u32, key: &[u8], value: &[u8]) -> Result<(), StoreError>;
    fn get(&self, key: &[u8]) -> Option<Vec<u8>>;
    /// Put a value longer than [`Store::max_value`], up to
    /// [`fastpmi_codec::LARGE_VALUE_MAX`], for a client that speaks
    /// continued commands (docs/continued.md). A store without room for
    /// them refuses.
    fn put_large(&mut self, _rank: u32, _key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        Err(StoreError::ValueTooLong {
            len: value.len(),
            max: self.max_value(),
        })
    }
    /// Every pair of the KVS (`kvs-getall`), in no particular order; a key
    /// put twice appears once, with its last value.
    fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>)>;
    fn put_node_attr(&mut self, rank: u32, key: &[u8], value: &[u8]) -> Result<(), StoreError>;
    fn get_node_attr(&self, key: &[u8]) -> Option<Vec<u8>>;
    /// A node attribute the launcher itself sets (`localRanks`, ...): its
    /// value may exceed the clients' limit (it grows with the job), and a
    /// client whose protocol cannot carry it gets an error for its request
    /// only.
    fn put_launcher_attr(&mut self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.put_node_attr(0, key, value)
    }
    /// How many fences `rank` has entered and whether it is in one now, when
    /// the store knows it itself (the segment's per-rank words, written by
    /// shared-memory ranks).
    fn rank_progress(&self, _rank: u32) -> Option<(u64, bool)> {
        None
    }
    /// Whether `rank` recorded in the job segment that it finalized.
    /// fastpmi's client on the segment does so, then sends `finalize`
    /// without waiting for the answer and may have exited before the
    /// launcher reads it.
    fn rank_finalized(&self, _rank: u32) -> bool {
        false
    }
    /// Whether `rank` attached to the job segment (registered in its state
    /// slot). fastpmi's client on the segment does so at init without a
    /// word on the socket, so this is its `init`.
    fn rank_attached(&self, _rank: u32) -> bool {
        false
    }
    /// Arrive at the job's fence on behalf of `rank`. A rank arrives again
    /// only after its previous fence is done.
    fn fence_arrive(&mut self, rank: u32) -> Result<FenceTicket, StoreError>;
    /// Whether the fence `ticket` arrived at has completed.
    fn fence_done(&self, ticket: FenceTicket) -> bool;
    /// How many fences of the job have completed (for messages).
    fn fences_completed(&self) -> u64;
    /// How many ranks are waiting in the current fence (any transport).
    fn fence_arrivals(&self) -> u32;
    /// Record that the job is aborting, waking anyone blocked in the store.
    fn abort(&mut self, code: i32, rank: u32);
    /// Record that `rank` died (fault-tolerant jobs): the job segment's
    /// dead set, which breaks its fence and wakes its waiters. The
    /// in-launcher store has nothing to wake (the server answers its
    /// socket waiters).
    fn record_death(&mut self, _rank: u32, _cause: shm_layout::DeathCause) {}
    /// `rank`, recorded dead of a lost connection, ended of `cause`.
    fn refine_death(&mut self, _rank: u32, _cause: shm_layout::DeathCause) {}
    /// Nested mode: the job's dead on other node servers are now `dead`
    /// (Hydra's range format); one more death is counted (the segment's
    /// fence breaks, its waiters wake).
    fn record_death_elsewhere(&mut self, _dead: &[u8]) {}
    /// Slots in the job segment's group barrier pool (0: no pool). The
    /// server does the bookkeeping of which are in use.
    fn group_slots(&self) -> u32 {
        0
    }
    /// Give free slot `slot` to a group of `parties` members.
    fn group_assign(&mut self, _slot: u32, _ctxid: u64, _parties: u32) {}
    /// The group of `slot` is gone.
    fn group_release(&mut self, _slot: u32) {}
    /// A member of the group of `slot` left (one party fewer).
    fn group_leave(&mut self, _slot: u32) {}
    /// Member `rank` of the group of `slot` failed: wake its waiters.
    fn group_fail(&mut self, _slot: u32, _rank: u32) {}
}

/// A value within [`fastpmi_codec::LARGE_VALUE_MAX`].
pub(crate) fn large_fits(value: &[u8]) -> Result<(), StoreError> {
    if value.len() > fastpmi_codec::LARGE_VALUE_MAX {
        return Err(StoreError::ValueTooLong {
            len: value.len(),
            max: fastpmi_codec::LARGE_VALUE_MAX,
        });
    }
    Ok(())
}
