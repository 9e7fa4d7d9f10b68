//! The job segment as the server's store: socket ranks' puts land in the
//! same lock-free table the shared-memory ranks use, and the server arrives
//! at the same futex barrier on their behalf.

use std::collections::HashMap;
use std::sync::Arc;

use shm_layout::{Arrival, KvsError};

use super::api::{large_fits, FenceTicket, Store, StoreError};
use fastpmi_segment::{JobSegment, SharedFutex};

pub struct ShmStore {
    seg: Arc<JobSegment>,
    /// Pairs that did not fit in the segment: kept here and found by a get
    /// that misses in the table (the design's overflow table).
    overflow: HashMap<Vec<u8>, Vec<u8>>,
    overflow_attrs: HashMap<Vec<u8>, Vec<u8>>,
    overflow_bytes: usize,
}

/// Launcher memory the overflow may use before "full" is an error.
const OVERFLOW_MAX: usize = 256 << 20;

impl ShmStore {
    pub fn new(seg: Arc<JobSegment>) -> Self {
        ShmStore {
            seg,
            overflow: HashMap::new(),
            overflow_attrs: HashMap::new(),
            overflow_bytes: 0,
        }
    }
}

fn map_err(e: KvsError) -> StoreError {
    match e {
        KvsError::EmptyKey => StoreError::EmptyKey,
        KvsError::KeyTooLong { len, max } => StoreError::KeyTooLong { len, max },
        KvsError::ValueTooLong { len, max } => StoreError::ValueTooLong { len, max },
        KvsError::Aborted(a) => StoreError::Aborted {
            code: a.code,
            rank: a.rank,
        },
        full => StoreError::Full(full.to_string()),
    }
}

fn is_full(e: &KvsError) -> bool {
    matches!(e, KvsError::TableFull { .. } | KvsError::ArenaFull { .. })
}

impl ShmStore {
    fn spill(
        &mut self,
        attrs: bool,
        key: &[u8],
        value: &[u8],
        e: KvsError,
    ) -> Result<(), StoreError> {
        if self.overflow_bytes + key.len() + value.len() > OVERFLOW_MAX {
            return Err(map_err(e));
        }
        tracing::debug!(
            "segment full ({e}); keeping {} in the launcher's overflow table",
            fastpmi_codec::show(key)
        );
        self.overflow_bytes += key.len() + value.len();
        // Clients check this attribute before taking a miss to the socket.
        let _ = self.seg.seg().node_attrs().put(
            fastpmi_codec::names::attr::OVERFLOW.as_bytes(),
            b"1",
            &SharedFutex,
        );
        let map = if attrs {
            &mut self.overflow_attrs
        } else {
            &mut self.overflow
        };
        map.insert(key.to_vec(), value.to_vec());
        Ok(())
    }
}

impl Store for ShmStore {
    fn max_value(&self) -> usize {
        fastpmi_codec::VALLEN_MAX.min(self.seg.seg().kvs().max_value_len())
    }

    fn put(&mut self, _rank: u32, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        if value.len() > self.max_value() {
            return Err(StoreError::ValueTooLong {
                len: value.len(),
                max: self.max_value(),
            });
        }
        match self.seg.seg().kvs().put(key, value, &SharedFutex) {
            Ok(_) => {
                // A newer value in the table wins over an older spilled one.
                self.overflow.remove(key);
                Ok(())
            }
            Err(e) if is_full(&e) => self.spill(false, key, value, e),
            Err(e) => Err(map_err(e)),
        }
    }

    fn put_large(&mut self, _rank: u32, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        large_fits(value)?;
        let seg = self.seg.seg();
        let kvs = seg.kvs();
        if let Some(a) = seg.abort_status() {
            return Err(StoreError::Aborted {
                code: a.code,
                rank: a.rank,
            });
        }
        // A get reads the segment first: a key there would hide the value.
        if kvs.get(key).is_some() {
            return Err(StoreError::Full(format!(
                "key {} already has a value in the job segment; a value longer than {} bytes needs a key of its own",
                fastpmi_codec::show(key),
                self.max_value()
            )));
        }
        let e = KvsError::ValueTooLong {
            len: value.len(),
            max: self.max_value(),
        };
        if key.is_empty() {
            return Err(StoreError::EmptyKey);
        }
        if let Some(old) = self.overflow.get(key) {
            self.overflow_bytes -= key.len() + old.len();
        }
        self.spill(false, key, value, e)
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.seg
            .seg()
            .kvs()
            .get(key)
            .map(<[u8]>::to_vec)
            .or_else(|| self.overflow.get(key).cloned())
    }

    fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        // The segment's pairs, then those that did not fit it (a key is in
        // one or the other: a put that fits the table leaves the overflow).
        let seg = self.seg.seg();
        let mut all: Vec<(Vec<u8>, Vec<u8>)> = seg
            .kvs()
            .entries()
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect();
        all.extend(
            self.overflow
                .iter()
                .filter(|(k, _)| seg.kvs().get(k).is_none())
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        all
    }

    fn put_node_attr(&mut self, _rank: u32, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        match self.seg.seg().node_attrs().put(key, value, &SharedFutex) {
            Ok(_) => {
                self.overflow_attrs.remove(key);
                Ok(())
            }
            Err(e) if is_full(&e) => self.spill(true, key, value, e),
            Err(e) => Err(map_err(e)),
        }
    }

    fn rank_finalized(&self, rank: u32) -> bool {
        self.seg
            .seg()
            .rank(rank)
            .is_some_and(|r| r.phase() == Ok(shm_layout::RankPhase::Finalized))
    }

    fn rank_attached(&self, rank: u32) -> bool {
        use shm_layout::RankPhase;
        self.seg.seg().rank(rank).is_some_and(|r| {
            !matches!(
                r.phase(),
                Ok(RankPhase::NotStarted | RankPhase::Exited) | Err(_)
            )
        })
    }

    fn rank_progress(&self, rank: u32) -> Option<(u64, bool)> {
        let r = self.seg.seg().rank(rank)?;
        Some((
            r.stats().fences,
            r.phase() == Ok(shm_layout::RankPhase::InFence),
        ))
    }

    fn get_node_attr(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.seg
            .seg()
            .node_attrs()
            .get(key)
            .map(<[u8]>::to_vec)
            .or_else(|| self.overflow_attrs.get(key).cloned())
    }

    fn fence_arrive(&mut self, _rank: u32) -> Result<FenceTicket, StoreError> {
        if let Some(a) = self.seg.seg().abort_status() {
            return Err(StoreError::Aborted {
                code: a.code,
                rank: a.rank,
            });
        }
        let arrival = self.seg.seg().fence().arrive(&SharedFutex);
        Ok(FenceTicket {
            generation: arrival.generation as u64,
        })
    }

    fn fence_done(&self, ticket: FenceTicket) -> bool {
        self.seg.seg().fence().is_complete(Arrival {
            generation: ticket.generation as u32,
            last: false,
        })
    }

    fn fences_completed(&self) -> u64 {
        self.seg.seg().fence().generation() as u64
    }

    fn fence_arrivals(&self) -> u32 {
        self.seg.seg().fence().arrived()
    }

    fn record_death(&mut self, rank: u32, cause: shm_layout::DeathCause) {
        self.seg.seg().record_death(rank, cause, &SharedFutex);
    }

    fn record_death_elsewhere(&mut self, dead: &[u8]) {
        let seg = self.seg.seg();
        // The list first: a rank that sees the count grow finds it.
        if let Err(e) = seg.node_attrs().put(
            fastpmi_codec::names::attr::DEAD_ELSEWHERE.as_bytes(),
            dead,
            &SharedFutex,
        ) {
            // Its clients then ask the launcher (the count says more died).
            tracing::warn!("cannot list the dead of other node servers in the segment: {e}");
        }
        seg.job().count_death(&SharedFutex);
    }

    fn refine_death(&mut self, rank: u32, cause: shm_layout::DeathCause) {
        if let Some(st) = self.seg.seg().rank(rank) {
            st.refine_death(cause);
        }
    }

    fn abort(&mut self, code: i32, rank: u32) {
        self.seg.seg().abort(code, rank, &SharedFutex);
    }

    fn group_slots(&self) -> u32 {
        self.seg.seg().group_slots()
    }

    fn group_assign(&mut self, slot: u32, ctxid: u64, parties: u32) {
        if let Some(g) = self.seg.seg().group(slot) {
            g.assign(ctxid, parties);
        }
    }

    fn group_release(&mut self, slot: u32) {
        if let Some(g) = self.seg.seg().group(slot) {
            g.release();
        }
    }

    fn group_leave(&mut self, slot: u32) {
        if let Some(g) = self.seg.seg().group(slot) {
            g.leave(&SharedFutex);
        }
    }

    fn group_fail(&mut self, slot: u32, rank: u32) {
        if let Some(g) = self.seg.seg().group(slot) {
            g.fail(rank, &SharedFutex);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `entries` (kvs-getall) lists the segment's pairs and those that
    /// overflowed it, each key once, with its last value.
    #[test]
    fn entries_cover_the_segment_and_its_overflow() {
        // A tiny table: 1 MiB of KVS for 2 ranks fills after some puts.
        let params = shm_layout::SegmentParams::for_ranks(2).with_kvs_mb(1);
        let seg =
            JobSegment::create(fastpmi_segment::MemPool::AnonMmap, &params, "t").expect("segment");
        let mut st = ShmStore::new(Arc::new(seg));
        let value = vec![b'v'; 1000];
        let mut n = 0;
        while st.overflow.is_empty() {
            st.put(0, format!("k{n}").as_bytes(), &value).unwrap();
            n += 1;
            assert!(n < 100_000, "the segment never filled");
        }
        st.put(1, b"k0", b"new").unwrap();
        let mut got = st.entries();
        got.sort();
        let mut want: Vec<(Vec<u8>, Vec<u8>)> = (1..n)
            .map(|i| (format!("k{i}").into_bytes(), value.clone()))
            .chain([(b"k0".to_vec(), b"new".to_vec())])
            .collect();
        want.sort();
        assert_eq!(got.len(), want.len());
        assert_eq!(got, want);
    }
}
