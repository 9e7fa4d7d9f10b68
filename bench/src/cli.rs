//! The command line ([`Options`], parsed by clap from [`Cli`]).
//!
//! The rank programs (`fastpmi-bench __rank`, `__group`, `__death`) are not options:
//! `main` hands them over before the command line is parsed.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::configs::{self, Config, Kind, RunParams};

/// Measures PMI put/get/fence (a business-card exchange) under fastpmi's
/// shared-memory path, fastpmi's socket path, Hydra and Slurm's libpmi2 on
/// fastpmi beside a futex barrier floor, plus MPICH startup and launcher
/// memory. Writes bench.md, bench.svg and raw.csv into --out. Build first
/// with `cargo build --release --workspace` (fastpmi must sit next to
/// fastpmi-bench).
#[derive(Debug, Parser)]
#[command(
    name = "fastpmi-bench",
    args_override_self = true,
    max_term_width = 100
)]
pub struct Cli {
    /// Rank counts of the exchange.
    #[arg(long, value_name = "LIST", default_value = "2,16,64,256,1024", value_parser = sizes)]
    sizes: List,
    /// Repetitions of every case.
    #[arg(long, value_name = "N", default_value = "3", value_parser = count)]
    reps: u32,
    /// Repetitions of the configurations whose medians the fence and
    /// start-up targets compare (fastpmi-shm, fastpmi-shm-yields0,
    /// futex-floor, the start-up table): seconds a run, with a spread as
    /// large as the targets' margins (never fewer than --reps).
    #[arg(long, value_name = "N", default_value = "11", value_parser = count)]
    target_reps: u32,
    /// Output directory.
    #[arg(
        long,
        value_name = "DIR",
        default_value = "results",
        allow_hyphen_values = true
    )]
    out: PathBuf,
    /// Subset of: fastpmi-shm, fastpmi-socket, hydra, slurm-pmi2@fastpmi,
    /// futex-floor, mpich-startup (default: all).
    #[arg(long, value_name = "LIST", value_parser = config_list)]
    configs: Option<ConfigList>,
    /// Rank counts of the MPICH startup table (default 16,64,256; 16,64 with
    /// --quick; `none` to skip).
    #[arg(long, value_name = "LIST", value_parser = list)]
    startup_sizes: Option<List>,
    /// Fewer floor iterations and loop fences, no 256-rank MPICH startup.
    #[arg(long)]
    quick: bool,
    /// Seconds per run; the launcher's process tree is killed after it and
    /// the run recorded as failed.
    #[arg(long, value_name = "SECS", default_value = "120", value_parser = count)]
    timeout: u32,
    /// Fences per futex-floor run (default 1000, quick 100).
    #[arg(long, value_name = "N", value_parser = count)]
    floor_iters: Option<u32>,
    /// After the exchange, the Rust rank program runs K back-to-back fences
    /// and reports rank 0's mean: the steady-state fence compared with the
    /// futex floor (default 100, quick 20; 0: off, compare fence2). Fewer
    /// than ~100 mostly measure waking sleepers.
    #[arg(long, value_name = "K", value_parser = fence_loop)]
    fence_loop: Option<u32>,
    /// At most K ranks per Hydra proxy (Hydra 4.0.2 deadlocks past ~224
    /// ranks behind one proxy).
    #[arg(long, value_name = "K", default_value = "128", value_parser = count)]
    hydra_ppn: u32,
    /// Children of the spawn-latency runs (MPI_Comm_spawn from 2 ranks,
    /// MPICH 5 wheel, fastpmi vs its Hydra 5; `none` to skip; configuration
    /// name `spawn` selects both).
    #[arg(long, value_name = "LIST", default_value = "1,16,64", value_parser = list)]
    spawn_sizes: List,
    /// Rank counts of the job start-up table: the posix_spawn floor, fastpmi
    /// with a trivial program, a minimal PMI-2 job on fastpmi's installed
    /// libpmi2 (shared memory; `make install` into --out/.build, or
    /// FASTPMI_BENCH_CAPI_LIBDIR) and on Slurm's (socket), Hydra (`none` to
    /// skip; configuration name `launch` selects them all).
    #[arg(long, value_name = "LIST", default_value = "1,16,256,1024", value_parser = list)]
    launch_sizes: List,
    /// Job sizes of the group-fence runs: a 64-member group fence while the
    /// other ranks sleep, and the job's own fence, against futex-floor at
    /// N=64 (`none` to skip).
    #[arg(long, value_name = "LIST", default_value = "256", value_parser = list)]
    group_sizes: List,
    /// Job sizes of the `fastpmi ps` runs: 1000 steady fences alone and with
    /// `fastpmi ps PID --json` every 100 ms, and `ps` every 100 ms while N-1
    /// ranks sit in a fence for the last (configuration name `ps`; `none` to
    /// skip).
    #[arg(long, value_name = "LIST", default_value = "1024", value_parser = list)]
    ps_sizes: List,
    /// Job sizes of the death-detection runs: `fastpmi --fault-tolerant`,
    /// the last rank SIGKILLs itself while the others wait in a fence, time
    /// to their error (configuration name `death`; `none` to skip).
    #[arg(long, value_name = "LIST", default_value = "64,256,1024", value_parser = list)]
    death_sizes: List,
    /// Job sizes of the ULFM runs: Open MPI 5's tests/c/ulfm_shrink.c, rank
    /// 3 SIGKILLed, the others revoke, shrink and allreduce; whole job under
    /// `fastpmi --with-ft ulfm` vs the wheel's `mpirun --with-ft ulfm`
    /// (configuration name `ulfm`; at least 4 ranks; `none` to skip).
    #[arg(long, value_name = "LIST", default_value = "64", value_parser = ulfm_list)]
    ulfm_sizes: List,
    /// Job sizes of the Python rows: N Python ranks exchange one address
    /// each, the wheel's `fastpmi -n N python bench/python/pmi_exchange.py`
    /// (fastpmi.Pmi put, fence, get of every rank's) vs the `mpich` wheel's
    /// `mpiexec -n N python bench/python/mpi4py_allgather.py` (mpi4py
    /// allgather); whole job; both from a venv the harness makes in
    /// --out/.build with pip (the wheel built from this checkout, mpich,
    /// mpi4py; PyPI needed the first time) (configuration name `python`;
    /// `none` to skip).
    #[arg(long, value_name = "LIST", default_value = "256", value_parser = list)]
    python_sizes: List,
    /// Rank counts of the placement rows: Intel MPI hello
    /// and allreduce under fastpmi in each PMI mode and with -bind-to none
    /// and core vs Intel's mpiexec.hydra; Debian MPICH and the MPICH 5 wheel
    /// allreduce under fastpmi vs their Hydra (configuration name
    /// `placement` selects only these).
    #[arg(long, value_name = "LIST", default_value = "none", value_parser = list)]
    placement_sizes: List,
    /// Job sizes of the nested-mode rows: one job under a private Slurm
    /// (started as root), `srun -n N` against 4 fastpmi node servers of N/4
    /// ranks (configuration name `nest`; `none` to skip).
    #[arg(long, value_name = "LIST", default_value = "256", value_parser = list)]
    nest_sizes: List,
    /// `many-core`: rank counts sized from this machine's CPUs (N = cores,
    /// 4x, 16x and 64x cores, cores as `nproc` counts them): the exchange
    /// (fastpmi-shm, fastpmi-socket, futex-floor: fence and get-all), job
    /// start-up, and Intel MPI and MPICH 5 allreduce under fastpmi against
    /// their own launchers; nothing else. Replaces --sizes, --configs and
    /// the other families' sizes.
    #[arg(
        long,
        value_name = "NAME",
        conflicts_with_all = ["sizes", "configs", "launch_sizes", "placement_sizes", "startup_sizes", "spawn_sizes", "group_sizes", "ps_sizes", "death_sizes", "ulfm_sizes", "python_sizes", "nest_sizes"]
    )]
    profile: Option<Profile>,
}

/// A preset of sizes and configurations (`--profile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Profile {
    ManyCore,
}

/// The multiples of the core count the many-core profile runs at.
pub const MANY_CORE_FACTORS: [u32; 4] = [1, 4, 16, 64];

/// The configurations of the many-core profile (besides the start-up
/// table's, all of which it runs).
pub const MANY_CORE_CONFIGS: [&str; 7] = [
    "fastpmi-shm",
    "fastpmi-socket",
    "futex-floor",
    "impi-allreduce@mpiexec.hydra",
    "impi-allreduce@fastpmi",
    "mpich5-allreduce@hydra5",
    "mpich5-allreduce@fastpmi",
];

/// A comma list of rank counts, sorted, without repeats (a newtype: clap
/// would read a `Vec` field as a repeated option).
#[derive(Debug, Clone)]
struct List(Vec<u32>);

/// The configurations `--configs` picks, sorted, without repeats.
#[derive(Debug, Clone)]
struct ConfigList(Vec<Config>);

/// `none` or nothing is the empty list.
fn list(s: &str) -> Result<List, String> {
    if s == "none" || s.is_empty() {
        return Ok(List(vec![]));
    }
    let mut v = Vec::new();
    for part in s.split(',') {
        match part.trim().parse::<u32>() {
            Ok(n) if n >= 1 => v.push(n),
            _ => return Err(format!("`{part}` is not a rank count >= 1")),
        }
    }
    v.sort_unstable();
    v.dedup();
    Ok(List(v))
}

/// `--ulfm-sizes`: every job must hold the victim, rank 3.
fn ulfm_list(s: &str) -> Result<List, String> {
    let l = list(s)?;
    let least = configs::ULFM_VICTIM + 1;
    match l.0.iter().find(|&&n| n < least) {
        Some(n) => Err(format!(
            "{n} ranks: at least {least} (rank {} is the victim)",
            configs::ULFM_VICTIM
        )),
        None => Ok(l),
    }
}

/// `--sizes`: a list that is not empty.
fn sizes(s: &str) -> Result<List, String> {
    let l = list(s)?;
    if l.0.is_empty() {
        return Err("no rank count".into());
    }
    Ok(l)
}

fn count(s: &str) -> Result<u32, String> {
    s.parse::<u32>()
        .ok()
        .filter(|&n| n >= 1)
        .ok_or_else(|| "expected a number >= 1".to_string())
}

fn fence_loop(s: &str) -> Result<u32, String> {
    s.parse().map_err(|_| "expected a number".to_string())
}

fn config_list(s: &str) -> Result<ConfigList, String> {
    let mut configs = Vec::new();
    for name in s.split(',').map(str::trim) {
        let picked: Vec<Config> = if name == "mpich-startup" {
            vec![Config::MpichFastpmi, Config::MpichHydra]
        } else if name == "spawn" {
            vec![Config::SpawnFastpmi, Config::SpawnHydra5]
        } else if name == "launch" {
            configs::LAUNCH.to_vec()
        } else if name == "group" {
            configs::GROUP.to_vec()
        } else if name == "ps" {
            configs::PS.to_vec()
        } else if name == "nest" {
            configs::NEST.to_vec()
        } else if name == "death" {
            configs::DEATH.to_vec()
        } else if name == "ulfm" {
            configs::ULFM.to_vec()
        } else if name == "python" {
            configs::PYTHON.to_vec()
        } else if name == "placement" {
            Config::ALL
                .into_iter()
                .filter(|c| c.kind() == Kind::Placement)
                .collect()
        } else {
            Config::ALL
                .into_iter()
                .filter(|c| c.name() == name && c.kind() != Kind::Startup)
                .collect()
        };
        if picked.is_empty() {
            return Err(format!("unknown configuration `{name}`"));
        }
        configs.extend(picked);
    }
    configs.sort();
    configs.dedup();
    Ok(ConfigList(configs))
}

/// Parsed command line.
#[derive(Debug, Clone)]
pub struct Options {
    pub sizes: Vec<u32>,
    pub reps: u32,
    /// Repetitions of the configurations the targets compare (see
    /// [`crate::plan`]).
    pub target_reps: u32,
    pub out: PathBuf,
    pub configs: Vec<Config>,
    pub startup_sizes: Vec<u32>,
    /// Rank counts of the placement rows (Intel MPI, MPICH; default none).
    pub placement_sizes: Vec<u32>,
    pub spawn_sizes: Vec<u32>,
    pub launch_sizes: Vec<u32>,
    pub group_sizes: Vec<u32>,
    pub ps_sizes: Vec<u32>,
    pub death_sizes: Vec<u32>,
    pub ulfm_sizes: Vec<u32>,
    pub python_sizes: Vec<u32>,
    pub nest_sizes: Vec<u32>,
    pub params: RunParams,
    /// `--profile`, and the core count it was sized from.
    pub profile: Option<(Profile, u32)>,
}

impl Options {
    /// The options of `args` (the arguments after the program name); the
    /// error is clap's, `--help` included (print it, exit with its code).
    pub fn from_args(args: &[OsString]) -> Result<Options, clap::Error> {
        let argv = std::iter::once(OsString::from("fastpmi-bench")).chain(args.iter().cloned());
        Cli::try_parse_from(argv).map(Options::from)
    }
}

impl From<Cli> for Options {
    /// Fills in the defaults that depend on `--quick`.
    fn from(c: Cli) -> Options {
        let quick = c.quick;
        let profile = c.profile;
        let mut o = Options {
            sizes: c.sizes.0,
            reps: c.reps,
            target_reps: c.target_reps,
            out: c.out,
            configs: c.configs.map_or_else(|| Config::ALL.to_vec(), |l| l.0),
            startup_sizes: c.startup_sizes.map_or_else(
                || {
                    if quick {
                        vec![16, 64]
                    } else {
                        vec![16, 64, 256]
                    }
                },
                |l| l.0,
            ),
            placement_sizes: c.placement_sizes.0,
            spawn_sizes: c.spawn_sizes.0,
            launch_sizes: c.launch_sizes.0,
            group_sizes: c.group_sizes.0,
            ps_sizes: c.ps_sizes.0,
            death_sizes: c.death_sizes.0,
            ulfm_sizes: c.ulfm_sizes.0,
            python_sizes: c.python_sizes.0,
            nest_sizes: c.nest_sizes.0,
            params: RunParams {
                timeout: Duration::from_secs(u64::from(c.timeout)),
                floor_iters: c.floor_iters.unwrap_or(if quick { 100 } else { 1000 }),
                hydra_ppn: c.hydra_ppn,
                fence_loop: c.fence_loop.unwrap_or(if quick { 20 } else { 100 }),
            },
            profile: None,
        };
        if let Some(p) = profile {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
            o.apply_profile(p, cores);
        }
        o
    }
}

impl Options {
    /// Set the sizes and configurations of profile `p` for a machine of
    /// `cores` CPUs.
    pub fn apply_profile(&mut self, p: Profile, cores: u32) {
        match p {
            Profile::ManyCore => {
                let ns: Vec<u32> = MANY_CORE_FACTORS.iter().map(|f| f * cores).collect();
                let mut configs: Vec<Config> = configs::LAUNCH.to_vec();
                configs.extend(
                    Config::ALL
                        .into_iter()
                        .filter(|c| MANY_CORE_CONFIGS.contains(&c.name())),
                );
                configs.sort();
                self.configs = configs;
                self.sizes = ns.clone();
                self.launch_sizes = ns.clone();
                self.placement_sizes = ns;
                self.startup_sizes = vec![];
                self.spawn_sizes = vec![];
                self.group_sizes = vec![];
                self.ps_sizes = vec![];
                self.death_sizes = vec![];
                // Like the Open MPI placement rows, not part of the profile.
                self.ulfm_sizes = vec![];
                self.python_sizes = vec![];
                self.nest_sizes = vec![];
            }
        }
        self.profile = Some((p, cores));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::configs::placement;
    use clap::error::ErrorKind;

    /// None for `--help`.
    fn parse(args: &[&str]) -> Result<Option<Options>, String> {
        match Options::from_args(&args.iter().map(OsString::from).collect::<Vec<_>>()) {
            Ok(o) => Ok(Some(o)),
            Err(e) if e.kind() == ErrorKind::DisplayHelp => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn defaults_and_flags() {
        let o = parse(&[]).unwrap().unwrap();
        assert_eq!(o.sizes, [2, 16, 64, 256, 1024]);
        assert_eq!(o.reps, 3);
        assert_eq!(o.target_reps, 11);
        assert_eq!(o.configs.len(), Config::ALL.len());
        assert_eq!(o.startup_sizes, [16, 64, 256]);
        let o = parse(&[
            "--sizes",
            "64,2",
            "--quick",
            "--configs",
            "hydra,mpich-startup",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(o.sizes, [2, 64]);
        assert_eq!(o.startup_sizes, [16, 64]);
        assert_eq!(
            o.configs,
            [Config::Hydra, Config::MpichFastpmi, Config::MpichHydra]
        );
        assert!(parse(&["--configs", "nope"]).is_err());
        assert!(parse(&["--sizes", "0"]).is_err());
        assert!(parse(&["--reps"]).is_err());
        assert!(parse(&["--target-reps", "0"]).is_err());
        assert!(parse(&["--help"]).unwrap().is_none());
        let o = parse(&["--startup-sizes", "none"]).unwrap().unwrap();
        assert!(o.startup_sizes.is_empty());
        assert!(o.placement_sizes.is_empty());
        let o = parse(&["--configs", "placement", "--placement-sizes", "256,64"])
            .unwrap()
            .unwrap();
        assert_eq!(o.placement_sizes, [64, 256]);
        assert_eq!(o.configs.len(), placement::COUNT);
        let o = parse(&["--configs", "death", "--death-sizes", "1024,64"])
            .unwrap()
            .unwrap();
        assert_eq!(o.configs, [Config::DeathDetect]);
        assert_eq!(o.death_sizes, [64, 1024]);
        assert!(parse(&["--death-sizes", "none"])
            .unwrap()
            .unwrap()
            .death_sizes
            .is_empty());
        let o = parse(&["--configs", "ulfm", "--ulfm-sizes", "256,4"])
            .unwrap()
            .unwrap();
        assert_eq!(o.configs, [Config::UlfmFastpmi, Config::UlfmMpirun]);
        assert_eq!(o.ulfm_sizes, [4, 256]);
        let o = parse(&["--configs", "ompi5-ulfm@mpirun"]).unwrap().unwrap();
        assert_eq!(o.configs, [Config::UlfmMpirun]);
        assert!(parse(&["--ulfm-sizes", "3"]).is_err());
        assert!(parse(&["--ulfm-sizes", "none"])
            .unwrap()
            .unwrap()
            .ulfm_sizes
            .is_empty());
        let o = parse(&["--configs", "python", "--python-sizes", "64,16"])
            .unwrap()
            .unwrap();
        assert_eq!(o.configs, [Config::PythonFastpmi, Config::PythonMpiexec]);
        assert_eq!(o.python_sizes, [16, 64]);
        assert!(parse(&["--python-sizes", "none"])
            .unwrap()
            .unwrap()
            .python_sizes
            .is_empty());
    }

    #[test]
    fn quick_defaults_and_the_last_flag_win() {
        let o = parse(&[]).unwrap().unwrap();
        assert_eq!((o.params.floor_iters, o.params.fence_loop), (1000, 100));
        assert_eq!(o.params.timeout, Duration::from_secs(120));
        assert_eq!(o.params.hydra_ppn, 128);
        assert_eq!(o.spawn_sizes, [1, 16, 64]);
        assert_eq!(o.launch_sizes, [1, 16, 256, 1024]);
        assert_eq!(
            (&o.group_sizes[..], &o.ps_sizes[..]),
            (&[256][..], &[1024][..])
        );
        assert_eq!(o.death_sizes, [64, 256, 1024]);
        assert_eq!(o.ulfm_sizes, [64]);
        assert_eq!(o.python_sizes, [256]);
        assert_eq!(o.out, PathBuf::from("results"));
        let o = parse(&["--quick", "--fence-loop", "0", "--reps", "2", "--reps", "5"])
            .unwrap()
            .unwrap();
        assert_eq!((o.params.floor_iters, o.params.fence_loop), (100, 0));
        assert_eq!(o.reps, 5);
        let o = parse(&[
            "--spawn-sizes",
            "none",
            "--ps-sizes",
            "",
            "--sizes",
            " 4,2,4",
        ])
        .unwrap()
        .unwrap();
        assert!(o.spawn_sizes.is_empty() && o.ps_sizes.is_empty());
        assert_eq!(o.sizes, [2, 4]);
        assert!(parse(&["--sizes", "none"]).is_err());
        assert!(parse(&["--fence-loop", "x"]).is_err());
        assert!(parse(&["--timeout", "0"]).is_err());
        assert!(parse(&["stray"]).is_err());
        assert!(parse(&["-h"]).unwrap().is_none());
    }

    #[test]
    fn many_core_profile_is_sized_from_the_cores() {
        let mut o = parse(&[]).unwrap().unwrap();
        o.apply_profile(Profile::ManyCore, 16);
        assert_eq!(o.sizes, [16, 64, 256, 1024]);
        assert_eq!(o.launch_sizes, o.sizes);
        assert_eq!(o.placement_sizes, o.sizes);
        assert!(o.startup_sizes.is_empty() && o.spawn_sizes.is_empty());
        assert!(o.group_sizes.is_empty() && o.ps_sizes.is_empty());
        assert!(o.death_sizes.is_empty() && o.ulfm_sizes.is_empty());
        assert!(o.python_sizes.is_empty());
        let names: Vec<&str> = o.configs.iter().map(|c| c.name()).collect();
        for want in MANY_CORE_CONFIGS {
            assert!(names.contains(&want), "{want} in {names:?}");
        }
        for c in configs::LAUNCH {
            assert!(o.configs.contains(&c), "{c:?}");
        }
        assert_eq!(names.len(), MANY_CORE_CONFIGS.len() + configs::LAUNCH.len());
        assert_eq!(o.profile, Some((Profile::ManyCore, 16)));
        let o = parse(&["--profile", "many-core"]).unwrap().unwrap();
        let cores = std::thread::available_parallelism().unwrap().get() as u32;
        assert_eq!(o.sizes, [cores, 4 * cores, 16 * cores, 64 * cores]);
        assert!(parse(&["--profile", "many-core", "--sizes", "2"]).is_err());
        assert!(parse(&["--profile", "few-core"]).is_err());
    }

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
