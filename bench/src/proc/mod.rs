//! Running one benchmark job: spawn the launcher in its own process group,
//! time it from spawn to exit, capture its output, sample its memory, and
//! kill the whole tree on timeout.
//!
//! The calling thread does the watching: one `poll` over the launcher's
//! output pipes and a pidfd that becomes readable when it exits. The harness
//! used to start three threads (two readers, one waiter) right after each
//! spawn; on a 2-vCPU VM their creation competed with the job being timed
//! for its first 0.3 ms, more for a launcher that uses the second CPU than
//! for the `posix_spawn` floor. Where the kernel has no pidfds (before
//! Linux 5.3) those threads still do it ([`run_with_threads`]).
//!
//! The exit is observed first without reaping: the launcher stays a zombie
//! (its pid cannot be reused) until the memory sampler has stopped, and the
//! wall time is taken at the moment of exit, not when some thread got
//! around to noticing it.
//!
//! Memory sampling is in [`memory`], the polling of a command against the
//! running launcher (`fastpmi ps`) in [`poll`], the process table both the
//! sampler and [`kill_tree`] read in [`table`].

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

mod memory;
mod poll;
mod table;
mod watch;

pub use memory::{Mem, MemProbe};
pub use poll::{Classify, Poll, Polled};
use table::descendants;
use watch::{drain_until_closed, watch, Pipe};

/// Keep at most this much of a job's stderr (the tail is what explains a failure).
const STDERR_KEEP: usize = 64 * 1024;

/// A job to run.
#[derive(Debug, Clone)]
pub struct Spec {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env_set: Vec<(OsString, OsString)>,
    pub env_remove: Vec<OsString>,
    pub cwd: Option<PathBuf>,
    pub timeout: Duration,
    pub mem: MemProbe,
    pub poll: Option<Poll>,
}

impl Spec {
    /// The command as a shell-like string, for the report.
    pub fn display(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        for (k, v) in &self.env_set {
            parts.push(format!("{}={}", k.to_string_lossy(), v.to_string_lossy()));
        }
        parts.push(self.program.to_string_lossy().into_owned());
        parts.extend(self.args.iter().map(|a| a.to_string_lossy().into_owned()));
        parts.join(" ")
    }
}

/// How the job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    Exited(i32),
    Signaled(i32),
    TimedOut,
    SpawnFailed(String),
}

impl End {
    pub fn describe(&self, timeout: Duration) -> String {
        match self {
            End::Exited(c) => format!("exit status {c}"),
            End::Signaled(s) => format!("killed by signal {s}"),
            End::TimedOut => format!(
                "timed out after {} s (process tree killed)",
                timeout.as_secs()
            ),
            End::SpawnFailed(e) => format!("could not start: {e}"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub end: End,
    pub wall: Duration,
    pub stdout: String,
    pub stderr: String,
    pub mem: Option<Mem>,
    /// The polls made while the job ran (see [`Poll`]).
    pub polls: Vec<Polled>,
}

/// Output of a reader thread; shared so that a reader still blocked (an
/// orphaned descendant holding the pipe) does not hold back what it has read.
type Sink = Arc<Mutex<Vec<u8>>>;

fn spawn_reader(
    mut from: impl Read + Send + 'static,
    keep_tail: Option<usize>,
) -> (Sink, mpsc::Receiver<()>) {
    let sink: Sink = Arc::default();
    let (tx, rx) = mpsc::channel();
    let s = sink.clone();
    thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let mut v = s.lock().unwrap_or_else(|p| p.into_inner());
                    watch::append(&mut v, &buf[..n], keep_tail);
                }
            }
        }
        let _ = tx.send(());
    });
    (sink, rx)
}

fn take(sink: &Sink, keep_tail: Option<usize>) -> String {
    watch::text(&sink.lock().unwrap_or_else(|p| p.into_inner()), keep_tail)
}

/// The command of `spec`, its output piped, in a process group of its own.
fn command(spec: &Spec) -> Command {
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Own process group: on timeout the launcher and everything it
        // started go down with one kill(-pgid).
        .process_group(0);
    for k in &spec.env_remove {
        cmd.env_remove(k);
    }
    for (k, v) in &spec.env_set {
        cmd.env(k, v);
    }
    if let Some(d) = &spec.cwd {
        cmd.current_dir(d);
    }
    cmd
}

fn spawn_failed(spec: &Spec, e: std::io::Error) -> Outcome {
    Outcome {
        end: End::SpawnFailed(format!("{}: {e}", spec.program.display())),
        wall: Duration::ZERO,
        stdout: String::new(),
        stderr: String::new(),
        mem: None,
        polls: Vec::new(),
    }
}

/// How a reaped child ended.
fn end_of(status: std::io::Result<std::process::ExitStatus>) -> End {
    match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(c), _) => End::Exited(c),
            (None, Some(sig)) => End::Signaled(sig),
            _ => End::Exited(-1),
        },
        Err(e) => End::SpawnFailed(format!("wait: {e}")),
    }
}

/// The threads a run may ask for beside the watch: the memory sampler and
/// the poller of a command against the launcher, each with its stop flag.
struct Helpers {
    stop: Arc<AtomicBool>,
    sampler: Option<thread::JoinHandle<Option<Mem>>>,
    poll_stop: Arc<AtomicBool>,
    poller: Option<thread::JoinHandle<Vec<Polled>>>,
}

impl Helpers {
    fn start(spec: &Spec, pid: i32, t0: Instant) -> Helpers {
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = (spec.mem != MemProbe::None).then(|| {
            let stop = stop.clone();
            let probe = spec.mem;
            thread::spawn(move || memory::sample(pid, probe, &stop))
        });
        let poll_stop = Arc::new(AtomicBool::new(false));
        let poller = spec.poll.clone().map(|p| {
            let stop = poll_stop.clone();
            thread::spawn(move || poll::poll_launcher(pid, &p, t0, &stop))
        });
        Helpers {
            stop,
            sampler,
            poll_stop,
            poller,
        }
    }

    /// The launcher has exited: stop both, take the sampler's figures, and
    /// the poller to join once the output is read.
    fn stop(self) -> (Option<Mem>, Option<thread::JoinHandle<Vec<Polled>>>) {
        self.stop.store(true, Ordering::Release);
        self.poll_stop.store(true, Ordering::Release);
        let mem = self.sampler.and_then(|h| {
            h.thread().unpark();
            h.join().ok().flatten()
        });
        (mem, self.poller)
    }
}

/// Join the poller of a run, if it had one.
fn polls_of(poller: Option<thread::JoinHandle<Vec<Polled>>>) -> Vec<Polled> {
    poller
        .and_then(|h| {
            h.thread().unpark();
            h.join().ok()
        })
        .unwrap_or_default()
}

/// Run `spec` to completion (or timeout). Never panics on job failure.
pub fn run(spec: &Spec) -> Outcome {
    let mut cmd = command(spec);
    let t0 = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return spawn_failed(spec, e),
    };
    let pid = child.id() as i32;
    let pidfd = pid_of(pid)
        .and_then(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok());
    let Some(pidfd) = pidfd else {
        return run_with_threads(spec, child, t0);
    };
    let mut out = Pipe::new(child.stdout.take().expect("piped stdout").into(), None);
    let mut err = Pipe::new(
        child.stderr.take().expect("piped stderr").into(),
        Some(STDERR_KEEP),
    );

    let helpers = Helpers::start(spec, pid, t0);
    let mut exited = watch(&pidfd, &mut out, &mut err, t0 + spec.timeout);
    let timed_out = exited.is_none();
    if timed_out {
        kill_tree(pid);
        exited = watch(
            &pidfd,
            &mut out,
            &mut err,
            Instant::now() + Duration::from_secs(30),
        );
    }
    let (mem, poller) = helpers.stop();
    let (end, wall) = match exited {
        Some(t_end) => {
            let status = child.wait();
            let end = if timed_out {
                End::TimedOut
            } else {
                end_of(status)
            };
            (end, t_end - t0)
        }
        None => (End::TimedOut, t0.elapsed()),
    };
    // The launcher is gone; its pipes close when the last holder exits. A
    // holder that outlives the launcher is a stray rank or proxy: kill the
    // group (it still exists only if such members remain) and move on.
    if !drain_until_closed(&mut out, &mut err, Duration::from_secs(5)) {
        kill_group(pid);
        drain_until_closed(&mut out, &mut err, Duration::from_secs(2));
    }
    let polls = polls_of(poller);
    Outcome {
        end,
        wall,
        stdout: out.text(),
        stderr: err.text(),
        mem,
        polls,
    }
}

/// [`run`] where the kernel gives no pidfd: reader threads and a waiter
/// thread.
fn run_with_threads(spec: &Spec, mut child: std::process::Child, t0: Instant) -> Outcome {
    let pid = child.id() as i32;
    let (out_sink, out_done) = spawn_reader(child.stdout.take().expect("piped stdout"), None);
    let (err_sink, err_done) = spawn_reader(
        child.stderr.take().expect("piped stderr"),
        Some(STDERR_KEEP),
    );

    let helpers = Helpers::start(spec, pid, t0);
    let (wtx, wrx) = mpsc::channel();
    thread::spawn(move || {
        wait_exited_nowait(pid);
        let t_end = Instant::now();
        let (mem, poller) = helpers.stop();
        let status = child.wait();
        let _ = wtx.send((status, t_end, mem, poller));
    });

    let (waited, timed_out) = match wrx.recv_timeout(spec.timeout) {
        Ok(w) => (Some(w), false),
        Err(_) => {
            kill_tree(pid);
            (wrx.recv_timeout(Duration::from_secs(30)).ok(), true)
        }
    };
    let (end, wall, mem, poller) = match waited {
        Some((status, t_end, mem, poller)) => {
            let end = if timed_out {
                End::TimedOut
            } else {
                end_of(status)
            };
            (end, t_end - t0, mem, poller)
        }
        None => (End::TimedOut, t0.elapsed(), None, None),
    };

    // The launcher is gone; its pipes close when the last holder exits. A
    // holder that outlives the launcher is a stray rank or proxy: kill the
    // group (it still exists only if such members remain) and move on.
    for done in [&out_done, &err_done] {
        if done.recv_timeout(Duration::from_secs(5)).is_err() {
            kill_group(pid);
            let _ = done.recv_timeout(Duration::from_secs(2));
        }
    }
    // On a timeout the wait thread never got to stop the poller.
    let polls = polls_of(poller);
    Outcome {
        end,
        wall,
        stdout: take(&out_sink, None),
        stderr: take(&err_sink, Some(STDERR_KEEP)),
        mem,
        polls,
    }
}

/// Make this process the reaper of its orphaned descendants. Hydra's proxies
/// run in sessions of their own; when a timed-out job is killed they are
/// re-parented, and the init of some containers never reaps them. As their
/// subreaper the harness collects them itself ([`reap_orphans`]).
pub fn become_subreaper() {
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
}

fn pid_of(pid: i32) -> Option<rustix::process::Pid> {
    rustix::process::Pid::from_raw(pid)
}

/// SIGKILL a process group; one that is already gone is not an error.
fn kill_group(pgid: i32) {
    if let Some(p) = pid_of(pgid) {
        let _ = rustix::process::kill_process_group(p, rustix::process::Signal::KILL);
    }
}

/// Reap every exited child that nobody waits for (orphans re-parented to
/// us). Called between runs, when no waiter thread is active.
pub fn reap_orphans() {
    while let Ok(Some(_)) = rustix::process::wait(rustix::process::WaitOptions::NOHANG) {}
}

/// Block until `pid` has exited, leaving it a zombie (not reaped).
fn wait_exited_nowait(pid: i32) {
    use rustix::process::{waitid, WaitId, WaitIdOptions};
    let Some(p) = pid_of(pid) else { return };
    loop {
        match waitid(
            WaitId::Pid(p),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        ) {
            Err(rustix::io::Errno::INTR) => continue,
            _ => return,
        }
    }
}

/// SIGKILL `root`'s process group and every descendant (some launchers move
/// their children to other groups or sessions).
pub fn kill_tree(root: i32) {
    let desc = descendants(root);
    kill_group(root);
    for p in desc.into_iter().filter_map(pid_of) {
        let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn spec(prog: &str, args: &[&str], timeout: Duration) -> Spec {
        Spec {
            program: prog.into(),
            args: args.iter().map(OsString::from).collect(),
            env_set: vec![],
            env_remove: vec![],
            cwd: None,
            timeout,
            mem: MemProbe::Launcher,
            poll: None,
        }
    }

    #[test]
    fn captures_output_and_status() {
        let o = run(&spec(
            "/bin/sh",
            &["-c", "echo out; echo err >&2; exit 3"],
            Duration::from_secs(30),
        ));
        assert_eq!(o.end, End::Exited(3));
        assert_eq!(o.stdout, "out\n");
        assert_eq!(o.stderr, "err\n");
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let t = Instant::now();
        // The background sleep keeps stdout open: it must die with the group.
        let o = run(&spec(
            "/bin/sh",
            &["-c", "sleep 60 & sleep 60; echo never"],
            Duration::from_millis(300),
        ));
        assert_eq!(o.end, End::TimedOut);
        assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
        assert!(!o.stdout.contains("never"));
    }

    #[test]
    fn output_larger_than_a_pipe_is_read_whole_while_the_job_runs() {
        // 1 MiB on stdout, then a line on stderr and an exit: a watch that
        // read only after the exit would leave the job blocked on a full pipe.
        let o = run(&spec(
            "/bin/sh",
            &[
                "-c",
                "head -c 1048576 /dev/zero | tr '\\0' x; echo done >&2",
            ],
            Duration::from_secs(30),
        ));
        assert_eq!(o.end, End::Exited(0));
        assert_eq!(o.stdout.len(), 1 << 20);
        assert!(o.stdout.bytes().all(|b| b == b'x'));
        assert_eq!(o.stderr, "done\n");
    }

    #[test]
    fn the_threaded_watch_captures_output_and_status_too() {
        let s = spec(
            "/bin/sh",
            &["-c", "echo out; echo err >&2; exit 4"],
            Duration::from_secs(30),
        );
        let t0 = Instant::now();
        let child = command(&s).spawn().unwrap();
        let o = run_with_threads(&s, child, t0);
        assert_eq!(o.end, End::Exited(4));
        assert_eq!((o.stdout.as_str(), o.stderr.as_str()), ("out\n", "err\n"));
    }

    #[test]
    fn spawn_failure_is_reported() {
        let o = run(&spec("/nonexistent/prog", &[], Duration::from_secs(5)));
        assert!(matches!(o.end, End::SpawnFailed(_)));
    }
}
