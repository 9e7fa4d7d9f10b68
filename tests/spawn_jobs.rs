//! Spawned jobs' output, exit and KVS with real processes: `--label` on a
//! spawned job's lines, a spawned child's failure ending both jobs, the
//! launcher waiting for children after the parent job ended, and reads of
//! another job's KVS.
//!
//! Rust ranks are this test binary (see `rank_role`): the launcher runs it
//! with a role in the environment, and spawned children get theirs through
//! the spawn's `env` info key.

mod common;
mod rank_role;

use std::time::Duration;

use common::spawn::{lines_with, printed_jobid, role_spawn_request};
use common::{heavy, stats_row};
use fastpmi_client::PmiError;
use rank_role::{ensure, env, finish, init};

// -----------------------------------------------------------------------------
// Output and failure

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
        // The child exits only once this rank has printed its job id: its
        // failure tears this job down, and a child that exited at once
        // could have this rank killed before it printed.
        let mark = std::env::temp_dir().join(format!("fastpmi-exit3-{}", std::process::id()));
        let env = [format!("EXIT3_MARK={}", mark.display())];
        let s = role_spawn_request(
            &pmi,
            vec![rank_role::cmd(EXIT3_TEST, "exit3-child", 1, &env)],
        )
        .map_err(|e| e.to_string())?;
        println!("exit3 spawned jobid={}", s.jobid);
        std::fs::write(&mark, b"").map_err(|e| format!("{}: {e}", mark.display()))?;
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
            let mark = std::path::PathBuf::from(env("EXIT3_MARK").unwrap_or_default());
            let seen = rank_role::poll(Duration::from_secs(10), "the parent's line", || {
                Ok(mark.exists().then_some(()))
            });
            let _ = std::fs::remove_file(&mark);
            if let Err(e) = seen {
                eprintln!("exit3 child: {e}");
            }
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

// -----------------------------------------------------------------------------
// Cross-job KVS

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

// -----------------------------------------------------------------------------
// Binding of spawned jobs

const BIND_TEST: &str = "a_spawned_job_is_bound_to_the_cores_its_parents_left_free";

fn cpus_line(who: &str) -> String {
    let cpus = common::placement::own_cpus();
    let list: Vec<String> = cpus.iter().map(u32::to_string).collect();
    format!("bind {who} cpus={}", list.join(","))
}

/// A spawned child of the binding tests: prints its CPUs and finalizes.
fn bind_child() {
    let pmi = init();
    println!("{}", cpus_line("child"));
    finish(pmi.and_then(|p| p.finalize().map_err(|e| e.to_string())))
}

/// The CPUs `who` printed with [`cpus_line`].
fn printed_cpus(out: &common::Outcome, who: &str) -> std::collections::BTreeSet<u32> {
    let prefix = format!("bind {who} cpus=");
    let line = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` line: {}", out.report()));
    common::placement::parse_list(line)
}

/// Spawns one child of `test` in `role`; every errcode must be 0.
fn spawn_one(pmi: &fastpmi_client::Pmi, test: &str, role: &str) -> Result<(), String> {
    let s = role_spawn_request(pmi, vec![rank_role::cmd(test, role, 1, &[])])
        .map_err(|e| e.to_string())?;
    ensure(s.errcodes.iter().all(|&c| c == 0), || {
        format!("spawn errors {:?}", s.errcodes)
    })
}

/// The parent (1 rank) prints its CPUs and spawns one child, which prints
/// its own.
fn role_bind_parent() -> Result<(), String> {
    let pmi = init()?;
    println!("{}", cpus_line("parent"));
    spawn_one(&pmi, BIND_TEST, "bind-child")?;
    pmi.finalize().map_err(|e| e.to_string())
}

/// With the default binding, a 1-rank job sits on the first core; the job
/// it spawns goes to the next core, not onto its parent's (the slots of a
/// spawned job are the least loaded by the launcher's live jobs).
#[test]
fn a_spawned_job_is_bound_to_the_cores_its_parents_left_free() {
    match rank_role::role().as_deref() {
        Some("bind-child") => bind_child(),
        Some(_) => finish(role_bind_parent()),
        None => {}
    }
    let _g = heavy();
    let out = rank_role::launch(BIND_TEST, "bind-parent", 1, &[]).run();
    out.assert_success();
    let (parent, child) = (printed_cpus(&out, "parent"), printed_cpus(&out, "child"));
    let cores: Vec<_> = common::placement::cores().into_iter().collect();
    assert_eq!(
        parent,
        cores[0],
        "parent not on the first core: {}",
        out.report()
    );
    let want = cores.get(1).unwrap_or(&cores[0]);
    assert_eq!(
        &child,
        want,
        "the child is not on the core after its parent's ({} cores): {}",
        cores.len(),
        out.report()
    );
}

const AVOID_TEST: &str = "a_spawned_job_avoids_the_spawning_ranks_core";

/// One parent per core; rank 0 spawns one child while the others wait in a
/// fence (their slots stay taken). Every core holds one parent, and the
/// child goes to the first core that is not rank 0's: rank 0 busy-polls
/// in `MPI_Comm_accept` under MPICH until its children connect.
#[test]
fn a_spawned_job_avoids_the_spawning_ranks_core() {
    match rank_role::role().as_deref() {
        Some("avoid-child") => bind_child(),
        Some(_) => finish((|| {
            let pmi = init()?;
            if pmi.rank() == 0 {
                println!("{}", cpus_line("spawner"));
                spawn_one(&pmi, AVOID_TEST, "avoid-child")?;
            }
            pmi.fence().map_err(|e| e.to_string())?;
            pmi.finalize().map_err(|e| e.to_string())
        })()),
        None => {}
    }
    let _g = heavy();
    let cores: Vec<_> = common::placement::cores().into_iter().collect();
    let n = cores.len() as u32;
    let out = rank_role::launch(AVOID_TEST, "avoid-parent", n, &[]).run();
    out.assert_success();
    let (spawner, child) = (printed_cpus(&out, "spawner"), printed_cpus(&out, "child"));
    assert_eq!(
        spawner,
        cores[0],
        "rank 0 not on the first core: {}",
        out.report()
    );
    let want = cores.get(1).unwrap_or(&cores[0]);
    assert_eq!(
        &child,
        want,
        "the child is not on the first core other than the spawner's ({} cores, \
         one parent on each): {}",
        cores.len(),
        out.report()
    );
}
