//! `fastpmi ps` with real processes: a job whose rank 17 is late to PMI
//! while the others fence (shared memory, also with the tree release;
//! socket through Slurm's libpmi2; and mixed), and a shared-memory rank
//! waiting for a node attribute. The threads that answer run at nice -20,
//! the rest of the launcher and every rank at 0.
//!
//! Every launcher here runs with its own `XDG_RUNTIME_DIR`, so `fastpmi ps`
//! sees only the launchers of the test.

mod common;
mod rank_role;

use std::ffi::OsString;
use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use common::tools::{args, fastpmi, ps_json, runtime_dir, text, wait_for, wait_late_fence, Late};
use common::tools::{LATE, N};
use common::{heavy, prog, Prog};

/// The checks shared by the three transports: 256 rows, rank 17 running
/// without PMI, every other rank in fence 1 over `transport(rank)`, the
/// missing-rank summary in the human output; then rank 17 goes and the job
/// completes.
fn late_rank_ps(tag: &str, sections: Vec<OsString>, transport: impl Fn(u32) -> &'static str) {
    late_rank_ps_env(tag, sections, &[], transport)
}

/// [`late_rank_ps`] with extra launcher environment.
fn late_rank_ps_env(
    tag: &str,
    sections: Vec<OsString>,
    env: &[(&str, &str)],
    transport: impl Fn(u32) -> &'static str,
) {
    let _g = heavy();
    let late = Late::new(tag);
    let mut cmd = late.launch(sections);
    for (k, v) in env {
        cmd = cmd.env(k, v);
    }
    let started = std::time::Instant::now();
    let job = cmd.spawn();
    let pid = job.pid();
    let t = wait_late_fence(late.xdg.path(), pid);
    let age = started.elapsed().as_secs_f64();
    let late_pid = late.late_pid();
    assert_eq!(t.ranks.len(), N as usize, "one row per rank");
    for r in &t.ranks {
        assert!(r.pid.is_some(), "rank {} has no pid: {r:?}", r.rank);
        if r.rank == LATE {
            assert_eq!(r.kind, "no_pmi", "{r:?}");
            assert_eq!(r.state, "running without PMI", "{r:?}");
            assert_eq!(r.transport, "none");
            assert_eq!(r.pid, Some(late_pid), "rank 17's pid");
        } else {
            assert_eq!(r.kind, "in_fence", "{r:?}");
            assert_eq!(r.state, "in fence 1");
            assert_eq!(r.fence, Some(1));
            assert_eq!(r.transport, transport(r.rank), "{r:?}");
            assert_eq!(r.last_op.as_deref(), Some("kvs-fence"), "{r:?}");
            // Entered after the launch: whatever clock the ranks stamp with
            // (TSC ticks where the kernel keeps time by them), `ps` converts.
            assert!(
                r.seconds > 0.0 && r.seconds < age,
                "launched {age} s ago: {r:?}"
            );
        }
    }
    let human = fastpmi(late.xdg.path(), &["ps", &pid.to_string()]);
    let human = text(&human.stdout);
    let want = format!(
        "fence 1: 255/256 arrived, missing: rank 17 (pid {late_pid}, running without PMI for "
    );
    assert!(
        human.contains(&want),
        "human output lacks {want:?}:\n{human}"
    );
    assert_tools_ahead_of_ranks(
        pid,
        &t.ranks.iter().filter_map(|r| r.pid).collect::<Vec<_>>(),
    );
    // The listing names the launcher and its job.
    let list = text(&fastpmi(late.xdg.path(), &["ps"]).stdout);
    assert!(
        list.contains(&format!("fastpmi_{pid}_0")) && list.contains(&pid.to_string()),
        "{list}"
    );
    late.release();
    let out = job.wait_or_kill(Duration::from_secs(120));
    out.assert_success();
    assert_eq!(
        out.stdout_lines()
            .iter()
            .filter(|l| l.starts_with("late ok rank"))
            .count(),
        N as usize,
        "{}",
        out.report()
    );
}

/// 256 ranks bound to this node's cores by the default policy: on a machine
/// of up to 16 cores they share cores by 16 or more, and the fence is
/// released by cohorts.
#[test]
fn ps_late_rank_shared_memory() {
    let exe = prog(Prog::Pmi2LateFastpmi);
    let lib = common::capi_lib_dir();
    let mut a = args(&[&"-genv", &"LD_LIBRARY_PATH", &lib, &"-n", &"256", &exe]);
    a.shrink_to_fit();
    late_rank_ps("ps-shm", a, |_| "shm");
}

/// The same with the fence released by a tree (fan-out 4 forced through the
/// launcher's `FASTPMI_FENCE_FANOUT`, cohorts off by `FASTPMI_FENCE_COHORTS=0`;
/// the default picks a tree from 512 ranks that do not share cores):
/// ranks sleep on their own wake words, `ps` still reads fence 1 from each
/// rank's state, and the late rank, arriving last, releases the tree.
#[test]
fn ps_late_rank_shared_memory_tree_release() {
    let exe = prog(Prog::Pmi2LateFastpmi);
    let lib = common::capi_lib_dir();
    let a = args(&[&"-genv", &"LD_LIBRARY_PATH", &lib, &"-n", &"256", &exe]);
    let env = [
        ("FASTPMI_FENCE_FANOUT", "4"),
        ("FASTPMI_FENCE_COHORTS", "0"),
    ];
    late_rank_ps_env("ps-shm-tree", a, &env, |_| "shm");
}

#[test]
fn ps_late_rank_socket() {
    let exe = prog(Prog::Pmi2LateSlurm);
    late_rank_ps("ps-sock", args(&[&"-n", &"256", &exe]), |_| "socket");
}

#[test]
fn ps_late_rank_mixed() {
    let shm = prog(Prog::Pmi2LateFastpmi);
    let sock = prog(Prog::Pmi2LateSlurm);
    let lib = common::capi_lib_dir();
    // fastpmi's libpmi2 for the first section only (same SONAME as Slurm's).
    let a = args(&[
        &"-n",
        &"128",
        &"-env",
        &"LD_LIBRARY_PATH",
        &lib,
        &shm,
        &":",
        &"-n",
        &"128",
        &sock,
    ]);
    late_rank_ps("ps-mixed", a, |r| if r < 128 { "shm" } else { "socket" });
}

const ATTR_WAIT_TEST: &str = "ps_shows_the_node_attribute_a_shared_memory_rank_waits_for";
const ATTR_KEY: &str = "fastpmi-test-late-attr";

/// Rank 0 waits for a node attribute that rank 1 puts only once the go
/// file appears (written by the test after `ps` has shown the wait).
fn role_attr_wait() -> Result<(), String> {
    let pmi = rank_role::init()?;
    if pmi.rank() == 0 {
        let v = pmi
            .get_node_attr(ATTR_KEY, true)
            .map_err(|e| format!("get_node_attr: {e}"))?;
        rank_role::ensure(v.as_deref() == Some(&b"here"[..]), || format!("got {v:?}"))?;
        println!("attr waiter got it transport={:?}", pmi.transport());
    } else {
        let go = PathBuf::from(rank_role::env("FASTPMI_TEST_GO")?);
        rank_role::poll(Duration::from_secs(120), "go file", || {
            Ok(go.exists().then_some(()))
        })?;
        pmi.put_node_attr(ATTR_KEY, "here")
            .map_err(|e| format!("put_node_attr: {e}"))?;
    }
    pmi.finalize().map_err(|e| e.to_string())
}

/// A shared-memory rank waiting in `get_node_attr(KEY, wait)` shows the key
/// in `fastpmi ps --json` (row kind `waiting_attr`, `attr` = KEY, transport
/// shm) and in the human output; the wait is then satisfied and the job
/// completes.
#[test]
fn ps_shows_the_node_attribute_a_shared_memory_rank_waits_for() {
    if rank_role::role().is_some() {
        rank_role::finish(role_attr_wait());
    }
    let _g = heavy();
    let xdg = runtime_dir("attr-wait");
    let marks = common::scratch_dir("attr-wait-marks");
    let go = marks.path().join("go");
    let job = rank_role::launch(ATTR_WAIT_TEST, "attr-wait", 2, &[])
        .env("XDG_RUNTIME_DIR", xdg.path())
        .env("FASTPMI_TEST_GO", &go)
        .timeout(Duration::from_secs(120))
        .spawn();
    let pid = job.pid();
    let row = wait_for(
        Duration::from_secs(60),
        "rank 0 waiting for the attribute",
        || {
            let t = ps_json(xdg.path(), pid).ok()?.into_iter().next()?;
            let r = t.ranks.into_iter().next()?;
            (r.kind == "waiting_attr").then_some(r)
        },
    );
    assert_eq!(row.attr.as_deref(), Some(ATTR_KEY), "{row:?}");
    assert_eq!(row.transport, "shm", "{row:?}");
    assert_eq!(row.state, format!("waiting for node attribute {ATTR_KEY}"));
    let human = fastpmi(xdg.path(), &["ps", &pid.to_string()]);
    assert!(
        text(&human.stdout).contains(&format!("waiting for node attribute {ATTR_KEY}")),
        "{}{}",
        text(&human.stdout),
        text(&human.stderr)
    );
    fs::write(&go, "go").unwrap();
    let out = job.wait_or_kill(Duration::from_secs(60));
    out.assert_success();
    assert!(
        out.stdout.contains("attr waiter got it transport=Shm"),
        "{}",
        out.report()
    );
}

/// The scheduling of thread `tid` of process `pid`: its policy (field 41
/// of its stat: 0 the fair class, 2 round-robin real time), real-time
/// priority (field 40) and nice value (field 19).
fn sched(pid: u32, tid: &str) -> (u32, u32, i32) {
    let stat = fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).unwrap_or_default();
    let after: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, a)| a)
        .split_whitespace()
        .collect();
    // Fields from 3 (the state) on.
    let field = |n: usize| after.get(n - 3).copied().unwrap_or_default();
    match (field(41).parse(), field(40).parse(), field(19).parse()) {
        (Ok(p), Ok(rt), Ok(n)) => (p, rt, n),
        _ => panic!("no scheduling fields in /proc/{pid}/task/{tid}/stat: {stat:?}"),
    }
}

/// The threads that answered `ps` run in the real-time class at its lowest
/// priority (the tests run as root, who may); the event loop, the forker
/// threads and every rank stay in the fair class at nice 0.
fn assert_tools_ahead_of_ranks(launcher: u32, ranks: &[u32]) {
    const FAIR: (u32, u32, i32) = (0, 0, 0);
    const ROUND_ROBIN_1: (u32, u32, i32) = (2, 1, 0);
    let mut rendezvous = 0;
    for t in fs::read_dir(format!("/proc/{launcher}/task"))
        .unwrap()
        .flatten()
    {
        let tid = t.file_name().to_string_lossy().into_owned();
        let comm = fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let want = if comm.starts_with("fastpmi-rendezv") {
            rendezvous += 1;
            ROUND_ROBIN_1
        } else {
            FAIR
        };
        assert_eq!(
            sched(launcher, &tid),
            want,
            "launcher thread {tid} ({})",
            comm.trim()
        );
    }
    assert!(
        rendezvous > 0,
        "no rendezvous thread in launcher {launcher}"
    );
    for &r in ranks {
        assert_eq!(sched(r, &r.to_string()), FAIR, "rank process {r}");
    }
}
