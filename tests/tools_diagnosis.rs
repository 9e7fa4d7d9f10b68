//! Diagnosis of a stuck or failed job with real processes: `--fence-timeout`
//! and `FASTPMI_FENCE_TIMEOUT` (the report names the late rank and its pid),
//! the SIGUSR1 report of a running job, and `--verbose` on failure.
//!
//! Every launcher here runs with its own `XDG_RUNTIME_DIR`, so `fastpmi ps`
//! sees only the launchers of the test.

mod common;

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use common::tools::{args, ps_json, wait_for, wait_late_fence, Late};
use common::{heavy, prog, Prog};

/// "waiting for X s" of the report.
fn waited(stderr: &str) -> f64 {
    let l = stderr
        .lines()
        .find(|l| l.contains("ranks arrived") && l.contains("waiting for"))
        .unwrap_or_else(|| panic!("no fence line in the report:\n{stderr}"));
    let x = l.rsplit("waiting for ").next().unwrap();
    x.trim_end_matches(" s")
        .parse()
        .unwrap_or_else(|_| panic!("{l}"))
}

fn fence_timeout(tag: &str, exe: &Path, flags: &[&str], env: Option<(&str, &str)>) {
    let _g = heavy();
    let late = Late::new(tag);
    let lib = common::capi_lib_dir();
    let mut a: Vec<OsString> = flags.iter().map(OsString::from).collect();
    // fastpmi's libpmi2 only for the program linked against it.
    if exe == prog(Prog::Pmi2LateFastpmi) {
        a.extend(args(&[&"-genv", &"LD_LIBRARY_PATH", &lib]));
    }
    a.extend(args(&[&"-n", &"256", &exe]));
    let mut cmd = late.launch(a);
    if let Some((k, v)) = env {
        cmd = cmd.env(k, v);
    }
    let out = cmd.run();
    let late_pid = late.late_pid();
    assert_ne!(out.code(), Some(0), "the job must fail:\n{}", out.report());
    let err = &out.stderr;
    assert!(err.contains("fence timeout"), "{}", out.report());
    assert!(
        err.contains("fence 1: 255/256 ranks arrived (ranks 0-16,18-255)"),
        "{}",
        out.report()
    );
    let missing = format!("missing rank 17 (pid {late_pid}, running without PMI for ");
    assert!(
        err.contains(&missing),
        "report lacks {missing:?}:\n{}",
        out.report()
    );
    let w = waited(err);
    assert!(
        (2.0..3.0).contains(&w),
        "fence failed after {w} s, want 2 to 3 s:\n{err}"
    );
    // The final one-line message names the rank and its pid too.
    let last = out
        .stderr_lines()
        .last()
        .copied()
        .unwrap_or_default()
        .to_string();
    assert!(
        last.contains("--fence-timeout 2") && last.contains(&format!("rank 17 (pid {late_pid}")),
        "{last}"
    );
}

#[test]
fn fence_timeout_shared_memory() {
    fence_timeout(
        "ft-shm",
        prog(Prog::Pmi2LateFastpmi),
        &["--fence-timeout", "2"],
        None,
    );
}

#[test]
fn fence_timeout_socket_from_env() {
    fence_timeout(
        "ft-sock",
        prog(Prog::Pmi2LateSlurm),
        &[],
        Some(("FASTPMI_FENCE_TIMEOUT", "2")),
    );
}

#[test]
fn sigusr1_prints_report_and_job_goes_on() {
    let _g = heavy();
    let late = Late::new("usr1");
    let exe = prog(Prog::Pmi2LateFastpmi);
    let lib = common::capi_lib_dir();
    let job = late
        .launch(args(&[
            &"-genv",
            &"LD_LIBRARY_PATH",
            &lib,
            &"-n",
            &"256",
            &exe,
        ]))
        .spawn();
    let pid = job.pid();
    wait_late_fence(late.xdg.path(), pid);
    let late_pid = late.late_pid();
    common::signal(pid, libc::SIGUSR1);
    // The report is written by the event loop; give it a moment, then check
    // the job still runs.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        ps_json(late.xdg.path(), pid).is_ok(),
        "launcher gone after SIGUSR1"
    );
    late.release();
    let out = job.wait_or_kill(Duration::from_secs(120));
    out.assert_success();
    assert!(
        out.stderr
            .contains("fence 1: 255/256 ranks arrived (ranks 0-16,18-255)"),
        "{}",
        out.report()
    );
    assert!(
        out.stderr.contains(&format!(
            "missing rank 17 (pid {late_pid}, running without PMI"
        )),
        "{}",
        out.report()
    );
}

/// --verbose failure: the report says what every rank was doing.
#[test]
fn verbose_failure_names_every_ranks_state() {
    let _g = heavy();
    let late = Late::new("verbose");
    let exe = prog(Prog::Pmi2LateFastpmi);
    let lib = common::capi_lib_dir();
    let job = late
        .launch(args(&[
            &"--verbose",
            &"-genv",
            &"LD_LIBRARY_PATH",
            &lib,
            &"-n",
            &"32",
            &exe,
        ]))
        .spawn();
    let pid = job.pid();
    let late_pid = late.late_pid();
    wait_for(Duration::from_secs(60), "31 ranks in fence 1", || {
        let t = ps_json(late.xdg.path(), pid).ok()?.into_iter().next()?;
        (t.ranks.iter().filter(|r| r.kind == "in_fence").count() == 31).then_some(())
    });
    common::signal(late_pid, libc::SIGKILL);
    let out = job.wait_or_kill(Duration::from_secs(60));
    assert_eq!(out.code(), Some(128 + 9), "{}", out.report());
    assert!(
        out.stderr
            .contains("ranks 0-16,18-31: in fence 1 (last op kvs-fence, 1 fences)"),
        "{}",
        out.report()
    );
    assert!(
        out.stderr.contains("rank 17: killed by signal 9 (SIGKILL)"),
        "{}",
        out.report()
    );
}
