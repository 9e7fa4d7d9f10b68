//! Supervision: reaping ranks, failures (a failing rank ends its job and
//! every job connected to it), signals to the launcher, teardown and the
//! exit status. [`Procs`] owns the rank processes and the verdict; what a
//! rank's end or a teardown makes the other parts do is carried out by the
//! launcher's glue (`events.rs`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use rustix::process::Signal;

use super::os;
use fastpmi_server::{Event, JobIdx, Server};
use shm_layout::RankStats;

/// Time between SIGTERM and SIGKILL when a job is torn down.
const KILL_GRACE: Duration = Duration::from_millis(1000);

/// A rank process the launcher started.
pub(super) struct RankProc {
    pub pid: u32,
    pub job: JobIdx,
    pub rank: u32,
    pub status: Option<ExitStatus>,
    /// The signal the launcher itself sent, if any.
    pub signaled: Option<i32>,
    /// The program it runs, when it started and when it was reaped.
    pub exe: PathBuf,
    pub started: Instant,
    pub ended: Option<Instant>,
}

impl RankProc {
    /// Rank `rank` of `job`, running `exe` as `pid` from now on.
    pub(super) fn new(pid: u32, job: JobIdx, rank: u32, exe: PathBuf) -> RankProc {
        RankProc {
            pid,
            job,
            rank,
            status: None,
            signaled: None,
            exe,
            started: Instant::now(),
            ended: None,
        }
    }
}

/// How a rank process ended, as [`Procs::ended`] tells it.
#[derive(Clone, Copy)]
pub(super) struct RankEnd {
    pub job: JobIdx,
    pub rank: u32,
    pub status: ExitStatus,
    /// It was stopped by the launcher (see [`Procs::ended`]).
    pub by_us: bool,
}

/// A rank that ended badly on its own: its job fails with `code`.
pub(super) struct RankFailure {
    pub message: String,
    pub code: i32,
    /// What the rank was doing.
    pub activity: String,
}

/// Why the job ended badly, first cause wins.
pub(super) struct Failure {
    job: JobIdx,
    rank: u32,
    message: String,
    code: i32,
    /// What the rank was doing, kept for a better message once it is reaped.
    activity: String,
    /// Replace code and message by the rank's own exit status when it ends
    /// badly by itself (e.g. a lost connection that was really a SIGKILL).
    prefer_status: bool,
    /// `--verbose`: every rank of the job at the moment it failed.
    detail: Option<String>,
    /// When it was recorded.
    at: Instant,
}

impl Failure {
    /// Rank `rank` of `job` fails the launcher with `message` and `code`
    /// (see the fields), from now on.
    pub(super) fn new(
        job: JobIdx,
        rank: u32,
        message: String,
        code: i32,
        activity: String,
        prefer_status: bool,
        detail: Option<String>,
    ) -> Failure {
        Failure {
            job,
            rank,
            message,
            code,
            activity,
            prefer_status,
            detail,
            at: Instant::now(),
        }
    }
}

/// The rank processes (each once started, in start order) and what the
/// launcher will exit with: the first failure, or the signal that
/// interrupted it. Handed out read-only: only these methods signal a
/// process or record how it ended.
pub(super) struct Procs {
    procs: Vec<RankProc>,
    by_pid: HashMap<u32, usize>,
    failure: Option<Failure>,
    /// When ranks sent SIGTERM get SIGKILL.
    kill_at: Option<Instant>,
    /// The signal (SIGINT, SIGTERM, SIGHUP) that interrupted the launcher.
    interrupted: Option<i32>,
    /// The failure's line is on stderr already (a node server prints it
    /// before the outer launcher ends it).
    announced: bool,
}

impl Procs {
    pub(super) fn new() -> Procs {
        Procs {
            procs: Vec::new(),
            by_pid: HashMap::new(),
            failure: None,
            kill_at: None,
            interrupted: None,
            announced: false,
        }
    }

    /// A rank that has started; returns its index.
    pub(super) fn add(&mut self, p: RankProc) -> usize {
        let i = self.procs.len();
        self.by_pid.insert(p.pid, i);
        self.procs.push(p);
        i
    }

    /// The index of the rank process `pid`, if it is one.
    pub(super) fn index_of(&self, pid: u32) -> Option<usize> {
        self.by_pid.get(&pid).copied()
    }

    /// Rank processes not reaped yet.
    pub(super) fn running(&self) -> usize {
        self.procs.iter().filter(|p| p.status.is_none()).count()
    }

    /// Rank processes ever started.
    pub(super) fn count(&self) -> usize {
        self.procs.len()
    }

    /// Every rank process started, of every job.
    pub(super) fn all(&self) -> impl Iterator<Item = &RankProc> {
        self.procs.iter()
    }

    pub(super) fn of_job(&self, job: JobIdx) -> impl Iterator<Item = &RankProc> {
        self.procs.iter().filter(move |p| p.job == job)
    }

    /// The running process started as `rank` of `job`.
    pub(super) fn running_rank(&self, job: JobIdx, rank: u32) -> Option<&RankProc> {
        self.procs
            .iter()
            .find(|p| p.job == job && p.rank == rank && p.status.is_none())
    }

    /// `sig` to process `i` alone, if it still runs (a rank of a
    /// fault-tolerant job declared dead).
    pub(super) fn signal_one(&mut self, i: usize, sig: Signal) {
        let p = &mut self.procs[i];
        if p.status.is_none() {
            p.signaled = Some(sig.as_raw());
            os::signal(p.pid, sig);
        }
    }

    /// SIGKILL to process `i` at once (its job was torn down while it was
    /// being created).
    pub(super) fn kill(&mut self, i: usize) {
        let p = &mut self.procs[i];
        p.signaled = Some(libc::SIGKILL);
        os::signal(p.pid, Signal::KILL);
    }

    /// Process `i` was reaped with `status`: how it ended; `None` when it
    /// had been before.
    pub(super) fn ended(&mut self, i: usize, status: ExitStatus) -> Option<RankEnd> {
        let interrupted = self.interrupted.is_some();
        let p = &mut self.procs[i];
        if p.status.is_some() {
            return None;
        }
        p.status = Some(status);
        p.ended = Some(Instant::now());
        tracing::debug!(
            job = p.job,
            rank = p.rank,
            "rank {}",
            os::describe_status(status)
        );
        // After SIGINT/SIGTERM/SIGHUP to the launcher, however a rank
        // ends (killed, or exiting on its own when its fence fails) it
        // was stopped by us: the exit status says "interrupted".
        let by_us = interrupted
            || p.signaled
                .is_some_and(|s| os::status_code(status) == 128 + s);
        Some(RankEnd {
            job: p.job,
            rank: p.rank,
            status,
            by_us,
        })
    }

    /// `end` is not a fault-tolerant job's death: when the rank ended
    /// badly on its own, its job fails, returned for the caller to record
    /// and carry out. Not when its process groups are marked failed
    /// instead (`--tolerate-group-failures`), nor when its status only
    /// tells more of the failure recorded for it.
    pub(super) fn judge(
        &mut self,
        server: &mut Server,
        events: &mut Vec<Event>,
        end: &RankEnd,
    ) -> Option<RankFailure> {
        let RankEnd {
            job,
            rank,
            status,
            by_us,
        } = *end;
        if status.success() || by_us {
            return None;
        }
        let name = server.rank_name(job, rank);
        let activity = server.rank_activity(job, rank);
        let message = format!("{name} {} {activity}", os::describe_status(status))
            .trim_end()
            .to_string();
        if !self.has_failure() && server.group_member_lost(job, rank, &message, events) {
            crate::errln!(
                "fastpmi: {message}; tolerated (--tolerate-group-failures): its process groups are marked failed"
            );
            return None;
        }
        let code = os::status_code(status);
        if self.refine_failure(job, rank, &name, status) {
            return None;
        }
        Some(RankFailure {
            message,
            code,
            activity,
        })
    }

    /// Send `sig` to the running ranks of the jobs `of` accepts (again
    /// only when `sig` is SIGKILL), and arm the SIGKILL deadline.
    pub(super) fn signal(&mut self, of: impl Fn(JobIdx) -> bool, sig: Signal) {
        for p in self
            .procs
            .iter_mut()
            .filter(|p| p.status.is_none() && of(p.job))
        {
            if p.signaled.is_none() || sig == Signal::KILL {
                p.signaled = Some(sig.as_raw());
                os::signal(p.pid, sig);
            }
        }
        if sig != Signal::KILL && self.kill_at.is_none() {
            self.kill_at = Some(Instant::now() + KILL_GRACE);
        }
    }

    /// How long until the SIGKILL deadline, when one is armed.
    pub(super) fn kill_wait(&self) -> Option<Duration> {
        self.kill_at
            .map(|t| t.saturating_duration_since(Instant::now()))
    }

    /// Past the deadline: SIGKILL to the signalled ranks still running.
    pub(super) fn kill_overdue(&mut self) {
        if self.kill_at.is_none_or(|t| Instant::now() < t) {
            return;
        }
        self.kill_at = None;
        for p in self
            .procs
            .iter_mut()
            .filter(|p| p.status.is_none() && p.signaled.is_some())
        {
            tracing::debug!(rank = p.rank, "SIGKILL after grace period");
            p.signaled = Some(libc::SIGKILL);
            os::signal(p.pid, Signal::KILL);
        }
    }

    /// The signal that interrupted the launcher, if one did.
    pub(super) fn interrupted(&self) -> Option<i32> {
        self.interrupted
    }

    /// `sig` (SIGINT, SIGTERM, SIGHUP) interrupts the launcher (the first
    /// one counts): the signal to forward to the ranks (SIGKILL when it had
    /// been interrupted before), and why their jobs fail.
    pub(super) fn interrupt(&mut self, sig: i32) -> (Signal, String) {
        let again = self.interrupted.is_some();
        self.interrupted.get_or_insert(sig);
        let s = if again {
            Signal::KILL
        } else {
            Signal::from_named_raw(sig).unwrap_or(Signal::TERM)
        };
        tracing::debug!("forwarding {} to the ranks", os::signal_name(sig));
        (s, format!("launcher received {}", os::signal_name(sig)))
    }

    pub(super) fn has_failure(&self) -> bool {
        self.failure.is_some()
    }

    /// The rank that failed the launcher, and its code, if any.
    pub(super) fn failed_rank(&self) -> Option<(JobIdx, u32, i32)> {
        self.failure.as_ref().map(|f| (f.job, f.rank, f.code))
    }

    /// The failure, its code, once it says all it will: the failed rank's
    /// own exit status replaces a lost connection when it comes within
    /// `wait` (see [`Self::refine_failure`]).
    pub(super) fn settled_failure(&self, wait: Duration) -> Option<(String, i32)> {
        let f = self.failure.as_ref()?;
        (!f.prefer_status || f.at.elapsed() >= wait).then(|| (f.message.clone(), f.code))
    }

    /// Print the failure's line now (once), not at exit.
    pub(super) fn announce_failure(&mut self) {
        if let Some(f) = self.failure.as_ref().filter(|_| !self.announced) {
            crate::errln!("fastpmi: {}", f.message);
            self.announced = true;
        }
    }

    /// The launcher fails with `f`, unless it already fails.
    pub(super) fn record(&mut self, f: Failure) {
        if self.failure.is_none() {
            self.failure = Some(f);
        }
    }

    /// Rank `rank` of `job` (named `name`) ended by itself with `status`:
    /// when its failure waited for that, its own status replaces code and
    /// message (it says more than "lost connection"). Returns whether it did.
    fn refine_failure(&mut self, job: JobIdx, rank: u32, name: &str, status: ExitStatus) -> bool {
        match &mut self.failure {
            Some(f) if f.prefer_status && f.job == job && f.rank == rank => {
                f.message = format!("{name} {} {}", os::describe_status(status), f.activity)
                    .trim_end()
                    .to_string();
                f.code = os::status_code(status);
                f.prefer_status = false;
                true
            }
            _ => false,
        }
    }

    /// The failure message, if the launcher will exit with one.
    pub(super) fn failure_message(&self) -> Option<String> {
        self.failure.as_ref().map(|f| f.message.clone())
    }

    /// The launcher's exit status, with its line (and `--verbose` report)
    /// on stderr.
    pub(super) fn exit_code(&self) -> i32 {
        if let Some(f) = &self.failure {
            if !self.announced {
                crate::errln!("fastpmi: {}", f.message);
            }
            if let Some(d) = &f.detail {
                eprint!("{d}");
            }
            return f.code;
        }
        if let Some(sig) = self.interrupted {
            crate::errln!(
                "fastpmi: interrupted by {}; ranks stopped",
                os::signal_name(sig)
            );
            return 128 + sig;
        }
        0
    }

    /// `--stats`: what each transport served, so a user can see which path
    /// the job took. Socket figures are counted by the server; shared-memory
    /// ones (`shm`) by the ranks themselves in their state words in the
    /// segment.
    pub(super) fn stats_report(&self, server: &Server, shm: RankStats) -> String {
        let sock = server.stats;
        let ranks = self.count();
        let mut out = format!("fastpmi stats: {ranks} ranks\n");
        out += &format!(
            "  {:<14} {:>10} {:>10} {:>10} {:>10}\n",
            "transport", "puts", "gets", "fences", "node-attr"
        );
        out += &format!(
            "  {:<14} {:>10} {:>10} {:>10} {:>10}\n",
            "socket", sock.puts, sock.gets, sock.fences, sock.node_attr_ops
        );
        out += &format!(
            "  {:<14} {:>10} {:>10} {:>10} {:>10}\n",
            "shared-memory", shm.puts, shm.gets, shm.fences, shm.node_attr_ops
        );
        out
    }
}

/// `job` failed: every job connected to it fails too (`job` with
/// `message`, the others because of it). Returns them all, whose ranks
/// are to be stopped.
pub(super) fn fail_connected(
    server: &mut Server,
    events: &mut Vec<Event>,
    job: JobIdx,
    code: i32,
    message: &str,
) -> Vec<JobIdx> {
    let group = server.connected_group(job);
    for &j in &group {
        let why = if j == job {
            message.to_string()
        } else {
            format!("connected job {} failed: {message}", server.job_id(job))
        };
        server.fail_job(j, None, code, &why, events);
    }
    group
}

/// One row of the `--stats` report (as `Procs::stats_report` writes
/// it): `[puts, gets, fences, node-attr]` of `transport` (`socket` or
/// `shared-memory`), for tools and tests that read the launcher's stderr.
pub fn stats_row(report: &str, transport: &str) -> Option<[u64; 4]> {
    report.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        if f.next()? != transport {
            return None;
        }
        let v: Vec<u64> = f.map(|x| x.parse().ok()).collect::<Option<_>>()?;
        v.try_into().ok()
    })
}
