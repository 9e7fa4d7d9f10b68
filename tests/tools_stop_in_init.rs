//! `--stop-in-init` with real processes: every rank held in init (MPICH,
//! fastpmi's libpmi2 on shared memory, a libpmix client and Open MPI 5 in
//! `PMIx_Init`), shown by `fastpmi ps`, until `fastpmi release` by
//! launcher pid or job id.
//!
//! Every launcher here runs with its own `XDG_RUNTIME_DIR`, so `fastpmi ps`
//! sees only the launchers of the test.

mod common;

use std::ffi::OsString;
use std::fs;
use std::path::Path;
use std::time::Duration;

use common::tools::{args, fastpmi, ps_json, runtime_dir, text, wait_for};
use common::{heavy, launch, prog, Prog};

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

/// Who lets the held ranks go.
#[derive(Clone, Copy, PartialEq)]
enum Release {
    /// `fastpmi release PID`.
    Pid,
    /// `fastpmi release JOBID`.
    Job,
    /// A PMIx tool's `PMIX_DEBUGGER_RELEASE` (`tests/c/pmix_release_tool.c`),
    /// through the launcher's tool rendezvous.
    PmixTool,
}

/// Launch with --stop-in-init, wait until ps shows every rank held, check
/// nobody got past init, release with `release`, check the job completes.
fn stop_in_init(
    tag: &str,
    mut sections: Vec<OsString>,
    n: usize,
    release: Release,
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
    if release == Release::PmixTool {
        let host = rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned();
        let file = xdg
            .path()
            .join("fastpmi")
            .join(format!("pmix-{pid}"))
            .join(format!("pmix.{host}.tool.{pid}"));
        let tool = common::pmix::compile("pmix_release_tool", true);
        let r = std::process::Command::new(&tool)
            .arg(&file)
            .arg(&t.id)
            .output()
            .expect("run the release tool");
        assert!(
            r.status.success() && text(&r.stdout).contains("pmix tool released"),
            "release tool: {}{}",
            text(&r.stdout),
            text(&r.stderr)
        );
    } else {
        let target = if release == Release::Job {
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
    }
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
    let out = stop_in_init("sii-mpich", args(&[&"-n", &"64", &exe]), 64, Release::Pid);
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
        Release::Job,
    );
    // After release the ranks fenced in shared memory.
    let shm = common::stats_row(&out.stderr, "shared-memory").expect("stats row");
    assert_eq!(shm[2], 64, "shared-memory fences:\n{}", out.report());
}

/// PMIx ranks wait in `PMIx_Init` (`PMIX_DEBUG_STOP_IN_INIT`) until the
/// launcher's `PMIX_DEBUGGER_RELEASE`.
#[test]
fn stop_in_init_pmix_client() {
    let exe = common::pmix::compile("pmix_client", true);
    let out = stop_in_init(
        "sii-pmix",
        args(&[&"-n", &"4", &exe, &"exchange"]),
        4,
        Release::Job,
    );
    assert_eq!(
        out.stdout.matches("pmix exchange ok").count(),
        4,
        "{}",
        out.report()
    );
}

/// Open MPI 5 (the wheel), with its own server library: held in MPI_Init's
/// `PMIx_Init` until released by launcher pid.
#[test]
fn stop_in_init_open_mpi_5() {
    let s = common::stacks::Stack::Ompi5;
    let exe = s.program("mpi_init_mark");
    let venv = s.venv();
    let lib = s.pmix_lib().expect("the wheel ships its library");
    let out = stop_in_init(
        "sii-ompi5",
        args(&[
            &"--pmix-lib",
            &lib,
            &"-genv",
            &"OPAL_PREFIX",
            &venv,
            &"-n",
            &"4",
            &exe,
        ]),
        4,
        Release::Pid,
    );
    assert!(
        out.stdout.contains("init mark ok size=4 sum=6"),
        "{}",
        out.report()
    );
}

/// A PMIx tool releases the held ranks (`PMIX_DEBUGGER_RELEASE` to the
/// job's namespace), as a debugger does once attached.
#[test]
fn stop_in_init_released_by_a_pmix_tool() {
    let exe = common::pmix::compile("pmix_client", true);
    let out = stop_in_init(
        "sii-tool",
        args(&[&"-n", &"3", &exe, &"exchange"]),
        3,
        Release::PmixTool,
    );
    assert_eq!(
        out.stdout.matches("pmix exchange ok").count(),
        3,
        "{}",
        out.report()
    );
}
