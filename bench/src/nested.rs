//! Nested mode (issue 31, docs/nested.md): one 256-rank job under Slurm,
//! served by slurmstepd alone (`srun --mpi=pmi2 -n 256`) or by four fastpmi
//! node servers of 64 ranks each (`srun --mpi=pmi2 -n 4 fastpmi -n 64`),
//! with the same program: bench/c/pmi2_exchange.c on fastpmi's installed
//! libpmi2.so.0 (over slurmstepd's socket in the first, on each node's
//! segment in the second). The harness starts a private single-node Slurm
//! (scripts/slurm-up, as root) for these rows and stops it (by pid) when
//! the run ends. Targets: get-all at least 100x faster, the whole job at
//! most 0.5x.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use crate::cells::{cell, runs_cell, Context};
use crate::configs::{Config, RunParams};
use crate::proc::{MemProbe, Outcome, Spec};
use crate::record::{parse_exchange_line, summarize, Record};
use crate::tools::Tools;

/// Node servers of the nested rows.
pub const NODES: u32 = 4;

const SLURM_UP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/slurm-up");
const SLURM_DOWN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/slurm-down");

/// A private Slurm of the harness, stopped (its daemons by pid, its
/// directory removed) when the last handle goes.
#[derive(Debug)]
pub struct Cluster {
    dir: PathBuf,
}

impl Cluster {
    fn start(build_dir: &Path) -> Result<Cluster, String> {
        if !rustix::process::geteuid().is_root() {
            return Err("needs root: these rows start a private Slurm (scripts/slurm-up)".into());
        }
        let dir = std::path::absolute(build_dir.join(format!("slurm-{}", std::process::id())))
            .map_err(|e| format!("{}: {e}", build_dir.display()))?;
        let _ = std::fs::remove_dir_all(&dir);
        eprintln!(
            "fastpmi-bench: starting a private Slurm in {}",
            dir.display()
        );
        let out = Command::new(SLURM_UP)
            .arg(&dir)
            .output()
            .map_err(|e| format!("cannot run {SLURM_UP}: {e}"))?;
        // From here on the directory is stopped and removed on drop.
        let c = Cluster { dir };
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = err.lines().rev().take(3).collect();
            return Err(format!(
                "slurm-up failed ({}): {}",
                out.status,
                tail.join(" / ")
            ));
        }
        Ok(c)
    }

    fn conf(&self) -> PathBuf {
        self.dir.join("slurm.conf")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let stopped = Command::new(SLURM_DOWN).arg(&self.dir).output();
        if !stopped.is_ok_and(|o| o.status.success()) {
            eprintln!(
                "fastpmi-bench: {SLURM_DOWN} {} failed; its daemons may be left",
                self.dir.display()
            );
            return;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What the nested rows need: the cluster, the exchange program (linked
/// to libpmi2.so.0) and fastpmi's C libraries.
#[derive(Debug, Clone)]
pub struct NestTools {
    pub cluster: Result<Arc<Cluster>, String>,
    pub capi_libdir: Result<PathBuf, String>,
}

impl NestTools {
    pub fn prepare(build_dir: &Path, exe_dir: &Path, wanted: bool) -> NestTools {
        if !wanted {
            return NestTools {
                cluster: Err("not selected".into()),
                capi_libdir: Err("not selected".into()),
            };
        }
        NestTools {
            capi_libdir: crate::launch::install_capi(build_dir, exe_dir),
            cluster: Cluster::start(build_dir).map(Arc::new),
        }
    }
}

/// Why a nested row cannot run, if it cannot.
pub fn missing(t: &Tools, n: &NestTools) -> Option<String> {
    let reasons: Vec<String> = [
        t.fastpmi.as_ref().err().cloned(),
        t.pmi2_exchange.as_ref().err().cloned(),
        n.capi_libdir.as_ref().err().cloned(),
        n.cluster.as_ref().err().cloned(),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!reasons.is_empty()).then(|| reasons.join("; "))
}

/// `srun --mpi=pmi2 -n N --overcommit pmi2_exchange`, or `srun --mpi=pmi2
/// -n 4 fastpmi -n N/4 pmi2_exchange`, on fastpmi's libpmi2.
pub fn spec(t: &Tools, nt: &NestTools, c: Config, n: u32, p: &RunParams) -> Spec {
    let path = |r: &Result<PathBuf, String>| r.clone().unwrap_or_default();
    let exchange = path(&t.pmi2_exchange).into_os_string();
    let mut args: Vec<OsString> = vec!["--mpi=pmi2".into(), "--overcommit".into(), "-n".into()];
    if c == Config::NestNodes {
        args.extend([
            NODES.to_string().into(),
            path(&t.fastpmi).into_os_string(),
            "-n".into(),
            (n / NODES).to_string().into(),
        ]);
    } else {
        args.push(n.to_string().into());
    }
    args.push(exchange);
    let conf = nt.cluster.as_ref().map(|c| c.conf()).unwrap_or_default();
    Spec {
        program: "srun".into(),
        args,
        env_set: vec![
            ("SLURM_CONF".into(), conf.into()),
            ("LD_LIBRARY_PATH".into(), path(&nt.capi_libdir).into()),
        ],
        env_remove: vec![fastpmi_codec::names::env::TRANSPORT.into()],
        cwd: None,
        timeout: p.timeout,
        mem: MemProbe::None,
        poll: None,
    }
}

/// Rank 0's exchange line into the record.
pub fn judge(n: u32, o: &Outcome, r: &mut Record) -> Result<(), String> {
    let kv = parse_exchange_line(&o.stdout).ok_or("exit 0 but no result line on stdout")?;
    if kv.get("n").and_then(|v| v.parse::<u32>().ok()) != Some(n) {
        return Err(format!(
            "result line says n={:?}, expected {n}",
            kv.get("n")
        ));
    }
    for k in [
        "getall_us",
        "max_getall_us",
        "mean_getall_us",
        "fence_us",
        "total_us",
    ] {
        let v = kv
            .get(k)
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| format!("no {k}= in the result line"))?;
        r.metrics.insert(k.into(), v);
    }
    Ok(())
}

fn median(ctx: &Context, c: Config, n: u32, f: impl Fn(&Record) -> Option<f64>) -> Option<f64> {
    summarize(ctx.records, c, n, f).map(|s| s.median)
}

fn getall(ctx: &Context, c: Config, n: u32) -> Option<f64> {
    median(ctx, c, n, |r| r.get("max_getall_us"))
}

fn wall(ctx: &Context, c: Config, n: u32) -> Option<f64> {
    median(ctx, c, n, |r| r.wall_s)
}

/// The targets, once per size run.
pub fn target_lines(ctx: &Context) -> Vec<String> {
    let mut out = Vec::new();
    for &n in &ctx.opts.nest_sizes {
        let (a, b) = (Config::NestSrun, Config::NestNodes);
        let what = format!("N={n} {NODES} node servers under srun vs plain srun, get-all of the slowest rank (target ≥ 100x faster)");
        out.push(match (getall(ctx, a, n), getall(ctx, b, n)) {
            (Some(x), Some(y)) if y > 0.0 => {
                let r = x / y;
                format!(
                    "{what}: {} ({r:.0}x)",
                    if r >= 100.0 { "met" } else { "missed" }
                )
            }
            _ => format!("{what}: missed (not measured)"),
        });
        let what = format!(
            "N={n} {NODES} node servers under srun vs plain srun, whole job (target ≤ 0.5x)"
        );
        out.push(match (wall(ctx, a, n), wall(ctx, b, n)) {
            (Some(x), Some(y)) if x > 0.0 => {
                let r = y / x;
                format!(
                    "{what}: {} ({r:.2}x)",
                    if r <= 0.5 { "met" } else { "missed" }
                )
            }
            _ => format!("{what}: missed (not measured)"),
        });
    }
    out
}

/// The report's section.
pub fn section(ctx: &Context, w: &mut String) {
    let _ = writeln!(w, "\n## Beyond one node: node servers under Slurm\n");
    let _ = writeln!(
        w,
        "One job of N ranks under a private single-node Slurm: `srun --mpi=pmi2 -n N` (slurmstepd serves every rank) against `srun --mpi=pmi2 -n {NODES} fastpmi -n N/{NODES}` ({NODES} node servers, docs/nested.md), the same bench/c/pmi2_exchange.c on fastpmi's libpmi2.so.0 in both. Get-all: the slowest rank's get of every rank's value after the fence, µs; whole job: srun's wall time, s. Medians (min–max) over runs.\n"
    );
    if ctx.opts.nest_sizes.is_empty() {
        let _ = writeln!(w, "Not run (`--nest-sizes none`).");
        return;
    }
    let _ = writeln!(
        w,
        "| N | configuration | runs | get-all µs (slowest rank) | fence µs | whole job s | get-all: srun / nested | whole job: nested / srun |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|---|---|");
    for &n in &ctx.opts.nest_sizes {
        let (a, b) = (Config::NestSrun, Config::NestNodes);
        let g = match (getall(ctx, a, n), getall(ctx, b, n)) {
            (Some(x), Some(y)) if y > 0.0 => format!("{:.0}x", x / y),
            _ => "—".into(),
        };
        let j = match (wall(ctx, a, n), wall(ctx, b, n)) {
            (Some(x), Some(y)) if x > 0.0 => format!("{:.2}x", y / x),
            _ => "—".into(),
        };
        for c in [a, b] {
            let (gc, jc) = if c == b { (&g[..], &j[..]) } else { ("", "") };
            let _ = writeln!(
                w,
                "| {n} | `{}` | {} | {} | {} | {} | {gc} | {jc} |",
                c.name(),
                runs_cell(ctx, c, n),
                cell(
                    summarize(ctx.records, c, n, |r| r.get("max_getall_us")),
                    1.0
                ),
                cell(summarize(ctx.records, c, n, |r| r.get("fence_us")), 1.0),
                cell(summarize(ctx.records, c, n, |r| r.wall_s), 1.0),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::End;
    use std::collections::BTreeMap;
    use std::time::Duration;

    fn outcome(stdout: &str) -> Outcome {
        Outcome {
            end: End::Exited(0),
            wall: Duration::from_millis(300),
            stdout: stdout.into(),
            stderr: String::new(),
            mem: None,
            polls: Vec::new(),
        }
    }

    fn record() -> Record {
        Record {
            config: Config::NestNodes,
            n: 256,
            rep: 0,
            status: crate::record::Status::Ok,
            wall_s: Some(0.3),
            transport: None,
            metrics: BTreeMap::new(),
            mem: None,
            error: String::new(),
        }
    }

    #[test]
    fn judges_the_exchange_line() {
        let line = "n=256 init_us=1 put_us=1 fence_us=115000 getall_us=120 fence2_us=9 finalize_us=1 per_get_us=0.5 max_init_us=2 max_fence_us=116000 min_fence_us=3 max_getall_us=301 max_getall_rank=7 mean_getall_us=130 max_fence2_us=11 gather_us=5 total_us=160000\n";
        let mut r = record();
        judge(256, &outcome(line), &mut r).unwrap();
        assert_eq!(r.get("max_getall_us"), Some(301.0));
        assert_eq!(r.get("total_us"), Some(160000.0));
        let mut r = record();
        assert!(judge(64, &outcome(line), &mut r)
            .unwrap_err()
            .contains("n="));
        let mut r = record();
        assert!(judge(256, &outcome("nothing\n"), &mut r).is_err());
        let no_getall = line.replace("max_getall_us=301 ", "");
        assert!(judge(256, &outcome(&no_getall), &mut r).is_err());
    }
}
