//! The memory section: the launcher's peak RSS and what a rank's init adds.

use std::fmt::Write as _;

use crate::cells::{cell, md_escape, median, num, runs_cell, Context};
use crate::configs::{Config, Kind};
use crate::record::{runs_of, summarize, Status};

/// Launcher peak RSS and per-rank RSS added, at the largest N.
pub(super) fn section(ctx: &Context, w: &mut String) {
    let opts = ctx.opts;
    let big = *opts.sizes.last().unwrap_or(&1);
    let _ = writeln!(w, "\n## Memory (N={big})\n");
    let _ = writeln!(
        w,
        "Launcher peak RSS: VmHWM of the launcher process (for Hydra: `mpiexec.hydra` plus its proxies, summed), not of the ranks, sampled while the job ran (every 1 ms at first, backing off to every 20 ms; a high-water mark, so only growth in the last interval before exit can be missed). \
         Per-rank RSS added: VmRSS after `Pmi::init` (and after the exchange) minus VmRSS before `Pmi::init`, reported by the Rust rank program (rank 0 / largest over ranks); pages of the shared segment count in the RSS of every rank that touched them but exist once, so their share is given apart. \
         Medians over the ok runs; when a configuration has no ok run at N={big}, its largest N with one is shown.\n"
    );
    let _ = writeln!(
        w,
        "| configuration | N | launcher peak RSS MB | sampled processes (median run) | per-rank RSS added by init KB (rank 0 / max) | per-rank RSS added by init + exchange KB (rank 0 / max) | segment size |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|---|");
    for c in Config::ALL
        .into_iter()
        .filter(|c| c.kind() == Kind::Exchange)
    {
        let n = opts.sizes.iter().rev().copied().find(|&n| {
            summarize(ctx.records, c, n, |r| {
                r.mem.as_ref().map(|m| m.total_kb as f64)
            })
            .is_some()
        });
        let Some(n) = n else {
            let _ = writeln!(
                w,
                "| {c} | — | — | {} | — | — | n/a |",
                runs_cell(ctx, c, big)
            );
            continue;
        };
        let peak = summarize(ctx.records, c, n, |r| {
            r.mem.as_ref().map(|m| m.total_kb as f64)
        });
        // The detail of the run whose peak is the median (or nearest to it).
        let detail = peak
            .and_then(|p| {
                runs_of(ctx.records, c, n)
                    .into_iter()
                    .filter(|r| r.status == Status::Ok)
                    .filter_map(|r| r.mem.as_ref())
                    .min_by(|a, b| {
                        (a.total_kb as f64 - p.median)
                            .abs()
                            .total_cmp(&(b.total_kb as f64 - p.median).abs())
                    })
                    .map(|m| m.detail.clone())
            })
            .unwrap_or_default();
        let pair = |a: &'static str, b: &'static str| {
            let x = median(ctx, c, n, |r| r.get(a));
            let y = median(ctx, c, n, |r| r.get(b));
            match (x, y) {
                (Some(x), Some(y)) => format!("{} / {}", num(x), num(y)),
                _ => "— (not reported by this client)".into(),
            }
        };
        let _ = writeln!(
            w,
            "| {c} | {n} | {} | {} | {} | {} | {} |",
            cell(peak, 1.0 / 1024.0),
            md_escape(&detail),
            pair("rss_delta_kb", "max_rss_delta_kb"),
            pair("rss_exchange_kb", "max_rss_exchange_kb")
                + &median(ctx, c, n, |r| r.get("rss_shmem_exchange_kb"))
                    .filter(|&k| k > 0.0)
                    .map(|k| format!(" (of which shared segment pages, rank 0: {})", num(k)))
                    .unwrap_or_default(),
            // Mapped size; pages cost memory only once touched (see the RSS columns).
            median(ctx, c, n, |r| r.get("segment_kb"))
                .map(|k| format!("{} MB mapped", num(k / 1024.0)))
                .unwrap_or_else(|| "— (no segment)".into()),
        );
    }
}
