//! A private single-node Slurm for the Slurm tests: `scripts/slurm-up` in a
//! scratch directory, `scripts/slurm-down` at the end.
//!
//! The daemons are started once per test binary. Stopping them does not
//! depend on this process ending well: before `slurm-up` runs, a watchdog
//! shell (its own process group, deaf to SIGINT/SIGTERM/SIGHUP) blocks
//! reading a pipe from this process. [`Cluster::stop`] stops the daemons
//! itself, checks that none of their processes is left, and then tells the
//! watchdog it is done; if this process dies first (panic, kill -9, ^C) the
//! pipe closes and the watchdog runs `slurm-down` and removes the directory.
//! `slurm-down` ends only processes whose executable is one of the
//! directory's copies of the daemons, by pid.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;

/// The watchdog: `sh -c WATCHDOG sh <scripts dir> <cluster dir>`.
const WATCHDOG: &str = r#"trap '' INT TERM HUP PIPE
read cmd
[ "$cmd" = done ] && exit 0
exec >/dev/null 2>&1
"$1/slurm-down" "$2"
rm -rf "$2""#;

/// Executables `slurm-up` copies into `<dir>/bin` (their processes are
/// this cluster's).
pub const DAEMONS: [&str; 4] = ["munged", "slurmctld", "slurmd", "slurmstepd"];

pub struct Cluster {
    pub dir: PathBuf,
    pub conf: PathBuf,
    /// (name, pid) of munged, slurmctld, slurmd, from their pid files.
    pub daemons: Vec<(String, u32)>,
    watchdog: Child,
    to_watchdog: Option<ChildStdin>,
    stopped: bool,
}

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts")
}

/// Root is needed: slurmd runs each job step as its user and the daemons
/// run as SlurmUser=root.
pub fn require_root() {
    if !rustix::process::geteuid().is_root() {
        panic!(
            "the Slurm tests need root: they start munged, slurmctld and slurmd (SlurmUser=root) \
             and slurmd runs job steps as their user; run them as root (scripts/test-all does \
             on CI) or with sudo"
        );
    }
}

/// The Slurm and munge programs this needs, and the Debian package of each.
const TOOLS: [(&str, &str); 9] = [
    ("munged", "munge"),
    ("mungekey", "munge"),
    ("slurmctld", "slurmctld"),
    ("slurmd", "slurmd"),
    ("slurmstepd", "slurmd"),
    ("srun", "slurm-client"),
    ("sinfo", "slurm-client"),
    ("squeue", "slurm-client"),
    ("scancel", "slurm-client"),
];

/// Fail, naming the Debian package, when a Slurm or munge program is not
/// in `PATH`.
pub fn require_slurm() {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let missing: Vec<String> = TOOLS
        .iter()
        .filter(|(tool, _)| !std::env::split_paths(&path).any(|d| d.join(tool).is_file()))
        .map(|(tool, pkg)| format!("{tool} (Debian package {pkg})"))
        .collect();
    assert!(
        missing.is_empty(),
        "Slurm is needed and not installed: {} not found in PATH; install the Debian packages \
         `munge slurmctld slurmd slurm-client` (apt-get install munge slurmctld slurmd \
         slurm-client; scripts/test-all does)",
        missing.join(", ")
    );
}

impl Cluster {
    /// Start the daemons and wait until the node is idle. Panics with
    /// `slurm-up`'s message (which names the Debian package if Slurm or
    /// munge is missing).
    pub fn start() -> Cluster {
        require_root();
        // Short path: munged's socket path must fit in sun_path.
        let dir = tempfile::Builder::new()
            .prefix("fastpmi-slurm-")
            .tempdir()
            .expect("scratch directory for Slurm")
            .keep();
        let mut watchdog = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG)
            .arg("sh")
            .arg(scripts())
            .arg(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("start the Slurm watchdog shell");
        let to_watchdog = watchdog.stdin.take();
        let mut cluster = Cluster {
            conf: dir.join("slurm.conf"),
            dir,
            daemons: Vec::new(),
            watchdog,
            to_watchdog,
            stopped: false,
        };
        let up = Command::new(scripts().join("slurm-up"))
            .arg(&cluster.dir)
            .stdin(Stdio::null())
            .output()
            .expect("run scripts/slurm-up");
        if !up.status.success() {
            // Drop (unwinding) hands the cleanup to the watchdog.
            panic!(
                "scripts/slurm-up failed ({}): {}{}",
                up.status,
                String::from_utf8_lossy(&up.stdout),
                String::from_utf8_lossy(&up.stderr)
            );
        }
        for name in ["munged", "slurmctld", "slurmd"] {
            let pf = cluster.dir.join("run").join(format!("{name}.pid"));
            let pid: u32 = std::fs::read_to_string(&pf)
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or_else(|| panic!("{} missing after slurm-up", pf.display()));
            assert!(common::pid_alive(pid), "{name} (pid {pid}) is not running");
            cluster.daemons.push((name.to_string(), pid));
        }
        cluster
    }

    /// `srun ARGS...` against this cluster (timeout 120 s).
    pub fn srun<I, S>(&self, args: I) -> common::Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        common::launch(args)
            .program("srun")
            .env("SLURM_CONF", &self.conf)
            .timeout(Duration::from_secs(120))
    }

    /// Live processes of this cluster (executable in `<dir>/bin`).
    pub fn processes(&self) -> Vec<(u32, char, String)> {
        DAEMONS
            .iter()
            .flat_map(|d| common::processes_with_exe(&self.dir.join("bin").join(d)))
            .collect()
    }

    /// The tail of the daemons' logs, for failure messages.
    pub fn logs(&self) -> String {
        let mut s = String::new();
        for l in ["slurmctld.log", "slurmd.log", "munged.log"] {
            let text = std::fs::read_to_string(self.dir.join("log").join(l)).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            s.push_str(&format!("--- {l} (tail) ---\n"));
            for line in &lines[lines.len().saturating_sub(15)..] {
                s.push_str(line);
                s.push('\n');
            }
        }
        s
    }

    /// Stop every daemon (`slurm-down`), then check that no process of the
    /// cluster is left and that the daemons started are gone; remove the
    /// directory. `Err` says what went wrong.
    pub fn stop(mut self) -> Result<(), String> {
        self.stopped = true;
        let down = Command::new(scripts().join("slurm-down"))
            .arg(&self.dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("run scripts/slurm-down: {e}"))?;
        let mut problems = Vec::new();
        if !down.status.success() {
            problems.push(format!(
                "scripts/slurm-down failed ({}): {}",
                down.status,
                String::from_utf8_lossy(&down.stderr)
            ));
        }
        let left = self.processes();
        if !left.is_empty() {
            problems.push(format!("Slurm/munge processes left: {left:?}"));
        }
        for (name, pid) in &self.daemons {
            if common::pid_alive(*pid) {
                problems.push(format!("{name} (pid {pid}) still running"));
            }
        }
        self.release_watchdog();
        if problems.is_empty() {
            std::fs::remove_dir_all(&self.dir)
                .map_err(|e| format!("remove {}: {e}", self.dir.display()))?;
            Ok(())
        } else {
            Err(format!(
                "{}\n(cluster directory kept: {})",
                problems.join("\n"),
                self.dir.display()
            ))
        }
    }

    /// Tell the watchdog the daemons are stopped, and reap it.
    fn release_watchdog(&mut self) {
        if let Some(mut w) = self.to_watchdog.take() {
            let _ = w.write_all(b"done\n");
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.watchdog.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.stopped {
            // Closing the pipe makes the watchdog stop the daemons and
            // remove the directory.
            drop(self.to_watchdog.take());
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.watchdog.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}
