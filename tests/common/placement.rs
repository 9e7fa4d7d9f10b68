//! Helpers of the placement tests (`tests/placement*.rs`): the node's cores
//! from `/sys/devices/system/cpu/*/topology` (the kernel's view, independent
//! of the hwloc the launcher uses), the CPUs ranks report, and Intel MPI runs
//! in each PMI mode.

use super::stacks::Stack;
use super::{capi_lib_dir, heavy, launch, Outcome};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

pub const T4: Duration = Duration::from_secs(120);
pub const T64: Duration = Duration::from_secs(300);

/// `0-2,5` -> [0, 1, 2, 5].
pub fn parse_list(s: &str) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
                out.extend(a..=b);
            }
            None => {
                out.insert(part.parse().unwrap());
            }
        }
    }
    out
}

/// The CPUs this test process may run on (what an unbound rank inherits).
pub fn own_cpus() -> BTreeSet<u32> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list in /proc/self/status");
    parse_list(line)
}

/// The cores of this node that this process may use: each one's CPUs, from
/// the kernel's `core_cpus_list` (older kernels: `thread_siblings_list`).
pub fn cores() -> BTreeSet<BTreeSet<u32>> {
    let own = own_cpus();
    own.iter()
        .map(|c| {
            let dir = format!("/sys/devices/system/cpu/cpu{c}/topology");
            let l = std::fs::read_to_string(format!("{dir}/core_cpus_list"))
                .or_else(|_| std::fs::read_to_string(format!("{dir}/thread_siblings_list")))
                .unwrap_or_else(|e| panic!("{dir}: {e}"));
            parse_list(&l).intersection(&own).copied().collect()
        })
        .collect()
}

/// `hello rank R of N cpus LIST` lines: rank -> CPUs; every rank of `n`
/// exactly once.
pub fn hello_cpus(out: &Outcome, n: u32) -> BTreeMap<u32, BTreeSet<u32>> {
    out.assert_success();
    let mut m = BTreeMap::new();
    for l in out.stdout_lines() {
        let Some(rest) = l.strip_prefix("hello rank ") else {
            continue;
        };
        let (rank, rest) = rest.split_once(" of ").unwrap();
        let (size, cpus) = rest.split_once(" cpus ").unwrap();
        assert_eq!(size.parse::<u32>().unwrap(), n, "{l}\n{}", out.report());
        let prev = m.insert(rank.parse::<u32>().unwrap(), parse_list(cpus));
        assert!(prev.is_none(), "rank {rank} twice\n{}", out.report());
    }
    assert_eq!(
        m.keys().copied().collect::<Vec<_>>(),
        (0..n).collect::<Vec<_>>(),
        "every rank says hello once\n{}",
        out.report()
    );
    m
}

/// `fastpmi: rank R bound to cpus LIST` of `--print-bindings`.
pub fn printed_bindings(out: &Outcome) -> BTreeMap<u32, BTreeSet<u32>> {
    out.stderr_lines()
        .iter()
        .filter_map(|l| l.strip_prefix("fastpmi: rank "))
        .filter_map(|l| l.split_once(" bound to cpus "))
        .map(|(r, c)| (r.parse().unwrap(), parse_list(c)))
        .collect()
}

/// Intel MPI's `I_MPI_DEBUG=5` pinning table: `[0] MPI startup(): R PID
/// NODE {LIST}` -> rank -> CPUs.
pub fn impi_pin_table(out: &Outcome) -> BTreeMap<u32, BTreeSet<u32>> {
    let mut m = BTreeMap::new();
    let mut in_table = false;
    for l in out.stdout_lines().into_iter().chain(out.stderr_lines()) {
        if l.contains("===== CPU pinning =====") {
            in_table = true;
            continue;
        }
        if !in_table {
            continue;
        }
        let Some(rest) = l.split_once("MPI startup():").map(|(_, r)| r) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        match (f.first().and_then(|r| r.parse::<u32>().ok()), f.last()) {
            (Some(rank), Some(c)) if c.starts_with('{') && c.ends_with('}') => {
                m.insert(rank, parse_list(&c[1..c.len() - 1]));
            }
            (None, _) if f.first() != Some(&"Rank") => in_table = false,
            _ => {}
        }
    }
    m
}

#[derive(Clone, Copy, Debug)]
pub enum Mode {
    /// Intel's built-in PMI-1 client over the inherited socket (PMI_FD).
    Pmi1,
    /// Intel loading fastpmi's libpmi2.so.0 (`I_MPI_PMI=pmi2`).
    Pmi2Lib,
    /// PMI-1 over TCP (`--pmi-port`).
    Port,
    /// SysV job segment.
    Sysv,
    /// No job segment.
    NoPool,
}

pub fn impi(mode: Mode, n: u32, prog: &str, extra: &[&str]) -> Outcome {
    let _g = heavy();
    let exe = Stack::Impi.program(prog);
    let mut args: Vec<String> = match mode {
        Mode::Pmi1 | Mode::Pmi2Lib => vec![],
        Mode::Port => vec!["--pmi-port".into()],
        Mode::Sysv => vec!["--mem-pool".into(), "sysv".into()],
        Mode::NoPool => vec!["--mem-pool".into(), "none".into()],
    };
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(["-n".into(), n.to_string(), exe.display().to_string()]);
    if prog == "mpi_allreduce" {
        args.push(n.to_string());
    }
    let mut c = launch(args).timeout(if n > 8 { T64 } else { T4 });
    if let Mode::Pmi2Lib = mode {
        c = c
            .env("I_MPI_PMI", "pmi2")
            .env("I_MPI_PMI_LIBRARY", capi_lib_dir().join("libpmi2.so.0"));
    }
    c.run()
}

pub fn impi_hello(mode: Mode, n: u32) {
    let out = impi(mode, n, "mpi_hello", &[]);
    hello_cpus(&out, n);
}

pub fn impi_allreduce(mode: Mode, n: u32) {
    let out = impi(mode, n, "mpi_allreduce", &[]);
    out.assert_success();
    let sum = n as u64 * (n as u64 - 1) / 2;
    assert_eq!(
        out.stdout_lines(),
        vec![format!("allreduce ok size={n} sum={sum}")],
        "{}",
        out.report()
    );
}
