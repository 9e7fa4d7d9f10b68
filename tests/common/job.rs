//! Running the launcher: [`launch`] builds a command line, [`Cmd::run`] and
//! [`Cmd::spawn`] run it under a timeout, [`Outcome`] is how it ended.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::kill_tree;

/// One row of the launcher's `--stats` report (on stderr):
/// `[puts, gets, fences, node-attr]` of `transport` (`socket` or
/// `shared-memory`).
pub fn stats_row(stderr: &str, transport: &str) -> Option<[u64; 4]> {
    fastpmi::launcher::stats_row(stderr, transport)
}

/// The launcher under test: fastpmi, or `FASTPMI_TEST_LAUNCHER` (see the
/// module docs; only for validating the tests against Hydra).
pub fn launcher() -> PathBuf {
    match std::env::var_os("FASTPMI_TEST_LAUNCHER") {
        Some(l) if !l.is_empty() => PathBuf::from(l),
        _ => PathBuf::from(env!("CARGO_BIN_EXE_fastpmi")),
    }
}

fn launcher_is_hydra(l: &Path) -> bool {
    l.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.contains("mpiexec") || n.contains("hydra"))
}

/// True when the tests run against Hydra instead of fastpmi.
pub fn under_hydra() -> bool {
    launcher_is_hydra(&launcher())
}

/// Translate fastpmi flags to Hydra's (validation mode only).
fn hydra_args(args: &[OsString]) -> Vec<OsString> {
    let mut total: u64 = 0;
    let mut saw_n = false;
    let mut it = args.iter().peekable();
    while let Some(a) = it.next() {
        if a == "-n" || a == "-np" {
            if let Some(n) = it
                .peek()
                .and_then(|v| v.to_str())
                .and_then(|v| v.parse::<u64>().ok())
            {
                total += n;
                saw_n = true;
            }
        }
    }
    let mut out: Vec<OsString> = vec![
        "-ppn".into(),
        (if saw_n { total } else { 1 }).to_string().into(),
    ];
    out.extend(args.iter().map(|a| {
        if a == "--label" {
            "-l".into()
        } else if a == "--pmi-port" {
            "-pmi-port".into()
        } else {
            a.clone()
        }
    }));
    out
}

/// A launcher invocation being built.
pub struct Cmd {
    launcher: Option<PathBuf>,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    env_removed: Vec<OsString>,
    cwd: Option<PathBuf>,
    timeout: Duration,
}

/// `fastpmi ARGS...` (default timeout 60 s).
pub fn launch<I, S>(args: I) -> Cmd
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    Cmd {
        launcher: None,
        args: args.into_iter().map(|a| a.as_ref().to_owned()).collect(),
        envs: Vec::new(),
        env_removed: Vec::new(),
        cwd: None,
        timeout: Duration::from_secs(60),
    }
}

impl Cmd {
    /// Run `program` with exactly these arguments instead of the launcher
    /// under test (for example `mpiexec.hydra`, or a program run without any
    /// launcher): no flag translation; same timeout, capture and cleanup.
    pub fn program(mut self, program: impl Into<PathBuf>) -> Self {
        self.launcher = Some(program.into());
        self
    }

    /// Set an environment variable in the launcher's own environment (ranks
    /// inherit the launcher's environment).
    pub fn env(mut self, k: impl AsRef<OsStr>, v: impl AsRef<OsStr>) -> Self {
        self.envs
            .push((k.as_ref().to_owned(), v.as_ref().to_owned()));
        self
    }

    /// Remove a variable from the launcher's environment.
    pub fn env_remove(mut self, k: impl AsRef<OsStr>) -> Self {
        self.env_removed.push(k.as_ref().to_owned());
        self
    }

    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Limit for [`Cmd::run`]: past it the job is killed and the test fails.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }

    fn describe(launcher: &Path, args: &[OsString]) -> String {
        let mut s = launcher.display().to_string();
        for a in args {
            s.push(' ');
            s.push_str(&a.to_string_lossy());
        }
        s
    }

    /// Start the launcher in its own process group with stdin closed and
    /// stdout/stderr captured.
    pub fn spawn(self) -> Job {
        let fixed = self.launcher.is_some();
        let launcher = self.launcher.clone().unwrap_or_else(launcher);
        let args = if !fixed && launcher_is_hydra(&launcher) {
            hydra_args(&self.args)
        } else {
            self.args.clone()
        };
        let mut cmd = Command::new(&launcher);
        cmd.args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        for k in &self.env_removed {
            cmd.env_remove(k);
        }
        for (k, v) in &self.envs {
            cmd.env(k, v);
        }
        if let Some(d) = &self.cwd {
            cmd.current_dir(d);
        }
        let what = Self::describe(&launcher, &args);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start `{what}`: {e}"));
        let stdout = reader(child.stdout.take().unwrap());
        let stderr_seen = Arc::new(Mutex::new(Vec::new()));
        let stderr = reader_into(child.stderr.take().unwrap(), stderr_seen.clone());
        Job {
            child,
            stdout: Some(stdout),
            stderr: Some(stderr),
            stderr_seen,
            started: Instant::now(),
            what,
            timeout: self.timeout,
        }
    }

    /// Run to completion within the timeout.
    pub fn run(self) -> Outcome {
        let t = self.timeout;
        let job = self.spawn();
        job.wait_or_kill(t)
    }
}

fn reader(r: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    reader_into(r, Arc::new(Mutex::new(Vec::new())))
}

/// Read `r` to its end into `seen` (so far readable by others), then hand
/// it all back.
fn reader_into(
    mut r: impl Read + Send + 'static,
    seen: Arc<Mutex<Vec<u8>>>,
) -> JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        loop {
            match r.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => seen.lock().unwrap().extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        seen.lock().unwrap().clone()
    })
}

/// A running launcher.
pub struct Job {
    child: Child,
    stdout: Option<JoinHandle<Vec<u8>>>,
    stderr: Option<JoinHandle<Vec<u8>>>,
    /// What the launcher wrote on stderr so far.
    stderr_seen: Arc<Mutex<Vec<u8>>>,
    started: Instant,
    what: String,
    timeout: Duration,
}

/// How a launcher run ended.
#[derive(Debug)]
pub struct Outcome {
    pub what: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Outcome {
    /// Exit code, or `None` if the launcher itself died of a signal.
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Non-empty stdout lines, in order.
    pub fn stdout_lines(&self) -> Vec<&str> {
        self.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect()
    }

    /// Non-empty stderr lines, in order.
    pub fn stderr_lines(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect()
    }

    /// A report of the run for assertion messages (output tails only).
    pub fn report(&self) -> String {
        format!(
            "command: {}\nstatus: {}\nelapsed: {:.2?}\n--- stdout (tail) ---\n{}\n--- stderr (tail) ---\n{}",
            self.what,
            describe_status(self.status),
            self.elapsed,
            tail(&self.stdout, 4000),
            tail(&self.stderr, 4000)
        )
    }

    /// Panic unless the launcher exited 0.
    pub fn assert_success(&self) {
        assert!(
            self.status.success(),
            "launcher did not exit 0\n{}",
            self.report()
        );
    }

    /// Panic unless the launcher exited with exactly `code`.
    pub fn assert_code(&self, code: i32) {
        assert_eq!(
            self.code(),
            Some(code),
            "launcher exit status should be {code}\n{}",
            self.report()
        );
    }

    /// Panic unless some stderr line names rank `r` (`rank R` not followed
    /// by another digit).
    pub fn assert_stderr_names_rank(&self, r: usize) {
        assert!(
            mentions_rank(&self.stderr, r),
            "stderr should name the failing rank as `rank {r}`\n{}",
            self.report()
        );
    }
}

pub fn describe_status(s: ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => format!("{s}"),
    }
}

fn tail(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut cut = s.len() - max;
    while !s.is_char_boundary(cut) {
        cut += 1;
    }
    format!("[... {cut} bytes cut ...]\n{}", &s[cut..])
}

/// True when `text` contains `rank R` with R not followed by another digit
/// (so `rank 1` does not match `rank 10`).
pub fn mentions_rank(text: &str, r: usize) -> bool {
    let needle = format!("rank {r}");
    text.match_indices(&needle).any(|(i, _)| {
        let after = text[i + needle.len()..].chars().next();
        !after.is_some_and(|c| c.is_ascii_digit())
    })
}

impl Job {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn started(&self) -> Instant {
        self.started
    }

    /// What the launcher has written on stderr so far (while it runs).
    pub fn stderr_so_far(&self) -> String {
        String::from_utf8_lossy(&self.stderr_seen.lock().unwrap()).into_owned()
    }

    /// Non-blocking: has the launcher exited?
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("waitpid on the launcher")
    }

    /// Wait up to `limit`; `Err(self)` if the launcher is still running.
    #[allow(clippy::result_large_err)] // the Err is the job itself, handed back
    pub fn wait_timeout(mut self, limit: Duration) -> Result<Outcome, Job> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.try_wait() {
                return Ok(self.collect(status));
            }
            if Instant::now() >= deadline {
                return Err(self);
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Wait up to `limit`; past it, kill the launcher and all its
    /// descendants and fail the test with whatever output there was.
    pub fn wait_or_kill(self, limit: Duration) -> Outcome {
        match self.wait_timeout(limit) {
            Ok(o) => o,
            Err(job) => {
                let out = job.kill_all();
                panic!(
                    "launcher still running after {limit:.0?}: killed it and its ranks\n{}",
                    out.report()
                );
            }
        }
    }

    /// SIGKILL the launcher and every descendant, then collect the output.
    pub fn kill_all(mut self) -> Outcome {
        let root = self.child.id();
        kill_tree(root);
        let status = self.child.wait().expect("wait for killed launcher");
        self.collect(status)
    }

    /// Wait up to the timeout given to the [`Cmd`].
    pub fn wait(self) -> Outcome {
        let t = self.timeout;
        self.wait_or_kill(t)
    }

    fn collect(&mut self, status: ExitStatus) -> Outcome {
        let elapsed = self.started.elapsed();
        // The pipes reach EOF once every process holding them is gone. A rank
        // that outlived the launcher would keep them open: do not wait for it
        // forever, the caller's leftover-process checks report it.
        let stdout = join_reader(self.stdout.take().unwrap(), Duration::from_secs(10));
        let stderr = join_reader(self.stderr.take().unwrap(), Duration::from_secs(10));
        Outcome {
            what: self.what.clone(),
            status,
            stdout,
            stderr,
            elapsed,
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        // A test that panics while its job runs must not leave the job behind.
        if let Ok(None) = self.child.try_wait() {
            kill_tree(self.child.id());
            let _ = self.child.wait();
        }
    }
}

fn join_reader(h: JoinHandle<Vec<u8>>, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    while !h.is_finished() {
        if Instant::now() >= deadline {
            return "[output pipe still open: some process outlived the launcher]".into();
        }
        thread::sleep(Duration::from_millis(10));
    }
    String::from_utf8_lossy(&h.join().unwrap_or_default()).into_owned()
}
