//! A command run periodically against a job's launcher while the job runs
//! (`fastpmi ps PID --json`), each run timed and its output classified.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// A command run every `period` against the job's launcher while it runs
/// (`fastpmi ps PID --json`), each run timed. `{pid}` in an argument is
/// replaced by the launcher's pid.
#[derive(Debug, Clone)]
pub struct Poll {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub period: Duration,
    /// Which successful answers show the job in the state being measured
    /// ([`Polled::matched`]); None: none are classified.
    pub classify: Option<Classify>,
}

/// A test of a poll's stdout, run in the poller after the command was timed
/// (so that a poll can be counted only if the job was, by its own answer, in
/// the state the measurement is about).
#[derive(Clone)]
pub struct Classify(pub Arc<ClassifyFn>);

/// The test itself: true when the output shows the wanted state.
pub type ClassifyFn = dyn Fn(&[u8]) -> bool + Send + Sync;

impl std::fmt::Debug for Classify {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Classify(..)")
    }
}

/// One poll: how long the whole command took, whether it succeeded with
/// output, and whether that output passed [`Poll::classify`] (false when
/// there is no classifier or the poll failed).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Polled {
    /// When the command started, ms after the job's launch.
    pub at_ms: f64,
    pub ms: f64,
    pub ok: bool,
    pub matched: bool,
}

/// Run `p` every `p.period` until `stop`, timing each run.
pub(super) fn poll_launcher(pid: i32, p: &Poll, t0: Instant, stop: &AtomicBool) -> Vec<Polled> {
    let args: Vec<String> = p
        .args
        .iter()
        .map(|a| a.replace("{pid}", &pid.to_string()))
        .collect();
    let mut out = Vec::new();
    loop {
        thread::park_timeout(p.period);
        if stop.load(Ordering::Acquire) {
            return out;
        }
        let t = Instant::now();
        let r = Command::new(&p.program)
            .args(&args)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output();
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let stdout = r
            .ok()
            .filter(|o| o.status.success() && !o.stdout.is_empty())
            .map(|o| o.stdout);
        let matched = match (&stdout, &p.classify) {
            (Some(s), Some(c)) => (c.0)(s),
            _ => false,
        };
        out.push(Polled {
            at_ms: t.duration_since(t0).as_secs_f64() * 1e3,
            ms,
            ok: stdout.is_some(),
            matched,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::tests::spec;
    use crate::proc::{run, End, MemProbe};

    #[test]
    fn polls_are_timed_and_classified_on_their_output() {
        // The job lives ~1 s; the poll command prints a line that names
        // the launcher's pid (so `{pid}` was substituted) and the
        // classifier accepts only that line.
        let mut s = spec("/bin/sh", &["-c", "sleep 1"], Duration::from_secs(30));
        s.mem = MemProbe::None;
        let poll = |classify: Option<Classify>| Poll {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), "echo launcher $0".into(), "{pid}".into()],
            period: Duration::from_millis(100),
            classify,
        };
        s.poll = Some(poll(Some(Classify(Arc::new(|out: &[u8]| {
            let t = String::from_utf8_lossy(out);
            t.strip_prefix("launcher ")
                .and_then(|p| p.trim().parse::<u32>().ok())
                .is_some_and(|p| p > 0)
        })))));
        let o = run(&s);
        assert_eq!(o.end, End::Exited(0));
        assert!(o.polls.len() >= 3, "{:?}", o.polls);
        assert!(o.polls.iter().all(|p| p.ok && p.matched && p.ms > 0.0));
        // Same output, a classifier that rejects it: answered, not matched.
        s.poll = Some(poll(Some(Classify(Arc::new(|_: &[u8]| false)))));
        let o = run(&s);
        assert!(!o.polls.is_empty());
        assert!(o.polls.iter().all(|p| p.ok && !p.matched));
        // A failing command is neither answered nor matched.
        s.poll = Some(Poll {
            args: vec!["-c".into(), "echo x; exit 1".into()],
            ..poll(Some(Classify(Arc::new(|_: &[u8]| true))))
        });
        let o = run(&s);
        assert!(!o.polls.is_empty());
        assert!(o.polls.iter().all(|p| !p.ok && !p.matched));
    }
}
