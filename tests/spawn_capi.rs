//! Spawn from fastpmi's and Slurm's C libraries with real processes:
//! PMI2_Job_Spawn (Slurm's libpmi2 over the wire and fastpmi's on shared
//! memory) and PMI_Spawn_multiple (fastpmi's libpmi).

mod common;

use std::ffi::OsString;
use std::path::Path;

use common::spawn::lines_with;
use common::{heavy, prog, stats_row, Prog};

// -----------------------------------------------------------------------------
// PMI2_Job_Spawn from C

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

// -----------------------------------------------------------------------------
// PMI_Spawn_multiple from C

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
