//! Fault-tolerant jobs with PMI-2 clients: Slurm's libpmi2 (the socket) and
//! fastpmi's (shared memory). With `--fault-tolerant` (or Hydra's
//! `-disable-auto-cleanup`), rank 1 exiting 3 and rank 2 calling
//! `PMI2_Abort(0, ...)` end alone: the others' fence entered before the
//! deaths returns an error, `PMI_dead_processes` names ranks 1 and 2 both
//! ways (`PMI2_Info_GetJobAttr`, `PMI2_KVS_Get` with `PMI2_ID_NULL`), the
//! survivors finish, the launcher says once per dead rank how it died and
//! exits 0 (`--fail-on-death`: the first death's status). Without the mode
//! the job ends as before, and a non-world abort is reported as the rank
//! aborting itself.

mod common;

use common::{assert_one_job_on_segments, capi_lib_dir, heavy, launch, prog, Outcome, Prog};
use std::time::Duration;

const N: usize = 6;

fn run(p: Prog, flags: &[&str], mode: &str) -> Outcome {
    let _g = heavy();
    let mut args: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    args.extend(["-n".into(), N.to_string()]);
    args.push(prog(p).to_str().unwrap().into());
    args.push(mode.into());
    let cmd = launch(&args).timeout(Duration::from_secs(60));
    let out = if p == Prog::Pmi2FtFastpmi {
        cmd.env("LD_LIBRARY_PATH", capi_lib_dir())
            .env("FASTPMI_LOG", "warn,fastpmi_capi::session=debug")
            .run()
    } else {
        cmd.run()
    };
    if p == Prog::Pmi2FtFastpmi {
        assert_one_job_on_segments(&out, N as u32);
    }
    out
}

fn survivors_finish(out: &Outcome, dead: &str) {
    let mut lines: Vec<&str> = out
        .stdout_lines()
        .into_iter()
        .filter(|l| l.starts_with("ft ok"))
        .collect();
    lines.sort();
    let want: Vec<String> = [0, 3, 4, 5]
        .iter()
        .map(|r| format!("ft ok rank {r} dead={dead}"))
        .collect();
    assert_eq!(lines, want, "{}", out.report());
    for r in [0, 3, 4, 5] {
        assert!(
            out.stdout_lines()
                .contains(&format!("fence error rank {r}").as_str()),
            "rank {r}'s fence should have failed\n{}",
            out.report()
        );
    }
}

fn deaths_told_once(out: &Outcome) {
    let told = |what: &str| {
        out.stderr_lines()
            .iter()
            .filter(|l| l.contains(what) && l.contains("the job goes on"))
            .count()
    };
    assert_eq!(told("rank 1 exited with status 3"), 1, "{}", out.report());
    assert_eq!(
        told("rank 2 aborted itself (abort isworld=FALSE) with code 1: rank 2 leaves"),
        1,
        "{}",
        out.report()
    );
}

#[test]
fn slurm_pmi2_survivors_go_on() {
    let out = run(Prog::Pmi2FtSlurm, &["--fault-tolerant"], "both");
    out.assert_success();
    survivors_finish(&out, "1-2");
    deaths_told_once(&out);
}

/// fastpmi's libpmi2 also gives the dead set with `FPMI_Dead_ranks` (the
/// program checks it against `PMI_dead_processes`), rank 3 waits for the
/// first death with `FPMI_Wait_death` before its fence, and every survivor
/// reads a death notice per dead rank on its out-of-band channel.
#[test]
fn fastpmi_pmi2_survivors_go_on_over_shared_memory() {
    let out = run(Prog::Pmi2FtFastpmi, &["-disable-auto-cleanup"], "both");
    out.assert_success();
    survivors_finish(&out, "1-2");
    deaths_told_once(&out);
    assert!(
        out.stdout_lines().contains(&"wait death rank 3"),
        "{}",
        out.report()
    );
    for r in [0, 3, 4, 5] {
        assert!(
            out.stdout_lines()
                .contains(&format!("oob deaths rank {r}").as_str()),
            "{}",
            out.report()
        );
    }
}

/// `fastpmi ps` shows the dead ranks, how each died, beside the
/// survivors (waiting to finalize).
#[test]
fn ps_shows_the_dead_beside_the_survivors() {
    use common::tools::{ps_json, runtime_dir, wait_for};
    let _g = heavy();
    let xdg = runtime_dir("ft-ps");
    let go = xdg.path().join("go");
    let exe = prog(Prog::Pmi2FtSlurm).to_str().unwrap().to_string();
    let job = launch(["--fault-tolerant", "-n", &N.to_string(), &exe, "both"])
        .env("XDG_RUNTIME_DIR", xdg.path())
        .env("FASTPMI_TEST_GO", &go)
        .timeout(Duration::from_secs(60))
        .spawn();
    let rows = wait_for(Duration::from_secs(30), "two dead ranks in ps", || {
        let t = ps_json(xdg.path(), job.pid()).ok()?.into_iter().next()?;
        let dead: Vec<(u32, String)> = t
            .ranks
            .iter()
            .filter(|r| r.kind == "dead")
            .map(|r| (r.rank, r.state.clone()))
            .collect();
        (dead.len() == 2).then_some((dead, t.ranks))
    });
    assert_eq!(
        rows.0,
        vec![
            (1, "exited 3".to_string()),
            (2, "aborted itself (code 1)".to_string())
        ]
    );
    for r in rows.1.iter().filter(|r| ![1, 2].contains(&r.rank)) {
        assert!(
            ["running", "between_fences", "in_fence"].contains(&r.kind.as_str()),
            "survivor {}: {} ({})",
            r.rank,
            r.kind,
            r.state
        );
    }
    std::fs::write(&go, "go").unwrap();
    let out = job.wait();
    out.assert_success();
    survivors_finish(&out, "1-2");
}

#[test]
fn fail_on_death_keeps_the_first_deaths_status() {
    let out = run(Prog::Pmi2FtFastpmi, &["--fail-on-death"], "both");
    survivors_finish(&out, "1-2");
    // Rank 1 exits 3, rank 2 aborts with 1, both after the same pause:
    // either may be first.
    assert!(
        matches!(out.code(), Some(1 | 3)),
        "the exit status should be a dead rank's\n{}",
        out.report()
    );
}

#[test]
fn without_the_mode_a_self_abort_ends_the_job_and_says_so() {
    for p in [Prog::Pmi2FtSlurm, Prog::Pmi2FtFastpmi] {
        let out = run(p, &[], "abort");
        assert_eq!(out.code(), Some(1), "{}", out.report());
        assert!(
            out.stderr_lines()
                .iter()
                .any(|l| l.contains("rank 2 aborted itself (abort isworld=FALSE)")),
            "{}",
            out.report()
        );
        assert!(
            !out.stdout_lines().iter().any(|l| l.starts_with("ft ok")),
            "{}",
            out.report()
        );
    }
}
