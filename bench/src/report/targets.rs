//! The targets list: one verdict line per target, met or missed.

use crate::cells::{median, num, why_absent, Context};
use crate::configs::{Config, Kind};
use crate::record::Record;
use crate::{deaths, groups, launch, nested, ps, python, ulfm};

/// The N the targets are defined at.
const TARGET_N: u32 = 256;

fn target_n(ctx: &Context) -> (u32, String) {
    crate::cells::judged_at(&ctx.opts.sizes, TARGET_N).unwrap_or((TARGET_N, String::new()))
}

/// The figure that stands for the cost of one fence of `c`: the steady
/// loop (the floor's only figure) unless the loop was turned off.
fn fence_key(ctx: &Context, c: Config) -> &'static str {
    if ctx.opts.params.fence_loop > 0 || c.kind() == Kind::Floor {
        "fence_loop_us"
    } else {
        "fence2_us"
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "missed"
    }
}

/// One plain-language line per target.
pub fn target_lines(ctx: &Context) -> Vec<String> {
    let (n, caveat) = target_n(ctx);
    let ms = |c: Config, key: &'static str| median(ctx, c, n, move |r| r.get(key)).map(|v| v / 1e3);
    let shm_fence = ms(Config::FastpmiShm, fence_key(ctx, Config::FastpmiShm));
    let floor = ms(Config::FutexFloor, fence_key(ctx, Config::FutexFloor));
    let shm_get = ms(Config::FastpmiShm, "getall_us");
    let sock_get = ms(Config::FastpmiSocket, "getall_us");
    let sock_fence = ms(Config::FastpmiSocket, fence_key(ctx, Config::FastpmiSocket));
    // Says which fence figure the fence targets use.
    let fence = if ctx.opts.params.fence_loop > 0 {
        "fence (steady loop)"
    } else {
        "fence (2nd fence of the exchange)"
    };
    let unmeasured = |what: &str, cs: &[(Config, Option<f64>)]| {
        let why: Vec<String> = cs
            .iter()
            .filter(|(_, v)| v.is_none())
            .map(|(c, _)| why_absent(ctx, *c, n))
            .collect();
        format!(
            "N={n} {what}: missed (not measured: {}){caveat}",
            why.join("; ")
        )
    };
    let mut out = Vec::new();

    out.push(match (shm_fence, floor) {
        (Some(s), Some(f)) if f > 0.0 => format!(
            "N={n} shm {fence} {} ms vs floor {} ms: {:.2}x (target ≤ 1.2x): {}{caveat}",
            num(s),
            num(f),
            s / f,
            verdict(s / f <= 1.2)
        ),
        _ => unmeasured(
            "shm fence vs futex floor (target ≤ 1.2x)",
            &[(Config::FastpmiShm, shm_fence), (Config::FutexFloor, floor)],
        ),
    });
    let no_yield = ms(
        Config::FastpmiShmNoYield,
        fence_key(ctx, Config::FastpmiShmNoYield),
    );
    out.push(match (shm_fence, no_yield) {
        (Some(s), Some(z)) if z > 0.0 => format!(
            "N={n} shm {fence} {} ms with fence yields vs {} ms with FASTPMI_FENCE_YIELDS=0: {:.2}x (target ≤ 1x): {}{caveat}",
            num(s),
            num(z),
            s / z,
            verdict(s <= z)
        ),
        _ => unmeasured(
            "shm fence with yields vs without (target ≤ 1x)",
            &[
                (Config::FastpmiShm, shm_fence),
                (Config::FastpmiShmNoYield, no_yield),
            ],
        ),
    });
    out.push(match shm_fence {
        Some(s) => format!(
            "N={n} shm {fence} {} ms (target < 2 ms): {}{caveat}",
            num(s),
            verdict(s < 2.0)
        ),
        None => unmeasured("shm fence (target < 2 ms)", &[(Config::FastpmiShm, None)]),
    });
    out.push(match shm_get {
        Some(s) => format!(
            "N={n} shm get-all (rank 0) {} ms (target < 2 ms): {}{caveat}",
            num(s),
            verdict(s < 2.0)
        ),
        None => unmeasured(
            "shm get-all, rank 0 (target < 2 ms)",
            &[(Config::FastpmiShm, None)],
        ),
    });
    for (what, sock, shm, want) in [
        ("get-all", sock_get, shm_get, 20.0),
        (fence, sock_fence, shm_fence, 5.0),
    ] {
        out.push(match (sock, shm) {
            (Some(a), Some(b)) if b > 0.0 => format!(
                "N={n} {what}: fastpmi socket {} ms vs shm {} ms: socket/shm = {}x (target ≥ {want}x): {}{caveat}",
                num(a),
                num(b),
                num(a / b),
                verdict(a / b >= want)
            ),
            _ => unmeasured(
                &format!("shm vs socket {what} (target ≥ {want}x faster)"),
                &[(Config::FastpmiSocket, sock), (Config::FastpmiShm, shm)],
            ),
        });
    }
    let exch = |c: Config| median(ctx, c, n, Record::exchange_us).map(|v| v / 1e3);
    let wall = |c: Config| median(ctx, c, n, |r| r.wall_s);
    let (se, he) = (exch(Config::FastpmiSocket), exch(Config::Hydra));
    out.push(match (se, he) {
        (Some(s), Some(h)) if h > 0.0 => {
            let walls = match (wall(Config::FastpmiSocket), wall(Config::Hydra)) {
                (Some(a), Some(b)) => format!("; whole job {} s vs {} s", num(a), num(b)),
                _ => String::new(),
            };
            format!(
                "N={n} whole exchange (rank 0: put+fence+get-all+fence2): fastpmi socket {} ms vs Hydra {} ms: {:.2}x (target ≤ 1x){walls}: {}{caveat}",
                num(s),
                num(h),
                s / h,
                verdict(s <= h)
            )
        }
        _ => unmeasured(
            "fastpmi socket vs Hydra whole exchange (target: no slower)",
            &[(Config::FastpmiSocket, se), (Config::Hydra, he)],
        ),
    });
    out.extend(launch::target_lines(ctx));
    out.extend(groups::target_lines(ctx));
    out.extend(ps::target_lines(ctx));
    out.extend(deaths::target_lines(ctx));
    out.extend(ulfm::target_lines(ctx));
    out.extend(python::target_lines(ctx));
    out.extend(nested::target_lines(ctx));
    out.extend(stall_lines(ctx));
    out
}

/// The Open MPI row whose spread is checked, and the largest spread
/// allowed: no run slower than 1.5x the median (docs/pmix.md, "Start-up
/// stalls at 256 ranks").
const STALL_ROW: &str = "ompi5-allreduce@fastpmi";
const STALL_SPREAD: f64 = 1.5;
/// Runs below which a spread says nothing.
const STALL_MIN_RUNS: usize = 5;

/// The stall check: at each placement size of 256 ranks or more, the
/// slowest Open MPI 5 job under fastpmi against the median of its runs.
fn stall_lines(ctx: &Context) -> Vec<String> {
    let Some(i) = crate::configs::placement::CASES
        .iter()
        .position(|c| c.name == STALL_ROW)
    else {
        return Vec::new();
    };
    let c = Config::Placement(i as u8);
    ctx.opts
        .placement_sizes
        .iter()
        .filter(|&&n| n >= 256)
        .map(|&n| {
            let what = format!(
                "N={n} Open MPI 5 start-up stalls ({STALL_ROW}, slowest run ≤ {STALL_SPREAD}x the median)"
            );
            match crate::record::summarize(ctx.records, c, n, |r| r.wall_s) {
                Some(s) if s.count >= STALL_MIN_RUNS => format!(
                    "{what}: slowest {} s, median {} s, {:.2}x over {} runs: {}",
                    num(s.max),
                    num(s.median),
                    s.max / s.median,
                    s.count,
                    verdict(s.max <= STALL_SPREAD * s.median)
                ),
                Some(s) => format!(
                    "{what}: not judged, {} runs (at least {STALL_MIN_RUNS}: --reps)",
                    s.count
                ),
                None => format!("{what}: not measured ({})", why_absent(ctx, c, n)),
            }
        })
        .collect()
}
