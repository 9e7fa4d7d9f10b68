//! Peak resident memory of the launcher side of a running job: the
//! launcher itself or Hydra's `mpiexec` and its proxies, sampled from
//! `/proc/PID/status` (VmHWM) until the job exits.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use super::table::process_table;
use crate::rank::status_field_kb;

/// Memory sampling: VmHWM is a high-water mark, so sampling only loses growth
/// after the last sample, but an exited process has no VmHWM left to read.
/// The period starts at 1 ms (a 5-ms job still gets a few samples after the
/// launcher has set itself up) and doubles up to 20 ms, which keeps the
/// sampler's own CPU use (on a 2-core machine shared with the job) negligible.
const SAMPLE_FIRST: Duration = Duration::from_millis(1);
const SAMPLE_PERIOD: Duration = Duration::from_millis(20);

/// Whose memory to sample while the job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemProbe {
    None,
    /// The spawned process itself (fastpmi's launcher; not its ranks).
    Launcher,
    /// `mpiexec.hydra` plus its `hydra_pmi_proxy` children.
    HydraTree {
        proxies: usize,
    },
}

/// Peak resident memory of the launcher side of a job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mem {
    /// Sum of the peaks (VmHWM) of the sampled processes, KiB.
    pub total_kb: u64,
    /// What was summed, e.g. `mpiexec 9.1 MB + 2 proxies 7.0 MB`.
    pub detail: String,
}

/// `(name, VmHWM kB)` of a live process; None once it has exited (a zombie
/// has no memory fields).
fn name_and_hwm(pid: i32) -> Option<(String, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let name = s
        .lines()
        .find_map(|l| l.strip_prefix("Name:"))?
        .trim()
        .to_string();
    Some((name, status_field_kb(&s, "VmHWM:")?))
}

fn mb(kb: u64) -> String {
    format!("{:.1} MB", kb as f64 / 1024.0)
}

/// Sample peak RSS until `stop`; see [`MemProbe`].
pub(super) fn sample(pid: i32, probe: MemProbe, stop: &AtomicBool) -> Option<Mem> {
    let mut root_peak: Option<u64> = None;
    let mut proxy_peaks: HashMap<i32, u64> = HashMap::new();
    // Finding Hydra's proxies needs a scan of /proc, which at 1024 ranks is
    // itself real work: scan only until all are found, and for at most ~4 s
    // (proxies start before any rank does).
    let mut scans_left = 200u32;
    let mut period = SAMPLE_FIRST;
    loop {
        let stopping = stop.load(Ordering::Acquire);
        if let Some((_, hwm)) = name_and_hwm(pid) {
            root_peak = Some(root_peak.unwrap_or(0).max(hwm));
        }
        if let MemProbe::HydraTree { proxies } = probe {
            if proxy_peaks.len() < proxies && scans_left > 0 && !stopping {
                scans_left -= 1;
                for (p, ppid, comm) in process_table() {
                    if ppid == pid && comm == "hydra_pmi_proxy" {
                        proxy_peaks.entry(p).or_insert(0);
                    }
                }
            }
            for (p, peak) in proxy_peaks.iter_mut() {
                // Check the name: a proxy's pid may be reused once it exits.
                if let Some((name, hwm)) = name_and_hwm(*p) {
                    if name == "hydra_pmi_proxy" {
                        *peak = (*peak).max(hwm);
                    }
                }
            }
        }
        if stopping {
            break;
        }
        thread::park_timeout(period);
        period = (period * 2).min(SAMPLE_PERIOD);
    }
    let root = root_peak?;
    Some(match probe {
        MemProbe::HydraTree { .. } => {
            let proxies: u64 = proxy_peaks.values().sum();
            Mem {
                total_kb: root + proxies,
                detail: format!(
                    "mpiexec {} + {} proxies {}",
                    mb(root),
                    proxy_peaks.len(),
                    mb(proxies)
                ),
            }
        }
        _ => Mem {
            total_kb: root,
            detail: format!("launcher {}", mb(root)),
        },
    })
}
