//! One run's result (a row of raw.csv), parsing of the programs' result
//! lines, and the median / min–max summaries over repetitions. How a run
//! becomes a record is `suite::judge`, above the families.

use std::collections::BTreeMap;

use crate::configs::Config;
use crate::proc::Mem;

/// Numeric fields of the exchange line, in raw.csv column order. The C
/// program prints the first 16; the Rust rank program adds the rss fields
/// and, when asked, the steady-state fence loop (which is also where the
/// futex floor's per-fence time goes).
pub const METRICS: &[&str] = &[
    "init_us",
    "put_us",
    "fence_us",
    "getall_us",
    "fence2_us",
    "finalize_us",
    "per_get_us",
    "max_init_us",
    "max_fence_us",
    "min_fence_us",
    "max_getall_us",
    "max_getall_rank",
    "mean_getall_us",
    "max_fence2_us",
    "gather_us",
    "total_us",
    "rss_delta_kb",
    "max_rss_delta_kb",
    "rss_exchange_kb",
    "max_rss_exchange_kb",
    "rss_shmem_exchange_kb",
    "fence_loop_us",
    "fence_loop_n",
    "segment_kb",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    /// Non-zero exit, signal, or no result line.
    Failed,
    TimedOut,
    /// Ran, but rank 0 used another transport than the configuration is about.
    WrongTransport,
    /// Not run (see the error column).
    Skipped,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::TimedOut => "timeout",
            Status::WrongTransport => "wrong-transport",
            Status::Skipped => "skipped",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Record {
    pub config: Config,
    pub n: u32,
    pub rep: u32,
    pub status: Status,
    /// Launch to the launcher's exit, measured by the harness.
    pub wall_s: Option<f64>,
    pub transport: Option<String>,
    pub metrics: BTreeMap<String, f64>,
    pub mem: Option<Mem>,
    /// Why the run failed (with the stderr tail), or a note.
    pub error: String,
}

impl Record {
    pub fn skipped(config: Config, n: u32, rep: u32, why: &str) -> Record {
        Record {
            config,
            n,
            rep,
            status: Status::Skipped,
            wall_s: None,
            transport: None,
            metrics: BTreeMap::new(),
            mem: None,
            error: why.to_string(),
        }
    }

    pub fn get(&self, key: &str) -> Option<f64> {
        self.metrics.get(key).copied()
    }

    /// Rank 0's put + fence + get-all + fence2: the exchange itself.
    pub fn exchange_us(&self) -> Option<f64> {
        Some(
            self.get("put_us")?
                + self.get("fence_us")?
                + self.get("getall_us")?
                + self.get("fence2_us")?,
        )
    }
}

/// `key=value` pairs of the last line of `stdout` that starts with `n=` and
/// has `total_us=`: the result line of `pmi2_exchange` or `__rank`.
pub fn parse_exchange_line(stdout: &str) -> Option<BTreeMap<String, String>> {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with("n=") && l.contains(" total_us="))?;
    Some(
        line.split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

/// `per-fence X us` of futex_barrier_floor's line.
pub fn parse_floor_line(stdout: &str) -> Option<f64> {
    let l = stdout.lines().rev().find(|l| l.contains("per-fence"))?;
    let rest = l.split("per-fence").nth(1)?;
    rest.split_whitespace().next()?.parse().ok()
}

/// `mpi_spawn ok children=N spawn_ms=T`: T, if the line is there for N.
pub fn parse_spawn_line(stdout: &str, n: u32) -> Option<f64> {
    let l = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("mpi_spawn ok"))?;
    let want = format!("children={n}");
    if !l.split_whitespace().any(|w| w == want) {
        return None;
    }
    l.split_whitespace()
        .find_map(|w| w.strip_prefix("spawn_ms="))?
        .parse()
        .ok()
}

/// Median and spread of one figure over the ok runs of one (config, N).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub count: usize,
}

impl Summary {
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Summary> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let m = v.len();
        let median = if m % 2 == 1 {
            v[m / 2]
        } else {
            (v[m / 2 - 1] + v[m / 2]) / 2.0
        };
        Some(Summary {
            median,
            min: v[0],
            max: v[m - 1],
            count: m,
        })
    }
}

/// Runs of one (config, N), in order.
pub fn runs_of(records: &[Record], c: Config, n: u32) -> Vec<&Record> {
    records
        .iter()
        .filter(|r| r.config == c && r.n == n)
        .collect()
}

/// Summary of `f` over the ok runs of (c, n).
pub fn summarize(
    records: &[Record],
    c: Config,
    n: u32,
    f: impl Fn(&Record) -> Option<f64>,
) -> Option<Summary> {
    Summary::of(
        runs_of(records, c, n)
            .into_iter()
            .filter(|r| r.status == Status::Ok)
            .filter_map(f),
    )
}

/// Of the repetitions where both `a` and `b` ran ok at `n` (interleaved,
/// so each pair ran minutes apart at most), how many `a` was faster in
/// by `f`: `(faster, pairs)`.
pub fn paired_wins(
    records: &[Record],
    a: Config,
    b: Config,
    n: u32,
    f: impl Fn(&Record) -> Option<f64>,
) -> (usize, usize) {
    let ok = |c| {
        runs_of(records, c, n)
            .into_iter()
            .filter(|r| r.status == Status::Ok)
            .filter_map(|r| Some((r.rep, f(r)?)))
            .collect::<BTreeMap<u32, f64>>()
    };
    let (a, b) = (ok(a), ok(b));
    let pairs: Vec<(f64, f64)> = a
        .iter()
        .filter_map(|(rep, &x)| Some((x, *b.get(rep)?)))
        .collect();
    (pairs.iter().filter(|(x, y)| x < y).count(), pairs.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_spread() {
        let s = Summary::of([3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.count), (2.0, 1.0, 3.0, 3));
        assert_eq!(Summary::of([1.0, 2.0]).unwrap().median, 1.5);
        assert!(Summary::of([]).is_none());
    }

    #[test]
    fn paired_wins_compare_runs_of_the_same_repetition() {
        let run = |c, rep, wall: Option<f64>| Record {
            wall_s: wall,
            status: if wall.is_some() {
                Status::Ok
            } else {
                Status::Failed
            },
            ..Record::skipped(c, 4, rep, "")
        };
        let (a, b) = (Config::LaunchShm, Config::LaunchSocket);
        let records = [
            run(a, 1, Some(1.0)),
            run(b, 1, Some(2.0)),
            run(a, 2, Some(3.0)),
            run(b, 2, Some(2.5)),
            // Rep 3: b failed, no pair. Rep 4: a is faster, but only a
            // rep-4 run of b at another N exists.
            run(a, 3, Some(0.1)),
            run(b, 3, None),
            run(a, 4, Some(0.1)),
            Record {
                n: 8,
                ..run(b, 4, Some(9.0))
            },
        ];
        assert_eq!(paired_wins(&records, a, b, 4, |r| r.wall_s), (1, 2));
        assert_eq!(paired_wins(&records, b, a, 4, |r| r.wall_s), (1, 2));
        assert_eq!(paired_wins(&records, a, b, 16, |r| r.wall_s), (0, 0));
    }

    #[test]
    fn parses_result_lines() {
        let out = "noise\nn=4 init_us=1.5 put_us=2.0 total_us=9.0 transport=socket\n";
        let kv = parse_exchange_line(out).unwrap();
        assert_eq!(kv["init_us"], "1.5");
        assert_eq!(kv["transport"], "socket");
        assert!(parse_exchange_line("n=4 init_us=1").is_none());
        assert_eq!(
            parse_floor_line("n=8 spin=100 per-fence 12.5 us\n"),
            Some(12.5)
        );
    }
}
