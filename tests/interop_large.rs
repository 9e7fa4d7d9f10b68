//! The large jobs (N >= 256), in one test binary so that, with the shared
//! `heavy()` lock, they run one at a time.
//!
//! Under Hydra 4.0.2 (validation mode) the MPICH N=256 job passes (about 36 s
//! on the 2-core machine); the Slurm libpmi2 jobs at N=256 and N=1024 hang
//! (Hydra's single proxy stalls on a full socket and then fails with
//! "write error (Interrupted system call)"), as docs/architecture.md records
//! ("The event loop").

mod common;

use common::{heavy, launch, prog, Prog};
use std::time::Duration;

#[test]
fn mpich_allreduce_n256() {
    let _g = heavy();
    let exe = prog(Prog::MpiAllreduce).to_str().unwrap();
    let out = launch(["-n", "256", exe, "256"])
        .timeout(Duration::from_secs(180))
        .run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines(),
        vec!["allreduce ok size=256 sum=32640"],
        "stdout should be exactly rank 0's summary line\n{}",
        out.report()
    );
}

fn pmi2_job(n: usize, timeout: Duration) {
    let _g = heavy();
    let exe = prog(Prog::Pmi2Slurm).to_str().unwrap();
    let ns = n.to_string();
    let out = launch(["-n", &ns, exe, &ns]).timeout(timeout).run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines(),
        vec![format!("pmi2 ok size={n}").as_str()],
        "stdout should be exactly rank 0's summary line\n{}",
        out.report()
    );
}

#[test]
fn slurm_pmi2_n256() {
    pmi2_job(256, Duration::from_secs(60));
}

/// 1024 ranks, each getting all 1024 keys (about a million gets over the
/// sockets); must finish within 120 s on 2 cores.
#[test]
fn slurm_pmi2_n1024() {
    pmi2_job(1024, Duration::from_secs(120));
}
