//! A job spanning several node servers (nested mode, docs/nested.md): this
//! launcher serves ranks `first..first + size` of a job of `total` ranks.
//! Inside the server a rank is its index on this node (the index of its
//! slot, its segment record and its launcher-side process); on the wire,
//! in messages and in reports it is the job's rank.

use std::collections::HashMap;

use fastpmi_codec::names::attr::NEST_KEY_PREFIX;
use fastpmi_codec::{Response, VALLEN_MAX};

use crate::{ConnId, Event, Job, JobIdx, ReplyTo, Server};

/// Why a get could not be asked of the outer job, as the launcher's
/// nested mode says it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OuterGetFailed(pub String);

/// Most gets one launcher waits on the outer job for at once; more are
/// answered "not found" at once.
pub const OUTER_GETS_MAX: usize = 4096;

/// Gets that missed here and wait for the outer job's answer.
#[derive(Debug, Default)]
pub(crate) struct OuterGets {
    next: u64,
    pending: HashMap<u64, (ReplyTo, Vec<u8>)>,
}

/// Where one node's ranks sit in a job spanning several node servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePlace {
    /// The job's rank of this node's first rank.
    pub first: u32,
    /// Ranks in the whole job.
    pub total: u32,
    /// The whole job's `PMI_process_mapping`.
    pub mapping: String,
}

impl Job {
    /// The job's rank of this node's rank `rank`.
    pub(crate) fn global_rank(&self, rank: u32) -> u32 {
        self.place.as_ref().map_or(rank, |p| p.first + rank)
    }

    /// This node's index of the job's rank `rank`, if it runs here.
    pub(crate) fn local_rank(&self, rank: i64) -> Option<u32> {
        let first = self.place.as_ref().map_or(0, |p| p.first);
        let i = rank.checked_sub(first.into())?;
        (0..i64::from(self.size)).contains(&i).then_some(i as u32)
    }

    /// Ranks in the whole job.
    pub(crate) fn world_size(&self) -> u32 {
        self.place.as_ref().map_or(self.size, |p| p.total)
    }

    /// The job's `PMI_process_mapping`.
    pub(crate) fn process_mapping(&self) -> String {
        match &self.place {
            Some(p) => p.mapping.clone(),
            None => fastpmi_codec::names::attr::single_node_mapping(self.size),
        }
    }

    /// How messages name this node's rank `rank`: "rank 3" in the first
    /// job, "rank 3 of job J" in a spawned one, by the job's rank.
    pub(crate) fn rank_label(&self, job: JobIdx, rank: u32) -> String {
        self.job_rank_label(job, self.global_rank(rank))
    }

    /// How messages name the job's rank `g` (of any node): "rank 3" in the
    /// first job, "rank 3 of job J" in a spawned one.
    pub(crate) fn job_rank_label(&self, job: JobIdx, g: u32) -> String {
        if job == 0 {
            format!("rank {g}")
        } else {
            format!("rank {g} of job {}", self.id)
        }
    }
}

impl Server {
    /// Nested mode: `job` is this node's part of a bigger job. Before any
    /// of its ranks starts.
    pub fn set_place(&mut self, job: JobIdx, place: NodePlace) {
        if let Some(j) = self.jobs.get_mut(job) {
            if place
                .first
                .checked_add(j.size)
                .is_some_and(|e| e <= place.total)
            {
                j.place = Some(place);
            }
        }
    }

    /// The job's rank of `job`'s local rank `rank` (for the launcher's
    /// messages and reports).
    pub fn global_rank(&self, job: JobIdx, rank: u32) -> u32 {
        self.jobs.get(job).map_or(rank, |j| j.global_rank(rank))
    }

    /// A get of `key` in `job` that missed here: whether it was handed to
    /// the outer job (nested mode, after the job's first fence; the node
    /// servers' own keys are never served).
    pub(crate) fn ask_outer(
        &mut self,
        job: JobIdx,
        to: &ReplyTo,
        key: &[u8],
        out: &mut Vec<Event>,
    ) -> bool {
        let j = &self.jobs[job];
        let asks = j.place.is_some()
            && j.store.fences_completed() > 0
            && !key.starts_with(NEST_KEY_PREFIX.as_bytes())
            && self.outer_gets.pending.len() < OUTER_GETS_MAX;
        if !asks {
            return false;
        }
        let g = &mut self.outer_gets;
        g.next += 1;
        g.pending.insert(g.next, (to.clone(), key.to_vec()));
        out.push(Event::OuterGet {
            id: g.next,
            key: key.to_vec(),
        });
        true
    }

    /// The outer job's answer to get `id` ([`Event::OuterGet`]): the value,
    /// none, or why it could not be asked.
    pub fn outer_get_reply(
        &mut self,
        id: u64,
        result: Result<Option<Vec<u8>>, OuterGetFailed>,
        out: &mut Vec<Event>,
    ) {
        let Some((to, key)) = self.outer_gets.pending.remove(&id) else {
            return;
        };
        let resp = match result {
            Ok(Some(v)) if v.len() > VALLEN_MAX => Response::error(format!(
                "the outer job's value of {} is {} bytes, more than {VALLEN_MAX}",
                fastpmi_codec::show(&key),
                v.len()
            )),
            Ok(value) => Response::Value { key, value },
            Err(why) => Response::error(format!("the outer PMI server: {why}")),
        };
        crate::reply(out, &to, &resp, None);
    }

    /// Drop the outer gets of a closed connection.
    pub(crate) fn forget_outer_gets(&mut self, conn: ConnId) {
        self.outer_gets.pending.retain(|_, (to, _)| to.conn != conn);
    }

    /// `job`'s node place, if it spans several node servers.
    pub fn place(&self, job: JobIdx) -> Option<&NodePlace> {
        self.jobs.get(job)?.place.as_ref()
    }
}
