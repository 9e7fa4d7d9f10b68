//! Failure handling: MPI_Abort, a rank SIGKILLed during a PMI-2 fence,
//! non-zero exits and signals of plain programs, a missing program.
//!
//! Contract: exit status 0 when every rank exits 0; otherwise the first
//! failing rank's code (128+signal for a signal) and a stderr line that
//! contains `rank R`; no rank process outlives the launcher.
//!
//! Under Hydra 4.0.2 (validation mode): the MPI_Abort tests pass (exit 7,
//! nothing left). The others fail on Hydra faults or on fastpmi-specific
//! parts of the contract: Hydra's PMI-2 fence is not a barrier (the other
//! ranks' fences complete while the victim sleeps, so the job ends before
//! the kill); Hydra's messages do not say `rank R`; it reports a rank killed
//! by signal 9 as exit 9, not 137; it prints one error line per rank for a
//! missing program; and when a plain (non-PMI) rank exits 5 it keeps waiting
//! for the others (`failing_rank_ends_the_job` times out).

mod common;
mod rank_role;

use common::{
    assert_no_process_left, assert_pids_gone, capi_lib_dir, heavy, launch, prog, scratch_dir,
    signal, unique_copy, wait_for_pid_files, Prog,
};
use std::path::Path;
use std::time::{Duration, Instant};

/// Processes that are already dying get this long after the launcher exits.
const GRACE: Duration = Duration::from_secs(2);

/// Rank N-1 calls MPI_Abort(MPI_COMM_WORLD, 7) while the others wait in
/// MPI_Barrier: the launcher exits 7 and no process of the program remains.
fn mpi_abort(n: usize) {
    let _g = heavy();
    let dir = scratch_dir("mpi-abort");
    let exe = unique_copy(prog(Prog::MpiAbort), dir.path(), &format!("n{n}"));
    let out = launch(["-n", &n.to_string(), exe.to_str().unwrap()])
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_code(7);
    assert_no_process_left(&exe, GRACE);
}

#[test]
fn mpi_abort_exit_code_n4() {
    mpi_abort(4);
}

#[test]
fn mpi_abort_exit_code_n64() {
    mpi_abort(64);
}

/// 64 ranks of Slurm's libpmi2 (socket fence): rank 37 sleeps before the fence, the other
/// 63 block in PMI2_KVS_Fence. SIGKILL rank 37: the launcher must exit
/// within 2 s with status 137 (128 + SIGKILL, the first failure), name
/// `rank 37` on stderr, and leave no rank process behind.
#[test]
fn kill9_rank_during_fence_n64() {
    kill9_rank_during_fence(64, 37, false);
}

/// The same at 1024 ranks on fastpmi's libpmi2.so.0 (the fence in shared
/// memory, released by tree at this size): rank 700 is killed while 1023
/// ranks sleep on their own wake words, which only the launcher's abort
/// (it bumps every wake word) can end; the launcher still exits within 2 s
/// and leaves nothing behind.
#[test]
fn kill9_rank_during_shared_memory_fence_n1024() {
    kill9_rank_during_fence(1024, 700, true);
}

fn kill9_rank_during_fence(n: usize, victim: usize, fastpmi_lib: bool) {
    let _g = heavy();
    let dir = scratch_dir("fence-kill");
    let pid_dir = dir.path().join("pids");
    std::fs::create_dir(&pid_dir).unwrap();
    let exe = unique_copy(
        prog(Prog::Pmi2FenceSleep),
        dir.path(),
        &format!("kill9-{n}"),
    );

    let mut cmd = launch([
        "-n",
        &n.to_string(),
        "-genv",
        "FASTPMI_TEST_PID_DIR",
        pid_dir.to_str().unwrap(),
        "-genv",
        "FASTPMI_TEST_SLEEP_RANK",
        &victim.to_string(),
        exe.to_str().unwrap(),
    ])
    .timeout(Duration::from_secs(120));
    if fastpmi_lib {
        cmd = cmd.env("LD_LIBRARY_PATH", capi_lib_dir());
    }
    let job = cmd.spawn();
    let (mut job, pids) = wait_for_pid_files(job, &pid_dir, n, Duration::from_secs(120));

    // Every rank wrote its pid file just before its fence: give the others
    // a moment to be blocked in it.
    std::thread::sleep(Duration::from_millis(if n > 256 { 1500 } else { 500 }));
    if job.try_wait().is_some() {
        let out = job.wait_or_kill(Duration::from_secs(5));
        panic!(
            "the job ended before rank {victim} was killed: the others' PMI2_KVS_Fence must \
             not complete while rank {victim} has not fenced (a fence is a barrier)\n{}",
            out.report()
        );
    }

    let started = job.started();
    signal(pids[victim], libc::SIGKILL);
    let killed_at = Instant::now();
    let out = job.wait_or_kill(Duration::from_secs(30));
    // `elapsed` is taken when the launcher's exit was seen (10 ms polling),
    // before the output pipes are drained.
    let took = (started + out.elapsed).saturating_duration_since(killed_at);

    assert!(
        took <= Duration::from_secs(2),
        "launcher took {took:.2?} after the SIGKILL of rank {victim} to exit (limit 2 s)\n{}",
        out.report()
    );
    out.assert_code(128 + libc::SIGKILL);
    out.assert_stderr_names_rank(victim);
    assert_no_process_left(&exe, GRACE);
    assert_pids_gone(&pids, GRACE);
}

/// A plain (non-PMI) rank that exits 3: the launcher exits 3 and names it.
#[test]
fn exit_code_of_failing_rank_is_propagated() {
    let out = launch([
        "-n",
        "4",
        "sh",
        "-c",
        r#"if [ "$PMI_RANK" = 2 ]; then exit 3; fi; exit 0"#,
    ])
    .timeout(Duration::from_secs(30))
    .run();
    out.assert_code(3);
    out.assert_stderr_names_rank(2);
}

/// A rank killed by SIGKILL: the launcher exits 128 + 9 and names it.
#[test]
fn signal_of_failing_rank_is_propagated() {
    let out = launch([
        "-n",
        "2",
        "sh",
        "-c",
        r#"if [ "$PMI_RANK" = 1 ]; then kill -9 $$; fi; exit 0"#,
    ])
    .timeout(Duration::from_secs(30))
    .run();
    out.assert_code(128 + libc::SIGKILL);
    out.assert_stderr_names_rank(1);
}

/// Rank 1 exits 5 while ranks 0 and 2 sleep for 5 minutes: the launcher
/// ends the job promptly (well under the sleep), exits 5, names rank 1, and
/// the sleeping ranks are gone.
#[test]
fn failing_rank_ends_the_job() {
    let dir = scratch_dir("teardown");
    let d = dir.path().to_str().unwrap();
    let script = format!(
        r#"echo "pid $PMI_RANK $$" > {d}/.t.$PMI_RANK && mv {d}/.t.$PMI_RANK {d}/pid.$PMI_RANK
if [ "$PMI_RANK" = 1 ]; then sleep 1; exit 5; fi
exec sleep 300"#
    );
    let out = launch(["-n", "3", "sh", "-c", &script])
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_code(5);
    out.assert_stderr_names_rank(1);
    assert!(
        out.elapsed < Duration::from_secs(20),
        "the job should end soon after rank 1 failed, took {:.1?}\n{}",
        out.elapsed,
        out.report()
    );
    let mut pids = Vec::new();
    for r in [0, 2] {
        let s = std::fs::read_to_string(dir.path().join(format!("pid.{r}")))
            .unwrap_or_else(|e| panic!("rank {r} wrote no pid file ({e})\n{}", out.report()));
        pids.push(s.split_whitespace().nth(2).unwrap().parse::<u32>().unwrap());
    }
    assert_pids_gone(&pids, GRACE);
}

/// A program that does not exist: non-zero exit, quickly, and exactly one
/// (non-empty) stderr line, which names the program.
fn missing_program(program: &str) {
    // FASTPMI_LOG would add log lines to stderr.
    let out = launch(["-n", "2", program])
        .env_remove("FASTPMI_LOG")
        .timeout(Duration::from_secs(30))
        .run();
    assert!(
        out.code().is_some_and(|c| c != 0),
        "a missing program must give a non-zero exit status\n{}",
        out.report()
    );
    let lines = out.stderr_lines();
    assert!(
        lines.len() == 1 && lines[0].contains(program),
        "expected exactly one stderr line naming `{program}`\n{}",
        out.report()
    );
    assert!(
        out.elapsed < Duration::from_secs(10),
        "a missing program should fail fast, took {:.1?}",
        out.elapsed
    );
}

#[test]
fn missing_program_absolute_path() {
    missing_program("/nonexistent/fastpmi-test/no-such-program");
}

#[test]
fn missing_program_in_path() {
    missing_program("fastpmi-test-no-such-program-in-path");
}

/// Ranks on the job segment leave finalize without waiting for the
/// launcher's answer (the launcher reads "finalized" from the segment);
/// waiting made the ranks of a 1024-rank job leave one at a time, each
/// woken in turn by the launcher's reply. With the launcher stopped
/// (SIGSTOP), 4 shared-memory ranks finalize and get past it; once it
/// continues, the job ends with status 0: none counts as having exited
/// before finalize, though the launcher read their `finalize` only after
/// their exit.
#[test]
fn segment_ranks_finalize_without_waiting_for_the_launcher() {
    match rank_role::role().as_deref() {
        Some("finalize-unanswered") => rank_role::finish(role_finalize_unanswered()),
        Some(_) => return,
        None => {}
    }
    let n = 4;
    let marks = scratch_dir("finalize-unanswered");
    let job = rank_role::launch(
        "segment_ranks_finalize_without_waiting_for_the_launcher",
        "finalize-unanswered",
        n,
        &[],
    )
    .env(MARKS, marks.path())
    .spawn();
    let all = |what: &str| (0..n).all(|r| marks.path().join(format!("{what}.{r}")).exists());
    let wait = |what: &str, limit: Duration| {
        let deadline = Instant::now() + limit;
        while !all(what) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        all(what)
    };
    let fenced = wait("fenced", Duration::from_secs(60));
    if !fenced {
        panic!("the ranks did not all fence: {}", job.kill_all().report());
    }
    signal(job.pid(), libc::SIGSTOP);
    std::fs::write(marks.path().join("go"), b"").unwrap();
    let finalized = wait("finalized", Duration::from_secs(20));
    signal(job.pid(), libc::SIGCONT);
    let out = job.wait_or_kill(Duration::from_secs(30));
    assert!(
        finalized,
        "with the launcher stopped, shared-memory ranks did not get past finalize: {}",
        out.report()
    );
    out.assert_success();
}

/// Where the finalize-unanswered ranks leave their marks.
const MARKS: &str = "FASTPMI_TEST_MARKS";

/// Init (on the segment), fence, mark; wait for the test's `go`, finalize,
/// mark.
fn role_finalize_unanswered() -> Result<(), String> {
    let dir = rank_role::env(MARKS)?;
    let dir = Path::new(&dir);
    let pmi = rank_role::init()?;
    let me = pmi.rank();
    rank_role::ensure(
        pmi.transport() == fastpmi_client::TransportKind::Shm,
        || {
            format!(
                "rank {me}: transport {:?}, not the segment",
                pmi.transport()
            )
        },
    )?;
    pmi.fence().map_err(|e| format!("fence: {e}"))?;
    let mark = |what: &str| {
        std::fs::write(dir.join(format!("{what}.{me}")), b"").map_err(|e| format!("{what}: {e}"))
    };
    mark("fenced")?;
    rank_role::poll(Duration::from_secs(60), "go", || {
        Ok(dir.join("go").exists().then_some(()))
    })?;
    pmi.finalize().map_err(|e| format!("finalize: {e}"))?;
    mark("finalized")
}
