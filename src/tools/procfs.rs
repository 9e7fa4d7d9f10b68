//! What the kernel says of a rank's process: its scheduler state from
//! `/proc/PID/stat` and, for a process that is not running or sleeping,
//! when it last ran (`/proc/PID/sched`) and where it waits in the kernel
//! (`/proc/PID/wchan`). Plain file reads, no ptrace, nothing sent to the
//! process; a process may end between two reads, so every read can fail
//! and no content is trusted.

use std::fmt;
use std::fs;
use std::io::{self, Read};

/// The process state letter of `/proc/PID/stat`, for the main thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcState {
    /// `R`: running or runnable.
    Running,
    /// `S`: interruptible sleep (a futex, `poll`, `nanosleep`, ...).
    Sleeping,
    /// `D`: uninterruptible sleep (I/O, page faults, some locks).
    Uninterruptible,
    /// `T`: stopped by a signal (SIGSTOP, SIGTSTP, ...).
    Stopped,
    /// `t`: stopped by a tracer (a debugger).
    Traced,
    /// `Z`: exited, not reaped yet.
    Zombie,
    /// `X` / `x`: being torn down.
    Dead,
    /// Any other letter (`I` idle, `P` parked, `K`, `W`: kernel threads or
    /// old kernels).
    Other(char),
}

impl ProcState {
    fn from_letter(c: char) -> ProcState {
        match c {
            'R' => ProcState::Running,
            'S' => ProcState::Sleeping,
            'D' => ProcState::Uninterruptible,
            'T' => ProcState::Stopped,
            't' => ProcState::Traced,
            'Z' => ProcState::Zombie,
            'X' | 'x' => ProcState::Dead,
            c => ProcState::Other(c),
        }
    }

    /// The word `fastpmi ps` shows: `running`, `sleeping`,
    /// `uninterruptible`, `stopped`, `traced`, `zombie`, `dead`, `other`.
    pub fn word(self) -> &'static str {
        match self {
            ProcState::Running => "running",
            ProcState::Sleeping => "sleeping",
            ProcState::Uninterruptible => "uninterruptible",
            ProcState::Stopped => "stopped",
            ProcState::Traced => "traced",
            ProcState::Zombie => "zombie",
            ProcState::Dead => "dead",
            ProcState::Other(_) => "other",
        }
    }

    /// Whether the process cannot go on by itself for now (what a
    /// diagnosis points at): stopped, traced, uninterruptible, zombie, dead.
    pub fn is_held(self) -> bool {
        !matches!(
            self,
            ProcState::Running | ProcState::Sleeping | ProcState::Other(_)
        )
    }
}

impl fmt::Display for ProcState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())
    }
}

/// One process, as the kernel describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStatus {
    pub state: ProcState,
    /// How long ago it last ran on a CPU, in ns (the scheduler's clock),
    /// for a process that [`ProcState::is_held`], where the kernel has
    /// `/proc/PID/sched`. For a stopped or traced process that is about
    /// when it stopped; for a zombie, when it exited.
    pub last_ran_ns: Option<u64>,
    /// The kernel function an uninterruptible process waits in.
    pub wchan: Option<String>,
}

/// Why a process's state could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    /// The file could not be read (the process is gone, or `/proc` is
    /// not mounted).
    #[error("/proc/{pid}/{file}: {source}")]
    Read {
        pid: u32,
        file: &'static str,
        source: io::Error,
    },
    /// The file does not hold what this kernel interface documents.
    #[error("/proc/{pid}/{file}: unexpected content")]
    Format { pid: u32, file: &'static str },
}

/// The scheduler's clock now, as this thread's `/proc/thread-self/sched`
/// last stamped it (the reading thread runs, so its stamp is at most a
/// scheduler tick old), read once per table and only when needed.
#[derive(Debug, Default)]
pub struct SchedNow {
    read: bool,
    ns: Option<u64>,
}

impl SchedNow {
    fn get(&mut self) -> Option<u64> {
        if !self.read {
            self.read = true;
            self.ns = fs::read_to_string("/proc/thread-self/sched")
                .ok()
                .and_then(|s| exec_start_ns(&s));
        }
        self.ns
    }
}

/// The state letter of a `/proc/PID/stat` line (or of its first 256
/// bytes). The command name, in parentheses, may itself hold spaces and
/// parentheses: the state follows the last `)` (the fields after the state
/// are numbers).
pub fn stat_state(stat: &str) -> Option<ProcState> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let c = rest.trim_start().chars().next()?;
    Some(ProcState::from_letter(c))
}

/// `se.exec_start` of a `/proc/PID/sched` text (milliseconds with a
/// fraction), in ns.
pub fn exec_start_ns(sched: &str) -> Option<u64> {
    let line = sched
        .lines()
        .find(|l| l.split_whitespace().next() == Some("se.exec_start"))?;
    let ms: f64 = line.split(':').nth(1)?.trim().parse().ok()?;
    (ms.is_finite() && ms >= 0.0).then_some((ms * 1e6) as u64)
}

/// The state of process `pid` now. `now` caches the scheduler clock across
/// the processes of one table.
pub fn status(pid: u32, now: &mut SchedNow) -> Result<ProcStatus, ProcError> {
    let read_err = |source| ProcError::Read {
        pid,
        file: "stat",
        source,
    };
    // The state follows the command name, near the start: one read of the
    // line's head (no size query, no allocation; `ps` reads one per rank).
    let mut buf = [0u8; 256];
    let n = fs::File::open(format!("/proc/{pid}/stat"))
        .and_then(|mut f| f.read(&mut buf))
        .map_err(read_err)?;
    let stat = String::from_utf8_lossy(&buf[..n]);
    let state = stat_state(&stat).ok_or(ProcError::Format { pid, file: "stat" })?;
    let mut st = ProcStatus {
        state,
        last_ran_ns: None,
        wchan: None,
    };
    if !state.is_held() {
        return Ok(st);
    }
    // Details are best effort: the process may be gone by now, and a kernel
    // without scheduler debugging has no `sched` file.
    if let (Some(mine), Some(theirs)) = (
        now.get(),
        fs::read_to_string(format!("/proc/{pid}/sched"))
            .ok()
            .and_then(|s| exec_start_ns(&s)),
    ) {
        st.last_ran_ns = Some(mine.saturating_sub(theirs));
    }
    if state == ProcState::Uninterruptible {
        st.wchan = fs::read_to_string(format!("/proc/{pid}/wchan"))
            .ok()
            .map(|w| w.trim().to_string())
            .filter(|w| !w.is_empty() && w != "0");
    }
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines() {
        assert_eq!(
            stat_state("26528 (cat) R 26523 26523 24071 0 -1"),
            Some(ProcState::Running)
        );
        // A command name with spaces and parentheses.
        assert_eq!(stat_state("7 (a) b) (c) T 1 2 3"), Some(ProcState::Stopped));
        assert_eq!(stat_state("8 (x) t 1"), Some(ProcState::Traced));
        assert_eq!(stat_state("8 (x) Z 1"), Some(ProcState::Zombie));
        assert_eq!(stat_state("8 (x) I 1"), Some(ProcState::Other('I')));
        // Cut short, or nothing like a stat line: no state, no panic.
        assert_eq!(stat_state("8 (x)"), None);
        assert_eq!(stat_state("8 (x) "), None);
        assert_eq!(stat_state(""), None);
        assert_eq!(stat_state("garbage"), None);
    }

    #[test]
    fn sched_exec_start() {
        let s = "cat (26525, #threads: 1)\n---\nse.exec_start                                :       3583689.111001\nse.vruntime   :  219.78\n";
        assert_eq!(exec_start_ns(s), Some(3_583_689_111_001));
        assert_eq!(exec_start_ns("se.exec_start : x\n"), None);
        assert_eq!(exec_start_ns("se.exec_start : -1\n"), None);
        assert_eq!(exec_start_ns("nothing\n"), None);
        assert_eq!(exec_start_ns(""), None);
    }

    #[test]
    fn this_process_runs_or_sleeps_and_a_gone_one_is_an_error() {
        let mut now = SchedNow::default();
        // The main thread: the harness's, waiting for this test's thread.
        let me = status(std::process::id(), &mut now).unwrap();
        assert!(
            matches!(me.state, ProcState::Running | ProcState::Sleeping),
            "{me:?}"
        );
        assert!(!me.state.is_held());
        assert_eq!((me.last_ran_ns, me.wchan), (None, None));
        // Above the kernel's pid_max (at most 2^22).
        let e = status(u32::MAX - 1, &mut now).unwrap_err();
        assert!(matches!(e, ProcError::Read { file: "stat", .. }), "{e}");
    }

    #[test]
    fn a_stopped_child_shows_stopped_and_since_when() {
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .expect("sleep runs");
        let pid = child.id();
        let p = rustix::process::Pid::from_raw(pid as i32).unwrap();
        rustix::process::kill_process(p, rustix::process::Signal::STOP).unwrap();
        let mut seen = None;
        for _ in 0..500 {
            let s = status(pid, &mut SchedNow::default()).unwrap();
            if s.state == ProcState::Stopped {
                seen = Some(s);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        let s = seen.expect("the child shows as stopped");
        assert!(s.state.is_held());
        if std::path::Path::new("/proc/self/sched").exists() {
            assert!(s.last_ran_ns.is_some(), "{s:?}");
        }
    }
}
