//! Concurrent spawns with real processes: two threads of one rank spawning
//! at once, socket gets while 64 children are spawned, and a spawn answered
//! only once all of its 128 children are started.
//!
//! Rust ranks are this test binary (see `rank_role`): the launcher runs it
//! with a role in the environment, and spawned children get theirs through
//! the spawn's `env` info key.

mod common;
mod rank_role;

use std::sync::Barrier;
use std::time::Duration;

use common::spawn::{lines_with, role_spawn_request};
use common::{heavy, stats_row};
use fastpmi_client::SpawnCmd;
use rank_role::{ensure, env, finish, init};

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
