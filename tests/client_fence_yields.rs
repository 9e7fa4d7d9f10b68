//! A rank waiting in a shared-memory fence yields its CPU a bounded number
//! of times (`FASTPMI_FENCE_YIELDS`, default 2) and then sleeps: behind a
//! rank that is seconds late, the waiting ranks use next to no CPU, with the
//! default and with the largest setting, while a setting out of range fails
//! init with a message naming the variable.

mod common;
mod rank_role;

use std::time::Duration;

use fastpmi_client::TransportKind;
use rustix::time::{clock_gettime, ClockId};

const RANKS: u32 = 16;
/// How late rank 0 comes to the fence.
const LATE: Duration = Duration::from_secs(3);
/// Most CPU a waiting rank may use in the fence: sleeping costs a few
/// context switches; waiting by polling or yielding without bound would
/// share the two CPUs' 3 s among 15 ranks, about 400 ms each.
const WAITER_CPU_MAX: Duration = Duration::from_millis(60);

fn cpu() -> Duration {
    let t = clock_gettime(ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// After one fence together (the job's first, which never yields), rank 0
/// sleeps [`LATE`] before the second; every rank prints the CPU time that
/// one took, then all fence twice more (the yields must not break ordinary
/// fences).
fn role_late() -> Result<(), String> {
    let pmi = rank_role::init()?;
    rank_role::ensure(pmi.transport() == TransportKind::Shm, || {
        format!("transport {:?}", pmi.transport())
    })?;
    pmi.fence().map_err(|e| format!("first fence: {e}"))?;
    if pmi.rank() == 0 {
        std::thread::sleep(LATE);
    }
    let before = cpu();
    pmi.fence().map_err(|e| format!("fence: {e}"))?;
    let used = cpu() - before;
    println!("rank {} fence_cpu_us {}", pmi.rank(), used.as_micros());
    for _ in 0..2 {
        pmi.fence().map_err(|e| format!("fence: {e}"))?;
    }
    pmi.finalize().map_err(|e| format!("finalize: {e}"))
}

/// (rank, CPU time of its fence) from the job's output.
fn fence_cpu(stdout: &str) -> Vec<(u32, Duration)> {
    let mut v: Vec<(u32, Duration)> = stdout
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["rank", r, "fence_cpu_us", us] => {
                    Some((r.parse().ok()?, Duration::from_micros(us.parse().ok()?)))
                }
                _ => None,
            }
        })
        .collect();
    v.sort();
    v
}

#[test]
fn fence_waiters_behind_a_late_rank_sleep_after_their_yields() {
    match rank_role::role().as_deref() {
        Some("late") => rank_role::finish(role_late()),
        Some(_) => return,
        None => {}
    }
    let test = "fence_waiters_behind_a_late_rank_sleep_after_their_yields";
    let max = shm_layout::MAX_YIELDS.to_string();
    for yields in [None, Some(max.as_str())] {
        let mut cmd = rank_role::launch(test, "late", RANKS, &[]);
        if let Some(y) = yields {
            cmd = cmd.env("FASTPMI_FENCE_YIELDS", y);
        }
        let out = cmd.run();
        out.assert_success();
        let cpu = fence_cpu(&out.stdout);
        assert_eq!(cpu.len(), RANKS as usize, "{}", out.report());
        for &(rank, used) in &cpu[1..] {
            assert!(
                used < WAITER_CPU_MAX,
                "FASTPMI_FENCE_YIELDS={yields:?}: rank {rank} used {used:?} of CPU \
                 waiting {LATE:?} in the fence: {}",
                out.report()
            );
        }
    }
}

#[test]
fn an_out_of_range_fence_yields_setting_fails_init_with_its_name() {
    match rank_role::role().as_deref() {
        Some("late") => rank_role::finish(role_late()),
        Some(_) => return,
        None => {}
    }
    let test = "an_out_of_range_fence_yields_setting_fails_init_with_its_name";
    for bad in ["17", "many"] {
        let out = rank_role::launch(test, "late", 2, &[])
            .env("FASTPMI_FENCE_YIELDS", bad)
            .run();
        assert!(!out.status.success(), "{}", out.report());
        assert!(
            out.stderr.contains(&format!("FASTPMI_FENCE_YIELDS={bad}")),
            "{}",
            out.report()
        );
    }
}
