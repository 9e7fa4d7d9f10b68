//! A client's life: its connection, finalize and abort (the `Client`
//! upcalls), the event that tells a job's clients a rank failed, and the
//! end of ranks and jobs. Each PMIx rank is deregistered from the library
//! when it has ended, each namespace when its job has: the library then
//! runs the epilogs its clients registered (Open MPI 5 registers its
//! shared-memory files in /dev/shm for removal) and forgets them, and the
//! job's session directory goes.

use std::time::{Duration, Instant};

use fastpmi_server::deaths::DeathCause;
use fastpmi_server::status::PmixStep;
use fastpmi_server::{Event, JobIdx, Server};
use pmix_host::ClientUpcall;

use super::dispatch::Reaction;
use super::host::PmixHost;
use crate::launcher::supervise::Procs;

/// How long a dead PMIx rank that connected waits, once reaped, for the
/// library to report its lost connection before it is deregistered anyway
/// (see `PmixHost::rank_ended`). The report comes within milliseconds
/// of the death (`pmix_host::Server::start` turns the library's event
/// window off), but not from a library that keeps its window
/// (`PMIX_MCA_pmix_event_caching_window`, 1 s by default) or does not
/// report losses: then the survivors hear of the death this much later,
/// rather than a whole-job fence waiting forever for the dead.
const LOST_CONNECTION_WAIT: Duration = Duration::from_secs(1);

impl PmixHost {
    /// Jobs `jobs` are being torn down: tell their PMIx clients which rank
    /// ended (the one that failed the launcher, when it is in them).
    pub(in crate::launcher) fn notify_failure(
        &self,
        jobs: &[JobIdx],
        server: &Server,
        procs: &Procs,
    ) {
        let Some((job, rank, code)) = procs.failed_rank() else {
            return;
        };
        if !jobs.contains(&job) || !server.is_pmix_job(job) {
            return;
        }
        let id = server.job_id(job).to_string();
        if let Err(e) = self.server.notify_terminated(&id, rank, code) {
            tracing::debug!("PMIx event for rank {rank} of {id}: {e}");
        }
    }

    /// Rank `rank` of fault-tolerant `job` died: the job's other PMIx
    /// clients get the event Open MPI's ULFM takes for it (see
    /// [`pmix_host::Server::notify_proc_failed`]).
    fn rank_died(&mut self, server: &Server, job: JobIdx, rank: u32, cause: DeathCause) {
        if !server.is_pmix_job(job) {
            return;
        }
        let (status, code) = match cause {
            DeathCause::Signaled(s) => (pmix_host::PMIX_ERR_PROC_ABORTED_BY_SIG, 128 + s),
            DeathCause::Aborted(c) => (pmix_host::PMIX_ERR_PROC_ABORTED, c),
            DeathCause::Exited(c) => (pmix_host::PMIX_ERR_PROC_TERM_WO_SYNC, c),
            DeathCause::ConnectionLost | DeathCause::NodeLost => {
                (pmix_host::PMIX_ERR_PROC_TERM_WO_SYNC, 1)
            }
        };
        let id = server.job_id(job).to_string();
        // Its parent and spawned jobs hear of it too.
        let others: Vec<String> = server
            .connected_group(job)
            .into_iter()
            .filter(|&j| j != job && server.is_pmix_job(j))
            .map(|j| server.job_id(j).to_string())
            .collect();
        let also: Vec<&str> = others.iter().map(String::as_str).collect();
        if let Err(e) = self
            .server
            .notify_proc_failed(&id, rank, status, code, &also)
        {
            tracing::debug!("PMIx event for the death of rank {rank} of {id}: {e}");
        }
        self.group_member_died(&id, rank);
    }

    /// A client's connection, finalize or abort: an abort that fails its
    /// job (unless the launcher was interrupted) is returned, for the
    /// launcher to record and carry out.
    pub(super) fn client(
        &mut self,
        u: ClientUpcall,
        server: &mut Server,
        events: &mut Vec<Event>,
        procs: &Procs,
    ) -> Option<Reaction> {
        match u {
            ClientUpcall::Abort {
                nspace,
                rank,
                status,
                message,
                only_self,
            } => {
                let job = server.job_index(&nspace)?;
                let name = server.rank_name(job, rank);
                let code = if status == 0 { 1 } else { status.clamp(1, 255) };
                // PMIx_Abort naming only itself: a fault-tolerant job goes
                // on without it.
                let how = match message.as_str() {
                    "" => format!("called PMIx_Abort of itself with status {status}"),
                    m => format!("called PMIx_Abort of itself with status {status}: {m}"),
                };
                if only_self && server.rank_died(job, rank, DeathCause::Aborted(code), &how, events)
                {
                    return None;
                }
                let message = if message.is_empty() {
                    format!("{name} called PMIx_Abort with status {status}")
                } else {
                    format!("{name} called PMIx_Abort with status {status}: {message}")
                };
                if procs.interrupted().is_none() {
                    return Some(Reaction::Abort {
                        job,
                        rank,
                        code,
                        message,
                    });
                }
            }
            ClientUpcall::Connected { nspace, rank } => {
                if let Some(job) = server.job_index(&nspace) {
                    server.pmix_rank(job, rank, PmixStep::Connected);
                }
            }
            ClientUpcall::Finalized { nspace, rank } => {
                if let Some(job) = server.job_index(&nspace) {
                    server.pmix_rank(job, rank, PmixStep::Finalized);
                }
            }
            // Noted as it came (`PmixHost::seen`): a dead rank already
            // reaped is deregistered by `end_ranks_and_jobs`, which
            // follows the upcalls.
            ClientUpcall::LostConnection { nspace, rank } => {
                tracing::debug!("PMIx client {rank} of {nspace} lost its connection");
            }
        }
        None
    }

    /// PMIx rank `rank` of `job` was reaped.
    ///
    /// A dead rank of a fault-tolerant job is deregistered once it is
    /// reaped and the library has let go of its connection (its lost
    /// connection reported; at once if it never connected or finalized;
    /// [`LOST_CONNECTION_WAIT`] after its reaping at the latest), and only
    /// then do the job's clients hear of its death
    /// ([`PmixHost::rank_died`]). OpenPMIx lowers the count of local
    /// processes a whole-job fence waits for only when it sees the
    /// client's connection close, not when its host deregisters the client
    /// first: deregistering at once left the survivors' finalize fence
    /// (Open MPI's `MPI_Finalize`) waiting for the dead forever in 6 of 10
    /// runs with three deaths at 64 ranks (`mpirun --with-ft ulfm` hangs
    /// the same way). And it leaves out of a group operation a member
    /// deregistered before the operation began, so the survivors' destruct
    /// after the death's event completes.
    pub(in crate::launcher) fn rank_ended(&mut self, server: &Server, job: JobIdx, rank: u32) {
        if !server.is_pmix_rank(job, rank) {
            return;
        }
        if server.is_dead(job, rank) {
            self.dead_ranks.push((job, rank, Instant::now()));
        } else {
            self.ended_ranks.push((job, rank));
        }
        self.end_ranks_and_jobs(server);
    }

    /// How long until a dead rank whose lost connection was not reported
    /// is deregistered anyway.
    pub(in crate::launcher) fn dead_tick(&self) -> Option<Duration> {
        self.dead_ranks
            .iter()
            .map(|(_, _, reaped)| {
                (*reaped + LOST_CONNECTION_WAIT).saturating_duration_since(Instant::now())
            })
            .min()
    }

    /// Every rank of `job` ended (or never started).
    pub(in crate::launcher) fn job_ended(&mut self, server: &Server, job: JobIdx) {
        if !server.is_pmix_job(job) {
            return;
        }
        self.ended_jobs.push(job);
        self.end_ranks_and_jobs(server);
    }

    /// Deregister the ended ranks whose exit is judged, then the ended
    /// jobs none of whose ranks is still registered.
    pub(in crate::launcher) fn end_ranks_and_jobs(&mut self, server: &Server) {
        let now = Instant::now();
        let seen = &self.seen;
        let (due, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut self.dead_ranks)
            .into_iter()
            .partition(|&(job, rank, reaped)| {
                seen.let_go(server.job_id(job), rank) || now >= reaped + LOST_CONNECTION_WAIT
            });
        self.dead_ranks = wait;
        for (job, rank, reaped) in due {
            let id = server.job_id(job);
            if !self.seen.let_go(id, rank) {
                tracing::debug!(
                    job,
                    rank,
                    "no lost connection reported within {LOST_CONNECTION_WAIT:?}"
                );
            }
            self.server.deregister_client(id, rank);
            self.seen.forget(id, rank);
            tracing::debug!(
                job,
                rank,
                "dead PMIx rank deregistered {:?} after it was reaped",
                reaped.elapsed()
            );
            if let Some(cause) = server.death_of(job, rank) {
                self.rank_died(server, job, rank, cause);
            }
        }
        let (host, seen) = (&self.server, &self.seen);
        self.ended_ranks.retain(|&(job, rank)| {
            if server.pmix_exit_pending(job, rank) {
                return true;
            }
            host.deregister_client(server.job_id(job), rank);
            seen.forget(server.job_id(job), rank);
            false
        });
        let ranks = &self.ended_ranks;
        let dead = &self.dead_ranks;
        let (done, wait): (Vec<JobIdx>, Vec<JobIdx>) = self.ended_jobs.iter().partition(|&&j| {
            !ranks.iter().any(|&(rj, _)| rj == j) && !dead.iter().any(|&(dj, _, _)| dj == j)
        });
        self.ended_jobs = wait;
        for job in done {
            let id = server.job_id(job).to_string();
            self.end_job(&id);
        }
    }

    /// How long until the PMIx ranks' shared files are recorded next.
    pub(super) fn record_tick(&self) -> Option<Duration> {
        let (at, _) = self.next_record.get()?;
        Some(at.saturating_duration_since(Instant::now()))
    }

    /// Record the shared files the running PMIx ranks map, when due, for
    /// the launch that follows a SIGKILL of this launcher
    /// ([`super::leftovers`]).
    pub(in crate::launcher) fn record_due(&mut self, server: &Server, procs: &Procs) {
        let Some((at, every)) = self.next_record.get() else {
            return;
        };
        let now = Instant::now();
        if now < at {
            return;
        }
        let pids: Vec<u32> = procs
            .all()
            .filter(|p| p.status.is_none() && server.is_pmix_rank(p.job, p.rank))
            .map(|p| p.pid)
            .collect();
        if pids.is_empty() {
            self.next_record.set(None);
            return;
        }
        self.recorder.record(&self.tmpdir, pids.into_iter());
        let every = (every * 2).min(super::host::LAST_RECORD_EVERY);
        self.next_record.set(Some((now + every, every)));
    }
}
