//! Bad spawn requests with real processes: malformed spawns on the wire,
//! a spawn of a missing program, and a spawn-multiple with one missing
//! command.
//!
//! Rust ranks are this test binary (see `rank_role`): the launcher runs it
//! with a role in the environment, and spawned children get theirs through
//! the spawn's `env` info key.

mod common;
mod rank_role;

use common::heavy;
use common::spawn::{lines_with, printed_jobid, role_spawn_request};
use fastpmi_client::{PmiError, SpawnCmd};
use rank_role::{ensure, finish, init};

/// A rank sends nine malformed PMI-2 spawns (maxprocs 0, -1, 99999999999,
/// no subcmd, argc > argv, 10 000 args with and without argc, a 2 KiB
/// preput value, ncmds mismatch) and a PMI-1 `mcmd=spawn` with nprocs=0:
/// each gets rc != 0 and a message naming the problem; then job-getid and a
/// valid spawn still work, and the job exits 0.
#[test]
fn malformed_spawn_requests_get_errors_and_the_rank_goes_on() {
    const T: &str = "malformed_spawn_requests_get_errors_and_the_rank_goes_on";
    if rank_role::role().is_some() {
        finish(rank_role::raw::role_raw());
    }
    let out = rank_role::launch(T, "raw", 1, &[]).run();
    out.assert_success();
    assert_eq!(
        lines_with(&out.stdout, "refused ").len(),
        10,
        "{}",
        out.report()
    );
    let jobid = printed_jobid(&out.stdout, "raw valid spawn");
    assert!(jobid.starts_with("fastpmi_"), "{}", out.report());
}

const MISSING: &str = "/nonexistent-dir/fastpmi-no-such-program";

fn role_spawn_missing() -> Result<(), String> {
    let pmi = init()?;
    let cmd = SpawnCmd {
        exe: MISSING.into(),
        maxprocs: 2,
        ..Default::default()
    };
    match role_spawn_request(&pmi, vec![cmd]) {
        Err(PmiError::Server { rc, msg, .. }) => {
            ensure(rc != 0 && msg.contains(MISSING), || {
                format!("rc {rc} msg {msg:?}")
            })?;
            println!("missing program refused: {msg}");
        }
        other => return Err(format!("spawn of a missing program: {other:?}")),
    }
    pmi.finalize().map_err(|e| e.to_string())
}

fn role_spawn_multiple_missing() -> Result<(), String> {
    let pmi = init()?;
    let cmds = vec![
        SpawnCmd {
            exe: MISSING.into(),
            maxprocs: 2,
            ..Default::default()
        },
        SpawnCmd {
            exe: "/bin/true".into(),
            maxprocs: 3,
            ..Default::default()
        },
    ];
    let s = role_spawn_request(&pmi, cmds)
        .map_err(|e| format!("spawn-multiple with one missing command: {e}"))?;
    let codes: Vec<String> = s.errcodes.iter().map(i32::to_string).collect();
    println!("multiple errcodes={} jobid={}", codes.join(","), s.jobid);
    pmi.finalize().map_err(|e| e.to_string())
}

/// A spawn of a program that does not exist fails with a message naming
/// it, the launcher writes one line naming it, and the job goes on.
#[test]
fn spawn_of_missing_program_fails_with_one_line_and_job_goes_on() {
    const T: &str = "spawn_of_missing_program_fails_with_one_line_and_job_goes_on";
    if rank_role::role().is_some() {
        finish(role_spawn_missing());
    }
    let out = rank_role::launch(T, "spawn-missing", 1, &[]).run();
    out.assert_success();
    let refused = lines_with(&out.stdout, "missing program refused: ");
    assert_eq!(refused.len(), 1, "{}", out.report());
    assert_eq!(
        lines_with(&out.stderr, "fastpmi-no-such-program").len(),
        1,
        "the launcher should write one line naming the missing program\n{}",
        out.report()
    );
}

/// A spawn-multiple with one missing command starts the other and reports
/// MPI_ERR_SPAWN (42) for the missing command's processes only.
#[test]
fn spawn_multiple_with_one_missing_command_reports_errcodes() {
    const T: &str = "spawn_multiple_with_one_missing_command_reports_errcodes";
    if rank_role::role().is_some() {
        finish(role_spawn_multiple_missing());
    }
    // Starts several processes.
    let _g = heavy();
    let out = rank_role::launch(T, "spawn-multiple-missing", 1, &[]).run();
    out.assert_success();
    let line = lines_with(&out.stdout, "multiple errcodes=42,42,0,0,0 jobid=fastpmi_");
    assert_eq!(line.len(), 1, "{}", out.report());
}
