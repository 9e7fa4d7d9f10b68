//! Spawn with real processes: PMI2_Job_Spawn (Slurm's libpmi2 and
//! fastpmi's), PMI_Spawn_multiple (fastpmi's libpmi), malformed spawn
//! requests on the wire, concurrent spawns, output labels, failures of
//! spawned jobs, and reads of another job's KVS.
//!
//! Rust ranks are this test binary (see `rank_role`): the launcher runs it
//! with a role in the environment, and spawned children get theirs through
//! the spawn's `env` info key.

mod common;
mod rank_role;

use std::ffi::OsString;
use std::path::Path;
use std::sync::Barrier;
use std::time::Duration;

use common::{heavy, prog, stats_row, Prog};
use fastpmi::client::{Pmi, PmiError, SpawnCmd, SpawnRequest};
use rank_role::{ensure, env, finish, init};

fn lines_with<'a>(out: &'a str, needle: &str) -> Vec<&'a str> {
    out.lines().filter(|l| l.contains(needle)).collect()
}

/// The job id a rank printed as `<tag> jobid=<id>`.
fn printed_jobid(out: &str, tag: &str) -> String {
    out.lines()
        .find_map(|l| {
            l.split_once(&format!("{tag} jobid="))?
                .1
                .split_whitespace()
                .next()
        })
        .unwrap_or_else(|| panic!("no `{tag} jobid=` line in\n{out}"))
        .to_string()
}

// ---------------------------------------------------------------------------
// 1. PMI2_Job_Spawn from C

/// `--stats -n 2 PROG ARGS`.
fn c_args(p: &Path, args: &[&str]) -> Vec<OsString> {
    let mut v: Vec<OsString> = ["--stats", "-n", "2"].map(OsString::from).into();
    v.push(p.into());
    v.extend(args.iter().map(OsString::from));
    v
}

fn pmi2_spawn_checks(out: &common::Outcome) {
    out.assert_success();
    assert_eq!(
        lines_with(&out.stdout, "pmi2 spawn ok children=8").len(),
        1,
        "{}",
        out.report()
    );
    let child = lines_with(&out.stdout, "pmi2 spawn child ok size=8 preput=from-");
    assert_eq!(child.len(), 1, "{}", out.report());
    assert!(
        !out.stderr.contains("pmi2_spawn:"),
        "a check of the program failed\n{}",
        out.report()
    );
}

/// Slurm's libpmi2 spawns 8 children over the wire: preput, put, fence and
/// get all work and are all socket traffic.
#[test]
fn pmi2_job_spawn_slurm_libpmi2_eight_children_put_fence_get() {
    let _g = heavy();
    let p = prog(Prog::Pmi2Spawn);
    let out = common::launch(c_args(p, &["8"])).run();
    pmi2_spawn_checks(&out);
    let sock = stats_row(&out.stderr, "socket").expect("socket stats row");
    // 8 puts, 8 fences, 8 preput gets + 8 x 8 gets.
    assert_eq!(sock[0..3], [8, 72, 8], "{}", out.report());
}

/// The same program on fastpmi's libpmi2: the children find the job segment
/// and do every put, get and fence in shared memory.
#[test]
fn pmi2_job_spawn_fastpmi_libpmi2_children_on_shared_memory() {
    let _g = heavy();
    let p = prog(Prog::Pmi2Spawn);
    let out = common::launch(c_args(p, &["8"]))
        .env("LD_LIBRARY_PATH", common::capi_lib_dir())
        .run();
    pmi2_spawn_checks(&out);
    let sock = stats_row(&out.stderr, "socket").expect("socket stats row");
    let shm = stats_row(&out.stderr, "shared-memory").expect("shm stats row");
    assert_eq!(sock[0..3], [0, 0, 0], "{}", out.report());
    assert_eq!(shm[0..3], [8, 72, 8], "{}", out.report());
}

// ---------------------------------------------------------------------------
// 2. PMI_Spawn_multiple from C

#[test]
fn pmi_spawn_multiple_appnums_preput_and_shared_memory() {
    let _g = heavy();
    let p = prog(Prog::Pmi1Spawn);
    let out = common::launch(c_args(p, &["3", "2"]))
        .env("LD_LIBRARY_PATH", common::capi_lib_dir())
        .run();
    out.assert_success();
    assert_eq!(lines_with(&out.stdout, "pmi1 spawn ok children=5").len(), 1);
    for r in 0..5 {
        let want = format!("pmi1 spawn child rank {r} appnum {}", u32::from(r >= 3));
        assert_eq!(
            out.stdout.lines().filter(|l| l.trim() == want).count(),
            1,
            "missing `{want}`\n{}",
            out.report()
        );
    }
    assert_eq!(
        lines_with(&out.stdout, "pmi1 spawn child ok size=5 preput=from-").len(),
        1,
        "{}",
        out.report()
    );
    assert!(!out.stderr.contains("pmi1_spawn:"), "{}", out.report());
    let sock = stats_row(&out.stderr, "socket").expect("socket stats row");
    let shm = stats_row(&out.stderr, "shared-memory").expect("shm stats row");
    assert_eq!(sock[0..3], [0, 0, 0], "{}", out.report());
    // 5 puts, 5 barriers, 5 preput gets + 5 x 5 gets.
    assert_eq!(shm[0..3], [5, 30, 5], "{}", out.report());
}

// ---------------------------------------------------------------------------
// 3. Bad input on the wire

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

fn role_spawn_request(
    pmi: &Pmi,
    cmds: Vec<SpawnCmd>,
) -> Result<fastpmi::client::Spawned, PmiError> {
    pmi.spawn(&SpawnRequest {
        cmds,
        preput: Vec::new(),
    })
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

// ---------------------------------------------------------------------------
// 4. Concurrency

fn role_two_threads() -> Result<(), String> {
    let pmi = init()?;
    let gate = Barrier::new(2);
    let ids: Vec<Result<String, String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    gate.wait();
                    role_spawn_request(
                        &pmi,
                        vec![SpawnCmd {
                            exe: "/bin/true".into(),
                            maxprocs: 2,
                            ..Default::default()
                        }],
                    )
                    .map(|s| s.jobid)
                    .map_err(|e| e.to_string())
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    let ids: Vec<String> = ids.into_iter().collect::<Result<_, _>>()?;
    ensure(ids[0] != ids[1] && !ids[0].is_empty(), || {
        format!("job ids {ids:?}")
    })?;
    println!("two spawns jobid={} jobid={}", ids[0], ids[1]);
    pmi.finalize().map_err(|e| e.to_string())
}

#[test]
fn two_threads_spawn_at_once_and_get_distinct_jobs() {
    const T: &str = "two_threads_spawn_at_once_and_get_distinct_jobs";
    if rank_role::role().is_some() {
        finish(role_two_threads());
    }
    // Starts several processes.
    let _g = heavy();
    let out = rank_role::launch(T, "two-threads", 1, &[]).run();
    out.assert_success();
    let line = lines_with(&out.stdout, "two spawns jobid=");
    assert_eq!(line.len(), 1, "{}", out.report());
}

const LOAD_CHILDREN: u32 = 64;
const LOAD_GETS: u32 = 1000;

fn role_load_parent() -> Result<(), String> {
    let pmi = init()?;
    let (rank, size) = (pmi.rank(), pmi.size());
    pmi.put(format!("k-{rank}"), format!("v-{rank}"))
        .map_err(|e| e.to_string())?;
    pmi.fence().map_err(|e| e.to_string())?;
    if rank == 0 {
        let s = role_spawn_request(
            &pmi,
            vec![rank_role::cmd(LOAD_TEST, "load-child", LOAD_CHILDREN, &[])],
        )
        .map_err(|e| format!("spawn of {LOAD_CHILDREN}: {e}"))?;
        ensure(s.errcodes.iter().all(|&c| c == 0), || format!("{s:?}"))?;
        println!("load spawned jobid={}", s.jobid);
    } else {
        for i in 0..LOAD_GETS {
            let r = (rank + i) % size;
            let v = pmi
                .get(format!("k-{r}"), Some(r))
                .map_err(|e| format!("get {i}: {e}"))?;
            ensure(v.as_deref() == Some(format!("v-{r}").as_bytes()), || {
                format!("get {i} of k-{r}: {v:?}")
            })?;
        }
        println!("load rank {rank} gets ok");
    }
    pmi.finalize().map_err(|e| e.to_string())
}

fn role_load_child() -> Result<(), String> {
    let pmi = init()?;
    ensure(pmi.spawned() && pmi.size() == LOAD_CHILDREN, || {
        format!("spawned {} size {}", pmi.spawned(), pmi.size())
    })?;
    pmi.fence().map_err(|e| e.to_string())?;
    if pmi.rank() == 0 {
        println!("load children fenced size={}", pmi.size());
    }
    pmi.finalize().map_err(|e| e.to_string())
}

const LOAD_TEST: &str = "socket_gets_succeed_while_64_children_are_spawned";

/// 3 ranks do 1000 socket gets each while the fourth spawns 64 children
/// that init, fence and finalize over the same launcher.
#[test]
fn socket_gets_succeed_while_64_children_are_spawned() {
    match rank_role::role().as_deref() {
        Some("load-child") => finish(role_load_child()),
        Some(_) => finish(role_load_parent()),
        None => {}
    }
    let _g = heavy();
    let out = rank_role::launch(LOAD_TEST, "load-parent", 4, &["--stats"])
        .env("FASTPMI_TRANSPORT", "socket")
        .run();
    out.assert_success();
    for r in 1..4 {
        assert_eq!(
            lines_with(&out.stdout, &format!("load rank {r} gets ok")).len(),
            1,
            "{}",
            out.report()
        );
    }
    assert_eq!(
        lines_with(&out.stdout, "load children fenced size=64").len(),
        1,
        "{}",
        out.report()
    );
    let sock = stats_row(&out.stderr, "socket").expect("socket stats row");
    assert!(sock[1] >= 3 * LOAD_GETS as u64, "{}", out.report());
}

const STARTED_CHILDREN: u32 = 128;
const STARTED_TEST: &str = "spawn_returns_once_every_child_is_started";

/// Processes of this user whose environment says they are ranks of `jobid`.
fn processes_of_job(jobid: &str) -> usize {
    let marker = format!("PMI_JOBID={jobid}");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read(e.path().join("environ")).ok())
        .filter(|env| env.split(|&b| b == 0).any(|v| v == marker.as_bytes()))
        .count()
}

fn role_started_parent() -> Result<(), String> {
    let pmi = init()?;
    let me = format!("STARTED_PARENT={}", pmi.job_id());
    let s = role_spawn_request(
        &pmi,
        vec![rank_role::cmd(
            STARTED_TEST,
            "started-child",
            STARTED_CHILDREN,
            std::slice::from_ref(&me),
        )],
    )
    .map_err(|e| format!("spawn of {STARTED_CHILDREN}: {e}"))?;
    // Counted before anything else: the reply must not precede the forks.
    let alive = processes_of_job(&s.jobid);
    println!("started jobid={} alive={alive}", s.jobid);
    // The children stay until they have read this, so none has exited
    // before the count.
    pmi.put("counted", "1").map_err(|e| e.to_string())?;
    pmi.fence().map_err(|e| e.to_string())?;
    pmi.finalize().map_err(|e| e.to_string())
}

fn role_started_child() -> Result<(), String> {
    let pmi = init()?;
    let parent = env("STARTED_PARENT")?;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while pmi
        .get_from(Some(&parent), "counted", Some(0))
        .map_err(|e| format!("get_from parent {parent}: {e}"))?
        .is_none()
    {
        ensure(std::time::Instant::now() < deadline, || {
            "the parent never put `counted`".to_string()
        })?;
        std::thread::sleep(Duration::from_millis(20));
    }
    pmi.fence().map_err(|e| e.to_string())?;
    pmi.finalize().map_err(|e| e.to_string())
}

/// The spawn is answered once every child process has been started (as
/// Hydra answers after its proxies launched), so the spawning rank sleeps
/// in its read meanwhile instead of busy-polling against its children.
#[test]
fn spawn_returns_once_every_child_is_started() {
    match rank_role::role().as_deref() {
        Some("started-child") => finish(role_started_child()),
        Some(_) => finish(role_started_parent()),
        None => {}
    }
    let _g = heavy();
    let out = rank_role::launch(STARTED_TEST, "started-parent", 1, &[]).run();
    out.assert_success();
    let line = lines_with(&out.stdout, "started jobid=");
    assert_eq!(line.len(), 1, "{}", out.report());
    assert!(
        line[0].ends_with(&format!(" alive={STARTED_CHILDREN}")),
        "{}",
        out.report()
    );
}

// ---------------------------------------------------------------------------
// 5. Output and failure

fn role_label_parent() -> Result<(), String> {
    let pmi = init()?;
    println!("label parent line");
    role_spawn_request(
        &pmi,
        vec![rank_role::cmd(LABEL_TEST, "label-child", 1, &[])],
    )
    .map_err(|e| e.to_string())?;
    pmi.finalize().map_err(|e| e.to_string())
}

const LABEL_TEST: &str = "label_marks_spawned_job_lines_with_job_and_rank";

#[test]
fn label_marks_spawned_job_lines_with_job_and_rank() {
    match rank_role::role().as_deref() {
        Some("label-child") => {
            let pmi = init();
            println!("label child line");
            finish(pmi.and_then(|p| p.finalize().map_err(|e| e.to_string())))
        }
        Some(_) => finish(role_label_parent()),
        None => {}
    }
    // Starts several processes.
    let _g = heavy();
    let out = rank_role::launch(LABEL_TEST, "label-parent", 1, &["--label"]).run();
    out.assert_success();
    assert!(
        out.stdout.lines().any(|l| l == "[0] label parent line"),
        "{}",
        out.report()
    );
    assert!(
        out.stdout.lines().any(|l| l == "[1,0] label child line"),
        "{}",
        out.report()
    );
}

const EXIT3_TEST: &str = "spawned_child_exit_3_ends_both_jobs_with_status_3";

fn role_exit3_parent() -> Result<(), String> {
    let pmi = init()?;
    if pmi.rank() == 0 {
        let s = role_spawn_request(
            &pmi,
            vec![rank_role::cmd(EXIT3_TEST, "exit3-child", 1, &[])],
        )
        .map_err(|e| e.to_string())?;
        println!("exit3 spawned jobid={}", s.jobid);
    }
    // The child's failure must end this job: wait to be torn down.
    std::thread::sleep(Duration::from_secs(30));
    Err("still running 30 s after the spawn: the child's failure did not end this job".into())
}

#[test]
fn spawned_child_exit_3_ends_both_jobs_with_status_3() {
    match rank_role::role().as_deref() {
        Some("exit3-child") => {
            let _pmi = init();
            println!("exit3 child initialized");
            std::process::exit(3);
        }
        Some(_) => finish(role_exit3_parent()),
        None => {}
    }
    let _g = heavy();
    let out = rank_role::launch(EXIT3_TEST, "exit3-parent", 2, &[]).run();
    out.assert_code(3);
    assert!(out.elapsed < Duration::from_secs(20), "{}", out.report());
    let jobid = printed_jobid(&out.stdout, "exit3 spawned");
    assert!(
        out.stderr.contains(&format!("rank 0 of job {jobid}")),
        "stderr should name the child as `rank 0 of job {jobid}`\n{}",
        out.report()
    );
    assert!(
        !out.stderr.contains("still running 30 s"),
        "{}",
        out.report()
    );
}

const LATE_TEST: &str = "launcher_waits_for_children_after_the_parent_job_ended";
const LATE_SLEEP: Duration = Duration::from_millis(1500);

fn role_late_child() -> Result<(), String> {
    let pmi = init()?;
    std::thread::sleep(LATE_SLEEP);
    let parent: u32 = env("LATE_PARENT_PID")?
        .parse()
        .map_err(|_| "pid".to_string())?;
    rank_role::poll(Duration::from_secs(10), "parent rank exit", || {
        Ok((!common::pid_alive(parent)).then_some(()))
    })?;
    println!("late child {} done after the parent exited", pmi.rank());
    pmi.finalize().map_err(|e| e.to_string())
}

#[test]
fn launcher_waits_for_children_after_the_parent_job_ended() {
    match rank_role::role().as_deref() {
        Some("late-child") => finish(role_late_child()),
        Some(_) => {
            let r = init().and_then(|pmi| {
                let env = [format!("LATE_PARENT_PID={}", std::process::id())];
                role_spawn_request(&pmi, vec![rank_role::cmd(LATE_TEST, "late-child", 2, &env)])
                    .map_err(|e| e.to_string())?;
                println!("late parent done");
                pmi.finalize().map_err(|e| e.to_string())
            });
            finish(r)
        }
        None => {}
    }
    // Starts several processes.
    let _g = heavy();
    let out = rank_role::launch(LATE_TEST, "late-parent", 1, &[]).run();
    out.assert_success();
    assert_eq!(
        lines_with(&out.stdout, "late parent done").len(),
        1,
        "{}",
        out.report()
    );
    for r in 0..2 {
        let want = format!("late child {r} done after the parent exited");
        assert_eq!(lines_with(&out.stdout, &want).len(), 1, "{}", out.report());
    }
    assert!(out.elapsed >= LATE_SLEEP, "{}", out.report());
}

// ---------------------------------------------------------------------------
// 7. Cross-job KVS

const KVS_TEST: &str = "child_reads_parent_kvs_but_unconnected_sibling_is_refused";

fn role_kvs_parent() -> Result<(), String> {
    let pmi = init()?;
    pmi.put("parent-key", "parent-value")
        .map_err(|e| e.to_string())?;
    pmi.fence().map_err(|e| e.to_string())?;
    let me = format!("KVS_PARENT={}", pmi.job_id());
    let a = role_spawn_request(
        &pmi,
        vec![rank_role::cmd(
            KVS_TEST,
            "kvs-a",
            1,
            std::slice::from_ref(&me),
        )],
    )
    .map_err(|e| e.to_string())?;
    let b_env = [me, format!("KVS_SIBLING={}", a.jobid)];
    role_spawn_request(&pmi, vec![rank_role::cmd(KVS_TEST, "kvs-b", 1, &b_env)])
        .map_err(|e| e.to_string())?;
    pmi.finalize().map_err(|e| e.to_string())
}

fn role_kvs_a() -> Result<(), String> {
    let pmi = init()?;
    let parent = env("KVS_PARENT")?;
    let v = pmi
        .get_from(Some(&parent), "parent-key", None)
        .map_err(|e| format!("get_from parent {parent}: {e}"))?;
    ensure(v.as_deref() == Some(&b"parent-value"[..]), || {
        format!("parent-key = {v:?}")
    })?;
    ensure(pmi.parent_segment() == Some(parent.as_str()), || {
        format!("parent segment not mapped: {:?}", pmi.parent_segment())
    })?;
    println!("kvs child read parent-key=parent-value");
    pmi.put("a-key", "a-value").map_err(|e| e.to_string())?;
    pmi.fence().map_err(|e| e.to_string())?;
    pmi.finalize().map_err(|e| e.to_string())
}

fn role_kvs_b() -> Result<(), String> {
    let pmi = init()?;
    let sib = env("KVS_SIBLING")?;
    match pmi.get_from(Some(&sib), "a-key", None) {
        Err(PmiError::Server { msg, .. }) if msg.contains("not connected") => {
            println!("kvs sibling refused: {msg}");
        }
        other => return Err(format!("get_from unconnected sibling {sib}: {other:?}")),
    }
    pmi.finalize().map_err(|e| e.to_string())
}

/// A spawned job reads its parent's KVS; a sibling spawned by the same
/// parent is not connected to it and gets a clear error.
#[test]
fn child_reads_parent_kvs_but_unconnected_sibling_is_refused() {
    match rank_role::role().as_deref() {
        Some("kvs-a") => finish(role_kvs_a()),
        Some("kvs-b") => finish(role_kvs_b()),
        Some(_) => finish(role_kvs_parent()),
        None => {}
    }
    // Starts several processes.
    let _g = heavy();
    let out = rank_role::launch(KVS_TEST, "kvs-parent", 1, &["--stats"]).run();
    out.assert_success();
    assert_eq!(
        lines_with(&out.stdout, "kvs child read parent-key=parent-value").len(),
        1,
        "{}",
        out.report()
    );
    // The child read its parent's key from the parent's segment: the only
    // get the server saw is the sibling's refused one.
    let sock = stats_row(&out.stderr, "socket").expect("socket stats row");
    assert_eq!(sock[1], 1, "socket gets\n{}", out.report());
    assert_eq!(
        lines_with(&out.stdout, "kvs sibling refused: ").len(),
        1,
        "{}",
        out.report()
    );
}
