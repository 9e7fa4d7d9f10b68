//! How ranks go and jobs fail: a connection that closes, a rank that
//! exits, a fence that a gone rank can never join, and [`Server::fail_job`],
//! which answers every waiting rank with an error and aborts the store.
//! Also the "what was the rank doing" text the failure messages carry.

use super::{reply, Activity, ConnId, Event, FailCause, JobIdx, Phase, RankSlot, ReplyTo, Server};
use crate::deaths::DeathCause;
use fastpmi_codec::{self, Response};

/// How long after a PMIx rank's clean exit its finalize may still be heard.
pub const PMIX_FINALIZE_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

impl Server {
    /// The peer closed `conn` (or the loop gave up on it).
    pub fn on_closed(&mut self, conn: ConnId, out: &mut Vec<Event>) {
        self.closed(conn, None, out);
    }

    /// `conn` is gone; `dropped` says why when the server itself closed it.
    pub(super) fn closed(&mut self, conn: ConnId, dropped: Option<&str>, out: &mut Vec<Event>) {
        let Some(c) = self.conns.remove(&conn) else {
            return;
        };
        self.forget_spawns_of(conn);
        self.forget_names_of(conn);
        self.forget_outer_gets(conn);
        self.forget_held(conn);
        self.continuing.remove(&conn);
        if c.oob {
            // A rank may close its channel: that fails nothing.
            self.oob_closed(conn, c.bound);
            return;
        }
        let Some((job, rank)) = c.bound else { return };
        self.sync_from_segment(job, rank);
        let j = &mut self.jobs[job];
        j.fence_waiters.retain(|(_, _, r)| r.conn != conn);
        j.attr_waiters.retain(|(_, _, r)| r.conn != conn);
        let shm = j.store.rank_progress(rank);
        let slot = &mut j.ranks[rank as usize];
        if slot.conn == Some(conn) {
            slot.conn = None;
        }
        if slot.phase == Phase::Initialized && j.failed.is_none() {
            let how = format!(
                "closed its PMI connection before finalize {}",
                activity_text(&j.ranks[rank as usize], shm)
            );
            let who = j.rank_label(job, rank);
            if self.rank_died(job, rank, DeathCause::ConnectionLost, &how, out) {
                return;
            }
            let lost = format!("{who} closed its PMI connection before finalize");
            if self.group_member_lost(job, rank, &lost, out) {
                return;
            }
            let j = &self.jobs[job];
            let slot = &j.ranks[rank as usize];
            let message = match dropped {
                Some(why) => format!(
                    "the launcher closed the PMI connection of {who} {} after a malformed message: {why}",
                    activity_text(slot, shm)
                ),
                None => format!(
                    "{who} closed its PMI connection before finalize {}",
                    activity_text(slot, shm)
                ),
            };
            out.push(Event::JobFailed {
                job,
                rank,
                cause: if dropped.is_some() {
                    FailCause::ProtocolError
                } else {
                    FailCause::ConnectionLost
                },
                message: message.clone(),
            });
            self.fail_job(job, Some(rank), 1, &message, out);
        }
    }

    /// The launcher reaped `rank`. `clean` = exit status 0. Returns nothing;
    /// a clean exit that still breaks the job is reported as `JobFailed`.
    pub fn rank_exited(&mut self, job: JobIdx, rank: u32, clean: bool, out: &mut Vec<Event>) {
        self.sync_from_segment(job, rank);
        let j = &mut self.jobs[job];
        let shm = j.store.rank_progress(rank);
        let who = j.rank_label(job, rank);
        let Some(slot) = j.ranks.get_mut(rank as usize) else {
            return;
        };
        slot.exited = true;
        if j.failed.is_some() || !clean {
            return;
        }
        if slot.phase == Phase::Initialized && slot.pmix {
            // The PMIx server may hear its finalize after the launcher read
            // its exit (a client under load stops waiting for the server's
            // answer): judged a moment later ([`Server::check_pmix_exits`]).
            self.pmix_exits
                .push((job, rank, std::time::Instant::now() + PMIX_FINALIZE_GRACE));
            return;
        }
        if slot.phase == Phase::Initialized {
            let message = format!(
                "{who} exited with status 0 before PMI finalize {}",
                activity_text(slot, shm)
            );
            self.fail_exited_early(job, rank, message, out);
            return;
        }
        self.check_stuck(job, out);
    }

    /// `rank` exited cleanly while its job needed it: fail the job (or,
    /// when group failures are tolerated, only its groups).
    fn fail_exited_early(&mut self, job: JobIdx, rank: u32, message: String, out: &mut Vec<Event>) {
        let label = self.jobs[job].rank_label(job, rank);
        let how = message
            .strip_prefix(&label)
            .unwrap_or(&message)
            .trim_start();
        if self.rank_died(job, rank, DeathCause::Exited(0), how, out) {
            return;
        }
        if self.group_member_lost(job, rank, &message, out) {
            return;
        }
        out.push(Event::JobFailed {
            job,
            rank,
            cause: FailCause::ExitedEarly,
            message: message.clone(),
        });
        self.fail_job(job, Some(rank), 1, &message, out);
    }

    /// Whether PMIx ranks that exited without a finalize are waiting for
    /// their finalize to be heard ([`Server::check_pmix_exits`]).
    pub fn has_pmix_exits(&self) -> bool {
        !self.pmix_exits.is_empty()
    }

    /// Whether the clean exit of PMIx rank `rank` of `job` waits for its
    /// finalize to be heard: until then the PMIx server must keep the
    /// client, whose finalize may still be on its way.
    pub fn pmix_exit_pending(&self, job: JobIdx, rank: u32) -> bool {
        self.pmix_exits
            .iter()
            .any(|&(j, r, _)| j == job && r == rank)
    }

    /// Fail the jobs of PMIx ranks that exited cleanly after `PMIx_Init`
    /// and whose `PMIx_Finalize` the PMIx server has not reported within
    /// [`PMIX_FINALIZE_GRACE`] of the exit.
    pub fn check_pmix_exits(&mut self, now: std::time::Instant, out: &mut Vec<Event>) {
        let due: Vec<(JobIdx, u32)> = self
            .pmix_exits
            .iter()
            .filter(|(_, _, at)| *at <= now)
            .map(|(j, r, _)| (*j, *r))
            .collect();
        self.pmix_exits.retain(|(_, _, at)| *at > now);
        for (job, rank) in due {
            let j = &self.jobs[job];
            let Some(slot) = j.ranks.get(rank as usize) else {
                continue;
            };
            if j.failed.is_some() || slot.phase != Phase::Initialized {
                continue;
            }
            let message = format!(
                "{} exited with status 0 before PMIx_Finalize",
                j.rank_label(job, rank)
            );
            self.fail_exited_early(job, rank, message, out);
        }
    }

    /// Take into `rank`'s slot what it recorded in the job segment: a rank
    /// of fastpmi's client attaches at init without a word on the socket
    /// (it opens the socket only when it needs the launcher), and finalizes
    /// there too; a `finalize` it did send may still be unread when it has
    /// exited (see `Store::rank_finalized`).
    pub(super) fn sync_from_segment(&mut self, job: JobIdx, rank: u32) {
        let j = &mut self.jobs[job];
        let attached = j.store.rank_attached(rank);
        let finalized = j.store.rank_finalized(rank);
        let Some(slot) = j.ranks.get_mut(rank as usize) else {
            return;
        };
        if slot.phase == Phase::Idle && attached {
            slot.set_phase(Phase::Initialized);
        }
        if slot.phase == Phase::Initialized && finalized {
            slot.set_phase(Phase::Finalized);
        }
    }

    /// True while some job could have a fence that can never complete and
    /// the event loop should call [`Server::check_stuck_all`] now and then.
    pub fn needs_stuck_check(&self) -> bool {
        self.jobs.iter().enumerate().any(|(job, j)| {
            j.failed.is_none()
                && !j.deaths.any()
                && j.ranks.iter().enumerate().any(|(r, s)| {
                    !j.deaths.is_dead(r as u32) && (gone(s) || self.is_lost_member(job, r as u32))
                })
        })
    }

    /// See [`Server::check_stuck`], for every job.
    pub fn check_stuck_all(&mut self, out: &mut Vec<Event>) {
        for job in 0..self.jobs.len() {
            self.check_stuck(job, out);
        }
    }

    /// Fail `job` if ranks wait in a fence (over the socket or in shared
    /// memory) that a finalized or PMI-less exited rank can never join.
    pub fn check_stuck(&mut self, job: JobIdx, out: &mut Vec<Event>) {
        let j = &self.jobs[job];
        // After a death the fence fails for everybody (its arrivals stay
        // counted): nobody waits in it.
        if j.failed.is_some() || j.store.fence_arrivals() == 0 || j.deaths.any() {
            return;
        }
        let Some((r, slot)) = j.ranks.iter().enumerate().find(|(r, s)| {
            !j.deaths.is_dead(*r as u32) && (gone(s) || self.is_lost_member(job, *r as u32))
        }) else {
            return;
        };
        let why = if slot.phase == Phase::Finalized {
            "finalized"
        } else if self.is_lost_member(job, r as u32) {
            "died (a tolerated group member failure)"
        } else {
            "exited without taking part in PMI"
        };
        let message = format!(
            "fence {} can never complete: {} {why}",
            j.store.fences_completed() + 1,
            j.rank_label(job, r as u32)
        );
        let rank = r as u32;
        out.push(Event::JobFailed {
            job,
            rank,
            cause: FailCause::ExitedEarly,
            message: message.clone(),
        });
        self.fail_job(job, Some(rank), 1, &message, out);
    }

    /// End `job`: every waiting rank gets an error reply now, and the store
    /// is marked aborted so shared-memory waiters wake up too.
    ///
    /// `rank` caused it (`None`: the launcher did, e.g. on Ctrl-C); `code` is
    /// the exit code the job ends with.
    pub fn fail_job(
        &mut self,
        job: JobIdx,
        rank: Option<u32>,
        code: i32,
        message: &str,
        out: &mut Vec<Event>,
    ) {
        let j = &mut self.jobs[job];
        if j.failed.is_some() {
            return;
        }
        j.store.abort(code, rank.unwrap_or(u32::MAX));
        tracing::debug!(job = %j.id, "job failed: {message}");
        j.failed = Some(message.to_string());
        j.at_failure = Some(j.ranks.iter().map(|s| s.activity.clone()).collect());
        let msg = format!("job aborted: {message}");
        let waiters: Vec<ReplyTo> = j
            .fence_waiters
            .drain(..)
            .map(|(_, _, r)| r)
            .chain(j.attr_waiters.drain(..).map(|(_, _, r)| r))
            .collect();
        for slot in &mut j.ranks {
            slot.set_activity(Activity::Running);
        }
        for r in waiters {
            reply(out, &r, &Response::error(msg.clone()), None);
        }
        // Ranks that asked to hear of it, before the launcher stops them.
        let notice = fastpmi_codec::oob::Notice::Abort {
            jobid: self.jobs[job].id.clone(),
            rank,
            exitcode: code,
            message: message.to_string(),
        };
        self.notify(job, &notice, out);
        self.groups_job_failed(job, &msg, out);
        self.fail_held(job, &msg, out);
    }

    /// What `rank` is doing, for failure messages ("during fence 3").
    pub fn rank_activity(&self, job: JobIdx, rank: u32) -> String {
        let j = &self.jobs[job];
        j.ranks
            .get(rank as usize)
            .map(|slot| activity_text(slot, j.store.rank_progress(rank)))
            .unwrap_or_default()
    }
}

/// A rank that can never arrive at another fence.
fn gone(slot: &RankSlot) -> bool {
    slot.phase == Phase::Finalized || (slot.phase == Phase::Idle && slot.exited)
}

/// What a rank is doing, from the server's view of its socket and, for a
/// shared-memory rank, the segment's word (`shm`: fences entered, in one now).
fn activity_text(slot: &RankSlot, shm: Option<(u64, bool)>) -> String {
    let (fences, in_fence) = match shm {
        Some((n, inside)) if n >= slot.fences => (n, inside),
        _ => (slot.fences, false),
    };
    match (&slot.activity, slot.phase) {
        (Activity::InFence(n), _) => format!("during fence {n}"),
        _ if in_fence && slot.phase != Phase::Finalized => format!("during fence {fences}"),
        (Activity::WaitingAttr(k), _) => {
            format!(
                "while waiting for node attribute {}",
                fastpmi_codec::show(k)
            )
        }
        (_, Phase::Idle) => "before PMI init".to_string(),
        (_, Phase::Finalized) => "after PMI finalize".to_string(),
        // The PMIx server counts a PMIx rank's fences, not fastpmi's.
        (_, Phase::Initialized) if slot.pmix => "after PMIx_Init".to_string(),
        (_, Phase::Initialized) if fences == 1 => "after 1 fence".to_string(),
        (_, Phase::Initialized) => format!("after {fences} fences"),
    }
}
