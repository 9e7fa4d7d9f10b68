//! `fastpmi-bench`: the benchmark harness.
//!
//! One run measures, side by side and interleaved (for each N, for each
//! repetition, every configuration once, so that drift on a shared machine
//! hits all of them alike):
//!
//! * the business-card exchange (put one ~100-byte value, fence, get and
//!   verify every rank's, fence) under fastpmi's shared-memory path, its
//!   socket path, Hydra, and Slurm's libpmi2 on fastpmi, beside the futex
//!   barrier floor of the machine;
//! * MPICH startup (`MPI_Init` + `MPI_Barrier` + `MPI_Finalize`) under
//!   fastpmi and Hydra;
//! * the launcher's peak memory and what the client adds to each rank.
//!
//! It writes `bench.md`, `bench.svg` and `raw.csv` into `--out`. The Rust
//! rank program is this binary itself (`fastpmi-bench __rank`, see
//! [`rank`]).

mod configs;
mod groups;
mod launch;
mod placement;
mod plan;
mod plot;
mod proc;
mod ps;
mod rank;
mod record;
mod report;

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use configs::{Config, Kind, RunParams, Tools};
use record::{Record, Status};

pub const USAGE: &str = "\
usage: fastpmi-bench [--sizes 2,16,64,256,1024] [--reps 3] [--target-reps 11]
                     [--out results]
                     [--configs LIST] [--startup-sizes 16,64,256] [--quick]
                     [--timeout 120] [--floor-iters N] [--fence-loop K]
                     [--hydra-ppn 128] [--spawn-sizes 1,16,64]

Measures PMI put/get/fence (a business-card exchange) under fastpmi's
shared-memory path, fastpmi's socket path, Hydra and Slurm's libpmi2 on
fastpmi beside a futex barrier floor, plus MPICH startup and launcher memory.
Writes bench.md, bench.svg and raw.csv into --out. Build first with
`cargo build --release --workspace` (fastpmi must sit next to fastpmi-bench).

  --sizes LIST          rank counts of the exchange (default 2,16,64,256,1024)
  --reps N              repetitions of every case (default 3)
  --target-reps N       repetitions of the configurations whose medians the
                        fence and start-up targets compare (fastpmi-shm,
                        fastpmi-shm-yields0, futex-floor, the start-up
                        table): seconds a run, with a spread as large as the
                        targets' margins (default 11; never fewer than --reps)
  --out DIR             output directory (default results)
  --configs LIST        subset of: fastpmi-shm, fastpmi-socket, hydra,
                        slurm-pmi2@fastpmi, futex-floor, mpich-startup
                        (default: all)
  --startup-sizes LIST  rank counts of the MPICH startup table
                        (default 16,64,256; 16,64 with --quick; `none` to skip)
  --quick               fewer floor iterations and loop fences, no 256-rank
                        MPICH startup
  --timeout SECS        per run; the launcher's process tree is killed after
                        it and the run recorded as failed (default 120)
  --floor-iters N       fences per futex-floor run (default 1000, quick 100)
  --fence-loop K        after the exchange, the Rust rank program runs K
                        back-to-back fences and reports rank 0's mean: the
                        steady-state fence compared with the futex floor
                        (default 100, quick 20; 0: off, compare fence2).
                        Fewer than ~100 mostly measure waking sleepers.
  --hydra-ppn K         at most K ranks per Hydra proxy (default 128: Hydra
                        4.0.2 deadlocks past ~224 ranks behind one proxy)
  --spawn-sizes LIST    children of the spawn-latency runs (MPI_Comm_spawn
                        from 2 ranks, MPICH 5 wheel, fastpmi vs its Hydra 5;
                        default 1,16,64; `none` to skip; configuration name
                        `spawn` selects both)
  --launch-sizes LIST   rank counts of the job start-up table: the
                        posix_spawn floor, fastpmi with a trivial program,
                        a minimal PMI-2 job on fastpmi's installed libpmi2
                        (shared memory; `make install` into --out/.build, or
                        FASTPMI_BENCH_CAPI_LIBDIR) and on Slurm's (socket),
                        Hydra (default 256,1024; `none` to skip;
                        configuration name `launch` selects them all)
  --group-sizes LIST    job sizes of the group-fence runs: a 64-member group
                        fence while the other ranks sleep, and the job's own
                        fence, against futex-floor at N=64 (default 256;
                        `none` to skip)
  --ps-sizes LIST       job sizes of the `fastpmi ps` runs: 1000 steady
                        fences alone and with `fastpmi ps PID --json` every
                        100 ms, and `ps` every 100 ms while N-1 ranks sit in
                        a fence for the last (configuration name `ps`;
                        default 1024; `none` to skip)
  --placement-sizes LIST
                        rank counts of the placement rows (default: none):
                        Intel MPI hello and allreduce under fastpmi in each
                        PMI mode and with -bind-to none and core vs Intel's
                        mpiexec.hydra; Debian MPICH and the MPICH 5 wheel
                        allreduce under fastpmi vs their Hydra (configuration
                        name `placement` selects only these)";

/// Parsed command line.
#[derive(Debug, Clone)]
pub struct Options {
    pub sizes: Vec<u32>,
    pub reps: u32,
    /// Repetitions of the configurations the targets compare (see
    /// [`plan`]).
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
    pub quick: bool,
    pub params: RunParams,
}

fn parse_list(flag: &str, s: &str) -> Result<Vec<u32>, String> {
    if s == "none" || s.is_empty() {
        return Ok(vec![]);
    }
    let mut v = Vec::new();
    for part in s.split(',') {
        match part.trim().parse::<u32>() {
            Ok(n) if n >= 1 => v.push(n),
            _ => return Err(format!("{flag} {s}: `{part}` is not a rank count >= 1")),
        }
    }
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

fn parse_num(flag: &str, s: &str) -> Result<u32, String> {
    s.parse::<u32>()
        .ok()
        .filter(|&n| n >= 1)
        .ok_or_else(|| format!("{flag} {s}: expected a number >= 1"))
}

impl Options {
    /// None for `--help`.
    pub fn parse(args: &[OsString]) -> Result<Option<Options>, String> {
        let mut sizes = vec![2, 16, 64, 256, 1024];
        let mut reps = 3;
        let mut target_reps = 11;
        let mut out = PathBuf::from("results");
        let mut configs: Vec<Config> = Config::ALL.to_vec();
        let mut startup: Option<Vec<u32>> = None;
        let mut spawn_sizes = vec![1, 16, 64];
        let mut launch_sizes = vec![256, 1024];
        let mut group_sizes = vec![256];
        let mut ps_sizes = vec![1024];
        let mut placement_sizes = vec![];
        let mut quick = false;
        let mut timeout = 120;
        let mut floor_iters: Option<u32> = None;
        let mut hydra_ppn = 128;
        let mut fence_loop: Option<u32> = None;
        let mut it = args.iter().map(|a| a.to_string_lossy().into_owned());
        while let Some(flag) = it.next() {
            let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "-h" | "--help" => return Ok(None),
                "--sizes" => sizes = parse_list(&flag, &value()?)?,
                "--reps" => reps = parse_num(&flag, &value()?)?,
                "--target-reps" => target_reps = parse_num(&flag, &value()?)?,
                "--out" => out = PathBuf::from(value()?),
                "--startup-sizes" => startup = Some(parse_list(&flag, &value()?)?),
                "--spawn-sizes" => spawn_sizes = parse_list(&flag, &value()?)?,
                "--launch-sizes" => launch_sizes = parse_list(&flag, &value()?)?,
                "--group-sizes" => group_sizes = parse_list(&flag, &value()?)?,
                "--ps-sizes" => ps_sizes = parse_list(&flag, &value()?)?,
                "--placement-sizes" => placement_sizes = parse_list(&flag, &value()?)?,
                "--quick" => quick = true,
                "--timeout" => timeout = parse_num(&flag, &value()?)?,
                "--floor-iters" => floor_iters = Some(parse_num(&flag, &value()?)?),
                "--hydra-ppn" => hydra_ppn = parse_num(&flag, &value()?)?,
                "--fence-loop" => {
                    let v = value()?;
                    fence_loop = Some(
                        v.parse()
                            .map_err(|_| format!("--fence-loop {v}: expected a number"))?,
                    );
                }
                "--configs" => {
                    configs = Vec::new();
                    for name in value()?.split(',').map(str::trim) {
                        let picked: Vec<Config> = if name == "mpich-startup" {
                            vec![Config::MpichFastpmi, Config::MpichHydra]
                        } else if name == "spawn" {
                            vec![Config::SpawnFastpmi, Config::SpawnHydra5]
                        } else if name == "launch" {
                            launch::CONFIGS.to_vec()
                        } else if name == "group" {
                            groups::CONFIGS.to_vec()
                        } else if name == "ps" {
                            ps::CONFIGS.to_vec()
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
                            return Err(format!("--configs: unknown configuration `{name}`"));
                        }
                        configs.extend(picked);
                    }
                    configs.sort();
                    configs.dedup();
                }
                other => return Err(format!("unknown argument `{other}` (see --help)")),
            }
        }
        if sizes.is_empty() {
            return Err("--sizes: no rank count".into());
        }
        let startup_sizes = startup.unwrap_or(if quick {
            vec![16, 64]
        } else {
            vec![16, 64, 256]
        });
        Ok(Some(Options {
            sizes,
            reps,
            target_reps,
            out,
            configs,
            startup_sizes,
            placement_sizes,
            spawn_sizes,
            launch_sizes,
            group_sizes,
            ps_sizes,
            quick,
            params: RunParams {
                timeout: Duration::from_secs(u64::from(timeout)),
                floor_iters: floor_iters.unwrap_or(if quick { 100 } else { 1000 }),
                hydra_ppn,
                fence_loop: fence_loop.unwrap_or(if quick { 20 } else { 100 }),
            },
        }))
    }
}

/// Entry point of the `fastpmi-bench` binary.
fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|a| a == "__rank") {
        return ExitCode::from(rank::main().clamp(0, 255) as u8);
    }
    if args.first().is_some_and(|a| a == "__group") {
        return ExitCode::from(groups::rank_main().clamp(0, 255) as u8);
    }
    match Options::parse(&args) {
        Ok(None) => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Ok(Some(opts)) => match run(&opts) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("fastpmi-bench: {e}");
                ExitCode::from(1)
            }
        },
        Err(e) => {
            eprintln!("fastpmi-bench: {e}");
            ExitCode::from(2)
        }
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// Whether the configuration was run, and if not why.
#[derive(Debug, Clone)]
pub enum Availability {
    Present,
    Missing(String),
    /// Left out on purpose; the text says by which option.
    NotSelected(&'static str),
}

fn run(opts: &Options) -> Result<(), String> {
    let t_run = Instant::now();
    let started = SystemTime::now();
    let load_start = load_average();
    std::fs::create_dir_all(&opts.out)
        .map_err(|e| format!("create {}: {e}", opts.out.display()))?;
    // Compiled helpers go to a hidden subdirectory that git ignores, so that
    // results/ can be committed with only the report in it.
    let build_dir = opts.out.join(".build");
    let tools = Tools::prepare(&build_dir, &opts.configs)?;
    proc::become_subreaper();
    let _ = std::fs::write(opts.out.join(".gitignore"), ".build/\n");

    let availability: Vec<(Config, Availability)> = Config::ALL
        .into_iter()
        .map(|c| {
            let a = if !opts.configs.contains(&c) {
                Availability::NotSelected("not selected (--configs)")
            } else if c.kind() == Kind::Startup && opts.startup_sizes.is_empty() {
                Availability::NotSelected("not run (--startup-sizes none)")
            } else if c.kind() == Kind::Placement && opts.placement_sizes.is_empty() {
                Availability::NotSelected("not run (no --placement-sizes)")
            } else if c.kind() == Kind::Spawn && opts.spawn_sizes.is_empty() {
                Availability::NotSelected("not run (--spawn-sizes none)")
            } else if c.kind() == Kind::Launch && opts.launch_sizes.is_empty() {
                Availability::NotSelected("not run (--launch-sizes none)")
            } else if c.kind() == Kind::Group && opts.group_sizes.is_empty() {
                Availability::NotSelected("not run (--group-sizes none)")
            } else if c.kind() == Kind::Ps && opts.ps_sizes.is_empty() {
                Availability::NotSelected("not run (--ps-sizes none)")
            } else if let Some(why) = tools.missing(c) {
                Availability::Missing(why)
            } else {
                Availability::Present
            };
            (c, a)
        })
        .collect();
    let present: Vec<Config> = availability
        .iter()
        .filter(|(_, a)| matches!(a, Availability::Present))
        .map(|(c, _)| *c)
        .collect();
    for (c, a) in &availability {
        if let Availability::Missing(why) = a {
            eprintln!("fastpmi-bench: {c}: missing: {why}");
        }
    }

    let cases = plan::plan(opts, &present);
    let total = cases.len();
    let mut records: Vec<Record> = Vec::with_capacity(total);
    let timeout_s = opts.params.timeout.as_secs();
    // Load average when the exchange cases are done, before the MPICH
    // startup jobs (which busy-poll and drive the load up themselves).
    let mut load_mid = None;
    for (i, case) in cases.iter().enumerate() {
        if case.config.kind() == Kind::Startup && load_mid.is_none() {
            load_mid = Some(load_average());
        }
        let head = format!(
            "[{}/{total}] N={} {} rep {}/{}",
            i + 1,
            case.n,
            case.config,
            case.rep + 1,
            case.of
        );
        if let Some((why, short)) = plan::skip(&records, case, timeout_s) {
            eprintln!("{head} ... skipped ({short})");
            records.push(Record::skipped(case.config, case.n, case.rep, &why));
            continue;
        }
        eprint!("{head} ... ");
        let _ = std::io::stderr().flush();
        let spec = tools.spec(case.config, case.n, &opts.params);
        let outcome = proc::run(&spec);
        proc::reap_orphans();
        let rec = record::judge(case.config, case.n, case.rep, &outcome, timeout_s);
        let note = match rec.status {
            Status::Ok => String::new(),
            s => format!(" {}", s.as_str()),
        };
        let w = outcome.wall.as_secs_f64();
        let took = if w < 1.0 {
            format!("{} ms", report::num(w * 1e3))
        } else {
            format!("{w:.1} s")
        };
        eprintln!("{took}{note}");
        records.push(rec);
    }

    let load_end = load_average();
    let ctx = report::Context {
        opts,
        tools: &tools,
        availability: &availability,
        records: &records,
        started,
        elapsed: t_run.elapsed(),
        load: [Some(load_start), load_mid, Some(load_end)],
    };
    let csv = report::csv(&records);
    write(opts, "raw.csv", &csv)?;
    let svg = plot::svg(
        &records,
        &present,
        &opts.sizes,
        &opts.launch_sizes,
        opts.params.fence_loop > 0,
    )?;
    write(opts, "bench.svg", &svg)?;
    let md = report::markdown(&ctx);
    write(opts, "bench.md", &md)?;
    for line in report::target_lines(&ctx) {
        println!("{line}");
    }
    println!(
        "fastpmi-bench: wrote {}/{{bench.md,bench.svg,raw.csv}} in {:.0} s",
        opts.out.display(),
        t_run.elapsed().as_secs_f64()
    );
    Ok(())
}

fn write(opts: &Options, name: &str, text: &str) -> Result<(), String> {
    let p = opts.out.join(name);
    std::fs::write(&p, text).map_err(|e| format!("write {}: {e}", p.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Option<Options>, String> {
        Options::parse(&args.iter().map(OsString::from).collect::<Vec<_>>())
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
    }
}
