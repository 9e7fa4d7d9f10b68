//! MPIR with real debuggers: gdb runs the launcher and reads the proc
//! table at `MPIR_Breakpoint` (releasing ranks held by `--stop-in-init`),
//! attaches to a running launcher, and sees spawned ranks at the second
//! breakpoint; the MPIR symbols survive the release build.
//!
//! Every launcher here runs with its own `XDG_RUNTIME_DIR`, so `fastpmi ps`
//! sees only the launchers of the test.

mod common;
mod rank_role;

use std::collections::HashMap;
use std::fs;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::tools::{ps_json, runtime_dir, text, wait_for};
use common::{heavy, launch, prog, Prog};

/// `gdb -batch` output lines `$k = v` as numbers.
fn gdb_values(out: &str) -> Vec<i64> {
    out.lines()
        .filter_map(|l| l.strip_prefix('$'))
        .filter_map(|l| l.split_once(" = "))
        .filter_map(|(_, v)| v.trim().parse().ok())
        .collect()
}

fn gdb_table_cmds(n: usize) -> Vec<String> {
    // C expressions, whatever language the stopped frame is in.
    let mut v: Vec<String> = [
        "-ex",
        "set language c",
        "-ex",
        "print (int)MPIR_proctable_size",
    ]
    .map(String::from)
    .to_vec();
    for i in 0..n {
        v.push("-ex".into());
        // MPIR_PROCDESC: two pointers, then the pid.
        v.push(format!(
            "print *(int*)(*(long*)&MPIR_proctable + 24*{i} + 16)"
        ));
    }
    v
}

/// gdb runs the launcher, stops in MPIR_Breakpoint, reads the proc table,
/// sets MPIR_being_debugged and continues: ranks held by --stop-in-init go on.
#[test]
fn gdb_runs_launcher_reads_proctable_and_continues() {
    let _g = heavy();
    let xdg = runtime_dir("gdb-run");
    let marks = common::scratch_dir("gdb-run-marks");
    let exe = prog(Prog::Pmi2LateFastpmi);
    let lib = common::capi_lib_dir();
    let n = 8;
    let mut a: Vec<String> = vec![
        "-batch".into(),
        "-ex".into(),
        "break MPIR_Breakpoint".into(),
        "-ex".into(),
        "run".into(),
    ];
    a.extend(gdb_table_cmds(n));
    a.extend(
        [
            "-ex",
            "set var *(int*)&MPIR_being_debugged = 1",
            "-ex",
            "continue",
        ]
        .map(String::from),
    );
    a.push("--args".into());
    a.push(common::launcher().display().to_string());
    for s in ["--stop-in-init", "-genv", "LD_LIBRARY_PATH"] {
        a.push(s.into());
    }
    a.push(lib.display().to_string());
    a.extend(["-n".to_string(), n.to_string(), exe.display().to_string()]);
    let out = launch(&a)
        .program("gdb")
        .env("XDG_RUNTIME_DIR", xdg.path())
        .env("FASTPMI_TEST_MARK_DIR", marks.path())
        .timeout(Duration::from_secs(120))
        .run();
    out.assert_success();
    let v = gdb_values(&out.stdout);
    assert_eq!(v.len(), n + 1, "gdb printed {v:?}:\n{}", out.report());
    assert_eq!(v[0], n as i64, "MPIR_proctable_size");
    // Every rank got past init (the debugger's continue released them) and
    // finished.
    assert_eq!(
        out.stdout
            .lines()
            .filter(|l| l.contains("late ok rank"))
            .count(),
        n,
        "{}",
        out.report()
    );
    assert!(out.stdout.contains("exited normally"), "{}", out.report());
    // The pids in the table are distinct ranks' pids: each is one rank process
    // the launcher started (checked against ps below in the attach test).
    let mut pids: Vec<i64> = v[1..].to_vec();
    pids.sort();
    pids.dedup();
    assert_eq!(pids.len(), n, "{v:?}");
    assert!(pids.iter().all(|&p| p > 1));
}

/// gdb attaches to a running launcher: MPIR_proctable holds exactly the
/// ranks' pids.
#[test]
fn gdb_attach_reads_rank_pids() {
    let _g = heavy();
    let xdg = runtime_dir("gdb-attach");
    let n = 6;
    // Each rank prints its pid (exec keeps it) and stays for a while.
    let job = launch([
        "-n",
        &n.to_string(),
        "sh",
        "-c",
        "echo rankpid $$; exec sleep 8",
    ])
    .env("XDG_RUNTIME_DIR", xdg.path())
    .spawn();
    let pid = job.pid();
    let table = wait_for(Duration::from_secs(30), "all ranks started", || {
        let t = ps_json(xdg.path(), pid).ok()?.into_iter().next()?;
        t.ranks.iter().all(|r| r.pid.is_some()).then_some(t)
    });
    let mut a: Vec<String> = vec!["-batch".into(), "-p".into(), pid.to_string()];
    a.extend(gdb_table_cmds(n));
    let g = Command::new("gdb")
        .args(&a)
        .stdin(Stdio::null())
        .output()
        .expect("run gdb");
    let gout = text(&g.stdout);
    let v = gdb_values(&gout);
    assert_eq!(
        v.len(),
        n + 1,
        "gdb printed {v:?}:\n{gout}\n{}",
        text(&g.stderr)
    );
    assert_eq!(v[0], n as i64);
    let from_ps: Vec<i64> = table.ranks.iter().map(|r| r.pid.unwrap() as i64).collect();
    assert_eq!(&v[1..], &from_ps[..], "MPIR_proctable pids in rank order");
    let out = job.wait_or_kill(Duration::from_secs(60));
    out.assert_success();
    let mut printed: Vec<i64> = out
        .stdout_lines()
        .iter()
        .filter_map(|l| l.strip_prefix("rankpid "))
        .filter_map(|p| p.trim().parse().ok())
        .collect();
    printed.sort();
    let mut table_pids = v[1..].to_vec();
    table_pids.sort();
    assert_eq!(printed, table_pids, "the ranks' own pids");
}

const MPIR_SPAWN_TEST: &str = "gdb_sees_spawned_ranks_in_proctable_at_second_breakpoint";
const MPIR_PARENTS: usize = 2;
const MPIR_CHILDREN: usize = 3;

/// A rank of the MPIR spawn test: rank 0 of the parents spawns the
/// children; every rank stays alive until the go file appears (written by
/// gdb's script once it has checked the table), so the pids it reads are
/// live.
fn role_mpir(spawns: bool) -> Result<(), String> {
    let pmi = rank_role::init()?;
    if spawns && pmi.rank() == 0 {
        let cmd = rank_role::cmd(MPIR_SPAWN_TEST, "mpir-child", MPIR_CHILDREN as u32, &[]);
        pmi.spawn(&fastpmi_client::SpawnRequest {
            cmds: vec![cmd],
            preput: Vec::new(),
        })
        .map_err(|e| format!("spawn: {e}"))?;
    }
    let go = PathBuf::from(rank_role::env("FASTPMI_TEST_GO")?);
    rank_role::poll(Duration::from_secs(120), "go file", || {
        Ok(go.exists().then_some(()))
    })?;
    pmi.finalize().map_err(|e| e.to_string())
}

/// gdb's script: `table(label)` prints the proc table with, for each pid,
/// whether it is a live process and its role, PMI rank and job id (from its
/// environment); `go()` lets the ranks finish.
const MPIR_GDB_SCRIPT: &str = r#"
import gdb, os

def _env(pid):
    try:
        raw = open("/proc/%d/environ" % pid, "rb").read()
    except OSError:
        return {}
    kv = [e.split(b"=", 1) for e in raw.split(b"\0") if b"=" in e]
    return dict((k.decode(), v.decode("utf-8", "replace")) for k, v in kv)

def _alive(pid):
    try:
        stat = open("/proc/%d/stat" % pid).read()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")

def table(label):
    n = int(gdb.parse_and_eval("(int)MPIR_proctable_size"))
    st = int(gdb.parse_and_eval("(int)MPIR_debug_state"))
    base = int(gdb.parse_and_eval("*(long*)&MPIR_proctable"))
    print("mpir %s size=%d state=%d" % (label, n, st))
    for i in range(n):
        pid = int(gdb.parse_and_eval("*(int*)(%d + 24*%d + 16)" % (base, i)))
        e = _env(pid)
        print("mpir %s entry=%d pid=%d alive=%d role=%s rank=%s job=%s" % (
            label, i, pid, _alive(pid), e.get("FASTPMI_SPAWNTEST_ROLE", "-"),
            e.get("PMI_RANK", "-"), e.get("PMI_JOBID", "-")))

def go():
    open(os.environ["FASTPMI_TEST_GO"], "w").write("go")
"#;

/// One `mpir LABEL entry=...` line of the script: (pid, alive, role, rank, job).
fn mpir_entries(out: &str, label: &str) -> Vec<(u32, bool, String, String, String)> {
    let head = format!("mpir {label} entry=");
    out.lines()
        .filter(|l| l.starts_with(&head))
        .map(|l| {
            let f: HashMap<&str, &str> = l
                .split_whitespace()
                .filter_map(|w| w.split_once('='))
                .collect();
            (
                f["pid"].parse().unwrap(),
                f["alive"] == "1",
                f["role"].to_string(),
                f["rank"].to_string(),
                f["job"].to_string(),
            )
        })
        .collect()
}

/// gdb runs the launcher on a job of 2 ranks whose rank 0 spawns 3
/// children. First stop in MPIR_Breakpoint: the table holds the 2 parents.
/// Second stop (once the children have all started): MPIR_debug_state is
/// MPIR_DEBUG_SPAWNED, MPIR_proctable_size is 2 + 3, entries 0-1 are live
/// parent ranks 0-1 of one job and entries 2-4 live child ranks 0-2 of
/// another job; then the job completes.
#[test]
fn gdb_sees_spawned_ranks_in_proctable_at_second_breakpoint() {
    match rank_role::role().as_deref() {
        Some("mpir-parent") => rank_role::finish(role_mpir(true)),
        Some("mpir-child") => rank_role::finish(role_mpir(false)),
        Some(_) => return,
        None => {}
    }
    let _g = heavy();
    let xdg = runtime_dir("gdb-spawn");
    let marks = common::scratch_dir("gdb-spawn-marks");
    let script = marks.path().join("mpir.py");
    fs::write(&script, MPIR_GDB_SCRIPT).unwrap();
    let go = marks.path().join("go");
    let mut a: Vec<String> = ["-batch", "-ex", "set language c", "-ex"]
        .map(String::from)
        .to_vec();
    a.push(format!("source {}", script.display()));
    a.extend(
        [
            "-ex",
            "break MPIR_Breakpoint",
            "-ex",
            "run",
            "-ex",
            "python table('stop1')",
            "-ex",
            "continue",
            "-ex",
            "python table('stop2')",
            "-ex",
            "python go()",
            "-ex",
            "continue",
            "--args",
        ]
        .map(String::from),
    );
    a.push(common::launcher().display().to_string());
    a.extend(["-n".into(), MPIR_PARENTS.to_string(), rank_role::me()]);
    a.extend(rank_role::args(MPIR_SPAWN_TEST));
    let out = launch(&a)
        .program("gdb")
        .env("XDG_RUNTIME_DIR", xdg.path())
        .env(rank_role::ROLE, "mpir-parent")
        .env("FASTPMI_TEST_GO", &go)
        .timeout(Duration::from_secs(180))
        .run();
    out.assert_success();
    assert!(out.stdout.contains("exited normally"), "{}", out.report());
    assert!(
        out.stdout
            .contains(&format!("mpir stop1 size={MPIR_PARENTS} state=1")),
        "{}",
        out.report()
    );
    let total = MPIR_PARENTS + MPIR_CHILDREN;
    assert!(
        out.stdout
            .contains(&format!("mpir stop2 size={total} state=1")),
        "{}",
        out.report()
    );
    let first = mpir_entries(&out.stdout, "stop1");
    let second = mpir_entries(&out.stdout, "stop2");
    assert_eq!(first.len(), MPIR_PARENTS, "{}", out.report());
    assert_eq!(second.len(), total, "{}", out.report());
    // The parents' entries are kept as they were.
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(
            a.0,
            b.0,
            "parent pid changed between stops\n{}",
            out.report()
        );
    }
    for (i, (pid, alive, role, rank, _)) in second.iter().enumerate() {
        let (want_role, want_rank) = if i < MPIR_PARENTS {
            ("mpir-parent", i)
        } else {
            ("mpir-child", i - MPIR_PARENTS)
        };
        assert!(
            *alive,
            "entry {i}: pid {pid} is not a live process\n{}",
            out.report()
        );
        assert_eq!(
            (role.as_str(), rank.as_str()),
            (want_role, want_rank.to_string().as_str()),
            "entry {i} (pid {pid})\n{}",
            out.report()
        );
    }
    let parent_job = &second[0].4;
    let child_job = &second[MPIR_PARENTS].4;
    assert_ne!(parent_job, child_job, "{}", out.report());
    assert!(second[..MPIR_PARENTS].iter().all(|e| &e.4 == parent_job));
    assert!(second[MPIR_PARENTS..].iter().all(|e| &e.4 == child_job));
}

#[test]
fn mpir_symbols_survive_the_build() {
    let o = Command::new("nm")
        .arg(common::launcher())
        .output()
        .expect("run nm (binutils)");
    assert!(o.status.success());
    let syms = text(&o.stdout);
    for (name, kinds) in [
        ("MPIR_Breakpoint", "T"),
        ("MPIR_proctable", "BD"),
        ("MPIR_proctable_size", "BD"),
        ("MPIR_debug_state", "BD"),
        ("MPIR_being_debugged", "BD"),
        ("MPIR_i_am_starter", "BD"),
        ("MPIR_partial_attach_ok", "BD"),
        ("MPIR_debug_abort_string", "BD"),
    ] {
        let found = syms.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() == 3 && f[2] == name && kinds.contains(f[1])
        });
        assert!(
            found,
            "symbol {name} ({kinds}) missing from {}",
            common::launcher().display()
        );
    }
}
