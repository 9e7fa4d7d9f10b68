//! Node attributes (PMI-2 `PutNodeAttr`/`GetNodeAttr`): a [`Kvs`] table in
//! its own region, plus a change counter that waiters sleep on.
//!
//! ```
//! use std::{sync::Arc, time::Duration};
//! use shm_layout::{futex::CondvarFutex, heap::HeapJob, SegmentParams};
//!
//! let job = Arc::new(HeapJob::new(&SegmentParams::for_ranks(2)));
//! let futex = Arc::new(CondvarFutex::new());
//! let leader = {
//!     let (job, futex) = (job.clone(), futex.clone());
//!     std::thread::spawn(move || {
//!         job.view().node_attrs().put(b"shmem-name", b"/fastpmi-7", &*futex).unwrap();
//!     })
//! };
//! let attrs = job.view().node_attrs();
//! // Sleeps until the leader's put (or an abort, or the timeout).
//! let value = attrs.get_wait(b"shmem-name", &*futex, Some(Duration::from_secs(10)))?;
//! assert_eq!(value, b"/fastpmi-7");
//! leader.join().unwrap();
//! # Ok::<(), shm_layout::WaitError>(())
//! ```

use std::time::{Duration, Instant};

use crate::error::{KvsError, WaitError};
use crate::futex::{Futex, WAKE_ALL};
use crate::kvs::{check_key, Kvs, PutOutcome};
use crate::sync::{AtomicU32, Ordering};
use crate::wait::{next_slice, SLEEP_SLICE};

/// The node-attribute table and its change counter.
#[derive(Debug, Clone, Copy)]
pub struct NodeAttrs<'a> {
    table: Kvs<'a>,
    changes: &'a AtomicU32,
}

impl<'a> NodeAttrs<'a> {
    pub(crate) fn new(table: Kvs<'a>, changes: &'a AtomicU32) -> Self {
        Self { table, changes }
    }

    /// The underlying table (same rules as the KVS: last writer wins).
    pub fn table(&self) -> Kvs<'a> {
        self.table
    }

    /// Number of completed node-attribute puts (plus aborts); wraps.
    pub fn changes(&self) -> u32 {
        self.changes.load(Ordering::Acquire)
    }

    /// Stores a node attribute and wakes everybody waiting for one (one
    /// `futex.wake`: node attributes are rare, a few per job).
    pub fn put<F: Futex + ?Sized>(
        &self,
        key: &[u8],
        value: &[u8],
        futex: &F,
    ) -> Result<PutOutcome<'a>, KvsError> {
        let outcome = self.table.put(key, value, futex)?;
        // SYNC POINT (node-attr change): Release pairs with the Acquire load
        // in `get_wait`; a waiter that sees the new count finds the entry.
        self.changes.fetch_add(1, Ordering::Release);
        futex.wake(self.changes, WAKE_ALL);
        Ok(outcome)
    }

    /// Sleeps until the change counter differs from `seen` (a put or an
    /// abort), at most `timeout`; returns the counter. For a watcher that
    /// serves waiters it holds elsewhere (the launcher's socket ranks).
    pub fn wait_changed<F: Futex + ?Sized>(&self, seen: u32, futex: &F, timeout: Duration) -> u32 {
        // SYNC POINT (node-attr change): Acquire pairs with the Release bump
        // in `put`; after a change the new entry is visible to the caller.
        let now = self.changes.load(Ordering::Acquire);
        if now != seen {
            return now;
        }
        futex.wait(self.changes, seen, Some(timeout.min(SLEEP_SLICE)));
        // SYNC POINT (node-attr change): as above.
        self.changes.load(Ordering::Acquire)
    }

    /// The attribute, if present (never blocks).
    pub fn get(&self, key: &[u8]) -> Option<&'a [u8]> {
        self.table.get(key)
    }

    /// The attribute, waiting until it is put, the job aborts or `timeout`
    /// (None = no limit) passes. Sleeps on the change counter in slices of at
    /// most 100 ms and re-checks the abort word after every wake, so an
    /// abort is noticed even if nobody wakes us.
    pub fn get_wait<F: Futex + ?Sized>(
        &self,
        key: &[u8],
        futex: &F,
        timeout: Option<Duration>,
    ) -> Result<&'a [u8], WaitError> {
        check_key(key).map_err(WaitError::InvalidKey)?;
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            // SYNC POINT (node-attr change): Acquire pairs with the Release
            // bump in `put` (and in the job's abort). Loaded before the
            // lookup: a put that lands after the lookup changes the counter,
            // so the futex wait below returns at once instead of sleeping.
            let seen = self.changes.load(Ordering::Acquire);
            if let Some(value) = self.table.get(key) {
                return Ok(value);
            }
            self.table.abort.check()?;
            let Some(slice) = next_slice(deadline, Some(SLEEP_SLICE)) else {
                return Err(WaitError::TimedOut(timeout.unwrap_or_default()));
            };
            futex.wait(self.changes, seen, slice);
        }
    }
}
