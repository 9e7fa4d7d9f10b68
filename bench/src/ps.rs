//! `fastpmi ps` against a running job (issue 11), three configurations
//! interleaved in one harness run:
//!
//! * `fence-loop@fastpmi-shm`: the steady shared-memory fence loop of an
//!   N-rank job (default 1024), alone;
//! * `fence-loop+ps@fastpmi-shm`: the same with `fastpmi ps PID --json` run
//!   every 100 ms for the whole job: the loop's cost of being watched
//!   ("within noise"), and how `ps` fares while every rank is busy fencing;
//! * `fence-sitting+ps@fastpmi-shm`: the situation the 100 ms target
//!   names, a job sitting in a shared-memory fence: the last rank sleeps
//!   before PMI init, so the other N-1 wait in the exchange's first fence,
//!   and `ps` is polled every 100 ms. Only the answers that show the job
//!   sitting there (summary "fence 1: N-1/N arrived, missing: rank N-1 ...")
//!   and are followed by another such answer count (so the job still sat
//!   there when the answer ended); those during launch, after the fence and
//!   the one the release overtook do not, and a run with none is a failed
//!   run.
//!
//! `ps` figures are whole commands (process start included).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use fastpmi::tools::proto::JobTable;

use crate::cells::{cell, runs_cell, Context};
use crate::configs::{Config, RunParams};
use crate::proc::{Classify, MemProbe, Outcome, Poll, Polled, Spec};
use crate::rank::{FENCE_LOOP_ENV, LATE_MS_ENV, LATE_RANK_ENV};
use crate::record::{runs_of, summarize, Record, Status, Summary};
use crate::tools::Tools;

/// The configurations of this family.
pub use crate::configs::PS as CONFIGS;

/// Back-to-back fences per run: long enough for dozens of polls.
const FENCES: u32 = 1000;
/// How often `fastpmi ps` runs during a polled job.
const PERIOD: Duration = Duration::from_millis(100);
/// How long the late rank of the sitting job sleeps before PMI init: the
/// others sit in fence 1 for this long minus the time they take to get
/// there after it started (a few dozen polls at N=1024).
pub const LATE_MS: u64 = 4000;
/// The answer time the issue asks for while a job sits in a fence.
const TARGET_MS: f64 = 100.0;

/// The figures [`judge`] records, in raw.csv column order (empty for the
/// other configurations; `ps_other` is the sitting runs' only).
pub const METRICS: &[&str] = &[
    "ps_count",
    "ps_failed",
    "ps_other",
    "ps_median_ms",
    "ps_max_ms",
    "ps_max_at_s",
    "ps_max_nth",
];

/// What the configurations need.
pub fn needs(t: &Tools, _c: Config) -> Vec<&Result<PathBuf, String>> {
    vec![&t.fastpmi]
}

/// Whether `fastpmi ps PID --json` output (the `jobs` array) shows the
/// `n`-rank job sitting in its first fence, every rank but the last (the
/// late one) arrived: the summary line the launcher computes from the rank
/// states.
pub fn sitting_in_fence(json: &[u8], n: u32) -> bool {
    let Ok(jobs) = serde_json::from_slice::<Vec<JobTable>>(json) else {
        return false;
    };
    let Some(late) = n.checked_sub(1) else {
        return false;
    };
    let want = format!("fence 1: {late}/{n} arrived, missing: rank {late} (");
    jobs.iter()
        .filter(|j| j.size == n)
        .any(|j| j.summary.iter().any(|l| l.starts_with(&want)))
}

/// `fastpmi -n N fastpmi-bench __rank`: with a long fence loop (quiet,
/// polled), or with the last rank starting late (sitting); polled and
/// sitting run `fastpmi ps PID --json` every 100 ms beside it.
pub fn spec(t: &Tools, c: Config, n: u32, p: &RunParams) -> Spec {
    let fastpmi = t.fastpmi.clone().unwrap_or_default();
    // Neither the loop nor the late start may leak from the caller's shell
    // into the configuration that does not ask for it.
    let os = |s: &str| OsString::from(s);
    let mut env_remove = vec![
        os(fastpmi_codec::names::env::TRANSPORT),
        os(FENCE_LOOP_ENV),
        os(LATE_RANK_ENV),
        os(LATE_MS_ENV),
    ];
    let env_set: Vec<(OsString, OsString)> = if c == Config::PsSitting {
        vec![
            (os(LATE_RANK_ENV), n.saturating_sub(1).to_string().into()),
            (os(LATE_MS_ENV), LATE_MS.to_string().into()),
        ]
    } else {
        vec![(os(FENCE_LOOP_ENV), FENCES.to_string().into())]
    };
    env_remove.retain(|k| env_set.iter().all(|(s, _)| s != k));
    let classify = (c == Config::PsSitting)
        .then(|| Classify(Arc::new(move |out: &[u8]| sitting_in_fence(out, n))));
    Spec {
        program: fastpmi.clone(),
        args: vec![
            "-n".into(),
            OsString::from(n.to_string()),
            t.rank_exe.clone().into_os_string(),
            "__rank".into(),
        ],
        env_set,
        env_remove,
        cwd: None,
        timeout: p.timeout,
        mem: MemProbe::None,
        poll: (c != Config::PsQuiet).then(|| Poll {
            program: fastpmi,
            args: vec!["ps".into(), "{pid}".into(), "--json".into()],
            period: PERIOD,
            classify,
        }),
    }
}

/// After the exchange line was judged. Polled: the run counts only if `ps`
/// answered at least once; sitting: only if it answered at least once while
/// the job sat in fence 1 (and only those answers are timed into the
/// record). Also recorded: failed polls and (sitting) answers that showed
/// another state (launch, the rest of the exchange).
pub fn judge(c: Config, o: &Outcome, r: &mut Record) -> Result<(), String> {
    if c == Config::PsQuiet {
        return Ok(());
    }
    let sitting = c == Config::PsSitting;
    let ok = o.polls.iter().filter(|p| p.ok).count();
    // Sitting: an answer counts if the job still sat in the fence when it
    // ended, that is if the next poll (started after it ended) found it
    // there too. The last sitting answer of a run straddles the release:
    // the job's N-1 ranks wake while `ps` prints, and it waits for a CPU
    // behind them (582 ms by hand, against 10-25 ms for the others).
    let timed: Vec<&Polled> = if sitting {
        o.polls
            .windows(2)
            .filter(|w| w[0].matched && w[1].matched)
            .map(|w| &w[0])
            .collect()
    } else {
        o.polls.iter().filter(|p| p.ok).collect()
    };
    let counted: Vec<f64> = timed.iter().map(|p| p.ms).collect();
    r.metrics.insert("ps_count".into(), counted.len() as f64);
    r.metrics
        .insert("ps_failed".into(), (o.polls.len() - ok) as f64);
    if sitting {
        r.metrics
            .insert("ps_other".into(), (ok - counted.len()) as f64);
    }
    let s = Summary::of(counted.iter().copied()).ok_or_else(|| {
        if sitting {
            format!(
                "fastpmi ps never answered while the job sat in fence 1 ({} attempts, {ok} answers, none with \"fence 1: {n1}/{n} arrived, missing: rank {n1}\")",
                o.polls.len(),
                n = r.n,
                n1 = r.n.saturating_sub(1),
            )
        } else {
            format!(
                "fastpmi ps never answered ({} attempts during the job)",
                o.polls.len()
            )
        }
    })?;
    r.metrics.insert("ps_median_ms".into(), s.median);
    r.metrics.insert("ps_max_ms".into(), s.max);
    // When the worst answer came (its start after the launch, and which of
    // the timed answers it was): a slow answer at the start or the end of
    // the sitting differs from one in its middle.
    if let Some((i, p)) = timed
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.ms.total_cmp(&b.1.ms))
    {
        r.metrics.insert("ps_max_at_s".into(), p.at_ms / 1e3);
        r.metrics.insert("ps_max_nth".into(), (i + 1) as f64);
    }
    if sitting {
        // The job leaves fence 1 once and never comes back: a poll between
        // the first and the last counted answer was made while it sat there,
        // and one that failed is a `ps` that did not answer in the situation
        // measured.
        let first = o.polls.iter().position(|p| p.matched);
        let last = o.polls.iter().rposition(|p| p.matched);
        if let (Some(a), Some(b)) = (first, last) {
            let failed = o.polls[a..=b].iter().filter(|p| !p.ok).count();
            if failed > 0 {
                return Err(format!(
                    "fastpmi ps failed {failed} time(s) while the job sat in fence 1 (between answers showing it there)"
                ));
            }
        }
    }
    Ok(())
}

fn fence_loop(ctx: &Context, c: Config, n: u32) -> Option<Summary> {
    summarize(ctx.records, c, n, |r| r.get("fence_loop_us"))
}

/// Targets: the fence loop with `ps` within noise of the loop without (the
/// polled median inside the quiet runs' range, or at most 1.05x), and every
/// `ps` answer while the job sits in a fence within 100 ms (the issue's
/// situation). The worst answer during the busy loop is information in the
/// section, not a target.
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
        let what = format!(
            "N={n} `fastpmi ps` answered within {TARGET_MS:.0} ms while the job sits in a shared-memory fence"
        );
        let worst = summarize(ctx.records, Config::PsSitting, n, |r| r.get("ps_max_ms"));
        out.push(match worst {
            Some(w) => format!(
                "{what}, worst answer of all runs: {} ({:.0} ms{})",
                if w.max <= TARGET_MS { "met" } else { "missed" },
                w.max,
                worst_where(ctx, Config::PsSitting, n)
            ),
            None => format!("{what}: missed (not measured)"),
        });
    }
    out
}

/// Where the worst answer of `c`'s runs at `n` was: its run, its place
/// among that run's timed answers, when it started.
fn worst_where(ctx: &Context, c: Config, n: u32) -> String {
    let worst = runs_of(ctx.records, c, n)
        .into_iter()
        .filter(|r| r.status == Status::Ok)
        .filter_map(|r| Some((r, r.get("ps_max_ms")?)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    match worst {
        Some((r, _)) => match (r.get("ps_max_nth"), r.get("ps_count"), r.get("ps_max_at_s")) {
            (Some(k), Some(m), Some(at)) => format!(
                "; run {}, answer {k:.0} of {m:.0}, started {at:.2} s after the launch",
                r.rep + 1
            ),
            _ => String::new(),
        },
        None => String::new(),
    }
}

/// The report's section.
pub fn section(ctx: &Context, w: &mut String) {
    let _ = writeln!(w, "\n## fastpmi ps during a job\n");
    let _ = writeln!(
        w,
        "`fence-loop`: the Rust rank program's exchange, then {FENCES} back-to-back shared-memory fences (rank 0's mean per fence), alone and (`+ps`) with `fastpmi ps PID --json` run every {} ms for the whole job. `fence-sitting+ps`: the exchange with the last rank sleeping {:.0} s before PMI init, so the other N-1 sit in its first fence, `ps` run every {} ms; only the answers showing \"fence 1: N-1/N arrived, missing: rank N-1\" and followed by another such answer count, so the job still sat there when the answer ended (those during launch or after the fence do not, nor the last sitting one, which the release overtakes: the N-1 ranks wake while it prints; a run with none, or with a failed `ps` between two sitting answers, fails). `ps` figures are whole commands (process start included), ms over the counted answers of a run, then median (min–max) over runs.\n",
        PERIOD.as_millis(),
        LATE_MS as f64 / 1e3,
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
            let polled = c != Config::PsQuiet;
            let dash = || "—".to_string();
            let _ = writeln!(
                w,
                "| {n} | {c} | {} | {} | {} | {} | {} |",
                runs_cell(ctx, c, n),
                if c == Config::PsSitting {
                    dash()
                } else {
                    cell(fence_loop(ctx, c, n), 1e-3)
                },
                if polled {
                    cell(m("ps_count"), 1.0)
                } else {
                    dash()
                },
                if polled {
                    cell(m("ps_median_ms"), 1.0)
                } else {
                    dash()
                },
                if polled {
                    cell(m("ps_max_ms"), 1.0)
                } else {
                    dash()
                },
            );
        }
    }
    for &n in &ctx.opts.ps_sizes {
        if let Some(b) = summarize(ctx.records, Config::PsPolled, n, |r| r.get("ps_max_ms")) {
            let _ = writeln!(
                w,
                "\nN={n}: worst `fastpmi ps` answer during the busy {FENCES}-fence loop, all polled runs: {:.0} ms{} (information: every rank is fencing and competes with `ps` for the CPUs; the 100 ms target is the sitting row's).",
                b.max,
                worst_where(ctx, Config::PsPolled, n)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastpmi::tools::proto::RankRow;

    /// The `jobs` array of a `size`-rank job with this summary, as the
    /// launcher encodes it (the crate's own types).
    fn answer(size: u32, summary: &str) -> Vec<u8> {
        let row = RankRow {
            rank: 0,
            pid: Some(42),
            executable: "x".into(),
            appnum: 0,
            transport: "shm".into(),
            kind: "in_fence".into(),
            state: "in fence 1".into(),
            fence: Some(1),
            attr: None,
            seconds: 0.5,
            last_op: Some("kvs-fence".into()),
            fences: 1,
            exit: None,
            cpus: None,
            process: Some("sleeping".into()),
            process_last_ran: None,
            process_wchan: None,
        };
        let job = JobTable {
            id: "fastpmi_1_0".into(),
            size,
            spawner: None,
            held: false,
            failed: None,
            fences_completed: 0,
            missing: Vec::new(),
            group_fences: Vec::new(),
            summary: vec![summary.into()],
            ranks: vec![row],
        };
        serde_json::to_vec(&vec![job]).unwrap()
    }

    fn judged(c: Config, polls: &[(f64, bool, bool)]) -> (Result<(), String>, Record) {
        let o = Outcome {
            end: crate::proc::End::Exited(0),
            wall: Duration::from_secs(5),
            stdout: String::new(),
            stderr: String::new(),
            mem: None,
            polls: polls
                .iter()
                .enumerate()
                .map(|(i, &(ms, ok, matched))| Polled {
                    at_ms: 100.0 * (i + 1) as f64,
                    ms,
                    ok,
                    matched,
                })
                .collect(),
        };
        let mut r = Record::skipped(c, 1024, 0, "");
        (judge(c, &o, &mut r), r)
    }

    #[test]
    fn sitting_runs_count_only_the_answers_that_show_the_job_sitting() {
        // Launch (answered, not sitting), three sitting answers, then the
        // rest of the exchange: only the first two are timed (the third
        // ended after the job left the fence, as far as the poller knows).
        let launch = (300.0, true, false);
        let after = (250.0, true, false);
        let polls = [
            launch,
            (20.0, true, true),
            (40.0, true, true),
            (30.0, true, true),
            after,
        ];
        let (res, r) = judged(Config::PsSitting, &polls);
        assert_eq!(res, Ok(()));
        assert_eq!(r.get("ps_count"), Some(2.0));
        assert_eq!(r.get("ps_other"), Some(3.0));
        assert_eq!(r.get("ps_median_ms"), Some(30.0));
        assert_eq!(r.get("ps_max_ms"), Some(40.0));
        // The worst timed answer is the second, the poll started third (at
        // 300 ms).
        assert_eq!(r.get("ps_max_nth"), Some(2.0));
        assert_eq!(r.get("ps_max_at_s"), Some(0.3));
        // The polled loop times every answer.
        let (res, r) = judged(Config::PsPolled, &polls);
        assert_eq!(res, Ok(()));
        assert_eq!(r.get("ps_max_ms"), Some(300.0));
        assert_eq!(r.get("ps_max_nth"), Some(1.0));
        // No answer while sitting: a failed run, not a pass.
        let (res, _) = judged(Config::PsSitting, &[launch, after]);
        assert!(res
            .unwrap_err()
            .contains("never answered while the job sat"));
        // A ps that failed between two sitting answers failed while sitting.
        let failed = (1000.0, false, false);
        let sat = (20.0, true, true);
        let (res, _) = judged(Config::PsSitting, &[sat, sat, failed, sat, sat]);
        assert!(res.unwrap_err().contains("failed 1 time(s)"));
        // One that failed during launch is only counted.
        let (res, r) = judged(Config::PsSitting, &[failed, sat, sat]);
        assert_eq!(res, Ok(()));
        assert_eq!(r.get("ps_failed"), Some(1.0));
        // A slow last sitting answer (the release came while it printed)
        // is not timed; a slow one followed by another sitting answer is.
        let slow = (580.0, true, true);
        let (res, r) = judged(Config::PsSitting, &[sat, sat, slow, after]);
        assert_eq!(res, Ok(()));
        assert_eq!(r.get("ps_max_ms"), Some(20.0));
        let (_, r) = judged(Config::PsSitting, &[sat, slow, sat, after]);
        assert_eq!(r.get("ps_max_ms"), Some(580.0));
        // A single sitting answer cannot be known to have ended sitting.
        let (res, _) = judged(Config::PsSitting, &[launch, sat, after]);
        assert!(res.is_err());
    }

    #[test]
    fn sitting_means_all_but_the_late_rank_in_fence_1() {
        let sit =
            "fence 1: 1023/1024 arrived, missing: rank 1023 (pid 9, running without PMI for 1.2 s)";
        assert!(sitting_in_fence(&answer(1024, sit), 1024));
        // Another job size, or the answer of another job.
        assert!(!sitting_in_fence(&answer(1024, sit), 256));
        // Still launching: fewer ranks arrived, or another rank missing.
        let launching =
            "fence 1: 700/1024 arrived, missing: rank 700 (pid 9, running without PMI for 0.1 s)";
        assert!(!sitting_in_fence(&answer(1024, launching), 1024));
        let other = "fence 1: 1023/1024 arrived, missing: rank 5 (pid 9, in PMI init for 0.1 s)";
        assert!(!sitting_in_fence(&answer(1024, other), 1024));
        // Past the first fence, or nothing to wait for.
        let later = "fence 2: 1023/1024 arrived, missing: rank 1023 (pid 9, running for 0.1 s)";
        assert!(!sitting_in_fence(&answer(1024, later), 1024));
        let idle = "no fence or node-attribute wait in progress";
        assert!(!sitting_in_fence(&answer(1024, idle), 1024));
        // Not a `jobs` array.
        assert!(!sitting_in_fence(sit.as_bytes(), 1024));
        assert!(!sitting_in_fence(b"", 1024));
    }
}
