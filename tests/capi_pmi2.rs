//! fastpmi's `libpmi2.so.0` (`capi/pmi2`) as a drop-in for Slurm's.
//!
//! The program `tests/c/pmi2_slurm.c` is compiled against Slurm's
//! `slurm/pmi2.h` and linked with Slurm's `-lpmi2`; pointing
//! `LD_LIBRARY_PATH` at [`capi_lib_dir`] makes it load fastpmi's library
//! instead, unchanged. Under the fastpmi launcher its puts, gets and fences
//! must then go through shared memory only (`--stats`); under Hydra (an
//! independent PMI-2 server) over the wire; with a segment of an unknown
//! layout, over the wire with a debug line saying why; with no launcher, as
//! a singleton; and mixed with ranks that use Slurm's real library, every
//! rank must see every value. `tests/c/pmi2_capi.c` (fastpmi's own header)
//! checks the error codes and edge cases of the ABI.

mod common;

use common::{capi_lib_dir, heavy, launch, prog, stats_row, Outcome, Prog};
use std::path::Path;
use std::time::Duration;

fn lib_dir() -> &'static str {
    capi_lib_dir().to_str().expect("UTF-8 library path")
}

/// `exe ARGS` with fastpmi's libpmi2 and no launcher: a singleton.
fn singleton(exe: &std::path::Path, args: &[&str]) -> Outcome {
    launch(args)
        .program(exe)
        .env("LD_LIBRARY_PATH", lib_dir())
        .env_remove("PMI_FD")
        .env_remove("PMI_PORT")
        .timeout(Duration::from_secs(30))
        .run()
}

fn assert_lines(out: &Outcome, want: &str) {
    assert_eq!(
        out.stdout_lines(),
        vec![want],
        "stdout should be exactly rank 0's summary line\n{}",
        out.report()
    );
}

/// `[puts, gets, fences, node-attr]` of both transports.
fn stats(out: &Outcome) -> ([u64; 4], [u64; 4]) {
    let sock = stats_row(&out.stderr, "socket")
        .unwrap_or_else(|| panic!("no socket row in --stats output\n{}", out.report()));
    let shm = stats_row(&out.stderr, "shared-memory")
        .unwrap_or_else(|| panic!("no shared-memory row in --stats output\n{}", out.report()));
    (sock, shm)
}

/// `fastpmi --stats -n N pmi2_slurm N` with fastpmi's library: passes, and
/// every put, get and fence went through shared memory.
fn slurm_binary_on_shm(n: usize, timeout: Duration) {
    let _g = heavy();
    let exe = prog(Prog::Pmi2Slurm);
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
    assert_lines(&out, &format!("pmi2 ok size={n}"));
    let (sock, shm) = stats(&out);
    assert_eq!(
        sock[..3],
        [0, 0, 0],
        "socket puts/gets/fences must be 0 with fastpmi's libpmi2\n{}",
        out.report()
    );
    let n = n as u64;
    // One put and one fence per rank; every rank gets every key.
    assert_eq!(shm[0], n, "shared-memory puts\n{}", out.report());
    assert_eq!(shm[2], n, "shared-memory fences\n{}", out.report());
    assert!(shm[1] >= n * n, "shared-memory gets\n{}", out.report());
}

#[test]
fn slurm_binary_on_fastpmi_lib_n4_uses_shared_memory_only() {
    slurm_binary_on_shm(4, Duration::from_secs(60));
}

#[test]
fn slurm_binary_on_fastpmi_lib_n64_uses_shared_memory_only() {
    slurm_binary_on_shm(64, Duration::from_secs(120));
}

#[test]
fn slurm_binary_on_fastpmi_lib_n256_uses_shared_memory_only() {
    slurm_binary_on_shm(256, Duration::from_secs(300));
}

/// The same binary and library under Hydra: the library finds no segment
/// and speaks PMI-2 on the wire to an independent server. `-ppn 4` because
/// Hydra's process mapping is wrong without it.
#[test]
fn slurm_binary_on_fastpmi_lib_under_hydra_n4() {
    let _g = heavy();
    let exe = prog(Prog::Pmi2Slurm);
    let out = launch(["-ppn", "4", "-n", "4", exe.to_str().unwrap(), "4"])
        .program("mpiexec.hydra")
        .env("LD_LIBRARY_PATH", lib_dir())
        .env("FASTPMI_LOG", "debug")
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines(),
        vec!["pmi2 ok size=4"],
        "stdout should be exactly rank 0's summary line\n{}",
        out.report()
    );
    // Proof that fastpmi's library (not Slurm's) was loaded: its debug line.
    assert!(
        out.stderr.contains("not using shared memory"),
        "fastpmi's library should log why it uses the socket under Hydra\n{}",
        out.report()
    );
}

/// A job where even ranks load fastpmi's library (shared memory) and odd
/// ranks Slurm's own (socket): every rank verifies every rank's value and
/// the node attribute, and each transport served exactly its ranks' puts.
#[test]
fn mixed_job_slurm_lib_and_fastpmi_lib_n8() {
    let _g = heavy();
    let n = 8;
    let exe = prog(Prog::Pmi2Slurm);
    let script = format!(
        "if [ $((PMI_RANK % 2)) -eq 0 ]; then export LD_LIBRARY_PATH='{}'; \
         else unset LD_LIBRARY_PATH; fi; exec '{}' {n}",
        lib_dir(),
        exe.display()
    );
    let out = launch(["--stats", "-n", &n.to_string(), "sh", "-c", &script])
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_success();
    assert_lines(&out, &format!("pmi2 ok size={n}"));
    let (sock, shm) = stats(&out);
    let half = (n / 2) as u64;
    assert_eq!(
        (sock[0], shm[0]),
        (half, half),
        "puts per transport\n{}",
        out.report()
    );
    assert_eq!(
        (sock[2], shm[2]),
        (half, half),
        "fences per transport\n{}",
        out.report()
    );
    assert!(
        sock[1] > 0 && shm[1] > 0,
        "gets on both transports\n{}",
        out.report()
    );
}

/// No launcher, no PMI environment: rank 0 of 1, put/fence/get work.
#[test]
fn slurm_binary_on_fastpmi_lib_as_singleton() {
    let exe = prog(Prog::Pmi2Slurm);
    let out = launch(["1"])
        .program(exe)
        .env("LD_LIBRARY_PATH", lib_dir())
        .env_remove("PMI_FD")
        .env_remove("PMI_PORT")
        .env_remove("PMI_ID")
        .env_remove("PMI_RANK")
        .env_remove("PMI_SIZE")
        .timeout(Duration::from_secs(30))
        .run();
    out.assert_success();
    assert_lines(&out, "pmi2 ok size=1");
}

/// The launcher advertises a segment stamped by "another version": the
/// library must not touch it, fall back to the socket and still pass.
#[test]
fn unknown_segment_stamp_falls_back_to_socket() {
    let _g = heavy();
    let n = 4;
    let exe = prog(Prog::Pmi2Slurm);
    let out = launch([
        "--stats",
        "-n",
        &n.to_string(),
        exe.to_str().unwrap(),
        &n.to_string(),
    ])
    .env("LD_LIBRARY_PATH", lib_dir())
    .env("FASTPMI_ADVERTISE_FOREIGN_SEGMENT", "1")
    .env("FASTPMI_LOG", "debug")
    .timeout(Duration::from_secs(60))
    .run();
    out.assert_success();
    assert_lines(&out, &format!("pmi2 ok size={n}"));
    let (sock, shm) = stats(&out);
    assert!(
        sock[0] > 0 && sock[1] > 0 && sock[2] > 0,
        "socket puts/gets/fences must be > 0\n{}",
        out.report()
    );
    assert_eq!(
        shm[..3],
        [0, 0, 0],
        "nothing through shared memory\n{}",
        out.report()
    );
    let why = out
        .stderr
        .lines()
        .filter(|l| l.contains("not using shared memory"))
        .count();
    assert_eq!(
        why,
        n,
        "every rank should log once why it does not use shared memory\n{}",
        out.report()
    );
}

/// `pmi2_capi.c` under the launcher: error codes, truncation rules, int
/// arrays, ring, name service, spawn refused.
#[test]
fn capi_conformance_under_fastpmi_n4() {
    let _g = heavy();
    let exe = prog(Prog::Pmi2Capi);
    let out = launch(["--stats", "-n", "4", exe.to_str().unwrap(), "4", "launcher"])
        .env("LD_LIBRARY_PATH", lib_dir())
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_success();
    assert_lines(&out, "pmi2 capi ok size=4");
    let (sock, _) = stats(&out);
    assert_eq!(sock[0], 0, "no socket puts\n{}", out.report());
}

/// `pmi2_capi.c` as a singleton (no name service, no other jobs).
#[test]
fn capi_conformance_as_singleton() {
    let exe = prog(Prog::Pmi2Capi);
    let out = singleton(exe, &["1", "singleton"]);
    out.assert_success();
    assert_lines(&out, "pmi2 capi ok size=1");
}

/// `PMI2_Abort` from one rank ends the job with status 1 and names the
/// rank; ranks waiting in a fence get an error, not a hang.
#[test]
fn abort_ends_the_job() {
    let _g = heavy();
    let exe = prog(Prog::Pmi2Capi);
    let out = launch(["-n", "4", exe.to_str().unwrap(), "4", "abort"])
        .env("LD_LIBRARY_PATH", lib_dir())
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_code(1);
    out.assert_stderr_names_rank(3);
    assert!(
        out.stderr.contains("pmi2_capi abort test"),
        "the abort message should reach the launcher\n{}",
        out.report()
    );
}

/// `pmi2_slurm.c` compiled against fastpmi's own `include/pmi2.h` (source
/// compatibility with Slurm's header) passes on shared memory.
#[test]
fn slurm_program_compiled_against_fastpmi_header_n4() {
    let _g = heavy();
    let exe = prog(Prog::Pmi2SlurmOwnHeader);
    let out = launch(["--stats", "-n", "4", exe.to_str().unwrap(), "4"])
        .env("LD_LIBRARY_PATH", lib_dir())
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_success();
    assert_lines(&out, "pmi2 ok size=4");
    let (sock, shm) = stats(&out);
    assert_eq!(sock[..3], [0, 0, 0], "{}", out.report());
    assert_eq!(shm[0], 4, "{}", out.report());
    assert!(Path::new(exe).is_file());
}

/// `fpmi_kvscopy.c`: `FPMI_KVS_Getall` and `FPMI_KVS_Putall` of
/// `include/fastpmi.h`, 5 ranks on shared memory, on the socket, and as a
/// singleton (its own store): every rank's card once, a putall seen by
/// every rank after the next fence, a bad key refused with nothing put.
#[test]
fn fpmi_kvscopy_getall_and_putall() {
    let exe = prog(Prog::FpmiKvscopy);
    for transport in ["shm", "socket"] {
        let out = launch(["-n", "5", exe.to_str().unwrap()])
            .env("LD_LIBRARY_PATH", lib_dir())
            .env("FASTPMI_TRANSPORT", transport)
            .timeout(Duration::from_secs(60))
            .run();
        out.assert_success();
        let mut lines = out.stdout_lines();
        lines.sort();
        let want: Vec<String> = (0..5)
            .map(|r| format!("fpmi kvscopy ok rank {r} size 5"))
            .collect();
        assert_eq!(lines, want, "{transport}\n{}", out.report());
    }
    let out = singleton(exe, &["1"]);
    out.assert_success();
    assert_eq!(out.stdout_lines(), vec!["fpmi kvscopy ok rank 0 size 1"]);
}
