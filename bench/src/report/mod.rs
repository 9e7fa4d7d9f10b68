//! `bench.md` (tables, machine, targets) and `raw.csv` (every run): the
//! core configurations' sections here and in the submodules, the
//! families' from their modules.

use std::fmt::Write as _;
use std::time::SystemTime;

use crate::cells::{cell, md_escape, median, runs_cell, Context};
use crate::cli::Options;
use crate::configs::{placement, Availability, Config, Kind};
use crate::record::{summarize, Record, Status, METRICS};
use crate::suite::Suite;
use crate::{deaths, groups, launch, nested, ps, python, ulfm};

mod memory;
mod mpi;
mod targets;

pub use targets::target_lines;

// ---------------------------------------------------------------------------
// raw.csv
// ---------------------------------------------------------------------------

/// One record per line: newlines in an error text become " | ".
fn one_line(s: &str) -> String {
    s.replace('\n', " | ")
}

/// raw.csv's dialect, the csv crate's defaults: comma-separated, `\n` after
/// every record, a field quoted only when it holds a comma, a quote or a
/// line break (`\r` too), quotes inside doubled.
fn csv_writer() -> csv::Writer<Vec<u8>> {
    csv::WriterBuilder::new().from_writer(Vec::new())
}

pub const CSV_FIXED: &[&str] = &["config", "n", "rep", "status", "wall_s", "transport"];

/// Every run, one row each, in the order they ran.
pub fn csv(records: &[Record]) -> Result<String, String> {
    let err = |e: csv::Error| format!("raw.csv: {e}");
    let mut w = csv_writer();
    let header: Vec<&str> = CSV_FIXED
        .iter()
        .chain(METRICS)
        .chain(ps::METRICS)
        .chain(deaths::METRICS)
        .chain(ulfm::METRICS)
        .copied()
        .chain(["launcher_peak_kb", "launcher_peak_detail", "error"])
        .collect();
    w.write_record(&header).map_err(err)?;
    for r in records {
        let mut row = vec![
            r.config.name().to_string(),
            r.n.to_string(),
            (r.rep + 1).to_string(),
            r.status.as_str().to_string(),
            r.wall_s.map(|w| format!("{w:.6}")).unwrap_or_default(),
            r.transport.clone().unwrap_or_default(),
        ];
        row.extend(
            METRICS
                .iter()
                .chain(ps::METRICS)
                .chain(deaths::METRICS)
                .chain(ulfm::METRICS)
                .map(|k| r.get(k).map(|v| v.to_string()).unwrap_or_default()),
        );
        row.push(
            r.mem
                .as_ref()
                .map(|m| m.total_kb.to_string())
                .unwrap_or_default(),
        );
        row.push(r.mem.as_ref().map(|m| m.detail.clone()).unwrap_or_default());
        row.push(r.error.clone());
        w.write_record(row.iter().map(|f| one_line(f)))
            .map_err(err)?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| format!("raw.csv: {}", e.error()))?;
    String::from_utf8(bytes).map_err(|e| format!("raw.csv: {e}"))
}

// ---------------------------------------------------------------------------
// Formatting helpers
// ---------------------------------------------------------------------------

/// `YYYY-MM-DD HH:MM UTC` without a date crate (days-to-civil algorithm).
pub fn utc(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, sod) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        sod / 3600,
        (sod % 3600) / 60
    )
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./,=@:+".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn command_line() -> String {
    std::env::args()
        .map(|a| shell_quote(&a))
        .collect::<Vec<_>>()
        .join(" ")
}

fn machine() -> String {
    let nproc = std::thread::available_parallelism()
        .map(|n| n.get().to_string())
        .unwrap_or_else(|_| "?".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "?".into());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| crate::rank::status_field_kb(&s, "MemTotal:"))
        .map(|kb| format!(", {:.0} GiB RAM", kb as f64 / 1024.0 / 1024.0))
        .unwrap_or_default();
    format!("{nproc} CPUs (nproc), {cpu}{mem}, Linux {kernel}")
}

/// A command for the report: absolute paths shortened to their file name.
fn short_command(suite: &Suite, c: Config, n: u32, opts: &Options) -> String {
    let spec = suite.spec(c, n, &opts.params);
    spec.display()
        .split(' ')
        .map(|t| {
            // `PATH=/abs/dir` too: no path of the measuring machine in the report.
            let (key, value) = match t.split_once("=/") {
                Some((k, v)) => (format!("{k}="), format!("/{v}")),
                None => (String::new(), t.to_string()),
            };
            if value.starts_with('/') {
                key + value.rsplit('/').next().unwrap_or(&value)
            } else {
                t.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------
// bench.md
// ---------------------------------------------------------------------------

pub fn markdown(ctx: &Context, suite: &Suite) -> String {
    let opts = ctx.opts;
    let mut md = String::new();
    let w = &mut md;
    let _ = writeln!(w, "# fastpmi benchmark\n");
    let _ = writeln!(w, "- date: {}", utc(ctx.started));
    let via = if std::env::var_os("CARGO").is_some() {
        " (run by cargo)"
    } else {
        ""
    };
    let _ = writeln!(w, "- command: `{}`{via}", command_line());
    let _ = writeln!(w, "- machine: {}", machine());
    if let Some((crate::cli::Profile::ManyCore, cores)) = opts.profile {
        let ns: Vec<String> = opts.sizes.iter().map(u32::to_string).collect();
        let _ = writeln!(
            w,
            "- profile: many-core, N = {} ({cores} cores x 1, 4, 16, 64)",
            ns.join(", ")
        );
    }
    let load: Vec<String> = ["at start", "before the MPICH startup jobs", "at end"]
        .iter()
        .zip(&ctx.load)
        .filter_map(|(when, l)| l.as_ref().map(|l| format!("{when} {l}")))
        .collect();
    let _ = writeln!(
        w,
        "- load average (1 min): {} (the machine may be shared: read spreads with that in mind; the MPICH startup jobs busy-poll and raise the load themselves)",
        load.join(", ")
    );
    let _ = writeln!(w, "- software: {}", suite.tools.versions.join("; "));
    let _ = writeln!(
        w,
        "- {} repetition(s), interleaved (for each N, for each repetition, every configuration once); {} of the configurations the fence and start-up targets compare ({}; {}x that for start-ups of at most {} ranks), the extra ones interleaved among them; timeout {} s per run; futex floor {} fences per run; fence loop {} fences per Rust-client run",
        opts.reps,
        crate::plan::target_reps(opts),
        crate::plan::TARGET_COMPARED,
        crate::plan::SHORT_LAUNCH_FACTOR,
        crate::plan::SHORT_LAUNCH,
        opts.params.timeout.as_secs(),
        opts.params.floor_iters,
        opts.params.fence_loop
    );
    let _ = writeln!(
        w,
        "- harness run time: {:.0} s\n",
        ctx.elapsed.as_secs_f64()
    );

    // Configurations.
    let show_n = *opts.sizes.last().unwrap_or(&2);
    let _ = writeln!(w, "## Configurations\n");
    let _ = writeln!(
        w,
        "| configuration | status | what runs | command (at N={show_n}) |"
    );
    let _ = writeln!(w, "|---|---|---|---|");
    for (c, a) in ctx.availability {
        let status = match a {
            Availability::Present => "present".to_string(),
            Availability::Missing(why) => format!("missing: {}", md_escape(why)),
            Availability::NotSelected(why) => why.to_string(),
        };
        let cmd = match a {
            Availability::Present => {
                let n = if c.kind() == Kind::Startup {
                    *opts.startup_sizes.last().unwrap_or(&show_n)
                } else if c.kind() == Kind::Placement {
                    *opts.placement_sizes.last().unwrap_or(&show_n)
                } else if c.kind() == Kind::Ulfm {
                    *opts.ulfm_sizes.last().unwrap_or(&show_n)
                } else if c.kind() == Kind::Python {
                    *opts.python_sizes.last().unwrap_or(&show_n)
                } else {
                    show_n
                };
                format!("`{}`", short_command(suite, *c, n, opts))
            }
            _ => "—".into(),
        };
        let _ = writeln!(w, "| {c} | {status} | {} | {cmd} |", c.description());
    }

    // Targets.
    let _ = writeln!(w, "\n## Targets\n");
    for l in target_lines(ctx) {
        let _ = writeln!(w, "- {l}");
    }

    // Exchange table.
    let _ = writeln!(w, "\n## PMI exchange\n");
    let _ = writeln!(
        w,
        "Every rank puts one 100-byte value, fences, gets and verifies every rank's value, fences again. \
         Cells: median over the ok runs (min–max over runs). Rank-0 figures unless marked slowest (the \
         maximum over ranks).\n"
    );
    let _ = writeln!(
        w,
        "| N | configuration | runs | wall s | init ms | put µs | fence ms | fence2 ms | get-all ms (rank 0) | get-all ms (slowest) | per get µs | fence ms (steady loop) |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    for &n in &opts.sizes {
        for c in Config::ALL
            .into_iter()
            .filter(|c| matches!(c.kind(), Kind::Exchange | Kind::Floor))
        {
            let s = |k: &'static str| summarize(ctx.records, c, n, move |r| r.get(k));
            let floor = c.kind() == Kind::Floor;
            let wall = if floor {
                None
            } else {
                summarize(ctx.records, c, n, |r| r.wall_s)
            };
            let _ = writeln!(
                w,
                "| {n} | {c} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                runs_cell(ctx, c, n),
                cell(wall, 1.0),
                cell(s("init_us"), 1e-3),
                cell(s("put_us"), 1.0),
                cell(s("fence_us"), 1e-3),
                cell(s("fence2_us"), 1e-3),
                cell(s("getall_us"), 1e-3),
                cell(s("max_getall_us"), 1e-3),
                cell(s("per_get_us"), 1.0),
                cell(s("fence_loop_us"), 1e-3),
            );
        }
    }
    let _ = writeln!(w, "\n![fence and get-all against N](bench.svg)\n");
    let _ = writeln!(w, "How to read it:\n");
    for note in [
        "**wall**: launch to the launcher's exit, measured by the harness; it includes starting and reaping the ranks and the untimed third round that gathers the slowest-rank figures.",
        "**fence** is rank 0's first fence of the exchange. It also absorbs launch skew (rank 0 starts first and waits for the last rank to start), so it is an upper bound. **fence2** is rank 0's second fence (nothing new put); it still waits for the slowest rank to finish its get-all, which at hundreds of ranks on two cores is most of it.",
        "**fence (steady loop)**: after the exchange and the gather round, the Rust rank program runs one untimed fence, then K back-to-back fences, then one more untimed fence (so that no rank finalizes and exits while rank 0's clock runs), and rank 0 reports the mean (K in the command line above, `--fence-loop`); every rank is ready, so this is the cost of a fence itself. The futex floor's per-fence time (a bare futex barrier over N forked processes, same method) is in this column too. This is the figure the fence targets and the plot use (fence2 when `--fence-loop 0`). The C program (slurm-pmi2@fastpmi) has no loop.",
        "The loop adds K fences to each Rust-client job, so **wall** of those configurations includes them (rank 0's share is K × the loop figure); slurm-pmi2@fastpmi's wall does not. The socket-vs-Hydra target compares rank 0's exchange (put + fence + get-all + fence2), not wall.",
        "Under **Hydra** the PMI-2 fence is not a barrier (its gets wait for the data instead), so Hydra's fence figures are not comparable; the wait shows up in its get-all.",
        "**per get**: rank 0's get-all divided by N.",
        "A configuration **missing** here did not run, for the reason given; a run that failed or timed out is listed under Failures, never dropped.",
    ] {
        let _ = writeln!(w, "- {note}");
    }
    let _ = writeln!(
        w,
        "- Hydra runs with ⌈N/{}⌉ proxies (`-launcher fork -hosts 127.0.0.1:k,127.0.0.2:k,...`): one proxy per distinct host name, because Hydra 4.0.2 deadlocks past ~224 ranks behind one proxy. With more than one proxy Hydra describes the job as several nodes (PMI_process_mapping), which the exchange does not use.",
        opts.params.hydra_ppn
    );

    mpi::startup_section(ctx, w);
    mpi::spawn_section(ctx, w);
    launch::section(ctx, w);
    groups::section(ctx, w);
    ps::section(ctx, w);
    deaths::section(ctx, w);
    ulfm::section(ctx, w);
    python::section(ctx, &suite.python, w);
    nested::section(ctx, w);

    placement_section(ctx, w);
    memory::section(ctx, w);

    // Failures.
    let failed: Vec<&Record> = ctx
        .records
        .iter()
        .filter(|r| matches!(r.status, Status::Failed | Status::TimedOut))
        .collect();
    let _ = writeln!(w, "\n## Failures\n");
    if failed.is_empty() {
        let _ = writeln!(w, "No run failed or timed out.");
    } else {
        for r in failed {
            let _ = writeln!(
                w,
                "- N={} {} rep {}: {}\n\n  ```\n{}\n  ```",
                r.n,
                r.config,
                r.rep + 1,
                r.status.as_str(),
                r.error
                    .lines()
                    .map(|l| format!("  {l}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
    }
    let wrong = ctx
        .records
        .iter()
        .filter(|r| matches!(r.status, Status::WrongTransport | Status::Skipped))
        .count();
    if wrong > 0 {
        let _ = writeln!(
            w,
            "\n{wrong} run(s) ran on another transport than their configuration is about, or were not repeated (after a run on the wrong transport, or after a run that reached the time-out); they count as missing above and are in raw.csv."
        );
    }
    md
}

/// Whole MPI jobs under fastpmi (each PMI mode, default binding and
/// `-bind-to none`) against each stack's own launcher.
fn placement_section(ctx: &Context, w: &mut String) {
    let opts = ctx.opts;
    let _ = writeln!(w, "\n## MPI stacks: fastpmi vs their own launchers\n");
    let _ = writeln!(
        w,
        "Whole-job wall time (launch to the launcher's exit) of `bench/c/mpi_hello.c` and `bench/c/mpi_allreduce.c`, seconds: median (min–max); the ratio is to the same program under the stack's own launcher in the same run. fastpmi's default binding is one core per rank, wrapping around past the core count (docs/placement.md); `-bind-to none` and `-bind-to core` rows name theirs. Debian MPICH's own launcher is `mpiexec.hydra -n N` with one proxy, as a user on one node runs it, so MPICH sees one node under both launchers; the `hydra-proxies` row is Hydra with at most {} ranks per proxy (the PMI-exchange family's workaround, see above; MPICH then sees several nodes), compared with that one-proxy run.\n",
        opts.params.hydra_ppn
    );
    if opts.placement_sizes.is_empty() {
        let _ = writeln!(w, "Not run (no `--placement-sizes`).");
        return;
    }
    let _ = writeln!(w, "| N | configuration | runs | wall s | vs own launcher |");
    let _ = writeln!(w, "|---|---|---|---|---|");
    for &n in &opts.placement_sizes {
        for i in 0..placement::COUNT {
            let c = Config::Placement(i as u8);
            let wall = |r: &Record| r.wall_s;
            let ratio = placement::baseline(i)
                .and_then(|b| {
                    let f = median(ctx, c, n, wall)?;
                    let h = median(ctx, Config::Placement(b as u8), n, wall)?;
                    (h > 0.0).then(|| format!("{:.2}x", f / h))
                })
                .unwrap_or_else(|| "—".into());
            let _ = writeln!(
                w,
                "| {n} | {c} | {} | {} | {ratio} |",
                runs_cell(ctx, c, n),
                cell(summarize(ctx.records, c, n, wall), 1.0)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cells::num;
    use std::time::Duration;

    #[test]
    fn dates() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400 + 3600 + 120);
        assert_eq!(utc(t), "2000-02-29 01:02 UTC");
        assert_eq!(utc(SystemTime::UNIX_EPOCH), "1970-01-01 00:00 UTC");
    }

    /// One field as raw.csv writes it.
    fn csv_field(s: &str) -> String {
        let mut w = csv_writer();
        w.write_record([one_line(s)]).unwrap();
        let mut field = String::from_utf8(w.into_inner().unwrap()).unwrap();
        assert_eq!(field.pop(), Some('\n'));
        field
    }

    #[test]
    fn numbers_and_csv() {
        assert_eq!(num(1234.5), "1234");
        assert_eq!(num(12.345), "12.3");
        assert_eq!(num(1.2345), "1.23");
        assert_eq!(num(0.12345), "0.123");
        assert_eq!(num(0.0012345), "0.0012");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"x\"\nnext"), "\"say \"\"x\"\" | next\"");
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(shell_quote("--sizes"), "--sizes");
        assert_eq!(shell_quote("a b"), "'a b'");
    }
}
