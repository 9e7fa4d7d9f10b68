//! The launcher's reactions that span its parts: carrying out what the
//! server core asked for ([`Launcher::apply_events`]), and the hooks that
//! hand one part's news to the others. With `mod.rs` (set-up and the event
//! loop), the only file with methods of [`Launcher`]: every other part
//! owns its state and is reached through its own methods.

use fastpmi_server::{Event, FailCause, JobIdx};
use mio::Token;

use super::pmix::dispatch::Reaction;
use super::pmix::register::Registration;
use super::tools::{self, Query, ReleaseError, ToolsRt, View};
use super::{nest, peer, pmix, starting, Launcher};

impl Launcher {
    /// The nested mode's hook (docs/nested.md): what its exchange thread
    /// could not do, or heard, fails the job; a failed job is reported to
    /// the outer server, which ends it on every node.
    pub(super) fn nest_tick(&mut self) {
        let Some(n) = &mut self.nest else { return };
        for why in n.tick(&mut self.server, &mut self.events) {
            if !self.procs.has_failure() {
                self.record_failure(0, 0, why.clone(), 1, String::new(), false);
                self.server.fail_job(0, None, 1, &why, &mut self.events);
                self.fail_group(0, 1, &why);
            }
        }
        if self.procs.interrupted().is_some() {
            return;
        }
        let Some(n) = self.nest.as_mut().filter(|n| n.wants_report()) else {
            return;
        };
        if let Some((msg, code)) = self.procs.settled_failure(nest::SETTLE) {
            // The outer launcher may end this one at once.
            self.procs.announce_failure();
            n.report_failure(code, &msg);
        }
    }

    /// Point each job's fence watcher at the fence its socket ranks wait
    /// in, starting a job's watchers when its socket ranks first wait for a
    /// fence or a node attribute.
    pub(super) fn update_watchers(&mut self) {
        for job in 0..self.jobs.len() {
            let gen = self.server.fence_wait_generation(job);
            if gen.is_some() || self.server.waits_for_attr(job) {
                if let Some(w) = self.jobs.watch(job, &self.waker) {
                    w.point_at(gen);
                }
            }
        }
        for (job, w) in self.jobs.fence_watchers() {
            if self.server.fence_wait_generation(job).is_none() {
                w.point_at(None);
            }
        }
    }

    /// Whether the socket of port-mode connection `tok` belongs to the
    /// process started as `rank` of `job` (or one of its descendants).
    pub(super) fn peer_is_rank(&self, tok: Token, job: JobIdx, rank: u32) -> bool {
        let Some(inode) = self.conns.peer_inode(tok) else {
            return false;
        };
        self.procs
            .running_rank(job, rank)
            .is_some_and(|p| peer::tree_holds_socket(p.pid, inode))
    }

    /// Answers of the shared name server, handed to the waiting ranks.
    pub(super) fn name_replies(&mut self) {
        let Some(n) = &self.names else { return };
        for (id, result) in n.replies() {
            self.server.name_reply(id, result, &mut self.events);
        }
    }

    /// Carry out what the server asked for.
    pub(super) fn apply_events(&mut self) {
        while !self.events.is_empty() {
            let batch = std::mem::take(&mut self.events);
            for ev in batch {
                match ev {
                    Event::Send { conn, bytes } => self.send(conn, &bytes),
                    Event::Close { conn } => {
                        if self.conns.close_when_flushed(Token(conn)) {
                            self.flush(Token(conn));
                        }
                    }
                    Event::JobFailed {
                        job,
                        rank,
                        cause,
                        message,
                    } => {
                        if self.procs.interrupted().is_some() {
                            continue;
                        }
                        let activity = self.server.rank_activity(job, rank);
                        let (code, prefer) = match cause {
                            FailCause::Abort { code } => (code, false),
                            FailCause::ConnectionLost | FailCause::ExitedEarly => (1, true),
                            FailCause::ProtocolError => (1, false),
                        };
                        self.record_failure(job, rank, message.clone(), code, activity, prefer);
                        self.fail_group(job, code, &message);
                    }
                    Event::Spawn { id, job, rank, req } => self.spawn_job(id, job, rank, req),
                    Event::CheckPeer { conn, job, rank } => {
                        // Its forker has not reported the pid yet: check
                        // once it has (`started`, `not_started`).
                        if self.starter.is_starting(job, rank) {
                            self.starter.check_when_started(conn, job, rank);
                            continue;
                        }
                        let ok = self.peer_is_rank(Token(conn), job, rank);
                        self.server.peer_checked(conn, ok, &mut self.events);
                        self.note_identified(Token(conn));
                    }
                    Event::Signal {
                        conn,
                        job,
                        rank,
                        signal,
                    } => self.oob_signal(conn, job, rank, signal),
                    Event::NameDone { token, result } => self.pmix_name_done(token, result),
                    Event::OuterGet { id, key } => match &self.nest {
                        Some(n) => n.outer_get(id, key, &mut self.server, &mut self.events),
                        None => self.server.outer_get_reply(
                            id,
                            Err(fastpmi_server::place::OuterGetFailed(
                                "not a node server".into(),
                            )),
                            &mut self.events,
                        ),
                    },
                    Event::RankDied {
                        job,
                        rank,
                        cause,
                        message,
                    } => self.on_rank_died(job, rank, cause, &message),
                    Event::Refuse { conn, reason } => {
                        crate::errln!("fastpmi: refused PMI connection {conn} from {reason}");
                    }
                    Event::Names { id, owner, op } => match &self.names {
                        Some(n) => n.send(id, owner, op),
                        None => self.server.name_reply(
                            id,
                            Err(fastpmi_server::NameError::Unavailable(
                                "no name server".into(),
                            )),
                            &mut self.events,
                        ),
                    },
                }
            }
        }
    }
}

// The tools (rendezvous, MPIR, reports, `--fence-timeout`).
impl Launcher {
    /// The tools' state, and what they read of the other parts.
    pub(super) fn tools_view(&mut self) -> (&mut ToolsRt, View<'_>) {
        let view = View {
            server: &self.server,
            jobs: &self.jobs,
            procs: &self.procs,
            starter: &self.starter,
            binding: &self.binding,
            cfg: &self.cfg,
        };
        (&mut self.tools, view)
    }

    /// Answer what the tools' connection threads asked.
    pub(super) fn serve_tool_queries(&mut self) {
        while let Some(q) = self.tools.next_query() {
            match q {
                Query::Info(tx) => {
                    let _ = tx.send(self.tools.launcher_info(&self.server, &self.jobs));
                }
                Query::Snapshot(tx) => {
                    let (tools, view) = self.tools_view();
                    let _ = tx.send(tools.snapshot_asked(view));
                }
                Query::Release(job, tx) => {
                    let _ = tx.send(self.release(job.as_deref()));
                }
                Query::Checkpoint(job, tx) => {
                    let (server, events) = (&mut self.server, &mut self.events);
                    let _ = tx.send(tools::checkpoint(
                        job.as_deref(),
                        server,
                        events,
                        &self.jobs,
                    ));
                }
            }
        }
        self.apply_events();
    }

    /// Release the ranks held in init, by the server and the PMIx host: of
    /// `job` (an id), or of every job (then later jobs are not held either).
    fn release(&mut self, job: Option<&str>) -> Result<usize, ReleaseError> {
        let mut n = 0;
        for j in self
            .tools
            .release_targets(job, &self.server, self.jobs.len())?
        {
            n += self.server.release_init(j, &mut self.events);
            self.pmix_release(j);
        }
        tracing::debug!("released {n} ranks held in init");
        Ok(n)
    }

    /// Ranks started: the MPIR proc table; the ranks of a job whose
    /// debugger continued go on (`--stop-in-init`).
    pub(super) fn tools_all_started(&mut self) {
        let stop = self.cfg.stop_in_init;
        while let Some(job) =
            self.tools
                .mpir_all_started(self.jobs.len(), &self.starter, &self.procs, stop)
        {
            let id = (job > 0).then(|| self.server.job_id(job).to_string());
            let _ = self.release(id.as_deref());
            self.apply_events();
        }
    }

    /// Once `ps` has asked: republish the snapshot it answers from.
    pub(super) fn tools_republish(&mut self) {
        let (tools, view) = self.tools_view();
        tools.republish(view);
    }

    /// SIGUSR1: the report of every running job on stderr.
    pub(super) fn print_report(&mut self) {
        let (tools, view) = self.tools_view();
        tools.print_report(view);
    }

    /// `--verbose`: the report of `job` at the moment it fails.
    pub(super) fn failure_detail(&mut self, job: JobIdx) -> Option<String> {
        let (tools, view) = self.tools_view();
        tools.failure_detail(job, view)
    }

    /// `--fence-timeout`: fail each job whose wait ran past it, one after
    /// the other (a failure ends the waits of the jobs connected to it).
    pub(super) fn check_fence_timeouts(&mut self) {
        let Some(due) = self.tools.fence_check_due(self.cfg.fence_timeout) else {
            return;
        };
        for job in 0..self.jobs.len() {
            let (tools, view) = self.tools_view();
            let Some(t) = tools.fence_timeout(job, due, view) else {
                continue;
            };
            // Recorded first: its `--verbose` report is taken now, before
            // the failure releases the ranks (which then end).
            self.record_failure(t.job, t.rank, t.message.clone(), 1, String::new(), false);
            self.server
                .fail_job(t.job, Some(t.rank), 1, &t.message, &mut self.events);
            self.fail_group(t.job, 1, &t.message);
            self.apply_events();
        }
    }
}

// The PMIx part (`pmix::PmixHost`): its upcalls' reactions, the other parts' news.
impl Launcher {
    /// What PMIx clients asked for since the last look, each served in
    /// turn (an abort fails its job, a spawn starts one, before the next).
    pub(super) fn pmix_upcalls(&mut self) {
        let Some(host) = &self.pmix else { return };
        for u in host.upcalls() {
            let Some(host) = &mut self.pmix else { break };
            let shared_names = self.names.is_some();
            let (server, events) = (&mut self.server, &mut self.events);
            match host.upcall(u, server, events, &self.procs, &self.jobs, shared_names) {
                Some(Reaction::Abort {
                    job,
                    rank,
                    code,
                    message,
                }) => {
                    self.record_failure(job, rank, message.clone(), code, String::new(), false);
                    self.server
                        .fail_job(job, Some(rank), code, &message, &mut self.events);
                    self.fail_group(job, code, &message);
                }
                Some(Reaction::Spawn(u)) => self.pmix_spawn(u),
                None => {}
            }
        }
        self.pmix_end_ranks_and_jobs();
        self.apply_events();
    }

    /// Register `job` with the PMIx server (started now if it is the
    /// first PMIx job), after publishing the topology it is given.
    pub(super) fn register_pmix_job(
        &mut self,
        job: JobIdx,
        apps: &[starting::AppPlan],
        universe: u32,
        parent: Option<(JobIdx, u32)>,
    ) -> std::io::Result<()> {
        let topology_xml = self
            .publish_topology()
            .and_then(|p| std::fs::read_to_string(p).ok());
        let held = self.tools.holding_new_jobs();
        let with = Registration {
            server: &self.server,
            binding: &self.binding,
            cfg: &self.cfg,
            waker: &self.waker,
            topology_xml,
            held,
        };
        pmix::PmixHost::register_job_in(&mut self.pmix, job, apps, universe, parent, with)
    }

    /// The environment of PMIx rank `rank` of `job`.
    pub(super) fn pmix_rank_env(
        &mut self,
        job: JobIdx,
        rank: u32,
    ) -> std::io::Result<Vec<(std::ffi::OsString, std::ffi::OsString)>> {
        let lib = self.cfg.pmix_lib.as_deref();
        let slot = &mut self.pmix;
        pmix::PmixHost::rank_env_in(slot, &mut self.server, job, rank, lib, &self.waker)
    }

    // The other parts' news, handed on while a PMIx server runs.

    pub(super) fn pmix_release(&self, job: JobIdx) {
        if let Some(host) = &self.pmix {
            host.release(&self.server, job);
        }
    }

    pub(super) fn pmix_notify_failure(&self, jobs: &[JobIdx]) {
        if let Some(host) = &self.pmix {
            host.notify_failure(jobs, &self.server, &self.procs);
        }
    }

    pub(super) fn pmix_rank_ended(&mut self, job: JobIdx, rank: u32) {
        if let Some(host) = &mut self.pmix {
            host.rank_ended(&self.server, job, rank);
        }
    }

    pub(super) fn pmix_job_ended(&mut self, job: JobIdx) {
        if let Some(host) = &mut self.pmix {
            host.job_ended(&self.server, job);
        }
    }

    pub(super) fn pmix_end_ranks_and_jobs(&mut self) {
        if let Some(host) = &mut self.pmix {
            host.end_ranks_and_jobs(&self.server);
        }
    }

    pub(super) fn pmix_name_done(&mut self, token: u64, result: fastpmi_server::NameResult) {
        if let Some(host) = &mut self.pmix {
            host.name_done(token, result);
        }
    }

    pub(super) fn pmix_retry_lookups(&mut self) {
        let Some(host) = &mut self.pmix else { return };
        if host.retry_lookups(&mut self.server, &mut self.events) {
            // With a shared name server the lookups are events to send
            // now: the loop would otherwise sleep on them.
            self.apply_events();
        }
    }

    pub(super) fn pmix_record_due(&mut self) {
        if let Some(host) = &mut self.pmix {
            host.record_due(&self.server, &self.procs);
        }
    }
}
