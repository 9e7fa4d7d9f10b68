//! How a job ends, with real processes: signals to the launcher (SIGTERM
//! forwarded to the ranks; exit status 143 when it comes during a
//! shared-memory fence loop), the launcher's own death (SIGKILLed, also
//! while it starts 1024 ranks: no rank outlives it), and failures with the
//! exit status and the one message that name them: a rank's exit code, bad
//! arguments, a shared-memory fence that can never complete, a rank
//! SIGKILLed in a shared-memory fence, the fence count after 10 000 fences.
//!
//! Rust ranks are this test binary (see `rank_role`); the other ranks are
//! `sh`, the launcher's demo ranks and a copy of `sleep`.

mod common;
mod rank_role;

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::heavy;
use common::plain::{run, BIN};
use common::tools::text;
use fastpmi_client::TransportKind;
use rank_role::{ensure, env, finish, init};

const LIMIT: Duration = Duration::from_secs(60);

/// Directory where ranks leave files for the test.
const DIR: &str = "FASTPMI_TEST_DIR";

/// Write `text` to `<$FASTPMI_TEST_DIR>/<name>` (to a temporary name, then
/// renamed, so a reader sees all of it or nothing).
fn report(name: &str, text: &str) -> Result<(), String> {
    let dir = env(DIR)?;
    let tmp = Path::new(&dir).join(format!(".{name}.tmp"));
    fs::write(&tmp, text).map_err(|e| format!("write {}: {e}", tmp.display()))?;
    fs::rename(&tmp, Path::new(&dir).join(name)).map_err(|e| format!("rename: {e}"))
}

/// Wait until the launcher `job` is gone or every file in `names` exists in
/// `dir`; returns their contents.
fn wait_files(job: &mut common::Job, dir: &Path, names: &[String]) -> Vec<String> {
    let deadline = Instant::now() + LIMIT;
    loop {
        let got: Vec<Option<String>> = names
            .iter()
            .map(|n| fs::read_to_string(dir.join(n)).ok())
            .collect();
        if got.iter().all(Option::is_some) {
            return got.into_iter().map(Option::unwrap).collect();
        }
        if let Some(st) = job.try_wait() {
            panic!(
                "launcher exited ({}) before the ranks wrote {names:?}",
                common::describe_status(st)
            );
        }
        assert!(Instant::now() < deadline, "ranks never wrote {names:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Processes whose command line contains `marker`.
fn procs_with(marker: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        if let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            if text(&cmd).contains(marker) {
                // Zombies are gone for every practical purpose.
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                if !stat.contains(") Z ") {
                    v.push(pid);
                }
            }
        }
    }
    v
}

fn wait_gone(marker: &str, within: Duration) -> Vec<u32> {
    let t = Instant::now();
    loop {
        let left = procs_with(marker);
        if left.is_empty() || t.elapsed() > within {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------
// Signals to the launcher, and its death

#[test]
fn sigterm_is_forwarded_to_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("fastpmi-sigterm-{}", std::process::id());
    let script = format!("trap 'echo got-term > {}/$PMI_RANK; exit 0' TERM; echo ready; while :; do sleep 0.05; done # {marker}", dir.path().display());
    let child = Command::new(BIN)
        .args(["-n", "3", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until all three shells run.
    let t = Instant::now();
    while procs_with(&marker).len() < 4 && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(143),
        "launcher exit: {}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stderr).contains("SIGTERM"),
        "{}",
        text(&out.stderr)
    );
    for r in 0..3 {
        let got = std::fs::read_to_string(dir.path().join(r.to_string())).unwrap_or_default();
        assert_eq!(got.trim(), "got-term", "rank {r} did not see SIGTERM");
    }
    assert!(wait_gone(&marker, Duration::from_secs(3)).is_empty());
}

/// Fences in shared memory until one fails (or the rank is killed); after
/// 50 it reports `looping <transport>`.
fn role_fence_loop() -> Result<(), String> {
    let pmi = init()?;
    let me = pmi.rank();
    for i in 1u64.. {
        pmi.fence().map_err(|e| format!("fence {i}: {e}"))?;
        if i == 50 {
            report(&format!("loop.{me}"), &format!("{:?}", pmi.transport()))?;
        }
    }
    Ok(())
}

/// SIGTERM to the launcher while 4 ranks loop on shared-memory fences:
/// exit status 143 and "interrupted by SIGTERM", every time (6 runs).
#[test]
fn sigterm_during_a_shared_memory_fence_loop_exits_143() {
    const T: &str = "sigterm_during_a_shared_memory_fence_loop_exits_143";
    if rank_role::role().is_some() {
        finish(role_fence_loop());
    }
    let _g = heavy();
    for run in 0..6 {
        let dir = common::scratch_dir("sigterm");
        let mut job = rank_role::launch(T, "fence-loop", 4, &[])
            .env(DIR, dir.path())
            .spawn();
        let names: Vec<String> = (0..4).map(|r| format!("loop.{r}")).collect();
        let got = wait_files(&mut job, dir.path(), &names);
        for (r, t) in got.iter().enumerate() {
            assert_eq!(
                t, "Shm",
                "run {run}: rank {r} fences over {t}, not shared memory"
            );
        }
        common::signal(job.pid(), libc::SIGTERM);
        let out = job.wait_or_kill(Duration::from_secs(20));
        assert_eq!(
            out.code(),
            Some(143),
            "run {run}: exit status after SIGTERM\n{}",
            out.report()
        );
        assert!(
            out.stderr.contains("interrupted by SIGTERM"),
            "run {run}\n{}",
            out.report()
        );
    }
}

#[test]
fn ranks_die_with_a_killed_launcher() {
    let marker = format!("fastpmi-orphan-{}", std::process::id());
    let script = format!("while :; do sleep 0.05; done # {marker}");
    let mut child = Command::new(BIN)
        .args(["-n", "4", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while procs_with(&marker).len() < 5 && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();
    let left = wait_gone(&marker, Duration::from_secs(3));
    assert!(left.is_empty(), "ranks outlived the launcher: {left:?}");
}

/// The launcher SIGKILLed while it is still starting 1024 ranks: every rank
/// already started dies with it (PDEATHSIG, set in the vfork child before
/// exec, with the getppid check for a launcher that died first) and none is
/// left behind.
#[test]
fn ranks_die_with_a_launcher_killed_during_the_launch_of_1024() {
    const N: usize = 1024;
    const KILL_AFTER: usize = 50;
    let dir = tempfile::tempdir().unwrap();
    // The program's path is the marker: ranks get it as argv[0].
    let marker = format!("fastpmi-launch-kill-{}", std::process::id());
    let exe = dir.path().join(&marker);
    std::fs::copy("/bin/sleep", &exe).unwrap();
    let mut child = Command::new(BIN)
        .args(["-n", &N.to_string(), exe.to_str().unwrap(), "3600"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let mut seen = 0;
    while t.elapsed() < Duration::from_secs(60) {
        seen = procs_with(&marker).len();
        if seen >= KILL_AFTER {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap(); // SIGKILL, mid-launch
    child.wait().unwrap();
    let left = wait_gone(&marker, Duration::from_secs(5));
    assert!(
        (KILL_AFTER..N).contains(&seen),
        "the launcher was not killed during the launch: {seen} of {N} ranks running"
    );
    assert!(left.is_empty(), "ranks outlived the launcher: {left:?}");
    // Nothing started late either.
    std::thread::sleep(Duration::from_millis(200));
    assert!(procs_with(&marker).is_empty());
}

// ---------------------------------------------------------------------------
// Failures: exit status and message

#[test]
fn failing_rank_is_named_and_its_code_returned() {
    let out = run(&[
        "-n",
        "4",
        "sh",
        "-c",
        "[ $PMI_RANK = 2 ] && exit 5; sleep 0.2",
    ]);
    assert_eq!(out.status.code(), Some(5));
    let err = text(&out.stderr);
    assert!(err.contains("rank 2 exited with status 5"), "{err}");
    assert_eq!(
        err.lines().filter(|l| l.starts_with("fastpmi:")).count(),
        1,
        "{err}"
    );
}

#[test]
fn bad_arguments_get_one_line_errors() {
    for args in [
        &["-n", "x", "true"][..],
        &["--bogus", "true"],
        &["-n", "2"],
        &["-n", "2", "/nonexistent/prog"],
    ] {
        let out = run(args);
        assert!(!out.status.success(), "{args:?}");
        let err = text(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("fastpmi: "), "{err}");
    }
    assert_eq!(
        run(&["-n", "1", "/nonexistent/prog"]).status.code(),
        Some(127)
    );
    let help = run(&["--help"]);
    assert!(help.status.success() && text(&help.stdout).contains("usage: fastpmi"));
}

#[test]
fn shared_memory_fence_blocked_by_a_rank_without_pmi_fails_fast() {
    // Ranks 0-2 wait in the segment's fence; rank 3 exits without PMI, so
    // the fence can never complete: the job must end instead of hanging.
    let t = Instant::now();
    let out = run(&["-n", "3", BIN, "__demo-rank", ":", "-n", "1", "true"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains(
            "fastpmi: fence 1 can never complete: rank 3 exited without taking part in PMI"
        ),
        "{err}"
    );
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn kill_9_during_a_shared_memory_fence_wakes_everyone() {
    let marker = format!("fastpmi-shmkill-{}", std::process::id());
    let script = format!("sleep 30 # {marker}");
    let child = Command::new(BIN)
        .args([
            "-n",
            "8",
            BIN,
            "__demo-rank",
            ":",
            "-n",
            "1",
            "sh",
            "-c",
            &script,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Let the demo ranks reach the fence (they sleep on the futex there).
    let t = Instant::now();
    let victim = loop {
        let v = procs_with(&marker);
        if let Some(&pid) = v.iter().find(|&&p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "sh")
        }) {
            break pid;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "victim never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(500));
    let killed = Instant::now();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(victim as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        killed.elapsed() < Duration::from_secs(2),
        "took {:?}",
        killed.elapsed()
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(137), "{err}");
    assert!(
        err.contains("fastpmi: rank 8 was killed by signal 9 (SIGKILL)"),
        "{err}"
    );
    assert!(wait_gone(&marker, Duration::from_secs(2)).is_empty());
}

/// 10 000 shared-memory fences, then rank 1 reports its pid and waits to
/// be killed while rank 0 enters fence 10 001.
fn role_fence_10000() -> Result<(), String> {
    let pmi = init()?;
    ensure(pmi.transport() == TransportKind::Shm, || {
        format!("transport {:?}, expected shared memory", pmi.transport())
    })?;
    for i in 1..=10_000u32 {
        pmi.fence().map_err(|e| format!("fence {i}: {e}"))?;
    }
    if pmi.rank() == 1 {
        report("victim", &std::process::id().to_string())?;
        std::thread::sleep(Duration::from_secs(60));
        return Err("not killed".into());
    }
    pmi.fence().map_err(|e| format!("fence 10001: {e}"))
}

/// A rank killed after 10 000 shared-memory fences: the failure message
/// counts them from the segment ("after 10000 fences" or "during fence
/// 10001"), not the socket's count of zero.
#[test]
fn kill_after_10000_shared_memory_fences_reports_the_fence_count() {
    const T: &str = "kill_after_10000_shared_memory_fences_reports_the_fence_count";
    if rank_role::role().is_some() {
        finish(role_fence_10000());
    }
    let _g = heavy();
    let dir = common::scratch_dir("fence-count");
    let mut job = rank_role::launch(T, "fence-10000", 2, &[])
        .env(DIR, dir.path())
        .spawn();
    let pid: u32 = wait_files(&mut job, dir.path(), &["victim".into()])[0]
        .parse()
        .unwrap();
    common::signal(pid, libc::SIGKILL);
    let out = job.wait_or_kill(Duration::from_secs(20));
    out.assert_code(137);
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains("rank 1 was killed by signal 9"))
        .unwrap_or_else(|| panic!("no line naming the killed rank\n{}", out.report()));
    assert!(
        line.contains("after 10000 fences") || line.contains("during fence 10001"),
        "the message does not count the shared-memory fences: {line:?}\n{}",
        out.report()
    );
}
