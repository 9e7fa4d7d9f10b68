//! /proc helpers: process tables and trees, signals, and checks that no
//! rank process outlived its job.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use super::Job;

/// (pid, ppid, state, pgid) of every process, from /proc/<pid>/stat.
fn proc_table() -> Vec<(u32, u32, char, u32)> {
    let mut v = Vec::new();
    let Ok(rd) = fs::read_dir("/proc") else {
        return v;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Some((state, ppid, pgid)) = stat_fields(pid) {
            v.push((pid, ppid, state, pgid));
        }
    }
    v
}

/// (state, ppid, pgid) of one process.
fn stat_fields(pid: u32) -> Option<(char, u32, u32)> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain anything.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgid = f.next()?.parse().ok()?;
    Some((state, ppid, pgid))
}

/// Is `pid` alive (exists and is not a zombie)?
pub fn pid_alive(pid: u32) -> bool {
    matches!(stat_fields(pid), Some((s, _, _)) if s != 'Z' && s != 'X')
}

/// Every descendant of `root` (children, grandchildren, ...).
pub fn descendants(root: u32) -> Vec<u32> {
    let table = proc_table();
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for &(pid, ppid, _, _) in &table {
        children.entry(ppid).or_default().push(pid);
    }
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut stack = vec![root];
    while let Some(p) = stack.pop() {
        for &c in children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
            if seen.insert(c) {
                out.push(c);
                stack.push(c);
            }
        }
    }
    out
}

/// SIGKILL `root`'s whole tree: stop the root first so it cannot start more
/// ranks, kill its descendants (and its process group), then the root.
pub fn kill_tree(root: u32) {
    use rustix::process::{kill_process, kill_process_group, Pid, Signal};
    let Some(r) = Pid::from_raw(root as i32) else {
        return;
    };
    let _ = kill_process(r, Signal::STOP);
    for _ in 0..3 {
        for p in descendants(root)
            .into_iter()
            .filter_map(|p| Pid::from_raw(p as i32))
        {
            let _ = kill_process(p, Signal::KILL);
        }
        thread::sleep(Duration::from_millis(20));
    }
    // The launcher was started as the leader of its own process group.
    let _ = kill_process_group(r, Signal::KILL);
    let _ = kill_process(r, Signal::KILL);
}

/// Send `sig` to one process.
pub fn signal(pid: u32, sig: libc::c_int) {
    use rustix::process::{kill_process, Pid, Signal};
    let p = Pid::from_raw(pid as i32).expect("pid > 0");
    let s = Signal::from_named_raw(sig).expect("a named signal");
    if let Err(e) = kill_process(p, s) {
        panic!("kill({pid}, {sig}) failed: {e}");
    }
}

/// SIGKILL one process, ignoring a process that is already gone.
fn kill9(pid: u32) {
    if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
    }
}

/// Live (non-zombie) processes whose executable is exactly `exe`, with
/// their state and command line.
pub fn processes_with_exe(exe: &Path) -> Vec<(u32, char, String)> {
    let exe = fs::canonicalize(exe).unwrap_or_else(|_| exe.to_path_buf());
    let mut v = Vec::new();
    for (pid, _, state, _) in proc_table() {
        if state == 'Z' || state == 'X' {
            continue;
        }
        let Ok(target) = fs::read_link(format!("/proc/{pid}/exe")) else {
            continue;
        };
        if target == exe {
            let cmdline = fs::read(format!("/proc/{pid}/cmdline"))
                .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
                .unwrap_or_default();
            v.push((pid, state, cmdline));
        }
    }
    v
}

/// Once the launcher has exited, no process of `exe` may remain. Allows
/// `grace` for processes that are already dying (SIGKILL delivery, parent
/// death signal); SIGKILLs and reports whatever is still there after it.
pub fn assert_no_process_left(exe: &Path, grace: Duration) {
    let deadline = Instant::now() + grace;
    loop {
        let left = processes_with_exe(exe);
        if left.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            for (pid, _, _) in &left {
                kill9(*pid);
            }
            panic!(
                "{} process(es) of {} still running {grace:.1?} after the launcher exited \
                 (now killed): {left:?}",
                left.len(),
                exe.display()
            );
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Like [`assert_no_process_left`] for a list of pids.
pub fn assert_pids_gone(pids: &[u32], grace: Duration) {
    let deadline = Instant::now() + grace;
    loop {
        let left: Vec<u32> = pids.iter().copied().filter(|&p| pid_alive(p)).collect();
        if left.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            for p in &left {
                kill9(*p);
            }
            panic!(
                "rank process(es) {left:?} still running {grace:.1?} after the launcher exited \
                 (now killed)"
            );
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Wait until `dir` holds files `pid.0` .. `pid.<n-1>` written by the test
/// programs (`pid <rank> <pid>`), failing the test if the launcher exits
/// first or `limit` passes. Returns the job and the pids indexed by rank.
pub fn wait_for_pid_files(mut job: Job, dir: &Path, n: usize, limit: Duration) -> (Job, Vec<u32>) {
    let deadline = Instant::now() + limit;
    loop {
        let mut pids = vec![0u32; n];
        let mut have = 0;
        for (r, slot) in pids.iter_mut().enumerate() {
            if let Ok(s) = fs::read_to_string(dir.join(format!("pid.{r}"))) {
                let f: Vec<&str> = s.split_whitespace().collect();
                if f.len() == 3 && f[0] == "pid" && f[1] == r.to_string() {
                    if let Ok(p) = f[2].parse() {
                        *slot = p;
                        have += 1;
                    }
                }
            }
        }
        if have == n {
            return (job, pids);
        }
        if job.try_wait().is_some() {
            let out = job.wait_or_kill(Duration::from_secs(5));
            panic!(
                "launcher exited while only {have} of {n} ranks had written their pid file\n{}",
                out.report()
            );
        }
        if Instant::now() >= deadline {
            let out = job.kill_all();
            panic!(
                "only {have} of {n} ranks wrote their pid file within {limit:.0?}; killed the \
                 job\n{}",
                out.report()
            );
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// SIGKILL the late rank `rank` of a running job of a test program (see
/// tests/c/late_rank.h; its job got `FASTPMI_TEST_LATE_RANK`, a `GO` file
/// that exists and `FASTPMI_TEST_MARK_DIR=dir`) once it wrote its pid and
/// every rank had `settle` to reach its loop. Returns when it was killed.
#[allow(dead_code)]
pub fn kill_late_rank(dir: &Path, rank: u32, settle: Duration) -> Instant {
    let pid_file = dir.join(format!("pid.{rank}"));
    let deadline = Instant::now() + Duration::from_secs(60);
    let pid: i32 = loop {
        if let Some(p) = fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            break p;
        }
        assert!(Instant::now() < deadline, "rank {rank} never started");
        thread::sleep(Duration::from_millis(20));
    };
    thread::sleep(settle);
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).expect("a pid"),
        rustix::process::Signal::KILL,
    )
    .expect("kill the rank");
    Instant::now()
}
