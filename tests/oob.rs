//! The out-of-band channel with real ranks (docs/oob.md): `tests/c/fpmi_oob.c`
//! through fastpmi's `libpmi2.so.0`, on shared memory, on the socket and in
//! port mode; `fastpmi checkpoint` by launcher pid and by job id; and a raw
//! `init_oob` from a shell rank before it initialized PMI.

mod common;

use std::time::Duration;

use common::tools::{fastpmi, runtime_dir, text, wait_for};
use common::{capi_lib_dir, launch, prog, Outcome, Prog};

fn lib_dir() -> &'static str {
    capi_lib_dir().to_str().expect("UTF-8 library path")
}

fn sorted(out: &Outcome) -> Vec<String> {
    let mut l: Vec<String> = out.stdout_lines().iter().map(|s| s.to_string()).collect();
    l.sort();
    l
}

/// 4 ranks; rank 3 aborts. Ranks 0-2 each get the notice naming rank 3,
/// its code and message, then `signal` (when one was asked for), and the
/// notice was readable when the signal's handler ran.
fn abort_reaches_every_channel(extra: &[&str], transport: &str, signal: &str) {
    let exe = prog(Prog::FpmiOob);
    let mut args: Vec<&str> = extra.to_vec();
    args.extend(["-n", "4", exe.to_str().unwrap(), "abort", signal]);
    let out = launch(args)
        .env("LD_LIBRARY_PATH", lib_dir())
        .env("FASTPMI_TRANSPORT", transport)
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_code(1);
    out.assert_stderr_names_rank(3);
    let got = if signal == "NONE" { 0 } else { 1 };
    let want: Vec<String> = (0..3)
        .map(|r| {
            format!(
                "oob abort rank {r} from=3 exitcode=1 signal={got} before={got} \
                 message=rank 3 called abort with code 1: disk full"
            )
        })
        .collect();
    assert_eq!(
        sorted(&out),
        want,
        "{extra:?} {transport} {signal}\n{}",
        out.report()
    );
}

#[test]
fn an_abort_notice_reaches_every_rank_then_its_signal() {
    abort_reaches_every_channel(&[], "shm", "SIGUSR2");
    abort_reaches_every_channel(&[], "socket", "SIGUSR1");
    abort_reaches_every_channel(&[], "shm", "NONE");
}

#[test]
fn an_abort_notice_reaches_port_mode_ranks_that_authenticated() {
    abort_reaches_every_channel(&["--pmi-port"], "socket", "SIGUSR2");
}

/// `fastpmi checkpoint PID`, then `fastpmi checkpoint JOBID`: every rank
/// gets requests 1 and 2 and their signal; the command says how many ranks
/// had a channel.
#[test]
fn fastpmi_checkpoint_reaches_every_rank_by_pid_and_by_job_id() {
    let exe = prog(Prog::FpmiOob);
    let xdg = runtime_dir("oob-cp");
    let marks = common::scratch_dir("oob-cp-marks");
    let job = launch([
        "-n",
        "4",
        exe.to_str().unwrap(),
        "checkpoint",
        "SIGUSR1",
        "2",
    ])
    .env("LD_LIBRARY_PATH", lib_dir())
    .env("XDG_RUNTIME_DIR", xdg.path())
    .env("FASTPMI_TEST_MARK_DIR", marks.path())
    .timeout(Duration::from_secs(120))
    .spawn();
    let pid = job.pid();
    wait_for(Duration::from_secs(60), "every rank's channel open", || {
        let n = std::fs::read_dir(marks.path()).ok()?.count();
        (n == 4).then_some(())
    });
    let jobid = format!("fastpmi_{pid}_0");
    let r = fastpmi(xdg.path(), &["checkpoint", &pid.to_string()]);
    assert!(r.status.success(), "{}", text(&r.stderr));
    assert_eq!(
        text(&r.stdout).trim(),
        format!("fastpmi: checkpoint 1 of job {jobid} sent to 4 of 4 ranks")
    );
    let r = fastpmi(xdg.path(), &["checkpoint", &jobid]);
    assert!(r.status.success(), "{}", text(&r.stderr));
    assert_eq!(
        text(&r.stdout).trim(),
        format!("fastpmi: checkpoint 2 of job {jobid} sent to 4 of 4 ranks")
    );
    let out = job.wait_or_kill(Duration::from_secs(60));
    out.assert_success();
    let mut want: Vec<String> = (0..4)
        .flat_map(|r| {
            let jobid = jobid.clone();
            (1..=2).map(move |q| format!("oob checkpoint rank {r} seq={q} job={jobid} signal=1"))
        })
        .collect();
    want.sort();
    assert_eq!(sorted(&out), want, "{}", out.report());
    // No such launcher or job: an error, exit status 1.
    let r = fastpmi(xdg.path(), &["checkpoint", "no_such_job"]);
    assert_eq!(r.status.code(), Some(1));
    assert!(
        text(&r.stderr).contains("no_such_job"),
        "{}",
        text(&r.stderr)
    );
}

/// The C API's error codes, under the launcher and as a singleton.
#[test]
fn oob_misuse_gets_error_codes() {
    let exe = prog(Prog::FpmiOob);
    let out = launch(["-n", "2", exe.to_str().unwrap(), "misuse"])
        .env("LD_LIBRARY_PATH", lib_dir())
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_success();
    assert_eq!(
        sorted(&out),
        ["oob misuse ok rank 0", "oob misuse ok rank 1"]
    );
    let out = launch(["misuse"])
        .program(exe)
        .env("LD_LIBRARY_PATH", lib_dir())
        .env_remove("PMI_FD")
        .env_remove("PMI_PORT")
        .timeout(Duration::from_secs(30))
        .run();
    out.assert_success();
    assert_eq!(out.stdout_lines(), ["oob misuse ok rank 0"]);
}

/// A rank that sends `init_oob` on `PMI_OOB_FD` before it initialized PMI
/// gets `rc=-1` and a message saying so; the job goes on and ends well.
#[test]
fn init_oob_before_init_is_refused_on_the_wire() {
    let out = launch([
        "-n",
        "2",
        "sh",
        "-c",
        "printf 'cmd=init_oob pmi_version=2 signal=NONE\\n' >&$PMI_OOB_FD; \
         head -n 1 <&$PMI_OOB_FD",
    ])
    .timeout(Duration::from_secs(30))
    .run();
    out.assert_success();
    let mut lines = out.stdout_lines();
    lines.sort();
    assert_eq!(
        lines,
        [
            "cmd=response_to_init_oob rc=-1 msg=init_oob_before_init:_rank_0_has_not_initialized_PMI",
            "cmd=response_to_init_oob rc=-1 msg=init_oob_before_init:_rank_1_has_not_initialized_PMI"
        ]
    );
}
