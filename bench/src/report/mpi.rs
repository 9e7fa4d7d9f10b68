//! The MPI programs' sections: MPICH startup and spawn latency.

use std::fmt::Write as _;

use crate::cells::{cell, median, runs_cell, Context};
use crate::configs::Config;
use crate::record::{summarize, Record};

/// MPICH startup: whole-job wall time under fastpmi and under Hydra.
pub(super) fn startup_section(ctx: &Context, w: &mut String) {
    let opts = ctx.opts;
    let _ = writeln!(w, "\n## MPI startup\n");
    let _ = writeln!(
        w,
        "Whole-job wall time of `bench/c/mpi_hello.c` (MPICH: `MPI_Init`, `MPI_Barrier`, `MPI_Finalize`), launch to the launcher's exit, seconds: median (min–max).\n"
    );
    if opts.startup_sizes.is_empty() {
        let _ = writeln!(w, "Not run (`--startup-sizes none`).");
    } else {
        let _ = writeln!(w, "| N | launcher | runs | wall s | fastpmi / Hydra |");
        let _ = writeln!(w, "|---|---|---|---|---|");
        for &n in &opts.startup_sizes {
            let f = median(ctx, Config::MpichFastpmi, n, |r| r.wall_s);
            let h = median(ctx, Config::MpichHydra, n, |r| r.wall_s);
            for c in [Config::MpichFastpmi, Config::MpichHydra] {
                let ratio = match (c, f, h) {
                    (Config::MpichFastpmi, Some(f), Some(h)) if h > 0.0 => format!("{:.2}x", f / h),
                    _ => "—".into(),
                };
                let _ = writeln!(
                    w,
                    "| {n} | {c} | {} | {} | {ratio} |",
                    runs_cell(ctx, c, n),
                    cell(summarize(ctx.records, c, n, |r| r.wall_s), 1.0)
                );
            }
        }
        if opts
            .startup_sizes
            .iter()
            .any(|&n| n > opts.params.hydra_ppn)
        {
            let _ = writeln!(
                w,
                "\nAbove {} ranks Hydra runs several proxies (see above), so MPICH sees several \"nodes\" there and connects them through its network module.",
                opts.params.hydra_ppn
            );
        }
    }
}

/// `MPI_Comm_spawn` latency, fastpmi against the wheel's own Hydra 5.
pub(super) fn spawn_section(ctx: &Context, w: &mut String) {
    let opts = ctx.opts;
    let _ = writeln!(w, "\n## Spawn latency\n");
    let _ = writeln!(
        w,
        "`bench/c/mpi_spawn.c` (MPICH 5.0.2 wheel, ofi netmod): {} parent ranks time one `MPI_Comm_spawn` of K children, from the request to its return (the children started, finished `MPI_Init`, whose PMI exchange ends in their first fence, and connected back), milliseconds: median (min–max).\n",
        crate::configs::SPAWN_PARENTS
    );
    if opts.spawn_sizes.is_empty() {
        let _ = writeln!(w, "Not run (`--spawn-sizes none`).");
        return;
    }
    let _ = writeln!(
        w,
        "| children | launcher | runs | spawn ms | fastpmi / Hydra 5 |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|");
    let ms = |r: &Record| r.metrics.get("spawn_ms").copied();
    for &n in &opts.spawn_sizes {
        let f = median(ctx, Config::SpawnFastpmi, n, ms);
        let h = median(ctx, Config::SpawnHydra5, n, ms);
        for c in [Config::SpawnFastpmi, Config::SpawnHydra5] {
            let ratio = match (c, f, h) {
                (Config::SpawnFastpmi, Some(f), Some(h)) if h > 0.0 => format!("{:.2}x", f / h),
                _ => "—".into(),
            };
            let _ = writeln!(
                w,
                "| {n} | {c} | {} | {} | {ratio} |",
                runs_cell(ctx, c, n),
                cell(summarize(ctx.records, c, n, ms), 1.0)
            );
        }
    }
}
