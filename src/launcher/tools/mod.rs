//! The launcher's side of the tools: the rendezvous, `--stop-in-init` and
//! release, the MPIR proc table, SIGUSR1 reports and `--verbose` failure
//! details (`--fence-timeout` is [`fence_timeout`], the answers to the
//! tools' queries [`queries`]).
//!
//! `ps` is answered on the connection thread without waiting for the event
//! loop: the first `ps` asks the loop for a snapshot of its state, and from
//! then on the loop republishes that snapshot (into [`Published`]) after
//! iterations that handled events, at most every [`REPUBLISH`]; the
//! connection threads take the latest one and read the shared-memory ranks'
//! states live from the segments. A job sitting in a shared-memory fence
//! sends the loop nothing, so `ps` costs it nothing.

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mio::unix::SourceFd;

use crate::config::LaunchConfig;
use crate::launcher::binding::Binding;
use crate::launcher::jobs::Jobs;
use crate::launcher::starting::Starter;
use crate::launcher::supervise::{Procs, RankProc};
use crate::launcher::{mpir, os};
use crate::ranges::ranges;

use crate::tools::instant_ns;
use crate::tools::proto::{CheckpointSent, LauncherInfo, Op, Reply, Request};
use crate::tools::rendezvous::{self, Rendezvous};
use crate::tools::report;
use crate::tools::view::{self, JobSnap, ProcSnap, Snapshot};
use fastpmi_server::{JobIdx, Server};

mod fence_timeout;
pub(in crate::launcher) mod queries;

/// How long a connection thread waits for the event loop.
const LOOP_DEADLINE: Duration = Duration::from_secs(2);
/// Shortest interval between two republished snapshots (how stale the
/// launcher-side part of a `ps` answer can be while the loop is busy).
const REPUBLISH: Duration = Duration::from_millis(20);

/// The latest snapshot the loop published (`None` until the first `ps`).
type Published = Arc<Mutex<Option<Arc<Snapshot>>>>;

/// What a connection thread asks of the event loop.
pub(in crate::launcher) enum Query {
    Info(Sender<LauncherInfo>),
    Snapshot(Sender<Arc<Snapshot>>),
    Release(Option<String>, Sender<Result<usize, ReleaseError>>),
    Checkpoint(
        Option<String>,
        Sender<Result<Vec<CheckpointSent>, CheckpointRefused>>,
    ),
}

/// Why `fastpmi checkpoint` sent nothing.
#[derive(Debug, thiserror::Error)]
pub(in crate::launcher) enum CheckpointRefused {
    #[error("no running job in this launcher")]
    NoRunningJob,
    #[error(transparent)]
    Job(#[from] fastpmi_server::oob::CheckpointError),
}

/// Why `fastpmi release` released nothing.
#[derive(Debug, thiserror::Error)]
pub(in crate::launcher) enum ReleaseError {
    #[error("no job {0} in this launcher")]
    NoJob(String),
}

/// What the tools read of the launcher's other parts (snapshots, reports,
/// fence timeouts).
#[derive(Clone, Copy)]
pub(in crate::launcher) struct View<'a> {
    pub(in crate::launcher) server: &'a Server,
    pub(in crate::launcher) jobs: &'a Jobs,
    pub(in crate::launcher) procs: &'a Procs,
    pub(in crate::launcher) starter: &'a Starter,
    pub(in crate::launcher) binding: &'a Binding,
    pub(in crate::launcher) cfg: &'a LaunchConfig,
}

pub(in crate::launcher) struct ToolsRt {
    rendezvous: Option<Rendezvous>,
    /// What [`ToolsRt::listen`] hands the rendezvous' connection threads.
    to_listen: Option<(Sender<Query>, Arc<mio::Waker>)>,
    /// The rendezvous' listener and handler until its first connection
    /// (then its accept thread has them: [`ToolsRt::accept`]).
    unserved: Option<(std::os::unix::net::UnixListener, rendezvous::Handler)>,
    queries: Receiver<Query>,
    started: Instant,
    command: String,
    /// `--stop-in-init` and not released yet: new jobs are held.
    hold_new_jobs: bool,
    /// Jobs (by index, in order) whose ranks are in the MPIR proc table.
    mpir_jobs: usize,
    /// When each job was created (index = job).
    created: Vec<Instant>,
    pub(in crate::launcher) next_check: Instant,
    /// Jobs seen waiting: (fences completed then, first seen).
    pub(in crate::launcher) waiting: HashMap<JobIdx, (u64, Instant)>,
    /// Where `ps` finds the loop's latest snapshot; `publishing` once a
    /// `ps` asked, `dirty` when the loop handled events since the last one.
    published: Published,
    publishing: bool,
    dirty: bool,
    last_published: Instant,
}

impl ToolsRt {
    /// The tools' state; the rendezvous opens with [`ToolsRt::listen`].
    pub(in crate::launcher) fn new(waker: Arc<mio::Waker>, stop_in_init: bool) -> ToolsRt {
        let (tx, rx) = mpsc::channel();
        let published: Published = Arc::new(Mutex::new(None));
        let command = std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        ToolsRt {
            rendezvous: None,
            to_listen: Some((tx, waker)),
            unserved: None,
            queries: rx,
            started: Instant::now(),
            command,
            hold_new_jobs: stop_in_init,
            mpir_jobs: 0,
            created: Vec::new(),
            next_check: Instant::now(),
            waiting: HashMap::new(),
            published,
            publishing: false,
            dirty: false,
            last_published: Instant::now(),
        }
    }

    /// Open the rendezvous (once; a failure is reported, not fatal: the
    /// job runs without `fastpmi ps`). The launcher opens it once its first
    /// ranks are on their way: no tool can ask about a job before it
    /// exists, and its socket is not on the ranks' path. Its listener
    /// wakes the event loop as `token` until [`ToolsRt::accept`].
    pub(in crate::launcher) fn listen(&mut self, registry: &mio::Registry, token: mio::Token) {
        let Some((tx, waker)) = self.to_listen.take() else {
            return;
        };
        let dir = rendezvous::dir();
        let bound = Rendezvous::bind(&dir);
        // What launchers killed with SIGKILL left on the node goes with
        // their sockets, off the ranks' path as the rendezvous is.
        crate::launcher::pmix::remove_dead(&dir);
        let bound = bound.and_then(|(r, listener)| {
            let fd = listener.as_raw_fd();
            registry.register(&mut SourceFd(&fd), token, mio::Interest::READABLE)?;
            Ok((r, listener))
        });
        match bound {
            Ok((r, listener)) => {
                self.rendezvous = Some(r);
                let handler = handler(tx, waker, self.published.clone());
                self.unserved = Some((listener, handler));
            }
            Err(e) => crate::errln!("fastpmi: no rendezvous for `fastpmi ps`: {e}"),
        }
    }

    /// A tool connected: from now on the rendezvous' own thread accepts.
    pub(in crate::launcher) fn accept(&mut self, registry: &mio::Registry) {
        let Some((listener, handler)) = self.unserved.take() else {
            return;
        };
        let _ = registry.deregister(&mut SourceFd(&listener.as_raw_fd()));
        if let Err(e) = rendezvous::serve(listener, handler) {
            crate::errln!("fastpmi: no rendezvous for `fastpmi ps`: {e}");
            self.rendezvous = None;
        }
    }

    /// Remove the rendezvous now (also done on drop).
    pub(in crate::launcher) fn close(&mut self) {
        self.rendezvous = None;
        self.to_listen = None;
        self.unserved = None;
    }
}

/// The rendezvous handler: runs on a connection thread.
fn handler(tx: Sender<Query>, waker: Arc<mio::Waker>, published: Published) -> rendezvous::Handler {
    Arc::new(move |req: Request| {
        let ask = |q: Query| -> bool { tx.send(q).is_ok() && waker.wake().is_ok() };
        let gone = || Reply::error("the launcher is shutting down or busy");
        match req.op {
            Op::Info => {
                let (s, r) = mpsc::channel();
                if !ask(Query::Info(s)) {
                    return gone();
                }
                match r.recv_timeout(LOOP_DEADLINE) {
                    Ok(info) => Reply {
                        launcher: Some(info),
                        ..Reply::ok()
                    },
                    Err(_) => gone(),
                }
            }
            Op::Ps => {
                let latest = published.lock().ok().and_then(|p| p.clone());
                let snap = match latest {
                    Some(snap) => snap,
                    None => {
                        let (s, r) = mpsc::channel();
                        if !ask(Query::Snapshot(s)) {
                            return gone();
                        }
                        let Ok(snap) = r.recv_timeout(LOOP_DEADLINE) else {
                            return gone();
                        };
                        snap
                    }
                };
                let jobs: Vec<&JobSnap> = snap
                    .jobs
                    .iter()
                    .filter(|j| req.job.as_ref().is_none_or(|id| *id == j.status.id))
                    .collect();
                if jobs.is_empty() {
                    if let Some(id) = &req.job {
                        return Reply::error(format!("no job {id} in this launcher"));
                    }
                }
                // Read the segments here, off the event loop.
                Reply {
                    jobs: Some(jobs.into_iter().map(view::job_table).collect()),
                    ..Reply::ok()
                }
            }
            Op::Release => answer(
                &ask,
                |s| Query::Release(req.job.clone(), s),
                |n| Reply {
                    released: Some(n),
                    ..Reply::ok()
                },
            ),
            Op::Checkpoint => answer(
                &ask,
                |s| Query::Checkpoint(req.job.clone(), s),
                |sent| Reply {
                    checkpoints: Some(sent),
                    ..Reply::ok()
                },
            ),
        }
    })
}

/// Ask the event loop `query` (built around the sender of its answer) and
/// make the reply of its answer: `ok` of a success, the error's text else.
fn answer<T, E: std::fmt::Display>(
    ask: &impl Fn(Query) -> bool,
    query: impl FnOnce(Sender<Result<T, E>>) -> Query,
    ok: impl FnOnce(T) -> Reply,
) -> Reply {
    let gone = || Reply::error("the launcher is shutting down or busy");
    let (s, r) = mpsc::channel();
    if !ask(query(s)) {
        return gone();
    }
    match r.recv_timeout(LOOP_DEADLINE) {
        Ok(Ok(v)) => ok(v),
        Ok(Err(e)) => Reply::error(e.to_string()),
        Err(_) => gone(),
    }
}

impl ToolsRt {
    /// A job was created: note when, and hold it under `--stop-in-init`.
    pub(in crate::launcher) fn job_created(&mut self, job: JobIdx, server: &mut Server) {
        while self.created.len() <= job {
            self.created.push(Instant::now());
        }
        if self.hold_new_jobs {
            server.hold_init(job);
        }
    }

    /// Whether a job created now is held in init (`--stop-in-init`, not
    /// released yet).
    pub(in crate::launcher) fn holding_new_jobs(&self) -> bool {
        self.hold_new_jobs
    }

    /// Build a snapshot and make it the one `ps` answers from.
    fn publish_snapshot(&mut self, view: View<'_>) -> Arc<Snapshot> {
        let snap = Arc::new(self.snapshot(view));
        // The old one is freed after the lock is let go: a tools thread,
        // which runs ahead of this one, may be waiting for it.
        let _old = self
            .published
            .lock()
            .ok()
            .and_then(|mut p| p.replace(snap.clone()));
        self.dirty = false;
        self.last_published = Instant::now();
        snap
    }

    /// The first `ps` asked for a snapshot: publish one now, and from now
    /// on republish it (see [`ToolsRt::republish`]).
    pub(in crate::launcher) fn snapshot_asked(&mut self, view: View<'_>) -> Arc<Snapshot> {
        self.publishing = true;
        self.publish_snapshot(view)
    }

    /// The loop handled events (its state may have changed since the
    /// snapshot `ps` answers from).
    pub(in crate::launcher) fn touched(&mut self) {
        self.dirty = true;
    }

    /// Once `ps` has asked: republish the snapshot if the loop's state may
    /// have changed, at most every [`REPUBLISH`].
    pub(in crate::launcher) fn republish(&mut self, view: View<'_>) {
        if self.publishing && self.dirty && self.last_published.elapsed() >= REPUBLISH {
            self.publish_snapshot(view);
        }
    }

    /// Poll timeout the tools need (a pending republish, the fence-timeout
    /// check; `fence_timeout` is `--fence-timeout`).
    pub(in crate::launcher) fn tick(&self, fence_timeout: Option<Duration>) -> Option<Duration> {
        let republish = (self.publishing && self.dirty)
            .then(|| REPUBLISH.saturating_sub(self.last_published.elapsed()));
        let Some(limit) = fence_timeout else {
            return republish;
        };
        let tick = (limit / 4).clamp(Duration::from_millis(10), Duration::from_millis(100));
        let check = self
            .next_check
            .saturating_duration_since(Instant::now())
            .min(tick);
        Some(republish.map_or(check, |r| r.min(check)))
    }

    pub(in crate::launcher) fn snapshot(&self, view: View<'_>) -> Snapshot {
        Snapshot {
            launcher_pid: std::process::id(),
            command: self.command.clone(),
            age_seconds: self.started.elapsed().as_secs_f64(),
            jobs: (0..view.jobs.len())
                .filter(|&j| view.jobs.live(j) > 0)
                .map(|j| self.job_snap(j, view))
                .collect(),
        }
    }

    pub(in crate::launcher) fn job_snap(&self, job: JobIdx, view: View<'_>) -> JobSnap {
        let status = view.server.job_status(job);
        let created = self.created.get(job).map_or(0, |&t| instant_ns(t));
        let mut procs: Vec<ProcSnap> = (0..status.size)
            .map(|_| ProcSnap {
                pid: None,
                executable: String::new(),
                since_ns: created,
                ended: None,
                cpus: None,
                death: None,
            })
            .collect();
        for p in view.starter.not_running(job) {
            if let Some(slot) = procs.get_mut(p.rank as usize) {
                slot.executable = p.program().display().to_string();
            }
        }
        for p in view.procs.of_job(job) {
            if let Some(slot) = procs.get_mut(p.rank as usize) {
                *slot = ProcSnap {
                    pid: Some(p.pid),
                    executable: p.exe.display().to_string(),
                    since_ns: instant_ns(p.started),
                    ended: p.status.map(|s| {
                        let how = os::describe_status(s);
                        (
                            how.trim_start_matches("was ").to_string(),
                            p.ended.map_or(0, instant_ns),
                        )
                    }),
                    cpus: view.binding.rank_cpus(job, p.rank).map(|(c, _)| ranges(c)),
                    death: None,
                };
            }
        }
        for (rank, cause) in view.server.dead_ranks(job) {
            if let Some(slot) = procs.get_mut(rank as usize) {
                slot.death = Some(crate::launcher::deaths::death_text(cause));
            }
        }
        let sock_since_ns = status.ranks.iter().map(|r| instant_ns(r.since)).collect();
        JobSnap {
            segment: view.jobs.segment(job).cloned(),
            status,
            procs,
            sock_since_ns,
        }
    }

    /// Once every rank of the first job has started: the MPIR proc table
    /// and `MPIR_Breakpoint`; then once every rank of each spawned job has
    /// started, its ranks appended and `MPIR_Breakpoint` again. A debugger
    /// that set `MPIR_being_debugged` has continued when it returns: with
    /// `stop_in_init`, the job returned, whose ranks held in init must go
    /// on (then call again, for the jobs after it).
    pub(in crate::launcher) fn mpir_all_started(
        &mut self,
        jobs: usize,
        starter: &Starter,
        procs: &Procs,
        stop_in_init: bool,
    ) -> Option<JobIdx> {
        while self.mpir_jobs < jobs {
            let job = self.mpir_jobs;
            if !starter.all_started(job) {
                return None;
            }
            self.mpir_jobs += 1;
            let host = rustix::system::uname()
                .nodename()
                .to_string_lossy()
                .into_owned();
            let mut ranks: Vec<&RankProc> = procs.of_job(job).collect();
            ranks.sort_by_key(|p| p.rank);
            // A spawned job none of whose ranks started adds nothing; the
            // first job is published even then (the debugger expects its
            // breakpoint).
            if ranks.is_empty() && job > 0 {
                continue;
            }
            let entries = ranks
                .iter()
                .map(|p| mpir::ProcEntry {
                    host: host.clone(),
                    executable: p.exe.display().to_string(),
                    pid: p.pid,
                })
                .collect();
            let debugged = if job == 0 {
                mpir::publish(entries)
            } else {
                mpir::extend(entries)
            };
            if debugged && stop_in_init {
                return Some(job);
            }
        }
        None
    }

    /// SIGUSR1: the report of every running job on stderr; nothing changes.
    pub(in crate::launcher) fn print_report(&self, view: View<'_>) {
        let snap = self.snapshot(view);
        let mut out = String::new();
        for js in &snap.jobs {
            out += &report::report(&view::job_table(js));
        }
        if out.is_empty() {
            out = "fastpmi: no running job\n".into();
        }
        eprint!("{out}");
    }

    /// `--verbose`: the report of `job` at the moment it fails.
    pub(in crate::launcher) fn failure_detail(
        &self,
        job: JobIdx,
        view: View<'_>,
    ) -> Option<String> {
        if !view.cfg.verbose || job >= view.jobs.len() {
            return None;
        }
        Some(report::report(&view::job_table(&self.job_snap(job, view))))
    }

    /// The launcher is exiting (with `failed`, a failure): tell a debugger.
    pub(in crate::launcher) fn exit(&mut self, failed: Option<&str>) {
        if let Some(why) = failed {
            if self.mpir_jobs > 0 {
                mpir::aborting(why);
            }
        }
        self.close();
    }
}
