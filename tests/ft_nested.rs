//! Fault-tolerant jobs over node servers (docs/nested.md, "Deaths across
//! node servers"): two node servers of 4 ranks, one job of 8, under an
//! outer fastpmi and under Debian's `mpiexec.hydra`. Rank 1 exiting 3 and
//! rank 2 calling `PMI2_Abort(0, ...)` on the first node reach the second:
//! every survivor's fence fails, both reads of `PMI_dead_processes` say
//! `1-2` on both nodes (Slurm's libpmi2 on the socket, fastpmi's on the
//! segments, where `FPMI_Dead_ranks` and the death notices agree), and the
//! job ends with status 0. A node server killed is the death of its
//! ranks: the other node's survivors see ranks 4-7 dead and finish. Node
//! servers that disagree on the mode refuse to start.

mod common;
mod rank_role;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{capi_lib_dir, heavy, launch, prog, Cmd, Outcome, Prog};
use rank_role::{ensure, finish, init, role};

const PER_NODE: u32 = 4;
const TOTAL: u32 = 2 * PER_NODE;

fn fastpmi() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fastpmi"))
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Outer {
    Fastpmi,
    Hydra,
}

/// `<outer> [outer flags] -n 2 fastpmi --fault-tolerant -n 4 PROG ARGS`.
fn nested(outer: Outer, outer_flags: &[&str], program: &Path, args: &[String]) -> Cmd {
    let mut argv: Vec<OsString> = outer_flags.iter().map(OsString::from).collect();
    argv.extend(["-n".into(), "2".into(), fastpmi().into()]);
    argv.extend([
        "--fault-tolerant".into(),
        "-n".into(),
        PER_NODE.to_string().into(),
    ]);
    argv.push(program.into());
    argv.extend(args.iter().map(OsString::from));
    let c = launch(argv).timeout(Duration::from_secs(120));
    match outer {
        Outer::Fastpmi => c.program(fastpmi()),
        Outer::Hydra => c.program("mpiexec.hydra"),
    }
}

/// `pmi2_ft both` over two node servers: ranks 1 and 2 (first node) die,
/// the six survivors on both nodes see it.
fn death_reaches_both_nodes(outer: Outer, p: Prog) {
    let _g = heavy();
    let mut cmd = nested(outer, &[], prog(p), &["both".to_string()]);
    if p == Prog::Pmi2FtFastpmi {
        cmd = cmd
            .env("LD_LIBRARY_PATH", capi_lib_dir())
            .env("FASTPMI_LOG", "warn,fastpmi_capi::session=debug");
    }
    let out = cmd.run();
    out.assert_success();
    let survivors = [0, 3, 4, 5, 6, 7];
    let mut ok: Vec<&str> = out
        .stdout_lines()
        .into_iter()
        .filter(|l| l.starts_with("ft ok"))
        .collect();
    ok.sort();
    let want: Vec<String> = survivors
        .iter()
        .map(|r| format!("ft ok rank {r} dead=1-2"))
        .collect();
    assert_eq!(ok, want, "{}", out.report());
    for r in survivors {
        assert!(
            out.stdout_lines()
                .contains(&format!("fence error rank {r}").as_str()),
            "rank {r}'s fence should have failed\n{}",
            out.report()
        );
        if p == Prog::Pmi2FtFastpmi {
            assert!(
                out.stdout_lines()
                    .contains(&format!("oob deaths rank {r}").as_str()),
                "rank {r} should have had a death notice per dead rank\n{}",
                out.report()
            );
        }
    }
    // Said once each, by the node server the rank ran on.
    for r in [1, 2] {
        let said = out
            .stderr
            .lines()
            .filter(|l| l.starts_with(&format!("fastpmi: rank {r} ")) && l.contains("goes on"))
            .count();
        assert_eq!(said, 1, "rank {r}'s death said once\n{}", out.report());
    }
    if p == Prog::Pmi2FtFastpmi {
        common::assert_one_job_on_segments(&out, TOTAL);
    }
}

#[test]
fn under_fastpmi_a_death_reaches_both_nodes_slurm_libpmi2() {
    death_reaches_both_nodes(Outer::Fastpmi, Prog::Pmi2FtSlurm);
}

#[test]
fn under_fastpmi_a_death_reaches_both_nodes_segments() {
    death_reaches_both_nodes(Outer::Fastpmi, Prog::Pmi2FtFastpmi);
}

#[test]
fn under_hydra_a_death_reaches_both_nodes_slurm_libpmi2() {
    death_reaches_both_nodes(Outer::Hydra, Prog::Pmi2FtSlurm);
}

#[test]
fn under_hydra_a_death_reaches_both_nodes_segments() {
    death_reaches_both_nodes(Outer::Hydra, Prog::Pmi2FtFastpmi);
}

const NODE_LOSS: &str = "a_node_servers_death_is_the_death_of_its_ranks";

/// A rank: fence 1; rank 4 (first of the second node) then SIGKILLs its
/// node server; the first node's ranks fence until a fence fails, wait
/// until ranks 4-7 are dead and print `node loss ok rank R dead=4-7`.
fn role_node_loss() -> Result<(), String> {
    let pmi = init()?;
    let me = pmi.rank();
    pmi.fence().map_err(|e| format!("fence 1: {e}"))?;
    if me == PER_NODE {
        let parent = rustix::process::getppid().ok_or("no parent")?;
        rustix::process::kill_process(parent, rustix::process::Signal::KILL)
            .map_err(|e| format!("kill the node server: {e}"))?;
    }
    if me >= PER_NODE {
        // Dies with its node server.
        std::thread::sleep(Duration::from_secs(30));
        return Err("outlived its node server".into());
    }
    let failed = (0..1000).find(|_| pmi.fence().is_err());
    ensure(failed.is_some(), || "every fence completed".into())?;
    let want: Vec<u32> = (PER_NODE..TOTAL).collect();
    let dead = rank_role::poll(Duration::from_secs(20), "ranks 4-7 dead", || {
        let d = pmi.dead_ranks().map_err(|e| format!("dead ranks: {e}"))?;
        Ok((d == want).then_some(d))
    })?;
    println!("node loss ok rank {me} dead={}-{}", dead[0], dead[3]);
    pmi.finalize().map_err(|e| format!("finalize: {e}"))
}

#[test]
fn a_node_servers_death_is_the_death_of_its_ranks() {
    if role().is_some() {
        finish(role_node_loss());
    }
    let _g = heavy();
    let mut args = rank_role::args(NODE_LOSS);
    args.insert(0, rank_role::me());
    let exe = PathBuf::from(args.remove(0));
    let out = nested(Outer::Fastpmi, &["--fault-tolerant"], &exe, &args)
        .env(rank_role::ROLE, "node-loss")
        .run();
    out.assert_success();
    let mut ok: Vec<&str> = out
        .stdout_lines()
        .into_iter()
        .filter(|l| l.starts_with("node loss ok"))
        .collect();
    ok.sort();
    let want: Vec<String> = (0..PER_NODE)
        .map(|r| format!("node loss ok rank {r} dead=4-7"))
        .collect();
    assert_eq!(ok, want, "{}", out.report());
    let said = out
        .stderr
        .lines()
        .filter(|l| l.contains("node server 1 (ranks 4-7) ended before its ranks finished"))
        .count();
    assert_eq!(said, 1, "the loss said once\n{}", out.report());
}

#[test]
fn node_servers_of_different_modes_refuse_to_start() {
    let _g = heavy();
    // The first node server is fault tolerant, the second is not.
    let script = format!(
        "if [ \"$PMI_RANK\" = 0 ]; then exec {f} --fault-tolerant -n 2 true; else exec {f} -n 2 true; fi",
        f = fastpmi().display()
    );
    let out: Outcome = launch(["-n", "2", "sh", "-c", &script])
        .program(fastpmi())
        .timeout(Duration::from_secs(60))
        .run();
    assert!(!out.status.success(), "{}", out.report());
    assert!(
        out.stderr.contains("every node server needs the same mode"),
        "{}",
        out.report()
    );
}
