//! MPICH 4.0.2 (its built-in PMI-1 client) under the launcher.
//!
//! Validated against Hydra (`FASTPMI_TEST_LAUNCHER=mpiexec.hydra`): all pass.

mod common;

use common::{heavy, launch, prog, Prog};
use std::time::Duration;

/// `fastpmi [--pmi-port] -n N mpi_allreduce N`: exit 0 and exactly one stdout
/// line, rank 0's `allreduce ok size=N sum=N(N-1)/2`.
fn allreduce(n: usize, port_mode: bool, timeout: Duration) {
    let _g = heavy();
    let exe = prog(Prog::MpiAllreduce);
    let mut args: Vec<String> = vec!["-n".into(), n.to_string()];
    if port_mode {
        args.push("--pmi-port".into());
    }
    args.push(exe.to_str().unwrap().into());
    args.push(n.to_string());
    let out = launch(&args).timeout(timeout).run();
    out.assert_success();
    let expected = format!("allreduce ok size={n} sum={}", n * (n - 1) / 2);
    assert_eq!(
        out.stdout_lines(),
        vec![expected.as_str()],
        "stdout should be exactly rank 0's summary line\n{}",
        out.report()
    );
}

#[test]
fn mpich_allreduce_n1() {
    allreduce(1, false, Duration::from_secs(30));
}

#[test]
fn mpich_allreduce_n4() {
    allreduce(4, false, Duration::from_secs(30));
}

#[test]
fn mpich_allreduce_n64() {
    allreduce(64, false, Duration::from_secs(60));
}

#[test]
fn mpich_allreduce_pmi_port_n4() {
    allreduce(4, true, Duration::from_secs(30));
}

#[test]
fn mpich_allreduce_pmi_port_n64() {
    allreduce(64, true, Duration::from_secs(60));
}

/// `fastpmi -n 2 mpmd_appnum : -n 3 mpmd_appnum`: five ranks, each prints
/// `rank R size 5 appnum A` with A = 0 for ranks 0-1 and 1 for ranks 2-4.
#[test]
fn mpich_mpmd_appnum() {
    let _g = heavy();
    let exe = prog(Prog::MpmdAppnum).to_str().unwrap();
    let out = launch(["-n", "2", exe, ":", "-n", "3", exe])
        .timeout(Duration::from_secs(30))
        .run();
    out.assert_success();
    let mut lines: Vec<String> = out.stdout_lines().iter().map(|l| l.to_string()).collect();
    lines.sort_by_key(|l| {
        l.split_whitespace()
            .nth(1)
            .and_then(|r| r.parse::<usize>().ok())
            .unwrap_or(usize::MAX)
    });
    let expected: Vec<String> = (0..5)
        .map(|r| format!("rank {r} size 5 appnum {}", if r < 2 { 0 } else { 1 }))
        .collect();
    assert_eq!(
        lines,
        expected,
        "each of the 5 ranks should print its rank, size 5 and its section's appnum\n{}",
        out.report()
    );
}
