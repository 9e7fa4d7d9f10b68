//! Supervision: reaping ranks, failures (a failing rank ends its job and
//! every job connected to it), signals to the launcher, teardown and the
//! exit status.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::atomic::Ordering;
use std::time::Instant;

use rustix::process::Signal;
use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGTERM, SIGUSR1};

use super::{os, Launcher, KILL_GRACE};
use fastpmi_server::JobIdx;

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
}

/// One row of the `--stats` report (as [`Launcher::stats_report`] writes
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

impl Launcher {
    /// `--stats`: what each transport served, so a user can see which path
    /// the job took. Socket figures are counted by the server; shared-memory
    /// ones by the ranks themselves in their state words in the segment.
    pub fn stats_report(&self) -> String {
        let sock = self.server.stats;
        let mut shm = self.shm_stats_done;
        for seg in self.jobs.iter().filter_map(|j| j.segment.as_ref()) {
            add_stats(&mut shm, seg);
        }
        let ranks = self.procs.len();
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

    /// The failure message, if the launcher will exit with one.
    pub(super) fn failure_message(&self) -> Option<String> {
        self.failure.as_ref().map(|f| f.message.clone())
    }

    pub(super) fn exit_code(&self) -> i32 {
        if let Some(f) = &self.failure {
            crate::errln!("fastpmi: {}", f.message);
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

    pub(super) fn on_signals(&mut self) {
        let pending: Vec<i32> = self.signals.pending().collect();
        for sig in pending {
            match sig {
                SIGCHLD => self.reap(),
                SIGUSR1 => self.print_report(),
                SIGINT | SIGTERM | SIGHUP => {
                    let again = self.interrupted.is_some();
                    self.interrupted.get_or_insert(sig);
                    let s = if again {
                        Signal::KILL
                    } else {
                        Signal::from_named_raw(sig).unwrap_or(Signal::TERM)
                    };
                    tracing::debug!("forwarding {} to the ranks", os::signal_name(sig));
                    let msg = format!("launcher received {}", os::signal_name(sig));
                    for job in 0..self.jobs.len() {
                        self.server
                            .fail_job(job, None, 128 + sig, &msg, &mut self.events);
                    }
                    self.begin_teardown(s);
                }
                _ => {}
            }
        }
        // Signals coalesce; reap anyway so no exit is missed.
        self.reap();
    }

    pub(super) fn reap(&mut self) {
        for (pid, status) in os::reap() {
            match self.by_pid.get(&pid) {
                Some(&i) => self.rank_ended(i, status),
                // A rank whose forker has not reported it yet (or no rank).
                None => {
                    self.unclaimed_exits.insert(pid, status);
                }
            }
        }
        self.apply_events();
    }

    /// Rank process `i` ended with `status`.
    pub(super) fn rank_ended(&mut self, i: usize, status: std::process::ExitStatus) {
        let p = &mut self.procs[i];
        if p.status.is_some() {
            return;
        }
        p.status = Some(status);
        p.ended = Some(Instant::now());
        let (job, rank, ours) = (p.job, p.rank, p.signaled);
        let clean = status.success();
        tracing::debug!(job, rank, "rank {}", os::describe_status(status));
        // After SIGINT/SIGTERM/SIGHUP to the launcher, however a rank
        // ends (killed, or exiting on its own when its fence fails) it
        // was stopped by us: the exit status says "interrupted".
        let by_us =
            self.interrupted.is_some() || ours.is_some_and(|s| os::status_code(status) == 128 + s);
        if !clean && !by_us {
            let name = self.server.rank_name(job, rank);
            let activity = self.server.rank_activity(job, rank);
            let message = format!("{name} {} {activity}", os::describe_status(status))
                .trim_end()
                .to_string();
            if self.failure.is_none()
                && self
                    .server
                    .group_member_lost(job, rank, &message, &mut self.events)
            {
                crate::errln!(
                    "fastpmi: {message}; tolerated (--tolerate-group-failures): its process groups are marked failed"
                );
                self.server.rank_exited(job, rank, clean, &mut self.events);
                self.rank_gone(job);
                return;
            }
            let code = os::status_code(status);
            match &mut self.failure {
                // The failing rank's own status says more than "lost connection".
                Some(f) if f.prefer_status && f.job == job && f.rank == rank => {
                    f.message = format!("{name} {} {}", os::describe_status(status), f.activity)
                        .trim_end()
                        .to_string();
                    f.code = code;
                    f.prefer_status = false;
                }
                _ => {
                    self.record_failure(job, rank, message.clone(), code, activity, false);
                    if !self.jobs[job].torn_down {
                        self.server
                            .fail_job(job, Some(rank), code, &message, &mut self.events);
                        self.fail_group(job, code, &message);
                    }
                }
            }
        }
        self.server.rank_exited(job, rank, clean, &mut self.events);
        self.rank_gone(job);
    }

    pub(super) fn record_failure(
        &mut self,
        job: JobIdx,
        rank: u32,
        message: String,
        code: i32,
        activity: String,
        prefer_status: bool,
    ) {
        if self.failure.is_none() {
            let detail = self.failure_detail(job);
            self.failure = Some(Failure {
                job,
                rank,
                message,
                code,
                activity,
                prefer_status,
                detail,
            });
        }
    }

    /// `job` failed: fail every job connected to it too and stop their ranks.
    pub(super) fn fail_group(&mut self, job: JobIdx, code: i32, message: &str) {
        let group = self.server.connected_group(job);
        for &j in &group {
            let why = if j == job {
                message.to_string()
            } else {
                format!(
                    "connected job {} failed: {message}",
                    self.server.job_id(job)
                )
            };
            self.server.fail_job(j, None, code, &why, &mut self.events);
        }
        self.teardown_jobs(&group, Signal::TERM);
    }

    /// Send `sig` to the running ranks of `jobs`, drop their ranks not
    /// started yet, and arm the SIGKILL deadline.
    fn teardown_jobs(&mut self, jobs: &[JobIdx], sig: Signal) {
        for &j in jobs {
            self.jobs[j].torn_down = true;
        }
        let mut dropped = Vec::new();
        self.pending.retain(|p| {
            let keep = !jobs.contains(&p.job);
            if !keep {
                dropped.push(p.job);
            }
            keep
        });
        for j in dropped {
            self.rank_gone(j);
        }
        for p in self
            .procs
            .iter_mut()
            .filter(|p| p.status.is_none() && jobs.contains(&p.job))
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

    /// A rank of `job` was reaped or will never start. When it was the
    /// last, the job has ended: its watchers stop and its segment goes.
    pub(super) fn rank_gone(&mut self, job: JobIdx) {
        let j = &mut self.jobs[job];
        j.live = j.live.saturating_sub(1);
        if j.live > 0 {
            return;
        }
        j.stop.store(true, Ordering::Relaxed);
        self.slot_load.release(&std::mem::take(&mut j.slots));
        j.fence_watcher = None;
        j.parent_segment = None;
        if let Some(seg) = j.segment.take() {
            add_stats(&mut self.shm_stats_done, &seg);
        }
        let listener = self
            .listeners
            .iter()
            .find(|(_, (_, jb))| *jb == job)
            .map(|(t, _)| *t);
        if let Some(tok) = listener {
            if let Some((mut l, _)) = self.listeners.remove(&tok) {
                let _ = self.poll.registry().deregister(&mut l);
            }
        }
        tracing::debug!(job = %self.server.job_id(job), "job ended");
    }

    /// Send `sig` to every running rank and arm the SIGKILL deadline.
    pub(super) fn begin_teardown(&mut self, sig: Signal) {
        for j in &mut self.jobs {
            j.torn_down = true;
        }
        let dropped: Vec<JobIdx> = self.pending.drain(..).map(|p| p.job).collect();
        for j in dropped {
            self.rank_gone(j);
        }
        for p in self.procs.iter_mut().filter(|p| p.status.is_none()) {
            if p.signaled.is_none() || sig == Signal::KILL {
                p.signaled = Some(sig.as_raw());
                os::signal(p.pid, sig);
            }
        }
        if sig != Signal::KILL && self.kill_at.is_none() {
            self.kill_at = Some(Instant::now() + KILL_GRACE);
        }
    }
}

fn add_stats(sum: &mut shm_layout::RankStats, seg: &fastpmi_segment::JobSegment) {
    for r in seg.seg().ranks() {
        let st = r.stats();
        sum.puts += st.puts;
        sum.gets += st.gets;
        sum.fences += st.fences;
        sum.node_attr_ops += st.node_attr_ops;
    }
}
