//! The group fence (issue 14): a steady fence of a 64-member group inside a
//! larger job whose other ranks sleep, beside a fence of the whole job, both
//! from the same run of `fastpmi-bench __group`, against the futex floor at
//! 64 processes from the same harness run.
//!
//! The rank program (`__group`, Rust client, shared memory): every rank
//! fences once (so nothing is timed while ranks are still starting); ranks
//! 0..M construct a group, fence it 100 times untimed and K times timed,
//! destruct it, while the others wait in a job fence; then every rank runs
//! K/4 timed job fences. Rank 0 prints
//! `group_bench ok n=N members=M transport=T group_fence_us=G full_fence_us=F`.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use fastpmi_client::{Pmi, PmiError};

use crate::cells::{cell, runs_cell, Context};
use crate::configs::{Config, RunParams};
use crate::proc::{MemProbe, Outcome, Spec};
use crate::record::{summarize, Record};
use crate::tools::Tools;

/// Members of the group (the 64).
pub const MEMBERS: u32 = 64;
/// Timed group fences per run (the job-fence loop runs a quarter of it).
const ITERS_ENV: &str = "FASTPMI_BENCH_GROUP_ITERS";
const ITERS: u32 = 1000;

/// What the group configuration needs.
pub fn needs(t: &Tools, _c: Config) -> Vec<&Result<PathBuf, String>> {
    vec![&t.fastpmi]
}

/// `fastpmi -n N fastpmi-bench __group`.
pub fn spec(t: &Tools, n: u32, p: &RunParams) -> Spec {
    Spec {
        program: t.fastpmi.clone().unwrap_or_default(),
        args: vec![
            "-n".into(),
            OsString::from(n.to_string()),
            t.rank_exe.clone().into_os_string(),
            "__group".into(),
        ],
        env_set: vec![(ITERS_ENV.into(), ITERS.to_string().into())],
        env_remove: vec![fastpmi_codec::names::env::TRANSPORT.into()],
        cwd: None,
        timeout: p.timeout,
        mem: MemProbe::None,
        poll: None,
    }
}

/// Parse rank 0's line into the record, or say why the run does not count.
pub fn judge(n: u32, o: &Outcome, r: &mut Record) -> Result<(), String> {
    let line = o
        .stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("group_bench ok"))
        .ok_or("exit 0 but no \"group_bench ok\" line on stdout")?;
    let field = |k: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(k)?.strip_prefix('='))
    };
    if field("n") != Some(n.to_string().as_str()) {
        return Err(format!("result line for another job size: {line}"));
    }
    let transport = field("transport").unwrap_or("unreported");
    r.transport = Some(transport.to_string());
    if transport != "shm" {
        return Err(format!(
            "rank 0 reported transport={transport}, this configuration needs shm"
        ));
    }
    for k in ["group_fence_us", "full_fence_us"] {
        let v = field(k)
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| format!("no {k}= in {line}"))?;
        r.metrics.insert(k.into(), v);
    }
    Ok(())
}

fn floor64(ctx: &Context) -> Option<f64> {
    summarize(ctx.records, Config::FutexFloor, MEMBERS, |r| {
        r.get("fence_loop_us")
    })
    .map(|s| s.median)
}

fn group_median(ctx: &Context, n: u32) -> Option<f64> {
    summarize(ctx.records, Config::GroupFence, n, |r| {
        r.get("group_fence_us")
    })
    .map(|s| s.median)
}

/// The group-fence target, once per job size run.
pub fn target_lines(ctx: &Context) -> Vec<String> {
    ctx.opts
        .group_sizes
        .iter()
        .map(|&n| {
            let what = format!(
                "N={n} group fence of {MEMBERS} members vs the futex floor at {MEMBERS} (target ≤ 1.2x)"
            );
            match (group_median(ctx, n), floor64(ctx)) {
                (Some(g), Some(f)) if f > 0.0 => {
                    let r = g / f;
                    format!("{what}: {} ({r:.2}x)", if r <= 1.2 { "met" } else { "missed" })
                }
                _ => format!(
                    "{what}: missed (not measured; the floor comes from futex-floor at N={MEMBERS})"
                ),
            }
        })
        .collect()
}

/// The report's group fence section.
pub fn section(ctx: &Context, w: &mut String) {
    let _ = writeln!(w, "\n## Group fence\n");
    let _ = writeln!(
        w,
        "Rust client, shared memory: in a job of N ranks, ranks 0-{} construct a group and fence it {ITERS} times back to back (after 100 untimed) while the other ranks sleep in a job fence; then all N ranks run {} job fences. Rank 0's mean per fence, µs: median (min–max) over runs; the floor is `futex-floor` at N={MEMBERS} from the same run.\n",
        MEMBERS - 1,
        ITERS / 4
    );
    if ctx.opts.group_sizes.is_empty() {
        let _ = writeln!(w, "Not run (`--group-sizes none`).");
        return;
    }
    let floor = floor64(ctx);
    let _ = writeln!(
        w,
        "| N | runs | group fence µs ({MEMBERS} members) | job fence µs (N ranks) | futex floor µs ({MEMBERS}) | group / floor |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|");
    for &n in &ctx.opts.group_sizes {
        let c = Config::GroupFence;
        let ratio = match (group_median(ctx, n), floor) {
            (Some(g), Some(f)) if f > 0.0 => format!("{:.2}x", g / f),
            _ => "—".into(),
        };
        let _ = writeln!(
            w,
            "| {n} | {} | {} | {} | {} | {ratio} |",
            runs_cell(ctx, c, n),
            cell(
                summarize(ctx.records, c, n, |r| r.get("group_fence_us")),
                1.0
            ),
            cell(
                summarize(ctx.records, c, n, |r| r.get("full_fence_us")),
                1.0
            ),
            floor.map_or("—".into(), |f| format!("{f:.1}")),
        );
    }
}

// ---------------------------------------------------------------------------
// The rank program
// ---------------------------------------------------------------------------

/// `fastpmi-bench __group`; returns the exit status.
pub fn rank_main() -> i32 {
    match group_rank() {
        Ok(()) => 0,
        Err(e) => {
            let rank =
                std::env::var(fastpmi_codec::names::env::PMI_RANK).unwrap_or_else(|_| "?".into());
            eprintln!("fastpmi-bench __group: rank {rank}: {e}");
            1
        }
    }
}

fn group_rank() -> Result<(), String> {
    let e = |what: &'static str| move |err: PmiError| format!("{what}: {err}");
    let iters: u32 = std::env::var(ITERS_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&k| k > 0)
        .unwrap_or(ITERS);
    let pmi = Pmi::init().map_err(e("Pmi::init"))?;
    let (rank, size) = (pmi.rank(), pmi.size());
    let members = MEMBERS.min(size);
    let mean_us = |t: Instant, k: u32| t.elapsed().as_secs_f64() * 1e6 / f64::from(k);
    // Nothing is timed while ranks are still starting.
    pmi.fence().map_err(e("start fence"))?;
    let mut group_us = 0.0;
    if rank < members {
        let list: Vec<u32> = (0..members).collect();
        pmi.group_construct("bench-g", &list)
            .map_err(e("group_construct"))?;
        for _ in 0..100 {
            pmi.group_fence("bench-g").map_err(e("group_fence"))?;
        }
        let t = Instant::now();
        for _ in 0..iters {
            pmi.group_fence("bench-g").map_err(e("group_fence"))?;
        }
        group_us = mean_us(t, iters);
        pmi.group_destruct("bench-g").map_err(e("group_destruct"))?;
    }
    // The non-members sleep here while the group fences.
    pmi.fence().map_err(e("fence"))?;
    let full = (iters / 4).max(1);
    let t = Instant::now();
    for _ in 0..full {
        pmi.fence().map_err(e("fence"))?;
    }
    let full_us = mean_us(t, full);
    // Untimed: no rank finalizes and exits while rank 0's clock runs.
    pmi.fence().map_err(e("fence"))?;
    if rank == 0 {
        let transport = format!("{:?}", pmi.transport()).to_lowercase();
        println!(
            "group_bench ok n={size} members={members} transport={transport} group_fence_us={group_us:.2} full_fence_us={full_us:.2}"
        );
    }
    pmi.finalize().map_err(e("finalize"))
}
