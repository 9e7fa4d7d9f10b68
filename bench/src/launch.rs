//! Job start-up against the `posix_spawn` floor (docs/launch.md): the
//! configurations (a) to (e), their programs, their commands, how a run is
//! judged, and the report's section.
//!
//! * (a) `launch-floor`: `bench/c/spawn_floor.c` starts N trivial processes
//!   with `posix_spawn` and reaps them;
//! * (b) `launch@fastpmi`: `fastpmi -n N trivial`;
//! * (c) `pmi2-min@fastpmi-shm`: `bench/c/pmi2_minimal.c` (init, one fence,
//!   finalize) on fastpmi's `libpmi2.so.0` as `make install` installs it,
//!   over shared memory;
//! * (d) `pmi2-min@fastpmi-socket`: the same binary on Slurm's libpmi2;
//! * (e) `launch@hydra` and `pmi2-min@hydra`: Hydra with the trivial
//!   program and with `pmi2_minimal` on Slurm's libpmi2.
//!
//! The figure is the whole run's wall time, launch to exit.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use fastpmi::launcher::stats_row;

use crate::cells::{cell, runs_cell, Context};
use crate::configs::{hydra_args, Config, RunParams};
use crate::proc::{MemProbe, Outcome, Spec};
use crate::record::{paired_wins, summarize, Record};
use crate::tools::{compile, Tools, SLURM_INCLUDE};

const SPAWN_FLOOR_C: &str = include_str!("../c/spawn_floor.c");
const PMI2_MINIMAL_C: &str = include_str!("../c/pmi2_minimal.c");
const TRIVIAL_C: &str = "int main(void) { return 0; }\n";

/// A `make install` lib directory to use instead of installing one.
pub const CAPI_LIBDIR_ENV: &str = "FASTPMI_BENCH_CAPI_LIBDIR";

/// The configurations, in the report's order.
pub use crate::configs::LAUNCH as CONFIGS;

/// The metric a launch run records: its wall time in µs (the plot's unit).
pub const METRIC: &str = "launch_us";

/// The programs of the launch configurations.
#[derive(Debug, Clone)]
pub struct LaunchTools {
    pub spawn_floor: Result<PathBuf, String>,
    pub trivial: Result<PathBuf, String>,
    pub pmi2_minimal: Result<PathBuf, String>,
    /// Where `make install` put fastpmi's libpmi2.so.0 (stripped, as users
    /// get it).
    pub capi_libdir: Result<PathBuf, String>,
}

impl LaunchTools {
    /// Build what the launch configurations run (nothing unless `wanted`).
    pub fn prepare(build_dir: &Path, exe_dir: &Path, wanted: bool) -> LaunchTools {
        if !wanted {
            let no = || Err("not selected".to_string());
            return LaunchTools {
                spawn_floor: no(),
                trivial: no(),
                pmi2_minimal: no(),
                capi_libdir: no(),
            };
        }
        let pmi2_minimal = if Path::new(SLURM_INCLUDE).join("pmi2.h").is_file() {
            let inc = format!("-I{SLURM_INCLUDE}");
            compile(
                "gcc",
                build_dir,
                "pmi2_minimal",
                PMI2_MINIMAL_C,
                &[&inc, "-lpmi2"],
            )
        } else {
            Err(format!(
                "no {SLURM_INCLUDE}/pmi2.h (Debian package libpmi2-0-dev)"
            ))
        };
        LaunchTools {
            spawn_floor: compile("gcc", build_dir, "spawn_floor", SPAWN_FLOOR_C, &[]),
            trivial: compile("gcc", build_dir, "trivial", TRIVIAL_C, &[]),
            pmi2_minimal,
            capi_libdir: install_capi(build_dir, exe_dir),
        }
    }
}

/// fastpmi's C libraries as users get them: `make install` into the build
/// directory (run by cargo), or the directory `FASTPMI_BENCH_CAPI_LIBDIR`
/// names.
pub fn install_capi(build_dir: &Path, exe_dir: &Path) -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os(CAPI_LIBDIR_ENV).map(PathBuf::from) {
        return if dir.join("libpmi2.so.0").exists() {
            Ok(dir)
        } else {
            Err(format!(
                "{CAPI_LIBDIR_ENV}={}: no libpmi2.so.0 there",
                dir.display()
            ))
        };
    }
    let (Some(cargo), Some(manifest_dir)) = (
        std::env::var_os("CARGO"),
        std::env::var_os("CARGO_MANIFEST_DIR"),
    ) else {
        return Err(format!(
            "fastpmi's libpmi2.so.0: run the harness with `cargo run`, or set {CAPI_LIBDIR_ENV} to a `make install` lib directory"
        ));
    };
    let root = PathBuf::from(manifest_dir).join("..");
    let prefix = std::path::absolute(build_dir.join("capi"))
        .map_err(|e| format!("{}: {e}", build_dir.display()))?;
    let target = exe_dir.parent().unwrap_or(exe_dir);
    eprintln!(
        "fastpmi-bench: make install of the C libraries into {}",
        prefix.display()
    );
    let out = Command::new("make")
        .arg("-C")
        .arg(&root)
        .arg("install")
        .arg(format!("PREFIX={}", prefix.display()))
        .arg(format!("CARGO={}", Path::new(&cargo).display()))
        .arg(format!("CARGO_TARGET_DIR={}", target.display()))
        .output()
        .map_err(|e| format!("cannot run make: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(3).collect();
        return Err(format!(
            "make install failed ({}): {}",
            out.status,
            tail.join(" / ")
        ));
    }
    Ok(prefix.join("lib"))
}

/// What configuration `c` needs beyond the launcher.
pub fn needs<'a>(t: &'a Tools, l: &'a LaunchTools, c: Config) -> Vec<&'a Result<PathBuf, String>> {
    match c {
        Config::LaunchFloor => vec![&l.spawn_floor, &l.trivial],
        Config::LaunchFastpmi => vec![&t.fastpmi, &l.trivial],
        Config::LaunchShm => vec![&t.fastpmi, &l.pmi2_minimal, &l.capi_libdir],
        Config::LaunchSocket => vec![&t.fastpmi, &l.pmi2_minimal],
        Config::LaunchHydra => vec![&t.hydra, &l.trivial],
        Config::LaunchHydraPmi => vec![&t.hydra, &l.pmi2_minimal],
        _ => vec![],
    }
}

/// The command of one run of launch configuration `c` at `n` ranks.
pub fn spec(t: &Tools, l: &LaunchTools, c: Config, n: u32, p: &RunParams) -> Spec {
    let path = |r: &Result<PathBuf, String>| r.clone().unwrap_or_default();
    let nn = OsString::from(n.to_string());
    // `--stats` shows which transport the ranks' fences took.
    let fastpmi = |prog: &Result<PathBuf, String>| {
        (
            path(&t.fastpmi),
            vec!["--stats".into(), "-n".into(), nn.clone(), path(prog).into()],
        )
    };
    let hydra = |prog: &Result<PathBuf, String>| {
        let (args, _) = hydra_args(n, p.hydra_ppn, path(prog).into(), vec![]);
        (path(&t.hydra), args)
    };
    let (program, args) = match c {
        Config::LaunchFloor => (
            path(&l.spawn_floor),
            vec![nn.clone(), path(&l.trivial).into()],
        ),
        Config::LaunchFastpmi => fastpmi(&l.trivial),
        Config::LaunchShm | Config::LaunchSocket => fastpmi(&l.pmi2_minimal),
        Config::LaunchHydra => hydra(&l.trivial),
        _ => hydra(&l.pmi2_minimal),
    };
    let mut env_set = vec![];
    let mut env_remove: Vec<OsString> = vec![fastpmi_codec::names::env::TRANSPORT.into()];
    if c == Config::LaunchShm {
        env_set.push(("LD_LIBRARY_PATH".into(), path(&l.capi_libdir).into()));
    } else {
        env_remove.push("LD_LIBRARY_PATH".into());
    }
    Spec {
        program,
        args,
        env_set,
        env_remove,
        cwd: None,
        timeout: p.timeout,
        // No sampler beside a timing this short.
        mem: MemProbe::None,
        poll: None,
    }
}

/// Why a run that exited 0 does not count: (c) must have fenced over
/// shared memory only, (d) over the socket.
pub fn judge(c: Config, n: u32, o: &Outcome) -> Result<(), String> {
    let fences = |t| stats_row(&o.stderr, t).map(|r| r[2]);
    let (want, other) = match c {
        Config::LaunchShm => ("shared-memory", "socket"),
        Config::LaunchSocket => ("socket", "shared-memory"),
        _ => return Ok(()),
    };
    match (fences(want), fences(other)) {
        (Some(w), Some(0)) if w == u64::from(n) => Ok(()),
        (w, x) => Err(format!(
            "--stats: {w:?} {want} fences and {x:?} {other} fences, expected {n} and 0"
        )),
    }
}

/// Record a successful run's figure.
pub fn record(r: &mut Record) {
    if let Some(w) = r.wall_s {
        r.metrics.insert(METRIC.into(), w * 1e6);
    }
}

fn median(ctx: &Context, c: Config, n: u32) -> Option<f64> {
    summarize(ctx.records, c, n, |r| r.wall_s).map(|s| s.median)
}

/// How many times the floor (a) may take `fastpmi -n N` of the trivial
/// program (b): the fixed set-up of a launch must not dominate the small
/// jobs people run most (issue 32: 1.5x at one rank, 1.15x at 16); 1.3x
/// at every other N (issue 12).
pub fn trivial_limit(n: u32) -> f64 {
    match n {
        1 => 1.5,
        16 => 1.15,
        _ => 1.3,
    }
}

/// The start-up targets of issues 12 and 32, one line each.
pub fn target_lines(ctx: &Context) -> Vec<String> {
    let mut out = Vec::new();
    for &n in &ctx.opts.launch_sizes {
        let m = |c| median(ctx, c, n);
        let (a, b, cc, d) = (
            m(Config::LaunchFloor),
            m(Config::LaunchFastpmi),
            m(Config::LaunchShm),
            m(Config::LaunchSocket),
        );
        let ratio = |x: Option<f64>, limit: f64, what: &str| match (x, a) {
            (Some(x), Some(a)) if a > 0.0 => {
                let r = x / a;
                let v = if r <= limit { "met" } else { "missed" };
                format!("N={n} {what} vs posix_spawn floor (target ≤ {limit}x): {v} ({r:.2}x)")
            }
            _ => format!(
                "N={n} {what} vs posix_spawn floor (target ≤ {limit}x): missed (not measured)"
            ),
        };
        out.push(ratio(b, trivial_limit(n), "fastpmi -n N trivial (b)"));
        out.push(ratio(
            cc,
            1.6,
            "PMI-2 job on fastpmi's libpmi2, shared memory (c)",
        ));
        let (won, pairs) = paired_wins(
            ctx.records,
            Config::LaunchShm,
            Config::LaunchSocket,
            n,
            |r| r.wall_s,
        );
        out.push(match (cc, d) {
            (Some(c), Some(d)) => format!(
                "N={n} (c) faster than Slurm's libpmi2 over the socket (d): {} ({:.2}x; (c) faster in {won} of {pairs} interleaved pairs)",
                if c < d { "met" } else { "missed" },
                c / d
            ),
            _ => format!(
                "N={n} (c) faster than Slurm's libpmi2 over the socket (d): missed (not measured)"
            ),
        });
    }
    out
}

/// The report's job start-up section.
pub fn section(ctx: &Context, w: &mut String) {
    let _ = writeln!(w, "\n## Job start-up\n");
    let _ = writeln!(
        w,
        "Wall time from launch to exit, seconds: median (min–max), and the ratio of the medians to the `posix_spawn` floor (a) at the same N. (a) `bench/c/spawn_floor.c` starts N trivial processes with `posix_spawn` and reaps them; (b) `fastpmi -n N` of the same trivial program; (c) `bench/c/pmi2_minimal.c` (PMI2_Init, one fence, PMI2_Finalize) on fastpmi's `libpmi2.so.0` as `make install` installs it (shared memory, checked with `--stats`); (d) the same binary on Slurm's libpmi2 (socket); (e) Hydra with the trivial program and with `pmi2_minimal`.\n"
    );
    if ctx.opts.launch_sizes.is_empty() {
        let _ = writeln!(w, "Not run (`--launch-sizes none`).");
        return;
    }
    let _ = writeln!(w, "| N | configuration | runs | wall s | x floor (a) |");
    let _ = writeln!(w, "|---|---|---|---|---|");
    for &n in &ctx.opts.launch_sizes {
        let floor = median(ctx, Config::LaunchFloor, n);
        for c in CONFIGS {
            let ratio = match (median(ctx, c, n), floor) {
                (Some(x), Some(f)) if f > 0.0 => format!("{:.2}x", x / f),
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::End;
    use std::time::Duration;

    fn outcome(stderr: &str) -> Outcome {
        Outcome {
            end: End::Exited(0),
            wall: Duration::from_millis(5),
            stdout: String::new(),
            stderr: stderr.into(),
            mem: Default::default(),
            polls: Vec::new(),
        }
    }

    const SHM4: &str = "fastpmi stats: 4 ranks\n  transport  puts gets fences node-attr\n  socket 0 0 0 0\n  shared-memory 0 0 4 0\n";
    const SOCK4: &str = "fastpmi stats: 4 ranks\n  transport  puts gets fences node-attr\n  socket 0 0 4 0\n  shared-memory 0 0 0 0\n";

    #[test]
    fn transports_are_checked() {
        assert!(judge(Config::LaunchShm, 4, &outcome(SHM4)).is_ok());
        assert!(judge(Config::LaunchShm, 4, &outcome(SOCK4)).is_err());
        assert!(judge(Config::LaunchShm, 4, &outcome("")).is_err());
        assert!(judge(Config::LaunchSocket, 4, &outcome(SOCK4)).is_ok());
        assert!(judge(Config::LaunchSocket, 4, &outcome(SHM4)).is_err());
        assert!(judge(Config::LaunchShm, 8, &outcome(SHM4)).is_err());
        assert!(judge(Config::LaunchFastpmi, 4, &outcome("")).is_ok());
    }
}
