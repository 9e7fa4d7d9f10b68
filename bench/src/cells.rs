//! What the report's sections share: the [`Context`] they read, and the
//! cells of their tables (figures, runs, why a figure is absent). The
//! families write their sections with it; `report` assembles them.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use crate::cli::Options;
use crate::configs::{Availability, Config};
use crate::record::{runs_of, summarize, Record, Status, Summary};

/// Everything the report is made of.
pub struct Context<'a> {
    pub opts: &'a Options,
    pub availability: &'a [(Config, Availability)],
    pub records: &'a [Record],
    pub started: SystemTime,
    pub elapsed: Duration,
    /// 1-minute load average at the start, before the MPICH startup jobs
    /// (if any ran), and at the end.
    pub load: [Option<String>; 3],
}

/// About three significant digits, never scientific notation.
pub fn num(x: f64) -> String {
    let a = x.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else if a >= 0.01 {
        format!("{x:.3}")
    } else {
        format!("{x:.4}")
    }
}

/// `median (min–max)`, scaled; just the median for a single run.
pub fn cell(s: Option<Summary>, scale: f64) -> String {
    match s {
        None => "—".into(),
        Some(s) if s.count == 1 || s.min == s.max => num(s.median * scale),
        Some(s) => format!(
            "{} ({}–{})",
            num(s.median * scale),
            num(s.min * scale),
            num(s.max * scale)
        ),
    }
}

pub fn md_escape(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn availability<'a>(ctx: &'a Context, c: Config) -> &'a Availability {
    ctx.availability
        .iter()
        .find(|(x, _)| *x == c)
        .map(|(_, a)| a)
        .unwrap_or(&Availability::NotSelected("not selected"))
}

/// The "runs" cell: `3/3 ok`, `missing: ...`, `2/3 ok; 1 timeout`.
pub fn runs_cell(ctx: &Context, c: Config, n: u32) -> String {
    match availability(ctx, c) {
        Availability::Missing(why) => return format!("missing: {}", md_escape(why)),
        Availability::NotSelected(why) => return why.to_string(),
        Availability::Present => {}
    }
    let runs = runs_of(ctx.records, c, n);
    if runs.is_empty() {
        return "not run".into();
    }
    let count = |s: Status| runs.iter().filter(|r| r.status == s).count();
    let ok = count(Status::Ok);
    if ok == 0 && count(Status::WrongTransport) > 0 {
        let got = runs
            .iter()
            .find_map(|r| r.transport.clone())
            .unwrap_or_else(|| "?".into());
        return format!(
            "missing: client did not use shared memory (rank 0 reported transport={got})"
        );
    }
    let mut s = format!("{ok}/{} ok", runs.len());
    for st in [
        Status::Failed,
        Status::TimedOut,
        Status::WrongTransport,
        Status::Skipped,
    ] {
        let k = count(st);
        if k > 0 {
            let _ = write!(s, "; {k} {}", st.as_str());
        }
    }
    s
}

pub fn median(ctx: &Context, c: Config, n: u32, f: impl Fn(&Record) -> Option<f64>) -> Option<f64> {
    summarize(ctx.records, c, n, f).map(|s| s.median)
}

/// Why (c, n) has no figure, for a target line.
pub fn why_absent(ctx: &Context, c: Config, n: u32) -> String {
    let r = runs_cell(ctx, c, n);
    if r.starts_with("missing") || r.starts_with("not ") {
        format!("{c}: {r}")
    } else {
        format!("{c} at N={n}: {r}")
    }
}

/// The N a target set at `target` is judged at among the sizes run:
/// `target` itself, or the largest size below it (then with a caveat for
/// the verdict line), or the smallest; `None` when nothing ran.
pub fn judged_at(sizes: &[u32], target: u32) -> Option<(u32, String)> {
    if sizes.contains(&target) {
        return Some((target, String::new()));
    }
    let n = sizes
        .iter()
        .copied()
        .filter(|&n| n < target)
        .max()
        .or_else(|| sizes.first().copied())?;
    Some((n, format!(" (N={target} not run; evaluated at N={n})")))
}
