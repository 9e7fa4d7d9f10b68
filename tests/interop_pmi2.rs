//! Slurm 22.05's PMI-2 client library (`libpmi2.so.0`) under the launcher,
//! at small and medium N (N >= 256 is in `interop_large.rs`).
//!
//! Validated against Hydra 4.0.2 with `-ppn N` (added by the helper): N=4 and
//! N=64 pass. The port-mode test fails under Hydra, which rejects the
//! `fullinit;srcid=` that Slurm's client sends when only PMI_ID is set
//! ("unable to find pmirank token"); fastpmi must accept it.

mod common;

use common::{heavy, launch, prog, Prog};
use std::time::Duration;

/// `fastpmi [--pmi-port] -n N pmi2_slurm N`: exit 0 and exactly one stdout
/// line `pmi2 ok size=N`. The program itself checks (every rank, every
/// return code): put/fence/get of every rank's 100-byte value, a miss for an
/// unknown key, `PMI_process_mapping == (vector,(0,1,N))`, a node attribute
/// miss without wait, and rank 0's node attribute seen by all others through
/// a get with wait.
pub fn pmi2_job(n: usize, port_mode: bool, timeout: Duration) {
    let _g = heavy();
    let exe = prog(Prog::Pmi2Slurm);
    let mut args: Vec<String> = vec!["-n".into(), n.to_string()];
    if port_mode {
        args.push("--pmi-port".into());
    }
    args.push(exe.to_str().unwrap().into());
    args.push(n.to_string());
    let out = launch(&args).timeout(timeout).run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines(),
        vec![format!("pmi2 ok size={n}").as_str()],
        "stdout should be exactly rank 0's summary line\n{}",
        out.report()
    );
}

#[test]
fn slurm_pmi2_n1() {
    pmi2_job(1, false, Duration::from_secs(30));
}

#[test]
fn slurm_pmi2_n4() {
    pmi2_job(4, false, Duration::from_secs(30));
}

#[test]
fn slurm_pmi2_n64() {
    pmi2_job(64, false, Duration::from_secs(60));
}

/// Port mode: Slurm's client connects to PMI_PORT and identifies itself with
/// `srcid=<PMI_ID>` in fullinit.
#[test]
fn slurm_pmi2_pmi_port_n4() {
    pmi2_job(4, true, Duration::from_secs(30));
}
