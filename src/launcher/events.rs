//! The launcher's reactions that span its parts: carrying out what the
//! server core asked for ([`Launcher::apply_events`]), and the hooks that
//! hand one part's news to the others. With `mod.rs` (set-up and the event
//! loop), the only file with methods of [`Launcher`]: every other part
//! owns its state and is reached through its own methods.

use std::io;
use std::process::ExitStatus;

use fastpmi_codec::spawn::SpawnRequest;
use fastpmi_server::deaths::DeathCause;
use fastpmi_server::{Event, FailCause, JobIdx, SpawnOutcome};
use mio::Token;
use rustix::process::Signal;
use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGTERM, SIGUSR1};

use super::jobs::create::{self as jobs, SpawnedBy};
use super::pmix::dispatch::Reaction;
use super::pmix::register::Registration;
use super::spawn::{self, PmixAnswer};
use super::starting::{AppPlan, Arrival, Fork, PendingRank};
use super::supervise::{self, Failure};
use super::tools::{self, ToolsRt, View};
use super::{nest, os, pmix, starting, Launcher};

impl Launcher {
    /// The nested mode's hook (docs/nested.md): what its exchange thread
    /// could not do, or heard, fails the job; a failed job is reported to
    /// the outer server, which ends it on every node.
    pub(super) fn nest_tick(&mut self) {
        let Some(n) = &mut self.nest else { return };
        for why in n.tick(&mut self.server, &mut self.events) {
            if !self.procs.has_failure() {
                self.fail(0, 0, None, 1, &why);
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

    /// Carry out what the server asked for.
    pub(super) fn apply_events(&mut self) {
        while !self.events.is_empty() {
            let batch = std::mem::take(&mut self.events);
            for ev in batch {
                match ev {
                    Event::Send { conn, bytes } => {
                        self.conns
                            .send(&mut self.server, &mut self.events, conn, &bytes)
                    }
                    Event::Close { conn } => {
                        if self.conns.close_when_flushed(Token(conn)) {
                            self.conns
                                .flush(&mut self.server, &mut self.events, Token(conn));
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
                        let claimed = self.procs.running_rank(job, rank);
                        self.conns
                            .check_peer(&mut self.server, &mut self.events, conn, claimed);
                    }
                    Event::Signal {
                        conn,
                        job,
                        rank,
                        signal,
                    } => self.conns.oob_signal(
                        &mut self.server,
                        &mut self.events,
                        conn,
                        self.procs.running_rank(job, rank),
                        signal,
                    ),
                    Event::NameDone { token, result } => {
                        if let Some(host) = &mut self.pmix {
                            host.name_done(token, result);
                        }
                    }
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

    /// What answering the tools reaches of the other parts.
    fn served(&mut self) -> (&mut ToolsRt, tools::queries::Served<'_>) {
        let served = tools::queries::Served {
            server: &mut self.server,
            events: &mut self.events,
            jobs: &self.jobs,
            procs: &self.procs,
            starter: &self.starter,
            binding: &self.binding,
            cfg: &self.cfg,
            pmix: self.pmix.as_ref(),
        };
        (&mut self.tools, served)
    }

    /// Answer what the tools' connection threads asked.
    pub(super) fn serve_tool_queries(&mut self) {
        let (tools, mut served) = self.served();
        tools.serve_queries(&mut served);
        self.apply_events();
    }

    /// Ranks started: the MPIR proc table, and the jobs the debugger let go.
    pub(super) fn tools_all_started(&mut self) {
        loop {
            let (tools, mut served) = self.served();
            if !tools.all_started(&mut served) {
                break;
            }
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
            self.fail(t.job, t.rank, Some(t.rank), 1, &t.message);
            self.apply_events();
        }
    }
}

// Deaths in fault-tolerant jobs (`deaths`).
impl Launcher {
    /// A rank of a fault-tolerant job died; the job goes on, the other
    /// node servers hear of it.
    fn on_rank_died(&mut self, job: JobIdx, rank: u32, cause: DeathCause, message: &str) {
        self.deaths
            .on_rank_died(&self.procs, job, rank, cause, message);
        if let Some(n) = &self.nest {
            n.tell_death(job, rank, cause);
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
                    self.fail(job, rank, Some(rank), code, &message);
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

    pub(super) fn pmix_end_ranks_and_jobs(&mut self) {
        if let Some(host) = &mut self.pmix {
            host.end_ranks_and_jobs(&self.server);
        }
    }
}

// Supervision: reaping, failures, signals, teardown (`supervise::Procs`).
impl Launcher {
    pub(super) fn on_signals(&mut self) {
        let pending: Vec<i32> = self.signals.pending().collect();
        for sig in pending {
            match sig {
                SIGCHLD => self.reap(),
                SIGUSR1 => self.print_report(),
                SIGINT | SIGTERM | SIGHUP => {
                    let (forward, why) = self.procs.interrupt(sig);
                    for job in 0..self.jobs.len() {
                        self.server
                            .fail_job(job, None, 128 + sig, &why, &mut self.events);
                    }
                    self.begin_teardown(forward);
                }
                _ => {}
            }
        }
        // Signals coalesce; reap anyway so no exit is missed.
        self.reap();
    }

    fn reap(&mut self) {
        // What PMIx ranks told the server before they exited (finalize,
        // abort) comes first: the exit may be read before its upcall.
        self.pmix_upcalls();
        for (pid, status) in os::reap() {
            super::timeline::step("rank reaped");
            match self.procs.index_of(pid) {
                Some(i) => self.rank_ended(i, status),
                // A rank whose forker has not reported it yet (or no rank).
                None => self.starter.exited_early(pid, status),
            }
        }
        self.apply_events();
    }

    /// Rank process `i` ended with `status`.
    pub(super) fn rank_ended(&mut self, i: usize, status: ExitStatus) {
        let Some(end) = self.procs.ended(i, status) else {
            return;
        };
        let (job, rank) = (end.job, end.rank);
        // What it sent before it exited (an abort, a finalize) is read
        // before its exit is judged: SIGCHLD may come first.
        if let Some(conn) = self.server.rank_conn(job, rank) {
            let mut buf = Vec::with_capacity(16 * 1024);
            self.read_conn(Token(conn), &mut buf);
        }
        let nest = &self.nest;
        let tell = |cause| {
            if let Some(n) = nest {
                n.tell_death(job, rank, cause);
            }
        };
        // A fault-tolerant job goes on without a dead rank.
        if !self
            .deaths
            .ended_as_death(&mut self.server, &mut self.events, &end, tell)
        {
            if let Some(f) = self.procs.judge(&mut self.server, &mut self.events, &end) {
                self.record_failure(job, rank, f.message.clone(), f.code, f.activity, false);
                if !self.jobs.torn_down(job) {
                    self.server
                        .fail_job(job, Some(rank), f.code, &f.message, &mut self.events);
                    self.fail_group(job, f.code, &f.message);
                }
            }
        }
        self.server
            .rank_exited(job, rank, status.success(), &mut self.events);
        if let Some(host) = &mut self.pmix {
            host.rank_ended(&self.server, job, rank);
        }
        self.rank_gone(job);
    }

    /// `job` failed of `message` (blaming `rank`; the server is told
    /// `blamed`): the launcher's failure recorded first (its `--verbose`
    /// report is taken before the ranks are released), then the job and
    /// every job connected to it fail.
    fn fail(&mut self, job: JobIdx, rank: u32, blamed: Option<u32>, code: i32, message: &str) {
        self.record_failure(job, rank, message.to_string(), code, String::new(), false);
        self.server
            .fail_job(job, blamed, code, message, &mut self.events);
        self.fail_group(job, code, message);
    }

    fn record_failure(
        &mut self,
        job: JobIdx,
        rank: u32,
        message: String,
        code: i32,
        activity: String,
        prefer_status: bool,
    ) {
        if !self.procs.has_failure() {
            let detail = self.failure_detail(job);
            self.procs.record(Failure::new(
                job,
                rank,
                message,
                code,
                activity,
                prefer_status,
                detail,
            ));
        }
    }

    /// `job` failed: fail every job connected to it too and stop their ranks.
    fn fail_group(&mut self, job: JobIdx, code: i32, message: &str) {
        let group =
            supervise::fail_connected(&mut self.server, &mut self.events, job, code, message);
        self.teardown_jobs(&group, Signal::TERM);
    }

    /// Send `sig` to the running ranks of `jobs`, drop their ranks not
    /// started yet, and arm the SIGKILL deadline.
    fn teardown_jobs(&mut self, jobs: &[JobIdx], sig: Signal) {
        // PMIx clients hear which rank ended first (their handlers run).
        if let Some(host) = &self.pmix {
            host.notify_failure(jobs, &self.server, &self.procs);
        }
        for &j in jobs {
            self.jobs.tear_down(j);
        }
        for j in self.starter.drop_pending(|j| jobs.contains(&j)) {
            self.rank_gone(j);
        }
        self.procs.signal(|j| jobs.contains(&j), sig);
    }

    /// A rank of `job` was reaped or will never start. When it was the
    /// last, the job has ended: its watchers stop, its segment goes, its
    /// binding slots and its port are given back.
    pub(super) fn rank_gone(&mut self, job: JobIdx) {
        if !self.jobs.rank_gone(job) {
            return;
        }
        self.binding.release(job);
        self.conns.unlisten(job);
        if let Some(host) = &mut self.pmix {
            host.job_ended(&self.server, job);
        }
        tracing::debug!(job = %self.server.job_id(job), "job ended");
    }

    /// Send `sig` to every running rank and arm the SIGKILL deadline.
    pub(super) fn begin_teardown(&mut self, sig: Signal) {
        self.jobs.tear_down_all();
        for j in self.starter.drop_pending(|_| true) {
            self.rank_gone(j);
        }
        self.procs.signal(|_| true, sig);
    }
}

// Spawn: a spawn request made a job (`spawn`).
impl Launcher {
    fn spawn_job(&mut self, id: u64, parent: JobIdx, rank: u32, req: SpawnRequest) {
        let mut errors = Vec::new();
        let (outcome, job) = self.try_spawn(parent, rank, &req, false, &mut errors);
        spawn::say_errors(&self.server.rank_name(parent, rank), &outcome, &errors);
        match job {
            Some(job) => self.starter.answer_when_started(id, job, outcome),
            None => self.server.finish_spawn(id, outcome, &mut self.events),
        }
    }

    /// Answer the spawns whose children have all been started (forked and
    /// exec'd, or failed to start), as Hydra answers once its proxies have
    /// launched. Until then the spawning rank sleeps in its read; answered
    /// at once, an MPI parent busy-polls its progress engine against the
    /// very children it waits for (8% of a 64-child spawn's wall time here,
    /// measured in docs/dynamic-jobs.md).
    pub(super) fn answer_started_spawns(&mut self) {
        for (id, outcome) in self.starter.started_spawns() {
            self.server.finish_spawn(id, outcome, &mut self.events);
        }
        self.apply_events();
    }

    /// `PMIx_Spawn` (see [`spawn::pmix_request`]), answered with the new
    /// namespace once it is registered.
    pub(in crate::launcher) fn pmix_spawn(&mut self, u: pmix_host::SpawnUpcall) {
        let pmix_host::SpawnUpcall {
            nspace,
            rank,
            apps,
            done,
        } = u;
        let asked = spawn::pmix_request(&self.server, &nspace, rank, apps);
        let Some((parent, req, by)) = asked else {
            done.complete(None);
            return;
        };
        let mut errors = Vec::new();
        let (outcome, _) = self.try_spawn(parent, rank, &req, true, &mut errors);
        match spawn::pmix_answer(&by, outcome, &errors) {
            PmixAnswer::Started(jobid) => done.complete(Some(&jobid)),
            PmixAnswer::Abandon(jobid) => {
                if let Some(j) = self.server.job_index(&jobid) {
                    self.abandon_job(j);
                }
                done.complete(None)
            }
            PmixAnswer::Failed => done.complete(None),
        }
    }

    fn try_spawn(
        &mut self,
        parent: JobIdx,
        rank: u32,
        req: &SpawnRequest,
        pmix: bool,
        errors: &mut Vec<String>,
    ) -> (SpawnOutcome, Option<JobIdx>) {
        let failed = |msg: String| (SpawnOutcome::Failed(msg), None);
        let at = spawn::SpawnCtx {
            server: &self.server,
            cfg: &self.cfg,
            procs: &self.procs,
            jobs: &self.jobs,
            starter: &self.starter,
            pmix_serves: self.pmix.is_some(),
        };
        let mut new = match spawn::plan_job(&at, parent, rank, req, pmix, errors) {
            Ok(new) => new,
            Err(e) => return failed(e.to_string()),
        };
        let plans = std::mem::take(&mut new.plans);
        let job = match self.create_job(new.jobid.clone(), plans, new.universe, Some(new.by)) {
            Ok(j) => j,
            Err(e) => return failed(format!("cannot create the job: {e}")),
        };
        match spawn::fill_job(&mut self.server, job, req, new) {
            Ok(outcome) => (outcome, Some(job)),
            Err(e) => {
                self.abandon_job(job);
                failed(e.to_string())
            }
        }
    }

    /// A job made for a spawn that cannot go on: drop its ranks unstarted.
    fn abandon_job(&mut self, job: JobIdx) {
        let msg = "spawn abandoned";
        self.server.fail_job(job, None, 1, msg, &mut self.events);
        for j in self.starter.drop_pending(|j| j == job) {
            self.rank_gone(j);
        }
    }
}

// Conns: PMI connections.
impl Launcher {
    /// Hand what `tok` has to the server, up to the read budget.
    pub(super) fn read_conn(&mut self, tok: Token, buf: &mut Vec<u8>) {
        self.conns
            .read_conn(&mut self.server, &mut self.events, tok, buf);
    }
}

// Starter: ranks on their way.
impl Launcher {
    /// Hand queued ranks to the forkers while one is free. The event loop
    /// calls this between polls, so early ranks are served while later ones
    /// are still being created.
    pub(super) fn spawn_next(&mut self) {
        while let Some(p) = self.starter.next() {
            self.tools.touched();
            if self.jobs.torn_down(p.job) || self.procs.interrupted().is_some() {
                self.rank_gone(p.job);
                continue;
            }
            let mut fork = Fork {
                server: &mut self.server,
                conns: &mut self.conns,
                binding: &self.binding,
                knobs: &self.cfg.knobs,
                job: self.jobs.view(p.job),
            };
            if let Err((p, e)) = self.starter.start(p, &mut fork) {
                self.not_started(p, e);
            }
        }
    }

    /// Take in what the forkers report: started ranks are supervised,
    /// failed ones fail their job.
    pub(super) fn forks_done(&mut self) {
        let mut any = false;
        while let Some((p, result)) = self.starter.finished() {
            any = true;
            let s = match result {
                Ok(s) => s,
                Err(e) => {
                    self.not_started(p, e);
                    continue;
                }
            };
            let mut arrival = Arrival {
                server: &mut self.server,
                events: &mut self.events,
                conns: &mut self.conns,
                procs: &mut self.procs,
                output: &mut self.output,
                registry: self.poll.registry(),
                job: self.jobs.view(p.job),
            };
            if let Some((i, status)) = self.starter.started(p, s, &mut arrival) {
                self.rank_ended(i, status);
            }
        }
        if any {
            if self.starter.is_idle() {
                tracing::debug!("all ranks started");
            }
            self.tools_all_started();
            self.apply_events();
        }
    }

    /// Rank `p` could not be started: its job fails.
    fn not_started(&mut self, p: PendingRank, e: io::Error) {
        let (job, rank) = (p.job, p.rank);
        let message = self.starter.not_started(
            p,
            e,
            &mut self.conns,
            &mut self.server,
            &mut self.events,
            &self.procs,
        );
        self.rank_gone(job);
        self.fail(job, rank, Some(rank), 127, &message);
    }
}

// Jobs: creating jobs.
impl Launcher {
    /// Create a job (first or spawned) and queue its ranks. `apps` may hold
    /// applications of 0 ranks (a spawn command that failed keeps its appnum).
    pub(super) fn create_job(
        &mut self,
        id: String,
        apps: Vec<AppPlan>,
        universe_size: u32,
        spawned_by: Option<SpawnedBy>,
    ) -> io::Result<JobIdx> {
        let held = self.tools.holding_new_jobs();
        let entry = jobs::Entry {
            cfg: &self.cfg,
            server: &mut self.server,
            nest: self.nest.as_mut(),
            waker: &self.waker,
        };
        let mut new = self
            .jobs
            .create(entry, id, &apps, universe_size, spawned_by, held)?;
        let job = new.job;
        self.tools.job_created(job, &mut self.server);
        self.jobs.settle(&mut new, &mut self.binding, &self.cfg);
        // Before its ranks are registered (each gets its environment), with
        // their binding.
        if apps.iter().any(|a| a.pmix && a.nranks > 0) {
            let parent = spawned_by.map(|s| (s.job, s.rank));
            self.register_pmix_job(job, &apps, universe_size, parent)?;
        }
        new.open(&mut self.conns, &mut self.server, &self.cfg, &self.binding)?;
        for (appnum, app) in apps.into_iter().enumerate() {
            let app = new.app(appnum, app, &mut self.singletons);
            for rank in app.ranks() {
                let mut env = Vec::with_capacity(8);
                if app.pmix() {
                    // PMIx's environment only: one personality per rank.
                    env = self.pmix_rank_env(job, rank)?;
                }
                self.starter.queue(new.rank(&app, rank, env));
            }
        }
        Ok(new.queued())
    }
}
