//! fastpmi's `libpmi.so.0` (`capi/pmi1`): the PMI-1 C API on the PMI-2
//! client. `tests/c/pmi1_kvs.c` (fastpmi's `include/pmi.h`, `-lpmi`) checks
//! put/commit/barrier/get, the clique, the maxima and the error codes; it
//! runs under the fastpmi launcher (shared memory, checked with `--stats`),
//! under Hydra (PMI-2 on the wire; the clique then comes from
//! `PMI_process_mapping`) and as a singleton.

mod common;

use common::{capi_lib_dir, heavy, launch, prog, stats_row, Prog};
use std::time::Duration;

fn lib_dir() -> &'static str {
    capi_lib_dir().to_str().expect("UTF-8 library path")
}

fn pmi1_on_fastpmi(n: usize, timeout: Duration) {
    let _g = heavy();
    let exe = prog(Prog::Pmi1Kvs);
    let out = launch([
        "--stats",
        "-n",
        &n.to_string(),
        exe.to_str().unwrap(),
        &n.to_string(),
    ])
    .env("LD_LIBRARY_PATH", lib_dir())
    .timeout(timeout)
    .run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines(),
        vec![format!("pmi1 ok size={n}").as_str()],
        "{}",
        out.report()
    );
    let sock = stats_row(&out.stderr, "socket").expect("socket stats row");
    let shm = stats_row(&out.stderr, "shared-memory").expect("shared-memory stats row");
    assert_eq!(
        sock[..3],
        [0, 0, 0],
        "socket puts/gets/fences must be 0\n{}",
        out.report()
    );
    // Two rounds of one put and one barrier per rank.
    let n = n as u64;
    assert_eq!((shm[0], shm[2]), (2 * n, 2 * n), "{}", out.report());
    assert!(shm[1] >= 2 * n * n, "{}", out.report());
}

#[test]
fn pmi1_program_under_fastpmi_n4_uses_shared_memory() {
    pmi1_on_fastpmi(4, Duration::from_secs(60));
}

#[test]
fn pmi1_program_under_fastpmi_n64_uses_shared_memory() {
    pmi1_on_fastpmi(64, Duration::from_secs(120));
}

/// Hydra: PMI-2 on the wire to an independent server, which has no
/// `localRanks` node attribute (the clique comes from the process mapping,
/// correct with `-ppn`).
#[test]
fn pmi1_program_under_hydra_n4() {
    let _g = heavy();
    let exe = prog(Prog::Pmi1Kvs);
    let out = launch(["-ppn", "4", "-n", "4", exe.to_str().unwrap(), "4"])
        .program("mpiexec.hydra")
        .env("LD_LIBRARY_PATH", lib_dir())
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines(),
        vec!["pmi1 ok size=4"],
        "{}",
        out.report()
    );
}

#[test]
fn pmi1_program_as_singleton() {
    let exe = prog(Prog::Pmi1Kvs);
    let out = launch(["1"])
        .program(exe)
        .env("LD_LIBRARY_PATH", lib_dir())
        .env_remove("PMI_FD")
        .env_remove("PMI_PORT")
        .env_remove("PMI_ID")
        .timeout(Duration::from_secs(30))
        .run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines(),
        vec!["pmi1 ok size=1"],
        "{}",
        out.report()
    );
}
