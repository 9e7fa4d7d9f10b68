//! Dead ranks of a fault-tolerant job (`fastpmi --fault-tolerant`): the dead
//! set, read straight from the job segment (no system call) or asked of the
//! launcher as `PMI_dead_processes`; a wait for the next death; the error
//! a fence returns once a rank died.

use std::time::{Duration, Instant};

use fastpmi_codec::names::attr;
use fastpmi_codec::ranks::{parse_ranges, ranges};
use fastpmi_codec::Request;
use fastpmi_segment::SharedFutex;
use shm_layout::FenceError;

use crate::{aborted, Pmi, PmiError};

/// How often a socket client asks the launcher for the dead set while it
/// waits for a death (shared-memory clients sleep on the segment instead).
const SOCKET_POLL: Duration = Duration::from_millis(20);

impl Pmi {
    /// The job's dead ranks, ascending (empty while every rank lives, and
    /// always outside fault-tolerant jobs: there a death ends the job).
    /// It holds at least the deaths [`Pmi::deaths`] counted before, and
    /// may hold one being recorded that it did not count yet: ranks that
    /// must agree on a view read both until the count matches the list.
    pub fn dead_ranks(&self) -> Result<Vec<u32>, PmiError> {
        self.live()?;
        if let Some(shm) = self.shm() {
            let seg = shm.seg.seg();
            // The count first: what it counts is written before it.
            let count = seg.deaths() as usize;
            let first = seg.first_rank();
            let mut dead: Vec<u32> = seg.dead_ranks().map(|(r, _)| first + r).collect();
            if dead.len() < count {
                // Nested mode: the other node servers' dead, as listed here.
                if let Some(v) = seg.node_attrs().get(attr::DEAD_ELSEWHERE.as_bytes()) {
                    let list = String::from_utf8_lossy(v);
                    dead.extend(parse_ranges(&list, self.size() as usize).unwrap_or_default());
                    dead.sort_unstable();
                    dead.dedup();
                }
            }
            if dead.len() >= count {
                return Ok(dead);
            }
            // The list could not be written in the segment: the launcher
            // knows (asked directly: the job attribute reads this).
            let req = Request::GetJobAttr {
                key: attr::DEAD_PROCESSES.as_bytes().to_vec(),
            };
            let m = self.wire(&req, req.response())?;
            return match crate::found_value(&m) {
                Some(v) => self.parse_dead(&v),
                None => Ok(Vec::new()),
            };
        }
        match self.job_attr(attr::DEAD_PROCESSES)? {
            Some(v) => self.parse_dead(&v),
            None => Ok(Vec::new()),
        }
    }

    fn parse_dead(&self, v: &[u8]) -> Result<Vec<u32>, PmiError> {
        let list = String::from_utf8_lossy(v);
        parse_ranges(&list, self.size() as usize).ok_or_else(|| {
            PmiError::Protocol(format!("malformed {}: {list}", attr::DEAD_PROCESSES))
        })
    }

    /// `PMI_dead_processes` in Hydra's format (`1-2,7`) from the segment:
    /// `None` without one; within, a miss while nobody died, as the
    /// launcher answers it (clients mishandle an empty value).
    pub(crate) fn segment_dead_processes(&self) -> Option<Option<Vec<u8>>> {
        self.shm()?;
        let dead = self.dead_ranks().ok()?;
        Some((!dead.is_empty()).then(|| ranges(&dead).into_bytes()))
    }

    /// Deaths known so far.
    pub fn deaths(&self) -> Result<u32, PmiError> {
        match self.shm() {
            Some(shm) => Ok(shm.seg.seg().deaths()),
            None => Ok(self.dead_ranks()?.len() as u32),
        }
    }

    /// Waits until more than `seen` ranks died ([`Pmi::deaths`] counts
    /// them): `Ok(Some(count))`, or `Ok(None)` when `timeout` passed first.
    /// On shared memory it sleeps on the segment's death counter; on the
    /// socket it asks the launcher every 20 ms. Returns an error when the
    /// job is aborted.
    pub fn wait_for_death(
        &self,
        seen: u32,
        timeout: Option<Duration>,
    ) -> Result<Option<u32>, PmiError> {
        self.live()?;
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        if let Some(shm) = self.shm() {
            return shm
                .seg
                .seg()
                .wait_death(seen, &SharedFutex, deadline)
                .map_err(aborted);
        }
        loop {
            let n = self.deaths()?;
            if n > seen {
                return Ok(Some(n));
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left == Some(Duration::ZERO) {
                return Ok(None);
            }
            std::thread::sleep(left.map_or(SOCKET_POLL, |l| l.min(SOCKET_POLL)));
        }
    }

    /// The error of a shared-memory fence that gave up.
    pub(crate) fn fence_error(&self, e: FenceError) -> PmiError {
        match e {
            FenceError::Aborted(a) => aborted(a),
            FenceError::RanksDied { .. } => {
                let ranks = self.dead_ranks().unwrap_or_default();
                PmiError::RanksDied {
                    message: format!(
                        "the fence can never complete: rank(s) {} died",
                        ranges(&ranks)
                    ),
                    ranks,
                }
            }
        }
    }
}
