//! Real processes sharing a job segment, for `tests/shm_processes_*.rs`.
//!
//! Each test re-executes its test binary as its child processes
//! (`--exact <test> --nocapture`) with `FASTPMI_SHM_CHILD_TEST` set; the test
//! function then runs the child role and leaves with `process::exit`, its
//! status saying what it saw. The parent creates a SysV segment (removed
//! with `IPC_RMID` at once, still attachable by id while it stays attached),
//! the children attach by id. Every child's status is checked, and a child
//! still running after [`CHILD_TIMEOUT`] is killed and fails the test.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fastpmi_segment::{JobSegment, MemPool};
use shm_layout::SegmentParams;

pub const ENV_TEST: &str = "FASTPMI_SHM_CHILD_TEST";
pub const ENV_RANK: &str = "FASTPMI_SHM_CHILD";
pub const ENV_SEG: &str = "FASTPMI_SHM_SEG";
pub const ENV_PARENT: &str = "FASTPMI_SHM_PARENT";

/// Longest a child may run before it is killed and the test fails.
pub const CHILD_TIMEOUT: Duration = Duration::from_secs(30);

/// What a child process was started with.
pub struct ChildArgs {
    pub rank: u32,
    pub seg_id: i32,
}

/// `Some` in a child started for `test`: this process must run the child
/// role and exit. Panics (exit 101) if started for another test.
pub fn child_args(test: &str) -> Option<ChildArgs> {
    let started_for = std::env::var(ENV_TEST).ok()?;
    assert_eq!(started_for, test, "child started for another test");
    // Die with the test process: a child blocked in a fence would otherwise
    // wait forever if the parent were killed.
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
        .expect("PR_SET_PDEATHSIG");
    let parent: i32 = env_parse(ENV_PARENT);
    if rustix::process::getppid().map(|p| p.as_raw_nonzero().get()) != Some(parent) {
        std::process::exit(97); // the parent is already gone
    }
    Some(ChildArgs {
        rank: env_parse(ENV_RANK),
        seg_id: env_parse(ENV_SEG),
    })
}

pub fn env_parse<T: std::str::FromStr>(name: &str) -> T {
    let s = std::env::var(name).unwrap_or_else(|_| panic!("{name} not set"));
    s.parse()
        .unwrap_or_else(|_| panic!("{name}={s:?} does not parse"))
}

/// Attaches the parent's segment; exits 98 if that fails.
pub fn attach(args: &ChildArgs) -> JobSegment {
    match JobSegment::attach_sysv(args.seg_id) {
        Ok(js) => {
            if let Some(state) = js.seg().rank(args.rank) {
                state.set_pid(std::process::id());
                state.set_phase(shm_layout::RankPhase::Running);
            }
            js
        }
        Err(e) => {
            eprintln!(
                "child {}: cannot attach segment {}: {e}",
                args.rank, args.seg_id
            );
            std::process::exit(98);
        }
    }
}

/// Prints why a child fails and returns its exit status.
pub fn fail(rank: u32, code: i32, why: std::fmt::Arguments<'_>) -> i32 {
    eprintln!("child {rank}: {why}");
    code
}

/// The running children of one test; killed and reaped if the test panics.
pub struct Children {
    procs: Vec<(u32, Child)>,
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Exit(i32),
    Signal(i32),
    /// Still running at the deadline (then killed).
    Hung,
}

impl Children {
    /// Starts this test binary as children `ranks`, each running `test`'s
    /// child role on segment `seg_id`.
    pub fn spawn(test: &str, ranks: std::ops::Range<u32>, seg_id: i32) -> Children {
        let exe = std::env::current_exe().expect("current_exe");
        let mut children = Children { procs: Vec::new() };
        for rank in ranks {
            let child = Command::new(&exe)
                .args(["--exact", test, "--nocapture", "--test-threads=1"])
                .env(ENV_TEST, test)
                .env(ENV_RANK, rank.to_string())
                .env(ENV_SEG, seg_id.to_string())
                .env(ENV_PARENT, std::process::id().to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::null()) // libtest's "running 1 test" lines
                .stderr(Stdio::inherit()) // a failing child says why
                .spawn()
                .unwrap_or_else(|e| panic!("spawn child {rank}: {e}"));
            children.procs.push((rank, child));
        }
        children
    }

    /// Whether every child is still running.
    pub fn all_running(&mut self) -> bool {
        self.procs
            .iter_mut()
            .all(|(_, c)| matches!(c.try_wait(), Ok(None)))
    }

    /// Waits for every child (killing those still running at `deadline`);
    /// returns `(rank, how it ended, when it was seen ended)` in rank order.
    pub fn reap(&mut self, deadline: Instant) -> Vec<(u32, Ended, Instant)> {
        use std::os::unix::process::ExitStatusExt;
        let mut done: Vec<Option<(Ended, Instant)>> = vec![None; self.procs.len()];
        loop {
            let now = Instant::now();
            for (i, (_, child)) in self.procs.iter_mut().enumerate() {
                if done[i].is_some() {
                    continue;
                }
                if let Some(status) = child.try_wait().expect("try_wait") {
                    let ended = match (status.code(), status.signal()) {
                        (Some(code), _) => Ended::Exit(code),
                        (None, Some(sig)) => Ended::Signal(sig),
                        (None, None) => Ended::Signal(0),
                    };
                    done[i] = Some((ended, now));
                } else if now >= deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    done[i] = Some((Ended::Hung, now));
                }
            }
            if done.iter().all(Option::is_some) {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let out = self
            .procs
            .iter()
            .zip(done)
            .map(|((rank, _), d)| {
                let (ended, at) = d.expect("reaped");
                (*rank, ended, at)
            })
            .collect();
        self.procs.clear();
        out
    }

    /// Reaps every child and asserts that each exited with `expected`.
    pub fn expect_all(&mut self, expected: i32) -> Vec<(u32, Ended, Instant)> {
        let ended = self.reap(Instant::now() + CHILD_TIMEOUT);
        let bad: Vec<_> = ended
            .iter()
            .filter(|(_, e, _)| *e != Ended::Exit(expected))
            .map(|(r, e, _)| (*r, *e))
            .collect();
        assert!(
            bad.is_empty(),
            "children that did not exit with {expected}: {bad:?}"
        );
        ended
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for (_, child) in &mut self.procs {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The SysV segment of a test, created by the parent.
pub fn create_segment(params: &SegmentParams, job: &str) -> (JobSegment, i32) {
    let js = JobSegment::create(MemPool::Sysv, params, job).expect("create SysV segment");
    let id = js.mapping().sysv_id().expect("SysV id");
    (js, id)
}

/// Waits until `cond` holds, at most `within`.
pub fn wait_for(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while !cond() {
        if t.elapsed() > within {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

/// A deterministic ~100-byte value that names its round, rank and index, so
/// a reader can check it byte for byte (and a torn or misplaced value shows).
pub fn value(round: u32, rank: u32, i: u32) -> Vec<u8> {
    let mut v = format!("v{round}-r{rank:04}-i{i:03}-").into_bytes();
    let mut x = (u64::from(round) << 48 | u64::from(rank) << 16 | u64::from(i))
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        | 1;
    while v.len() < 100 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(b"0123456789abcdefghijklmnopqrstuv"[(x & 31) as usize]);
    }
    v
}

pub fn show(v: Option<&[u8]>) -> String {
    match v {
        Some(v) => format!("{:?}", String::from_utf8_lossy(v)),
        None => "missing".into(),
    }
}
