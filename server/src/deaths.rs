//! Fault-tolerant jobs (`fastpmi --fault-tolerant`): a rank that dies ends
//! alone. Its death is recorded (in the job segment too, where ranks read
//! the dead set without a system call and their fence breaks), every rank
//! waiting in the job's fence over the socket gets an error naming the
//! dead, later fences fail at once, its groups fail (survivors build new
//! ones), and `PMI_dead_processes` lists it. A world abort still ends the
//! job ([`Server::fail_job`]).

use std::collections::BTreeMap;

use fastpmi_codec::ranks::ranges;
use fastpmi_codec::Response;
pub use shm_layout::DeathCause;

use crate::{reply, Activity, Event, JobIdx, ReplyTo, Server};

/// A job's fault-tolerance mode and its dead ranks.
#[derive(Debug, Default)]
pub(crate) struct JobDeaths {
    /// Deaths are events, not the end of the job.
    tolerant: bool,
    /// This node's dead, by their index here.
    dead: BTreeMap<u32, DeathCause>,
    /// Nested mode: the dead of the other node servers, by job rank.
    elsewhere: BTreeMap<u32, DeathCause>,
}

impl JobDeaths {
    /// Every dead rank by its rank in the job (`first`: the job's rank of
    /// this node's first), ascending.
    fn job_ranks(&self, first: u32) -> Vec<u32> {
        let mut all: Vec<u32> = self.dead.keys().map(|r| first + r).collect();
        all.extend(self.elsewhere.keys());
        all.sort_unstable();
        all
    }

    /// `PMI_dead_processes`: the dead ranks in Hydra's format; a miss while
    /// none died (an empty value is mishandled by clients).
    pub(crate) fn dead_processes(&self, first: u32) -> Option<Vec<u8>> {
        if !self.any() {
            return None;
        }
        Some(ranges(&self.job_ranks(first)).into_bytes())
    }

    pub(crate) fn is_dead(&self, rank: u32) -> bool {
        self.dead.contains_key(&rank)
    }

    /// How `rank` died, if it did.
    pub(crate) fn cause(&self, rank: u32) -> Option<DeathCause> {
        self.dead.get(&rank).copied()
    }

    /// Whether any rank died (here or, nested, elsewhere).
    pub(crate) fn any(&self) -> bool {
        !self.dead.is_empty() || !self.elsewhere.is_empty()
    }

    /// The error of a fence that dead ranks can never join, if any died.
    pub(crate) fn fence_error(&self, fence: u64, first: u32) -> Option<String> {
        if !self.any() {
            return None;
        }
        Some(format!(
            "fence {fence} can never complete: rank(s) {} died",
            ranges(&self.job_ranks(first))
        ))
    }
}

/// The exit status a death stands for (shell convention).
pub fn exit_status(cause: DeathCause) -> i32 {
    match cause {
        DeathCause::Exited(c) | DeathCause::Aborted(c) => c,
        DeathCause::Signaled(s) => 128 + s,
        DeathCause::ConnectionLost | DeathCause::NodeLost => 1,
    }
}

impl Server {
    /// Make `job` fault tolerant (before its ranks start): a death is an
    /// event ([`Server::rank_died`]), not the end of the job.
    pub fn set_fault_tolerant(&mut self, job: JobIdx, on: bool) {
        self.jobs[job].deaths.tolerant = on;
    }

    /// Whether `job` is fault tolerant.
    pub fn is_fault_tolerant(&self, job: JobIdx) -> bool {
        self.jobs[job].deaths.tolerant
    }

    /// The dead ranks of `job` with how each died, ascending.
    pub fn dead_ranks(&self, job: JobIdx) -> Vec<(u32, DeathCause)> {
        self.jobs[job]
            .deaths
            .dead
            .iter()
            .map(|(&r, &c)| (r, c))
            .collect()
    }

    /// How `rank` of `job` died, if it did.
    pub fn death_of(&self, job: JobIdx, rank: u32) -> Option<DeathCause> {
        self.jobs.get(job)?.deaths.cause(rank)
    }

    /// Whether `rank` of `job` is recorded dead.
    pub fn is_dead(&self, job: JobIdx, rank: u32) -> bool {
        self.jobs[job].deaths.is_dead(rank)
    }

    /// `rank` of `job` died of `cause` (`how`: the launcher's words for it,
    /// "was killed by signal 9 (SIGKILL) during fence 2"). In a
    /// fault-tolerant job that has not failed, the death is recorded and
    /// answered (see the module docs), [`Event::RankDied`] tells the
    /// launcher, and true is returned. Otherwise (not tolerant, the job
    /// failed already) nothing changes and false is returned: the caller
    /// fails the job as it always did. A rank recorded dead already stays
    /// as it was (true).
    pub fn rank_died(
        &mut self,
        job: JobIdx,
        rank: u32,
        cause: DeathCause,
        how: &str,
        out: &mut Vec<Event>,
    ) -> bool {
        let Some(j) = self.jobs.get_mut(job) else {
            return false;
        };
        if !j.deaths.tolerant || j.failed.is_some() || rank >= j.size {
            return false;
        }
        if j.deaths.is_dead(rank) {
            return true;
        }
        j.deaths.dead.insert(rank, cause);
        j.store.record_death(rank, cause);
        tracing::debug!(job = %j.id, rank, "rank died: {how}");
        // The dead rank's own waits end with it.
        j.fence_waiters.retain(|(r, _, _)| *r != rank);
        j.attr_waiters.retain(|(r, _, _)| *r != rank);
        j.ranks[rank as usize].set_activity(Activity::Running);
        self.fail_fence_waiters(job, out);
        let label = self.jobs[job].rank_label(job, rank);
        self.group_member_died(job, rank, &format!("{label} {how}"), out);
        let global = self.jobs[job].global_rank(rank);
        self.notify_death(job, global, cause, format!("{label} {how}"), out);
        out.push(Event::RankDied {
            job,
            rank,
            cause,
            message: format!("{label} {how}"),
        });
        true
    }

    /// Dead `rank` of `job`, recorded as having lost its connection, was
    /// reaped: `cause` says how it really ended. Returns whether it
    /// replaced the record (false: not dead, or dead of something else).
    pub fn refine_death(&mut self, job: JobIdx, rank: u32, cause: DeathCause) -> bool {
        let j = &mut self.jobs[job];
        match j.deaths.dead.get_mut(&rank) {
            Some(c @ DeathCause::ConnectionLost) => {
                *c = cause;
                j.store.refine_death(rank, cause);
                true
            }
            _ => false,
        }
    }

    /// The reply to a fence of `job` once ranks died: an error naming them.
    pub(crate) fn fence_after_deaths(&self, job: JobIdx) -> Option<Response> {
        let j = &self.jobs[job];
        j.deaths
            .fence_error(j.store.fences_completed() + 1, j.global_rank(0))
            .map(Response::error)
    }

    /// Every rank waiting in `job`'s fence over the socket gets the error
    /// naming the dead: it can never complete.
    fn fail_fence_waiters(&mut self, job: JobIdx, out: &mut Vec<Event>) {
        let Some(msg) = self.fence_after_deaths(job) else {
            return;
        };
        let j = &mut self.jobs[job];
        let waiters: Vec<(u32, ReplyTo)> = j
            .fence_waiters
            .drain(..)
            .map(|(r, _, to)| (r, to))
            .collect();
        for (r, to) in waiters {
            j.ranks[r as usize].set_activity(Activity::Running);
            reply(out, &to, &msg, None);
        }
    }

    /// Nested mode: `rank` of `job` (its rank in the job), which ran on
    /// another node server, died of `cause` (`how`: words for messages).
    /// Like [`Server::rank_died`] for this node's ranks: recorded (in the
    /// segment too, which breaks its fence), the fence's socket waiters
    /// answered, the out-of-band notice sent. A death heard again replaces
    /// a lost connection by its real cause. Returns false (nothing done)
    /// when the job is not fault tolerant, failed already, or `rank` is
    /// not another node's.
    pub fn rank_died_elsewhere(
        &mut self,
        job: JobIdx,
        rank: u32,
        cause: DeathCause,
        how: &str,
        out: &mut Vec<Event>,
    ) -> bool {
        let Some(j) = self.jobs.get_mut(job) else {
            return false;
        };
        let here = j.local_rank(rank.into()).is_some();
        if !j.deaths.tolerant || j.failed.is_some() || here || rank >= j.world_size() {
            return false;
        }
        if let Some(c) = j.deaths.elsewhere.get_mut(&rank) {
            if *c == DeathCause::ConnectionLost {
                *c = cause;
            }
            return true;
        }
        j.deaths.elsewhere.insert(rank, cause);
        let list: Vec<u32> = j.deaths.elsewhere.keys().copied().collect();
        j.store.record_death_elsewhere(ranges(&list).as_bytes());
        tracing::debug!(job = %j.id, rank, "rank died on another node server: {how}");
        self.fail_fence_waiters(job, out);
        let label = self.jobs[job].job_rank_label(job, rank);
        self.notify_death(job, rank, cause, format!("{label} {how}"), out);
        true
    }

    /// The out-of-band death notice of `rank` (its rank in `job`) to the
    /// ranks of `job` and of the jobs connected to it (its parent, the
    /// jobs it spawned) that opened the channel.
    fn notify_death(
        &mut self,
        job: JobIdx,
        rank: u32,
        cause: DeathCause,
        message: String,
        out: &mut Vec<Event>,
    ) {
        let notice = fastpmi_codec::oob::Notice::Died {
            jobid: self.jobs[job].id.clone(),
            rank,
            exitcode: exit_status(cause),
            message,
        };
        for j in self.connected_group(job) {
            self.notify(j, &notice, out);
        }
    }
}
