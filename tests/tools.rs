//! Tools and diagnosis with real processes: `fastpmi ps` on a job whose rank
//! 17 is late to PMI while the others fence (shared memory, socket through
//! Slurm's libpmi2, and mixed), `--fence-timeout` and `FASTPMI_FENCE_TIMEOUT`,
//! SIGUSR1, the MPIR proc table read by gdb, `--stop-in-init` with MPICH and
//! with fastpmi's libpmi2, and the rendezvous socket's permissions, cleanup
//! and behaviour under bad input.
//!
//! Every launcher here runs with its own `XDG_RUNTIME_DIR`, so `fastpmi ps`
//! sees only the launchers of the test.

mod common;
mod rank_role;

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{heavy, launch, prog, Prog};
use fastpmi::tools::proto::JobTable;

const LATE: u32 = 17;
const N: u32 = 256;

/// A private runtime directory (the launcher's rendezvous goes into
/// `<it>/fastpmi/`).
fn runtime_dir(tag: &str) -> tempfile::TempDir {
    let d = common::scratch_dir(tag);
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o700)).unwrap();
    d
}

/// `fastpmi ARGS` (not a launch) with this runtime dir.
fn fastpmi(xdg: &Path, args: &[&str]) -> Output {
    Command::new(common::launcher())
        .args(args)
        .env("XDG_RUNTIME_DIR", xdg)
        .stdin(Stdio::null())
        .output()
        .expect("run fastpmi")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The proc table of launcher `pid` (`fastpmi ps PID --json`).
fn ps_json(xdg: &Path, pid: u32) -> Result<Vec<JobTable>, String> {
    let o = fastpmi(xdg, &["ps", &pid.to_string(), "--json"]);
    if !o.status.success() {
        return Err(format!("fastpmi ps failed: {}", text(&o.stderr)));
    }
    serde_json::from_slice(&o.stdout).map_err(|e| format!("ps --json: {e}: {}", text(&o.stdout)))
}

/// Poll `f` every 200 ms until it yields `Some`, for at most `limit`.
fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The job's table once every rank but the late one is in fence 1.
fn wait_late_fence(xdg: &Path, pid: u32) -> JobTable {
    wait_for(Duration::from_secs(120), "255 ranks in fence 1", || {
        let jobs = ps_json(xdg, pid).ok()?;
        let t = jobs.into_iter().next()?;
        let inside = t.ranks.iter().filter(|r| r.kind == "in_fence").count();
        (inside == N as usize - 1).then_some(t)
    })
}

struct Late {
    xdg: tempfile::TempDir,
    marks: tempfile::TempDir,
    go: PathBuf,
}

impl Late {
    fn new(tag: &str) -> Late {
        let xdg = runtime_dir(tag);
        let marks = common::scratch_dir(&format!("{tag}-marks"));
        let go = marks.path().join("go");
        Late { xdg, marks, go }
    }

    /// `fastpmi FLAGS SECTIONS` with rank 17 late.
    fn launch(&self, args: Vec<OsString>) -> common::Cmd {
        launch(args)
            .env("XDG_RUNTIME_DIR", self.xdg.path())
            .env("FASTPMI_TEST_LATE_RANK", LATE.to_string())
            .env("FASTPMI_TEST_GO", &self.go)
            .env("FASTPMI_TEST_MARK_DIR", self.marks.path())
            .timeout(Duration::from_secs(180))
    }

    fn late_pid(&self) -> u32 {
        let p = self.marks.path().join(format!("pid.{LATE}"));
        wait_for(Duration::from_secs(60), "pid file of rank 17", || {
            fs::read_to_string(&p).ok()?.trim().parse().ok()
        })
    }

    fn release(&self) {
        fs::write(&self.go, "go").unwrap();
    }
}

fn args(parts: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    parts.iter().map(|p| p.as_ref().to_owned()).collect()
}

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
    let job = cmd.spawn();
    let pid = job.pid();
    let t = wait_late_fence(late.xdg.path(), pid);
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

#[test]
fn ps_late_rank_shared_memory() {
    let exe = prog(Prog::Pmi2LateFastpmi);
    let lib = common::capi_lib_dir();
    let mut a = args(&[&"-genv", &"LD_LIBRARY_PATH", &lib, &"-n", &"256", &exe]);
    a.shrink_to_fit();
    late_rank_ps("ps-shm", a, |_| "shm");
}

/// The same with the fence released by a tree (fan-out 4 forced through the
/// launcher's `FASTPMI_FENCE_FANOUT`; the default picks it from 512 ranks):
/// ranks sleep on their own wake words, `ps` still reads fence 1 from each
/// rank's state, and the late rank, arriving last, releases the tree.
#[test]
fn ps_late_rank_shared_memory_tree_release() {
    let exe = prog(Prog::Pmi2LateFastpmi);
    let lib = common::capi_lib_dir();
    let a = args(&[&"-genv", &"LD_LIBRARY_PATH", &lib, &"-n", &"256", &exe]);
    late_rank_ps_env("ps-shm-tree", a, &[("FASTPMI_FENCE_FANOUT", "4")], |_| {
        "shm"
    });
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
        pmi.spawn(&fastpmi::client::SpawnRequest {
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

/// Ranks past init so far.
fn marks(dir: &Path) -> usize {
    fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("init.")
        })
        .count()
}

/// Launch with --stop-in-init, wait until ps shows every rank held, check
/// nobody got past init, release with `release_by`, check the job completes.
fn stop_in_init(
    tag: &str,
    mut sections: Vec<OsString>,
    n: usize,
    release_by_job: bool,
) -> common::Outcome {
    let _g = heavy();
    let xdg = runtime_dir(tag);
    let marks_dir = common::scratch_dir(&format!("{tag}-marks"));
    let mut a: Vec<OsString> = vec!["--stop-in-init".into(), "--stats".into()];
    a.append(&mut sections);
    let job = launch(a)
        .env("XDG_RUNTIME_DIR", xdg.path())
        .env("FASTPMI_TEST_MARK_DIR", marks_dir.path())
        .timeout(Duration::from_secs(180))
        .spawn();
    let pid = job.pid();
    let t = wait_for(Duration::from_secs(120), "every rank held in init", || {
        let t = ps_json(xdg.path(), pid).ok()?.into_iter().next()?;
        t.ranks
            .iter()
            .all(|r| r.kind == "held_in_init")
            .then_some(t)
    });
    assert_eq!(t.ranks.len(), n);
    assert!(
        t.held
            && t.summary
                .iter()
                .any(|s| s.starts_with(&format!("held in init: {n}/{n}"))),
        "{t:?}"
    );
    let human = text(&fastpmi(xdg.path(), &["ps", &pid.to_string()]).stdout);
    assert!(human.contains("held in init"), "{human}");
    // Held: nobody returns from init, however long we wait.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        marks(marks_dir.path()),
        0,
        "a rank got past init before release"
    );
    let target = if release_by_job {
        t.id.clone()
    } else {
        pid.to_string()
    };
    let r = fastpmi(xdg.path(), &["release", &target]);
    assert!(r.status.success(), "release: {}", text(&r.stderr));
    assert!(
        text(&r.stdout).contains(&format!("released {n} ranks")),
        "{}",
        text(&r.stdout)
    );
    let out = job.wait_or_kill(Duration::from_secs(120));
    out.assert_success();
    assert_eq!(
        marks(marks_dir.path()),
        n,
        "every rank past init after release"
    );
    out
}

#[test]
fn stop_in_init_mpich_64() {
    let exe = prog(Prog::MpiInitMark);
    let out = stop_in_init("sii-mpich", args(&[&"-n", &"64", &exe]), 64, false);
    assert!(
        out.stdout.contains("init mark ok size=64 sum=2016"),
        "{}",
        out.report()
    );
}

#[test]
fn stop_in_init_fastpmi_libpmi2_shared_memory() {
    let exe = prog(Prog::Pmi2LateFastpmi);
    let lib = common::capi_lib_dir();
    let out = stop_in_init(
        "sii-shm",
        args(&[&"-genv", &"LD_LIBRARY_PATH", &lib, &"-n", &"64", &exe]),
        64,
        true,
    );
    // After release the ranks fenced in shared memory.
    let shm = common::stats_row(&out.stderr, "shared-memory").expect("stats row");
    assert_eq!(shm[2], 64, "shared-memory fences:\n{}", out.report());
}

fn rendezvous_files(xdg: &Path) -> Vec<PathBuf> {
    match fs::read_dir(xdg.join("fastpmi")) {
        Ok(d) => d.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

/// A second user is refused: by the directory's mode, and, with the modes
/// opened up, by the peer-credential check. Modes and ownership are right.
#[test]
fn rendezvous_refuses_other_users_and_has_private_modes() {
    assert_eq!(
        rustix::process::geteuid().as_raw(),
        0,
        "this test runs the client as nobody with setpriv: run the suite as root (as .ci/run does)"
    );
    let xdg = runtime_dir("rdv-users");
    // Let nobody reach the runtime dir itself (the fastpmi/ inside is the
    // launcher's).
    fs::set_permissions(xdg.path(), fs::Permissions::from_mode(0o711)).unwrap();
    for p in xdg.path().ancestors().skip(1) {
        let m = fs::metadata(p).unwrap().mode();
        assert!(
            m & 0o001 != 0,
            "{} is not searchable by others; nobody cannot reach the socket",
            p.display()
        );
    }
    let job = launch(["-n", "2", "sleep", "5"])
        .env("XDG_RUNTIME_DIR", xdg.path())
        .spawn();
    let pid = job.pid();
    let dir = xdg.path().join("fastpmi");
    let sock = dir.join(format!("{pid}.sock"));
    wait_for(Duration::from_secs(20), "socket", || {
        sock.exists().then_some(())
    });
    let dm = fs::symlink_metadata(&dir).unwrap();
    assert_eq!(dm.mode() & 0o777, 0o700, "directory mode");
    assert_eq!(dm.uid(), 0);
    let sm = fs::symlink_metadata(&sock).unwrap();
    assert_eq!(sm.mode() & 0o777, 0o600, "socket mode");
    assert_eq!(sm.uid(), 0);
    let as_nobody = || {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(common::launcher())
            .args(["ps", "--socket"])
            .arg(&sock)
            .arg(pid.to_string())
            .stdin(Stdio::null())
            .output()
            .expect("run setpriv")
    };
    let o = as_nobody();
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("Permission denied"),
        "{}",
        text(&o.stderr)
    );
    // Modes opened up by mistake: the launcher still refuses the peer.
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o711)).unwrap();
    fs::set_permissions(&sock, fs::Permissions::from_mode(0o666)).unwrap();
    let o = as_nobody();
    fs::set_permissions(&sock, fs::Permissions::from_mode(0o600)).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    assert!(!o.status.success());
    let e = text(&o.stderr);
    assert!(
        e.contains("refused: uid 65534 is not the launcher's user"),
        "{e}"
    );
    assert!(
        !text(&o.stdout).contains("rank"),
        "nothing of the job is shown: {}",
        text(&o.stdout)
    );
    // The owner is served.
    assert!(ps_json(xdg.path(), pid).is_ok());
    job.wait_or_kill(Duration::from_secs(30)).assert_success();
    assert!(rendezvous_files(xdg.path()).is_empty());
}

/// Without XDG_RUNTIME_DIR the rendezvous is /tmp/fastpmi-<uid>, 0700.
#[test]
fn rendezvous_default_dir_in_tmp() {
    let job = launch(["-n", "1", "sleep", "2"])
        .env_remove("XDG_RUNTIME_DIR")
        .spawn();
    let pid = job.pid();
    let uid = rustix::process::geteuid().as_raw();
    let dir = PathBuf::from(format!("/tmp/fastpmi-{uid}"));
    let sock = dir.join(format!("{pid}.sock"));
    wait_for(Duration::from_secs(20), "socket in /tmp", || {
        sock.exists().then_some(())
    });
    assert_eq!(fs::symlink_metadata(&dir).unwrap().mode() & 0o777, 0o700);
    assert_eq!(fs::symlink_metadata(&sock).unwrap().mode() & 0o777, 0o600);
    job.wait_or_kill(Duration::from_secs(30)).assert_success();
    assert!(!sock.exists(), "{} left behind", sock.display());
}

#[test]
fn rendezvous_removed_after_exit_failure_and_sigkill() {
    let xdg = runtime_dir("rdv-clean");
    // Normal exit.
    launch(["-n", "2", "true"])
        .env("XDG_RUNTIME_DIR", xdg.path())
        .run()
        .assert_success();
    assert!(rendezvous_files(xdg.path()).is_empty());
    // Failure.
    let out = launch(["-n", "2", "sh", "-c", "exit 3"])
        .env("XDG_RUNTIME_DIR", xdg.path())
        .run();
    assert_eq!(out.code(), Some(3));
    assert!(
        rendezvous_files(xdg.path()).is_empty(),
        "{:?}",
        rendezvous_files(xdg.path())
    );
    // SIGKILL: the file stays until the next `fastpmi ps`.
    let job = launch(["-n", "2", "sleep", "30"])
        .env("XDG_RUNTIME_DIR", xdg.path())
        .spawn();
    let pid = job.pid();
    let sock = xdg.path().join("fastpmi").join(format!("{pid}.sock"));
    wait_for(Duration::from_secs(20), "socket", || {
        sock.exists().then_some(())
    });
    common::signal(pid, libc::SIGKILL);
    let out = job.wait_or_kill(Duration::from_secs(30));
    assert_eq!(out.status.code(), None, "killed");
    assert!(
        sock.exists(),
        "a SIGKILLed launcher cannot remove its socket"
    );
    let o = fastpmi(xdg.path(), &["ps"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("stale"), "{}", text(&o.stderr));
    assert!(!sock.exists(), "fastpmi ps removes the stale socket");
    assert!(!text(&o.stdout).contains(&pid.to_string()));
}

fn raw_request(sock: &Path, bytes: &[u8]) -> String {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(bytes);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// Garbage, a huge request, bad versions and ops, and clients that connect
/// and never send or read: each is answered with an error or dropped; the
/// job runs on and a normal query still works.
#[test]
fn rendezvous_bad_input() {
    let _g = heavy();
    let xdg = runtime_dir("rdv-bad");
    let exe = prog(Prog::Pmi2LateFastpmi);
    let lib = common::capi_lib_dir();
    let go = common::scratch_dir("rdv-bad-go");
    let gofile = go.path().join("go");
    // 16 ranks, rank 3 late so the job waits in fence 1 while we poke it.
    let job = launch(args(&[
        &"-genv",
        &"LD_LIBRARY_PATH",
        &lib,
        &"-n",
        &"16",
        &exe,
    ]))
    .env("XDG_RUNTIME_DIR", xdg.path())
    .env("FASTPMI_TEST_LATE_RANK", "3")
    .env("FASTPMI_TEST_GO", &gofile)
    .spawn();
    let pid = job.pid();
    let sock = xdg.path().join("fastpmi").join(format!("{pid}.sock"));
    wait_for(Duration::from_secs(30), "socket", || {
        sock.exists().then_some(())
    });
    let err = |reply: &str, want: &str| {
        let v: serde_json::Value =
            serde_json::from_str(reply.trim()).unwrap_or_else(|e| panic!("{e}: {reply:?}"));
        assert_eq!(v["ok"], false, "{reply}");
        assert!(
            v["error"].as_str().unwrap_or("").contains(want),
            "want {want:?}: {reply}"
        );
    };
    err(&raw_request(&sock, b"garbage\n"), "not a JSON request");
    err(
        &raw_request(&sock, b"\x00\xff\xfe{{{\n"),
        "not a JSON request",
    );
    err(
        &raw_request(&sock, br#"{"version":99,"op":"ps"}"#),
        "version 99 not supported",
    );
    err(
        &raw_request(&sock, b"{\"version\":1,\"op\":\"format-disk\"}\n"),
        "bad request",
    );
    err(
        &raw_request(&sock, b"{\"version\":1,\"op\":\"ps\",\"job\":\"nope\"}\n"),
        "no job nope",
    );
    let huge = vec![b'x'; 8 << 20];
    err(&raw_request(&sock, &huge), "longer than 4096");
    // Connect and never send; connect, send and never read.
    let mut idle: Vec<UnixStream> = (0..fastpmi::tools::rendezvous::MAX_CLIENTS)
        .map(|_| UnixStream::connect(&sock).unwrap())
        .collect();
    // Over the limit of clients at once: told to retry.
    let busy = raw_request(&sock, b"{\"version\":1,\"op\":\"info\"}\n");
    err(&busy, "too many clients");
    // Clients that send a request and never read the reply.
    drop(idle.drain(..2));
    std::thread::sleep(Duration::from_millis(100));
    for _ in 0..2 {
        let mut s = UnixStream::connect(&sock).unwrap();
        s.write_all(b"{\"version\":1,\"op\":\"ps\"}\n").unwrap();
        idle.push(s);
    }
    // The stalled clients are dropped after their deadline; then queries work.
    std::thread::sleep(Duration::from_millis(2500));
    let t = wait_for(Duration::from_secs(10), "a normal query", || {
        ps_json(xdg.path(), pid).ok()
    });
    assert_eq!(t[0].ranks.len(), 16);
    drop(idle);
    fs::write(&gofile, "go").unwrap();
    let out = job.wait_or_kill(Duration::from_secs(60));
    out.assert_success();
    assert_eq!(
        out.stdout_lines()
            .iter()
            .filter(|l| l.starts_with("late ok"))
            .count(),
        16
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
