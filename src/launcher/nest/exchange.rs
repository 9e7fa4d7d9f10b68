//! The exchange thread of a node server (docs/nested.md, "The
//! exchange"): it sleeps until every rank of the node arrived at the
//! fence, trades the node's new pairs with the other node servers through
//! the outer job ([`super::trade`]), writes theirs into the segment and
//! arrives, releasing the ranks. In a fault-tolerant job, after a death,
//! it trades up to a last round the node servers agree on
//! ([`super::agreement`]), so that none is left waiting in the outer job.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fastpmi_client::Pmi;
use fastpmi_codec::names;
use fastpmi_segment::{JobSegment, SharedFutex};
use shm_layout::FenceError;

use super::agreement::Agreement;
use super::mesh::Teller;
use super::trade::{Pair, Trader};

/// Why a fence round across the node servers failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum RoundError {
    #[error(
        "the job segment is full and node servers trade only what is in it \
         (raise --kvs-mb)"
    )]
    Overflowed,
    #[error(transparent)]
    Trade(#[from] super::trade::TradeError),
    #[error("{key}: {source}")]
    Put {
        key: String,
        source: shm_layout::KvsError,
    },
}

/// How long the exchange thread sleeps before it looks at `stop` again.
const STOP_CHECK: Duration = Duration::from_millis(200);

/// How long a failed trade of a fault-tolerant job waits for the death
/// that explains it (an outer fastpmi fails the fence of a dead node
/// server at once; its mesh connection's end comes as fast).
const DEATH_EXPLAINS: Duration = Duration::from_secs(2);

/// The exchange thread's state.
pub(super) struct Exchange {
    pub(super) outer: Arc<Pmi>,
    pub(super) node: u32,
    pub(super) nodes: u32,
    pub(super) seg: Arc<JobSegment>,
    pub(super) failures: Arc<Mutex<Vec<String>>>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) waker: Arc<mio::Waker>,
    /// Fault-tolerant jobs: how the node servers agree on a last round.
    pub(super) ends: Option<(Teller, Arc<Agreement>)>,
    pub(super) in_round: Arc<AtomicBool>,
}

impl Exchange {
    pub(super) fn run(self) {
        // Every pair the segment and the other nodes agree on: what a round
        // need not send, or write, again.
        let mut known: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        let fence = self.seg.seg().fence();
        let mut round = 0u64;
        loop {
            match fence.wait_ranks(&SharedFutex, STOP_CHECK) {
                Ok(true) => {}
                Ok(false) if self.stop.load(Ordering::Relaxed) => return,
                Ok(false) => continue,
                Err(FenceError::RanksDied { .. }) => break,
                // The launcher aborted the job: nothing more to trade.
                Err(FenceError::Aborted(_)) => return,
            }
            round += 1;
            let whole = match self.traded(round, &mut known, false) {
                Ok(whole) => whole,
                Err(_) if self.death_explains() => break,
                Err(why) => {
                    // The ranks stay held: the launcher fails the job, which
                    // releases them with an error.
                    self.failures
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(format!("fence {round} across node servers failed: {why}"));
                    let _ = self.waker.wake();
                    return;
                }
            };
            if !whole || self.seg.seg().deaths() > 0 {
                // Another node's ranks did not all arrive, or this node's
                // fence broke meanwhile: this fence never completes (the
                // death, told by the mesh, releases the ranks with an
                // error).
                break;
            }
            fence.arrive(&SharedFutex);
        }
        self.end(round, &mut known);
    }

    /// One round, marked as waiting in the outer job while it runs.
    fn traded(
        &self,
        round: u64,
        known: &mut HashMap<Vec<u8>, Vec<u8>>,
        broken: bool,
    ) -> Result<bool, RoundError> {
        self.in_round.store(true, Ordering::Release);
        let r = self.round(round, known, broken);
        self.in_round.store(false, Ordering::Release);
        r
    }

    /// A trade failed: whether a death explains it (fault-tolerant jobs),
    /// so it is not a failure of the job.
    fn death_explains(&self) -> bool {
        if self.ends.is_none() {
            return false;
        }
        let by = std::time::Instant::now() + DEATH_EXPLAINS;
        matches!(
            self.seg.seg().wait_death(0, &SharedFutex, Some(by)),
            Ok(Some(_))
        )
    }

    /// A rank died after `done` rounds: no fence of the ranks completes
    /// again, but another node server may wait in the outer fence of round
    /// `done + 1` (its ranks all arrived before it heard). Every node
    /// server proposes `done + 1` as its last round, trades up to the
    /// highest proposed, then stops: none is left waiting in the outer
    /// job. The node servers' counts of rounds done differ by one at most,
    /// so the highest proposal covers every round begun. A node server
    /// gone (dead, or done) ends the trading at once: no outer fence can
    /// complete without it.
    fn end(&self, mut done: u64, known: &mut HashMap<Vec<u8>, Vec<u8>>) {
        let Some((teller, agreement)) = &self.ends else {
            return;
        };
        let mine = done + 1;
        teller.stop(mine);
        // Its own proposal first (another may wait in it), then up to the
        // highest of the others'.
        let mut last = mine;
        loop {
            while done < last {
                if agreement.any_gone() {
                    return;
                }
                done += 1;
                if let Err(why) = self.traded(done, known, true) {
                    tracing::debug!("last trade {done} across node servers: {why}");
                    return;
                }
            }
            match agreement.last_round(self.node, self.nodes, mine) {
                Some(l) if l > last => last = l,
                _ => return,
            }
        }
    }

    fn round(
        &self,
        round: u64,
        known: &mut HashMap<Vec<u8>, Vec<u8>>,
        broken: bool,
    ) -> Result<bool, RoundError> {
        let seg = self.seg.seg();
        let overflowed = seg
            .node_attrs()
            .get(names::attr::OVERFLOW.as_bytes())
            .is_some();
        if overflowed {
            return Err(RoundError::Overflowed);
        }
        let mine: Vec<Pair> = seg
            .kvs()
            .entries()
            .filter(|(k, v)| known.get(*k).map(Vec::as_slice) != Some(*v))
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect();
        for (k, v) in &mine {
            known.insert(k.clone(), v.clone());
        }
        let t = Trader {
            outer: &self.outer,
            node: self.node,
            nodes: self.nodes,
        };
        let (theirs, whole) = t.round(round, &mine, broken)?;
        for (k, v) in theirs {
            if known.get(&k) == Some(&v) {
                continue;
            }
            seg.kvs()
                .put(&k, &v, &SharedFutex)
                .map_err(|source| RoundError::Put {
                    key: fastpmi_codec::show(&k),
                    source,
                })?;
            known.insert(k, v);
        }
        Ok(whole)
    }
}
