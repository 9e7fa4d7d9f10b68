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
//!
//! Imports run one way, each module only using those listed before it:
//!
//! * [`rank`] (the rank program), [`proc`] (running one job);
//! * [`configs`] (the configurations, their kinds and families, the
//!   placement cases, the per-run knobs), [`cli`] (the command line);
//! * [`tools`] (the launchers and the core configurations' programs),
//!   [`record`] (one run's result, summaries), [`cells`] (what the report's
//!   sections share), [`plan`] (the order of the runs);
//! * the families: [`launch`], [`groups`], [`ps`], [`deaths`], [`ulfm`], [`python`], [`placement`], [`nested`] (their
//!   programs, commands, checks and report sections);
//! * [`suite`] (tools, command and judging over every configuration),
//!   [`plot`], [`report`];
//! * `main` (this file): the run itself.

mod cells;
mod cli;
mod configs;
mod deaths;
mod groups;
mod launch;
mod nested;
mod placement;
mod plan;
mod plot;
mod proc;
mod ps;
mod python;
mod rank;
mod record;
mod report;
mod suite;
mod tools;
mod ulfm;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Instant, SystemTime};

use cli::Options;
use configs::{Availability, Config, Kind};
use record::{Record, Status};
use suite::Suite;

/// Entry point of the `fastpmi-bench` binary.
fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|a| a == "__rank") {
        return ExitCode::from(rank::main().clamp(0, 255) as u8);
    }
    if args.first().is_some_and(|a| a == "__group") {
        return ExitCode::from(groups::rank_main().clamp(0, 255) as u8);
    }
    if args.first().is_some_and(|a| a == "__death") {
        return ExitCode::from(deaths::rank_main().clamp(0, 255) as u8);
    }
    let opts = match Options::from_args(&args) {
        Ok(opts) => opts,
        Err(e) => {
            // `--help` (stdout, 0) or a usage error (stderr, 2).
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    match run(&opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fastpmi-bench: {e}");
            ExitCode::from(1)
        }
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// Why `c` is left out of this run by the command line, or None.
fn not_run(opts: &Options, c: Config) -> Option<&'static str> {
    let sizes = |k: Kind| match k {
        Kind::Startup => Some((&opts.startup_sizes, "not run (--startup-sizes none)")),
        Kind::Placement => Some((&opts.placement_sizes, "not run (no --placement-sizes)")),
        Kind::Spawn => Some((&opts.spawn_sizes, "not run (--spawn-sizes none)")),
        Kind::Launch => Some((&opts.launch_sizes, "not run (--launch-sizes none)")),
        Kind::Group => Some((&opts.group_sizes, "not run (--group-sizes none)")),
        Kind::Ps => Some((&opts.ps_sizes, "not run (--ps-sizes none)")),
        Kind::Death => Some((&opts.death_sizes, "not run (--death-sizes none)")),
        Kind::Ulfm => Some((&opts.ulfm_sizes, "not run (--ulfm-sizes none)")),
        Kind::Python => Some((&opts.python_sizes, "not run (--python-sizes none)")),
        Kind::Exchange | Kind::Floor | Kind::Nested => None,
    };
    if !opts.configs.contains(&c) {
        return Some("not selected (--configs)");
    }
    match sizes(c.kind()) {
        Some((s, why)) if s.is_empty() => Some(why),
        _ => None,
    }
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
    // Only what will run is found or built (the Python rows' venv and
    // wheel take minutes the first time).
    let will_run: Vec<Config> = opts
        .configs
        .iter()
        .copied()
        .filter(|&c| not_run(opts, c).is_none())
        .collect();
    let suite = Suite::prepare(&build_dir, &will_run)?;
    proc::become_subreaper();
    let _ = std::fs::write(opts.out.join(".gitignore"), ".build/\n");

    let availability: Vec<(Config, Availability)> = Config::ALL
        .into_iter()
        .map(|c| {
            let a = if let Some(why) = not_run(opts, c) {
                Availability::NotSelected(why)
            } else if let Some(why) = suite.missing(c) {
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
        let mut spec = suite.spec(case.config, case.n, &opts.params);
        if case.config.kind() == Kind::Ulfm {
            // Their limit follows their own runs so far (a hang of
            // `mpirun --with-ft ulfm` costs little, see `ulfm`).
            spec.timeout = ulfm::limit(&records, case.config, case.n, spec.timeout);
        }
        let outcome = proc::run(&spec);
        proc::reap_orphans();
        let rec = suite::judge(
            case.config,
            case.n,
            case.rep,
            &outcome,
            spec.timeout.as_secs(),
        );
        let note = match rec.status {
            Status::Ok => String::new(),
            s => format!(" {}", s.as_str()),
        };
        let w = outcome.wall.as_secs_f64();
        let took = if w < 1.0 {
            format!("{} ms", cells::num(w * 1e3))
        } else {
            format!("{w:.1} s")
        };
        eprintln!("{took}{note}");
        records.push(rec);
    }

    let load_end = load_average();
    let ctx = cells::Context {
        opts,
        availability: &availability,
        records: &records,
        started,
        elapsed: t_run.elapsed(),
        load: [Some(load_start), load_mid, Some(load_end)],
    };
    let csv = report::csv(&records)?;
    write(opts, "raw.csv", &csv)?;
    let svg = plot::svg(
        &records,
        &present,
        &opts.sizes,
        &opts.launch_sizes,
        opts.params.fence_loop > 0,
    )?;
    write(opts, "bench.svg", &svg)?;
    let md = report::markdown(&ctx, &suite);
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
