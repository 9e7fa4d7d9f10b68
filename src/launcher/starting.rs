//! Starting ranks: handed to the forker threads a few at a time from the
//! event loop, so early ranks are served while later ones are still being
//! created. [`Starter`] owns the ranks on their way: queued, being created,
//! and what waits for them (identity checks, early exits, spawn answers).

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::{Arc, OnceLock};

use mio::net::UnixStream;
use mio::Registry;

use super::binding::Binding;
use super::conn::{stream_nonblocking, Conns, Sock};
use super::os;
use super::output::Output;
use super::supervise::{Procs, RankProc};
use crate::config::Knobs;
use fastpmi_codec::names;
use fastpmi_segment::JobSegment;
use fastpmi_server::{ConnId, Event, JobIdx, Server, SpawnOutcome};

/// Descriptor number of the PMI socket inside every rank.
pub(super) const PMI_FD_IN_RANK: i32 = 3;
/// Descriptor number of the job segment's memfd inside every rank
/// (advertised as the node attribute `memAnonMMAPfd`).
pub(super) const SEGMENT_FD_IN_RANK: i32 = 4;
/// Descriptor number of the parent job's memfd in a spawned job's ranks
/// (node attribute `fastpmi-parentSegment` = `fd:5`): fastpmi's clients
/// read the parent's KVS from it.
pub(super) const PARENT_SEGMENT_FD_IN_RANK: i32 = 5;
/// Descriptor number of the rank's out-of-band channel (`PMI_OOB_FD`,
/// docs/oob.md).
pub(super) const OOB_FD_IN_RANK: i32 = 6;

/// One application (MPMD section or spawn command) of a job to start.
pub(super) struct AppPlan {
    pub nranks: u32,
    pub program: PathBuf,
    /// The program as the user wrote it, for messages.
    pub shown: OsString,
    pub args: Vec<OsString>,
    /// Environment of every rank of this application (before PMI's own).
    pub env: Vec<(OsString, OsString)>,
    pub wdir: Option<PathBuf>,
    /// argv and environment of its ranks, built when the first one starts.
    pub image: OnceLock<Arc<os::ExecImage>>,
    /// Its ranks are PMIx clients (`--pmi`, docs/pmix.md).
    pub pmix: bool,
    /// The OpenPMIx library its program links, when it is PMIx and the
    /// user named none (the server loads it: `pmix::detect`).
    pub pmix_lib: Option<PathBuf>,
    /// Its job is fault tolerant (`--fault-tolerant`): PMIx ranks get
    /// Open MPI's ULFM switched on.
    pub fault_tolerant: bool,
}

/// A rank not started yet.
pub(super) struct PendingRank {
    pub job: JobIdx,
    pub rank: u32,
    app: Arc<AppPlan>,
    /// PMI variables of this rank.
    pmi_env: Vec<(OsString, OsString)>,
    socketpair: bool,
    /// Output label: `rank` in the first job, `job,rank` in spawned ones.
    tag: String,
}

impl PendingRank {
    /// Rank `rank` of `job`, an instance of `app` with the PMI variables
    /// `pmi_env`; `socketpair`: its PMI connection is an inherited socket
    /// (else it connects to the job's port).
    pub(super) fn new(
        job: JobIdx,
        rank: u32,
        app: Arc<AppPlan>,
        pmi_env: Vec<(OsString, OsString)>,
        socketpair: bool,
    ) -> PendingRank {
        PendingRank {
            job,
            rank,
            app,
            pmi_env,
            socketpair,
            tag: if job == 0 {
                rank.to_string()
            } else {
                format!("{job},{rank}")
            },
        }
    }

    /// The program it will run.
    pub(super) fn program(&self) -> &Path {
        &self.app.program
    }

    /// argv and environment of its application's ranks, built by the first
    /// of them to start.
    fn image(&self) -> io::Result<Arc<os::ExecImage>> {
        if let Some(i) = self.app.image.get() {
            return Ok(i.clone());
        }
        // Every rank of an application sets the same PMI names.
        let per_rank: Vec<&std::ffi::OsStr> =
            self.pmi_env.iter().map(|(k, _)| k.as_os_str()).collect();
        // The launcher's defaults first: the application's own settings,
        // later, win.
        let mut env = Vec::new();
        if self.app.pmix {
            env = super::pmix::app_env_defaults(self.app.fault_tolerant);
        }
        env.extend(self.app.env.iter().cloned());
        let i = os::ExecImage::new(
            &self.app.program,
            &self.app.args,
            std::env::vars_os(),
            ENV_REMOVE,
            &env,
            &per_rank,
            self.app.wdir.as_deref(),
        )?;
        Ok(self.app.image.get_or_init(|| Arc::new(i)).clone())
    }
}

/// The ranks on their way to running: queued in job order, handed to the
/// forker threads (by start id), and what waits for them to be known.
pub(super) struct Starter {
    /// Threads that create ranks, several at a time.
    forkers: os::Forkers,
    /// Ranks start sessions of their own (`Knobs::rank_sessions`).
    rank_sessions: bool,
    pending: VecDeque<PendingRank>,
    /// Ranks handed to the forkers, by start id.
    starting: HashMap<u64, PendingRank>,
    next_start: u64,
    /// Port-mode identity checks of ranks still being created.
    checks_waiting: Vec<(ConnId, JobIdx, u32)>,
    /// Exits reaped before the forker that created the process reported
    /// its pid.
    unclaimed_exits: HashMap<u32, ExitStatus>,
    /// Spawns answered once their job has no pending rank left.
    spawns_starting: Vec<(u64, JobIdx, SpawnOutcome)>,
}

impl Starter {
    pub(super) fn new(forkers: os::Forkers, rank_sessions: bool) -> Starter {
        Starter {
            forkers,
            rank_sessions,
            pending: VecDeque::new(),
            starting: HashMap::new(),
            next_start: 0,
            checks_waiting: Vec::new(),
            unclaimed_exits: HashMap::new(),
            spawns_starting: Vec::new(),
        }
    }

    /// Queue `p` behind the ranks already queued.
    pub(super) fn queue(&mut self, p: PendingRank) {
        self.pending.push_back(p);
    }

    /// No rank is queued or being created.
    pub(super) fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.starting.is_empty()
    }

    /// Ranks queued, not handed to a forker yet.
    pub(super) fn queued(&self) -> usize {
        self.pending.len()
    }

    /// A rank is queued and a forker is free for it: no time to sleep.
    pub(super) fn can_start(&self) -> bool {
        !self.pending.is_empty() && self.forkers.has_room()
    }

    /// The next queued rank, while a forker is free for it.
    pub(super) fn next(&mut self) -> Option<PendingRank> {
        if !self.forkers.has_room() {
            return None;
        }
        self.pending.pop_front()
    }

    /// The id of the next start handed to a forker.
    fn next_id(&mut self) -> u64 {
        let id = self.next_start;
        self.next_start += 1;
        id
    }

    /// Hand `p` to a forker as `job` (its id from [`Starter::next_id`]); on
    /// failure `p` comes back with the error.
    fn submit(&mut self, p: PendingRank, job: os::ForkJob) -> Result<(), (PendingRank, io::Error)> {
        let id = job.id;
        let alone = self.pending.is_empty();
        match self.forkers.submit(job, alone) {
            Ok(()) => {
                self.starting.insert(id, p);
                Ok(())
            }
            Err(e) => Err((p, e)),
        }
    }

    /// A start a forker finished: the rank, and its process or why not.
    pub(super) fn finished(&mut self) -> Option<(PendingRank, io::Result<os::Spawned>)> {
        loop {
            let d = self.forkers.try_done()?;
            // Every submitted start is in `starting` until its report.
            if let Some(p) = self.starting.remove(&d.id) {
                return Some((p, d.result));
            }
        }
    }

    /// Whether every rank of `job` has been started (or dropped). Pending
    /// ranks are handed out in order, job by job: none of `job` is left
    /// once the queue is empty or at a later job and no rank of it is still
    /// being started.
    pub(super) fn all_started(&self, job: JobIdx) -> bool {
        self.pending.front().is_none_or(|p| p.job > job)
            && !self.starting.values().any(|p| p.job == job)
    }

    /// Whether `rank` of `job` is being created (its pid not known yet).
    pub(super) fn is_starting(&self, job: JobIdx, rank: u32) -> bool {
        self.starting
            .values()
            .any(|p| p.job == job && p.rank == rank)
    }

    /// The rank `conn` claims to be is being created: check it once it is.
    pub(super) fn check_when_started(&mut self, conn: ConnId, job: JobIdx, rank: u32) {
        self.checks_waiting.push((conn, job, rank));
    }

    /// The connections waiting for `rank` of `job` to be known, in order.
    fn take_checks(&mut self, job: JobIdx, rank: u32) -> Vec<ConnId> {
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.checks_waiting)
            .into_iter()
            .partition(|&(_, j, r)| j == job && r == rank);
        self.checks_waiting = later;
        now.into_iter().map(|(conn, _, _)| conn).collect()
    }

    /// `pid` was reaped before its forker reported it (or is no rank).
    pub(super) fn exited_early(&mut self, pid: u32, status: ExitStatus) {
        self.unclaimed_exits.insert(pid, status);
    }

    /// How `pid` ended, if it was reaped before it was known.
    fn take_early_exit(&mut self, pid: u32) -> Option<ExitStatus> {
        self.unclaimed_exits.remove(&pid)
    }

    /// Drop the queued ranks of the jobs `of` accepts; returns the job of
    /// each rank dropped.
    pub(super) fn drop_pending(&mut self, of: impl Fn(JobIdx) -> bool) -> Vec<JobIdx> {
        let mut dropped = Vec::new();
        self.pending.retain(|p| {
            let keep = !of(p.job);
            if !keep {
                dropped.push(p.job);
            }
            keep
        });
        dropped
    }

    /// Whether ranks start sessions of their own.
    fn rank_sessions(&self) -> bool {
        self.rank_sessions
    }

    /// The ranks of `job` not running yet (queued or being created).
    pub(super) fn not_running(&self, job: JobIdx) -> impl Iterator<Item = &PendingRank> {
        self.pending
            .iter()
            .chain(self.starting.values())
            .filter(move |p| p.job == job)
    }

    /// Answer spawn `id` with `outcome` once every rank of `job` is started.
    pub(super) fn answer_when_started(&mut self, id: u64, job: JobIdx, outcome: SpawnOutcome) {
        self.spawns_starting.push((id, job, outcome));
    }

    pub(super) fn spawns_waiting(&self) -> bool {
        !self.spawns_starting.is_empty()
    }

    /// The spawns whose children have all been started, to answer now.
    pub(super) fn started_spawns(&mut self) -> Vec<(u64, SpawnOutcome)> {
        let (done, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.spawns_starting)
            .into_iter()
            .partition(|&(_, job, _)| self.all_started(job));
        self.spawns_starting = waiting;
        done.into_iter()
            .map(|(id, _, outcome)| (id, outcome))
            .collect()
    }
}

/// What starting a rank reads of its job (the launcher's side of it, in
/// `Jobs`).
pub(super) struct JobView<'a> {
    /// The job segment, mapped by its ranks.
    pub segment: Option<&'a Arc<JobSegment>>,
    /// A spawned job's parent's segment, handed to its ranks.
    pub parent_segment: Option<&'a Arc<JobSegment>>,
    /// The decoy segment's descriptor, handed to ranks instead of their
    /// job's (`Knobs::advertise_foreign_segment`).
    pub foreign_fd: Option<RawFd>,
    /// Its ranks were sent SIGTERM because the job failed.
    pub torn_down: bool,
}

/// What preparing a rank's start reaches of the other parts.
pub(super) struct Fork<'a> {
    pub server: &'a mut Server,
    /// Where the rank's PMI and out-of-band sockets are registered.
    pub conns: &'a mut Conns,
    pub binding: &'a Binding,
    pub knobs: &'a Knobs,
    /// The rank's job.
    pub job: JobView<'a>,
}

/// What taking in a started rank reaches of the other parts.
pub(super) struct Arrival<'a> {
    pub server: &'a mut Server,
    pub events: &'a mut Vec<Event>,
    pub conns: &'a mut Conns,
    pub procs: &'a mut Procs,
    pub output: &'a mut Output,
    /// The event loop's, for the rank's output pipes.
    pub registry: &'a Registry,
    /// The rank's job.
    pub job: JobView<'a>,
}

impl Starter {
    /// Prepare `p` and hand it to a forker (the event loop does so between
    /// polls, so early ranks are served while later ones are still being
    /// created); on failure `p` comes back with the error.
    pub(super) fn start(
        &mut self,
        p: PendingRank,
        fork: &mut Fork<'_>,
    ) -> Result<(), (PendingRank, io::Error)> {
        let id = self.next_id();
        match self.fork_job(id, &p, fork) {
            Ok(job) => self.submit(p, job),
            Err(e) => Err((p, e)),
        }
    }

    /// Port-mode identity checks that waited for rank `rank` of `job` to be
    /// known (it started, or failed to: then no socket is its).
    fn run_waiting_checks(
        &mut self,
        job: JobIdx,
        rank: u32,
        conns: &mut Conns,
        server: &mut Server,
        events: &mut Vec<Event>,
        procs: &Procs,
    ) {
        for conn in self.take_checks(job, rank) {
            conns.check_peer(server, events, conn, procs.running_rank(job, rank));
        }
    }

    /// `p` could not be started: the checks that waited for it are
    /// answered; returns the message its job fails with.
    pub(super) fn not_started(
        &mut self,
        p: PendingRank,
        e: io::Error,
        conns: &mut Conns,
        server: &mut Server,
        events: &mut Vec<Event>,
        procs: &Procs,
    ) -> String {
        self.run_waiting_checks(p.job, p.rank, conns, server, events, procs);
        format!(
            "cannot start {} ({}): {e}",
            server.rank_name(p.job, p.rank),
            p.app.shown.to_string_lossy()
        )
    }

    /// Prepare rank `p` (its PMI socket, its descriptors) as start `id` of
    /// a forker.
    fn fork_job(&self, id: u64, p: &PendingRank, fork: &mut Fork<'_>) -> io::Result<os::ForkJob> {
        let mut pass = Vec::new();
        let mut owned = Vec::new();
        let mut keep: Vec<Arc<dyn Send + Sync>> = Vec::new();
        if p.socketpair {
            let (ours, theirs) = os::socketpair()?;
            pass.push((theirs.as_raw_fd(), PMI_FD_IN_RANK));
            owned.push(theirs);
            let segment = fork.job.segment.cloned();
            let foreign = fork.job.foreign_fd;
            if let Some(fd) = foreign.or_else(|| segment.as_ref().and_then(|s| s.mapping().fd())) {
                pass.push((fd, SEGMENT_FD_IN_RANK));
            }
            if let Some(seg) = segment {
                keep.push(seg);
            }
            if let Some(seg) = fork.job.parent_segment.cloned() {
                if let Some(fd) = seg.mapping().fd() {
                    pass.push((fd, PARENT_SEGMENT_FD_IN_RANK));
                }
                keep.push(seg);
            }
            let stream = UnixStream::from_std(std::os::unix::net::UnixStream::from(ours));
            stream_nonblocking(&stream)?;
            fork.conns
                .add_conn(fork.server, Sock::Unix(stream), Some((p.job, p.rank)))?;
            // Its out-of-band channel, used only if the rank opens it.
            let (ours, theirs) = os::socketpair()?;
            pass.push((theirs.as_raw_fd(), OOB_FD_IN_RANK));
            owned.push(theirs);
            let stream = UnixStream::from_std(std::os::unix::net::UnixStream::from(ours));
            stream_nonblocking(&stream)?;
            fork.conns
                .add_oob_conn(fork.server, Sock::Unix(stream), p.job, p.rank)?;
        }
        let image = p.image()?;
        // Rank 0 of the first job reads the terminal's stdin.
        let on_terminal = p.rank == 0 && p.job == 0;
        Ok(os::ForkJob {
            id,
            image,
            env: p.pmi_env.clone(),
            pass_fds: pass,
            owned,
            keep,
            stdin_inherit: on_terminal,
            // On request, as Hydra does: with the kernel's autogroups (one
            // scheduling group per session), ranks in the launcher's session
            // share one group's CPU against every other busy session's. The
            // rank on the terminal's stdin keeps the launcher's session and
            // process group (job control). docs/launch.md.
            new_session: self.rank_sessions() && !on_terminal,
            timer_slack_ns: if p.app.pmix {
                super::pmix::wait_timer_slack(fork.server.job_size(p.job), fork.knobs)
            } else {
                0
            },
            cpus: fork
                .binding
                .rank_cpus(p.job, p.rank)
                .map(|(_, set)| set.clone()),
        })
    }

    /// Rank `p` runs as `s`: supervise it. Returns its process and how it
    /// ended when it was reaped before it was known here.
    pub(super) fn started(
        &mut self,
        p: PendingRank,
        s: os::Spawned,
        a: &mut Arrival<'_>,
    ) -> Option<(usize, ExitStatus)> {
        super::timeline::step("rank started");
        a.output.add_rank(a.registry, &p.tag, s.stdout, s.stderr);
        if let Some(state) = a.job.segment.and_then(|seg| seg.seg().rank(p.rank)) {
            state.set_pid(s.pid);
        }
        let i = a
            .procs
            .add(RankProc::new(s.pid, p.job, p.rank, p.app.program.clone()));
        // Its job was torn down while it was being created.
        if a.job.torn_down || a.procs.interrupted().is_some() {
            a.procs.kill(i);
        }
        self.run_waiting_checks(p.job, p.rank, a.conns, a.server, a.events, a.procs);
        // It may already have ended, reaped before it was known here.
        self.take_early_exit(s.pid).map(|status| (i, status))
    }
}

/// Variables a rank must not inherit from the launcher's own environment:
/// another launcher's PMI wiring, and PMIx markers that make MPICH 4.1+
/// refuse to start.
const ENV_REMOVE: &[&str] = &[
    names::env::PMI_FD,
    names::env::PMI_OOB_FD,
    names::env::PMI_PORT,
    names::env::PMI_ID,
    names::env::PMI_RANK,
    names::env::PMI_SIZE,
    names::env::PMI_JOBID,
    names::env::PMI_SPAWNED,
    names::env::PMI_TOTALVIEW,
    "PMIX_RANK",
    "PMIX_VERSION",
    "PMIX_NAMESPACE",
    "PMIX_SERVER_URI",
    "PRTE_LAUNCHED",
    "OMPI_COMM_WORLD_SIZE",
    "MPI_LOCALNRANKS",
    "MPI_LOCALRANKID",
    names::env::AUTH_SECRET,
    names::env::SEGMENT,
    names::env::APPNUM,
    names::env::SPAWNER,
    names::env::PARENT_SEGMENT,
    // srun --mpi=pmi2's marker: fastpmi's libraries would take the ranks
    // for Slurm's.
    "SLURM_MPI_TYPE",
    // Slurm's task and step variables describe the launcher's own task
    // (task 1 of 2, say), not its ranks, which are no tasks of the step;
    // Intel MPI sizes its nodes by them and crashed on a node server's
    // ranks (docs/nested.md). The allocation's (SLURM_JOB_*) stay.
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_GTIDS",
    "SLURM_NTASKS",
    "SLURM_NPROCS",
    "SLURM_TASKS_PER_NODE",
    "SLURM_TASK_PID",
    "SLURM_STEPID",
    "SLURM_STEP_ID",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_STEP_NUM_NODES",
    "SLURM_STEP_NODELIST",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_STEP_LAUNCHER_PORT",
    "SLURM_SRUN_COMM_HOST",
    "SLURM_SRUN_COMM_PORT",
];
