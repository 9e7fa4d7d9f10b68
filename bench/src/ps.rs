//! `fastpmi ps` against a running job (issue 11): the steady shared-memory
//! fence loop of an N-rank job (default 1024) alone, and with `fastpmi ps
//! PID --json` run every 100 ms for the whole job, interleaved in one
//! harness run. The polled runs also give the whole `ps` command's latency
//! (process start included), answered while the ranks sit in fences.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use super::configs::{Config, RunParams, Tools};
use super::proc::{MemProbe, Outcome, Poll, Spec};
use super::rank::FENCE_LOOP_ENV;
use super::record::{summarize, Record, Summary};
use super::report::{cell, runs_cell, Context};

/// The configurations of this family.
pub const CONFIGS: [Config; 2] = [Config::PsQuiet, Config::PsPolled];

/// Back-to-back fences per run: long enough for dozens of polls.
const FENCES: u32 = 1000;
/// How often `fastpmi ps` runs during a polled job.
const PERIOD: Duration = Duration::from_millis(100);

/// What the configurations need.
pub fn needs(t: &Tools, _c: Config) -> Vec<&Result<PathBuf, String>> {
    vec![&t.fastpmi]
}

/// `fastpmi -n N fastpmi-bench __rank` with a long fence loop; polled:
/// `fastpmi ps PID --json` every 100 ms beside it.
pub fn spec(t: &Tools, c: Config, n: u32, p: &RunParams) -> Spec {
    let fastpmi = t.fastpmi.clone().unwrap_or_default();
    Spec {
        program: fastpmi.clone(),
        args: vec![
            "-n".into(),
            OsString::from(n.to_string()),
            t.rank_exe.clone().into_os_string(),
            "__rank".into(),
        ],
        env_set: vec![(FENCE_LOOP_ENV.into(), FENCES.to_string().into())],
        env_remove: vec!["FASTPMI_TRANSPORT".into()],
        cwd: None,
        timeout: p.timeout,
        mem: MemProbe::None,
        poll: (c == Config::PsPolled).then(|| Poll {
            program: fastpmi,
            args: vec!["ps".into(), "{pid}".into(), "--json".into()],
            period: PERIOD,
        }),
    }
}

/// After the exchange line was judged: a polled run counts only if `ps`
/// answered at least once; its latencies go into the record.
pub fn judge(c: Config, o: &Outcome, r: &mut Record) -> Result<(), String> {
    if c != Config::PsPolled {
        return Ok(());
    }
    let ok: Vec<f64> = o.polls.iter().filter(|p| p.ok).map(|p| p.ms).collect();
    r.metrics.insert("ps_count".into(), ok.len() as f64);
    r.metrics
        .insert("ps_failed".into(), (o.polls.len() - ok.len()) as f64);
    let s = Summary::of(ok.iter().copied()).ok_or_else(|| {
        format!(
            "fastpmi ps never answered ({} attempts during the job)",
            o.polls.len()
        )
    })?;
    r.metrics.insert("ps_median_ms".into(), s.median);
    r.metrics.insert("ps_max_ms".into(), s.max);
    Ok(())
}

fn fence_loop(ctx: &Context, c: Config, n: u32) -> Option<Summary> {
    summarize(ctx.records, c, n, |r| r.get("fence_loop_us"))
}

/// Targets: the fence loop with `ps` within noise of the loop without (the
/// polled median inside the quiet runs' range, or at most 1.05x), and every
/// `ps` answer within 100 ms.
pub fn target_lines(ctx: &Context) -> Vec<String> {
    let mut out = Vec::new();
    for &n in &ctx.opts.ps_sizes {
        let what = format!(
            "N={n} steady fence with `fastpmi ps` every 100 ms vs without (target: within noise)"
        );
        out.push(
            match (
                fence_loop(ctx, Config::PsQuiet, n),
                fence_loop(ctx, Config::PsPolled, n),
            ) {
                (Some(q), Some(p)) => {
                    let ok = p.median <= q.max || p.median <= 1.05 * q.median;
                    format!(
                        "{what}: {} ({:.2}x; without: {:.2}–{:.2} ms)",
                        if ok { "met" } else { "missed" },
                        p.median / q.median,
                        q.min / 1e3,
                        q.max / 1e3
                    )
                }
                _ => format!("{what}: missed (not measured)"),
            },
        );
        let worst = summarize(ctx.records, Config::PsPolled, n, |r| r.get("ps_max_ms"));
        out.push(match worst {
            Some(w) => format!(
                "N={n} `fastpmi ps` answered within 100 ms, worst answer of all polled runs: {} ({:.0} ms)",
                if w.max <= 100.0 { "met" } else { "missed" },
                w.max
            ),
            None => format!("N={n} `fastpmi ps` answered within 100 ms: missed (not measured)"),
        });
    }
    out
}

/// The report's section.
pub fn section(ctx: &Context, w: &mut String) {
    let _ = writeln!(w, "\n## fastpmi ps during a job\n");
    let _ = writeln!(
        w,
        "The Rust rank program's exchange, then {FENCES} back-to-back shared-memory fences (rank 0's mean per fence), alone and with `fastpmi ps PID --json` run every {} ms for the whole job; `ps` figures are whole commands (process start included), ms over all answers of a run, then median (min–max) over runs.\n",
        PERIOD.as_millis()
    );
    if ctx.opts.ps_sizes.is_empty() {
        let _ = writeln!(w, "Not run (`--ps-sizes none`).");
        return;
    }
    let _ = writeln!(
        w,
        "| N | configuration | runs | fence ms (steady) | ps answers per run | ps median ms | ps worst ms |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|---|");
    for &n in &ctx.opts.ps_sizes {
        for c in CONFIGS {
            let m = |k: &'static str| summarize(ctx.records, c, n, move |r| r.get(k));
            let polled = c == Config::PsPolled;
            let _ = writeln!(
                w,
                "| {n} | {c} | {} | {} | {} | {} | {} |",
                runs_cell(ctx, c, n),
                cell(fence_loop(ctx, c, n), 1e-3),
                if polled {
                    cell(m("ps_count"), 1.0)
                } else {
                    "—".into()
                },
                if polled {
                    cell(m("ps_median_ms"), 1.0)
                } else {
                    "—".into()
                },
                if polled {
                    cell(m("ps_max_ms"), 1.0)
                } else {
                    "—".into()
                },
            );
        }
    }
}
