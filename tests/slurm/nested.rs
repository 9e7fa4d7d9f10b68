//! Nested mode under Slurm (docs/nested.md): `srun --mpi=pmi2 -n 2 fastpmi
//! -n 16 PROG` is one job of 32 ranks, served by two node servers that
//! trade their pairs through slurmstepd's KVS (values of at most 1024
//! bytes). The same programs as tests/nested.rs, under the private
//! cluster of this runner.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use super::cluster::Cluster;
use super::common::stacks::Stack;
use super::common::{self, capi_lib_dir, prog, Outcome, Prog};
use super::{copy_of, fastpmi, no_task_left};

const PER_NODE: u32 = 16;
const TOTAL: u32 = 2 * PER_NODE;

fn srun_nested(c: &Cluster, program: &Path, args: &[String]) -> common::Cmd {
    srun_nested_with(c, &[], program, args)
}

/// `srun --mpi=pmi2 -n 2 fastpmi FLAGS -n 16 PROGRAM ARGS`.
fn srun_nested_with(c: &Cluster, flags: &[&str], program: &Path, args: &[String]) -> common::Cmd {
    let mut argv: Vec<OsString> = vec![
        "--mpi=pmi2".into(),
        "-n".into(),
        "2".into(),
        fastpmi().into(),
    ];
    argv.extend(flags.iter().map(OsString::from));
    argv.extend(["-n".into(), PER_NODE.to_string().into(), program.into()]);
    argv.extend(args.iter().map(OsString::from));
    c.srun(argv)
}

fn assert_only_line(out: &Outcome, line: &str) {
    out.assert_success();
    assert_eq!(out.stdout_lines(), vec![line], "{}", out.report());
}

/// Slurm's libpmi2 program on the node servers' sockets.
pub fn slurm_libpmi2(c: &Cluster) {
    let (_d, exe) = copy_of(Prog::Pmi2Slurm, "nested");
    let args = [TOTAL.to_string(), "0".into(), PER_NODE.to_string()];
    let out = srun_nested(c, &exe, &args).run();
    assert_only_line(&out, &format!("pmi2 ok size={TOTAL}"));
    no_task_left(&exe);
}

/// The same on fastpmi's libpmi2: every rank on its node's segment.
pub fn fastpmi_libpmi2(c: &Cluster) {
    let (_d, exe) = copy_of(Prog::Pmi2SlurmOwnHeader, "nested");
    let args = [TOTAL.to_string(), "0".into(), PER_NODE.to_string()];
    let out = srun_nested(c, &exe, &args)
        .env("LD_LIBRARY_PATH", capi_lib_dir())
        .env("FASTPMI_LOG", "warn,fastpmi_capi::session=debug")
        .run();
    assert_only_line(&out, &format!("pmi2 ok size={TOTAL}"));
    common::assert_one_job_on_segments(&out, TOTAL);
    no_task_left(&exe);
}

/// Debian MPICH and Intel MPI: two nodes of 16 as the library sees them.
pub fn mpi(c: &Cluster, stack: Option<Stack>) {
    let program = match stack {
        Some(s) => s.program("mpi_node_split"),
        None => prog(Prog::MpiNodeSplit).to_path_buf(),
    };
    let args = [TOTAL.to_string(), PER_NODE.to_string()];
    let mut cmd = srun_nested(c, &program, &args);
    for (k, v) in stack.map_or(&[][..], Stack::env) {
        cmd = cmd.env(k, v);
    }
    let out = cmd.run();
    assert_only_line(&out, &format!("nodes ok size={TOTAL} local={PER_NODE}"));
    no_task_left(&program);
}

/// A rank SIGKILLed on the second node server: the step ends within 2 s,
/// srun exits non-zero, and the failure names the rank in the job.
pub fn killed_rank(c: &Cluster) {
    let victim = PER_NODE + 5;
    let (dir, exe) = copy_of(Prog::Pmi2FenceLoopSlurm, "nested-kill");
    let go = dir.path().join("go");
    std::fs::write(&go, b"").unwrap();
    let job = srun_nested(c, &exe, &["1000000000".into()])
        .env("FASTPMI_TEST_LATE_RANK", victim.to_string())
        .env("FASTPMI_TEST_GO", &go)
        .env("FASTPMI_TEST_MARK_DIR", dir.path())
        .spawn();
    let killed = common::kill_late_rank(dir.path(), victim, Duration::from_millis(500));
    let out = job.wait_or_kill(Duration::from_secs(30));
    let took = killed.elapsed();
    assert!(!out.status.success(), "srun exited 0\n{}", out.report());
    assert!(
        took < Duration::from_secs(2),
        "the step took {took:?} to end after the kill\n{}",
        out.report()
    );
    assert!(
        out.stderr
            .contains(&format!("rank {victim} was killed by signal 9")),
        "the failure does not name rank {victim} of the job\n{}",
        out.report()
    );
    no_task_left(&exe);
}

/// Fault-tolerant node servers (docs/nested.md, "Deaths across node
/// servers"): rank 1 exits 3 and rank 2 calls `PMI2_Abort(0, ...)` on the
/// first node; the 30 survivors on both nodes see their fence fail and
/// read `PMI_dead_processes` = `1-2` both ways, and the step ends with
/// status 0.
pub fn fault_tolerant_death(c: &Cluster) {
    let (_d, exe) = copy_of(Prog::Pmi2FtSlurm, "nested-ft");
    let out = srun_nested_with(c, &["--fault-tolerant"], &exe, &["both".to_string()]).run();
    out.assert_success();
    let mut ok: Vec<String> = out
        .stdout_lines()
        .into_iter()
        .filter(|l| l.starts_with("ft ok"))
        .map(String::from)
        .collect();
    ok.sort();
    let mut want: Vec<String> = (0..TOTAL)
        .filter(|r| ![1, 2].contains(r))
        .map(|r| format!("ft ok rank {r} dead=1-2"))
        .collect();
    want.sort();
    assert_eq!(ok, want, "{}", out.report());
    no_task_left(&exe);
}
