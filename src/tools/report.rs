//! The who-is-missing report of a job table: the fence in progress and
//! the ranks it waits for, the summary lines `fastpmi ps` prints, and the
//! text SIGUSR1, `--fence-timeout` and `--verbose` failures print.

use super::proto::{GroupFenceRow, JobTable, RankRow};
use crate::ranges::ranges;

/// What the kernel says of a rank's process: "stopped, last ran 3.0 s
/// ago", "uninterruptible in folio_wait_bit_common", "sleeping".
pub fn process_text(r: &RankRow) -> Option<String> {
    let mut s = r.process.clone()?;
    if let Some(w) = &r.process_wchan {
        s += &format!(" in {w}");
    }
    if let Some(t) = r.process_last_ran {
        s += &format!(", last ran {t:.1} s ago");
    }
    Some(s)
}

/// Whether a rank's process is stopped, traced, in uninterruptible sleep
/// or a zombie: what a report points at.
pub fn process_blocked(r: &RankRow) -> bool {
    matches!(
        r.process.as_deref(),
        Some("stopped" | "traced" | "uninterruptible" | "zombie" | "dead")
    )
}

/// "rank 17 (pid 4242, running without PMI for 12.3 s, process sleeping)";
/// a rank running, or between fences, also names its last operation.
pub fn describe(r: &RankRow) -> String {
    let pid = r
        .pid
        .map_or("not started".to_string(), |p| format!("pid {p}"));
    let mut s = format!("rank {} ({pid}, {} for {:.1} s", r.rank, r.state, r.seconds);
    // What it did last, unless it is still in (or leaving) a call.
    if r.kind == "running" || (r.kind == "between_fences" && r.fence.is_none()) {
        s += &format!(", last op {}", r.last_op.as_deref().unwrap_or("none"));
    }
    if let Some(p) = process_text(r) {
        s += &format!(", process {p}");
    }
    s + ")"
}

/// How many missing ranks a summary line names one by one.
const SUMMARY_DETAIL: usize = 8;

/// The fence in progress, if any: (number, ranks in it, ranks not in it).
/// It is the one after the job's last completed fence, once some rank has
/// arrived at it; every rank not in it holds it up (a rank that has not
/// returned from the previous fence included).
pub fn fence_progress(t: &JobTable) -> Option<(u64, Vec<&RankRow>, Vec<&RankRow>)> {
    let k = t.fences_completed + 1;
    let in_k = |r: &RankRow| r.kind == "in_fence" && r.fence == Some(k);
    if !t.ranks.iter().any(in_k) {
        return None;
    }
    let (inside, missing): (Vec<&RankRow>, Vec<&RankRow>) = t.ranks.iter().partition(|r| in_k(r));
    Some((k, inside, missing))
}

/// Ranks waiting for a node attribute, if any.
pub fn attr_waiters(t: &JobTable) -> Vec<&RankRow> {
    t.ranks
        .iter()
        .filter(|r| r.kind == "waiting_attr")
        .collect()
}

/// A member named in a group fence line: described when it is a rank of
/// this job.
fn group_member(t: &JobTable, m: &str) -> String {
    m.strip_prefix("rank ")
        .and_then(|r| r.parse::<u32>().ok())
        .and_then(|r| t.ranks.get(r as usize))
        .map_or_else(|| m.to_string(), describe)
}

/// "group G fence: 3/4 arrived".
fn group_head(g: &GroupFenceRow) -> String {
    let place = if g.barrier == "segment" {
        " (in the job segment)"
    } else {
        ""
    };
    format!(
        "group {} fence{place}: {}/{} arrived for {:.1} s",
        g.group, g.arrived, g.size, g.seconds
    )
}

/// "group G fence: 3/4 arrived, missing: rank 2 (pid ...)", the first
/// [`SUMMARY_DETAIL`] missing members described.
fn group_line(t: &JobTable, g: &GroupFenceRow) -> String {
    let mut line = group_head(g);
    if !g.missing.is_empty() {
        let named: Vec<String> = g
            .missing
            .iter()
            .take(SUMMARY_DETAIL)
            .map(|m| group_member(t, m))
            .collect();
        line += &format!(", missing: {}", named.join(", "));
        if g.missing.len() > SUMMARY_DETAIL {
            line += &format!(" and {} more", g.missing.len() - SUMMARY_DETAIL);
        }
    }
    line
}

pub(super) fn summary(t: &JobTable) -> Vec<String> {
    let mut out = Vec::new();
    let held: Vec<u32> = t
        .ranks
        .iter()
        .filter(|r| r.kind == "held_in_init")
        .map(|r| r.rank)
        .collect();
    if t.held || !held.is_empty() {
        out.push(format!(
            "held in init: {}/{} ranks (fastpmi release resumes them)",
            held.len(),
            t.size
        ));
    }
    if let Some((k, inside, missing)) = fence_progress(t) {
        let mut line = format!("fence {k}: {}/{} arrived", inside.len(), t.size);
        if !missing.is_empty() {
            let named: Vec<String> = missing
                .iter()
                .take(SUMMARY_DETAIL)
                .map(|r| describe(r))
                .collect();
            line += &format!(", missing: {}", named.join(", "));
            if missing.len() > SUMMARY_DETAIL {
                let rest: Vec<u32> = missing[SUMMARY_DETAIL..].iter().map(|r| r.rank).collect();
                line += &format!(" and {} more (ranks {})", rest.len(), ranges(&rest));
            }
        }
        out.push(line);
    }
    for g in &t.group_fences {
        out.push(group_line(t, g));
    }
    let waiting = attr_waiters(t);
    if !waiting.is_empty() {
        let ranks: Vec<u32> = waiting.iter().map(|r| r.rank).collect();
        let longest = waiting.iter().map(|r| r.seconds).fold(0.0, f64::max);
        out.push(format!(
            "node attribute wait: {}/{} ranks waiting (ranks {}) for up to {longest:.1} s",
            waiting.len(),
            t.size,
            ranges(&ranks)
        ));
    }
    // Processes that cannot go on, not named above.
    let named: Vec<u32> = fence_progress(t).map_or(Vec::new(), |(_, _, m)| {
        m.iter().take(SUMMARY_DETAIL).map(|r| r.rank).collect()
    });
    let blocked: Vec<&RankRow> = t
        .ranks
        .iter()
        .filter(|r| process_blocked(r) && !named.contains(&r.rank))
        .collect();
    if !blocked.is_empty() {
        let mut line = format!(
            "processes stopped or blocked: {}",
            blocked
                .iter()
                .take(SUMMARY_DETAIL)
                .map(|r| describe(r))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if blocked.len() > SUMMARY_DETAIL {
            let rest: Vec<u32> = blocked[SUMMARY_DETAIL..].iter().map(|r| r.rank).collect();
            line += &format!(" and {} more (ranks {})", rest.len(), ranges(&rest));
        }
        out.push(line);
    }
    if let Some(f) = &t.failed {
        out.push(format!("failed: {f}"));
    }
    if out.is_empty() {
        out.push("no fence or node-attribute wait in progress".into());
    }
    out
}

/// The report of `fastpmi ps`'s summary, SIGUSR1, the fence timeout and
/// `--verbose` failures: what the job waits for, every missing rank with
/// pid and state, then every rank's state, last operation and fence count
/// grouped into rank ranges. Lines end in `\n`, prefixed with `fastpmi: `.
pub fn report(t: &JobTable) -> String {
    let mut out = String::new();
    let name = format!("job {}", t.id);
    if let Some((k, inside, missing)) = fence_progress(t) {
        let arrived: Vec<u32> = inside.iter().map(|r| r.rank).collect();
        let longest = inside.iter().map(|r| r.seconds).fold(0.0, f64::max);
        out += &format!(
            "fastpmi: {name}: fence {k}: {}/{} ranks arrived (ranks {}), waiting for {longest:.1} s\n",
            inside.len(),
            t.size,
            ranges(&arrived)
        );
        for r in missing {
            out += &format!("fastpmi:   missing {}\n", describe(r));
        }
    }
    for g in &t.group_fences {
        out += &format!("fastpmi: {name}: {}\n", group_head(g));
        for m in &g.missing {
            out += &format!("fastpmi:   missing {}\n", group_member(t, m));
        }
    }
    let waiting = attr_waiters(t);
    if !waiting.is_empty() {
        let ranks: Vec<u32> = waiting.iter().map(|r| r.rank).collect();
        out += &format!(
            "fastpmi: {name}: {}/{} ranks wait for a node attribute (ranks {})\n",
            waiting.len(),
            t.size,
            ranges(&ranks)
        );
        for r in waiting {
            out += &format!("fastpmi:   waiting {}\n", describe(r));
        }
    }
    if out.is_empty() {
        out += &format!("fastpmi: {name}: no fence or node-attribute wait in progress\n");
    }
    // Everyone, grouped by what they do.
    let mut groups: Vec<(String, Vec<u32>)> = Vec::new();
    for r in &t.ranks {
        let mut key = format!(
            "{} (last op {}, {} fences)",
            r.state,
            r.last_op.as_deref().unwrap_or("none"),
            r.fences
        );
        // Running and sleeping are what ranks do; anything else is named.
        if process_blocked(r) {
            key += &format!(", process {}", r.process.as_deref().unwrap_or(""));
        }
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(r.rank),
            None => groups.push((key, vec![r.rank])),
        }
    }
    for (key, ranks) in groups {
        let which = if ranks.len() == 1 { "rank" } else { "ranks" };
        out += &format!("fastpmi:   {which} {}: {key}\n", ranges(&ranks));
    }
    out
}
