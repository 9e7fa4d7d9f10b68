//! The proc table and the who-is-missing report.
//!
//! The launcher's event loop hands out a [`Snapshot`]: the server's view of
//! every socket rank, the process table and each job's segment. Turning it
//! into [`JobTable`]s reads the shared-memory ranks' state words with plain
//! atomic loads (no lock a rank takes, no wake-up), so it can run on any
//! thread.

use std::sync::Arc;

use shm_layout::{RankOp, RankPhase};

use super::procfs::{self, ProcState, SchedNow};
use super::proto::{GroupFenceRow, JobTable, RankRow};
use super::{instant_ns, mono_ns};
use crate::ranges::ranges;
use fastpmi_segment::JobSegment;
use fastpmi_server::status::{GroupFence, JobStatus, SockState};

/// One rank's process, as the launcher knows it.
#[derive(Debug, Clone)]
pub struct ProcSnap {
    pub pid: Option<u32>,
    pub executable: String,
    /// When it was started, or its job created (not started yet); mono ns.
    pub since_ns: u64,
    /// How it ended and when (mono ns).
    pub ended: Option<(String, u64)>,
    /// CPU list it is bound to (`0-1,4`), if the launcher bound it.
    pub cpus: Option<String>,
}

/// One job.
#[derive(Clone)]
pub struct JobSnap {
    pub status: JobStatus,
    pub segment: Option<Arc<JobSegment>>,
    pub procs: Vec<ProcSnap>,
    /// Socket-rank `since` instants, converted to mono ns.
    pub sock_since_ns: Vec<u64>,
}

/// The launcher at one moment.
#[derive(Clone)]
pub struct Snapshot {
    pub launcher_pid: u32,
    pub command: String,
    pub age_seconds: f64,
    pub jobs: Vec<JobSnap>,
}

fn secs(now: u64, since: u64) -> f64 {
    if since == 0 {
        return 0.0;
    }
    now.saturating_sub(since) as f64 / 1e9
}

/// The proc table of one job, read now.
pub fn job_table(js: &JobSnap) -> JobTable {
    let st = &js.status;
    let seg = js.segment.as_ref().map(|s| s.seg());
    let failed = st.failed.is_some();
    let mut sched = SchedNow::default();
    let mut rows = Vec::with_capacity(st.ranks.len());
    for (r, sock) in st.ranks.iter().enumerate() {
        let proc = &js.procs[r];
        let shm = seg.as_ref().and_then(|s| s.rank(r as u32));
        let shm_phase = shm.map(|s| s.phase()).and_then(Result::ok);
        let shm_stamp = shm.map_or(0, |s| s.since_stamp());
        // The clocks are read after the rank's record, per rank: a rank that
        // changes phase while the table is read has a stamp after a clock
        // read at the start, which would show as 0 s in its new state.
        let now = mono_ns();
        // Shared-memory ranks may stamp with the TSC (`StampClock`).
        let tsc_now = fastpmi_segment::read_tsc().unwrap_or(0);
        let attached = matches!(shm_phase, Some(p) if p != RankPhase::NotStarted);
        let shm_fences = shm.map_or(0, |s| s.stats().fences);
        let fences = sock.fences + shm_fences;
        let last_op = shm
            .and_then(|s| s.last_op())
            .filter(|o| *o != RankOp::None)
            .map(|o| o.name())
            .map(String::from)
            .or((!sock.last_op.is_empty()).then(|| sock.last_op.clone()));
        let sock_since = js.sock_since_ns[r];
        let mut row = RankRow {
            rank: r as u32,
            pid: proc.pid,
            executable: proc.executable.clone(),
            appnum: st.appnum.get(r).copied().unwrap_or(0),
            transport: if attached {
                "shm"
            } else if sock.state != SockState::NoPmi {
                "socket"
            } else {
                "none"
            }
            .into(),
            kind: String::new(),
            state: String::new(),
            fence: None,
            attr: None,
            seconds: 0.0,
            last_op,
            fences,
            exit: None,
            cpus: proc.cpus.clone(),
            process: None,
            process_last_ran: None,
            process_wchan: None,
        };
        // What the kernel says of the process (not of one reaped: its pid
        // may be another process's by now).
        let process = match (proc.pid, &proc.ended) {
            (Some(pid), None) => procfs::status(pid, &mut sched).ok(),
            _ => None,
        };
        let cannot_run = process.as_ref().map(|p| p.state).filter(|s| {
            matches!(
                s,
                ProcState::Stopped | ProcState::Traced | ProcState::Zombie | ProcState::Dead
            )
        });
        if let Some(p) = &process {
            row.process = Some(p.state.word().to_string());
            row.process_last_ran = p.last_ran_ns.map(|ns| ns as f64 / 1e9);
            row.process_wchan = p.wchan.clone();
        }
        let (kind, state, since): (&str, String, u64) = if proc.pid.is_none() {
            ("launching", "launching".into(), proc.since_ns)
        } else if let Some((how, at)) = &proc.ended {
            row.exit = Some(how.clone());
            ("exited", how.clone(), *at)
        } else if sock.state == SockState::HeldInInit {
            ("held_in_init", "held in init".into(), sock_since)
        } else if attached {
            let since = match (shm, &seg) {
                (Some(_), Some(seg)) => seg.job().stamp_clock().to_mono_ns(shm_stamp, tsc_now, now),
                _ => 0,
            };
            match shm_phase {
                Some(RankPhase::InFence) => {
                    row.fence = Some(shm_fences);
                    ("in_fence", format!("in fence {shm_fences}"), since)
                }
                // A failed job's ranks leave the fence with an error: one that
                // had entered the fence that never completed was in it.
                Some(RankPhase::Running) if failed && shm_fences == st.fences_completed + 1 => {
                    row.fence = Some(shm_fences);
                    ("in_fence", format!("in fence {shm_fences}"), since)
                }
                Some(RankPhase::WaitingNodeAttr) => match shm.and_then(|s| s.wait_key()) {
                    Some(k) => {
                        // Set meanwhile: the rank has not seen it yet (it may
                        // be stopped, or not scheduled since).
                        let set = seg
                            .as_ref()
                            .is_some_and(|s| s.node_attrs().get(k.as_bytes()).is_some());
                        let k = String::from_utf8_lossy(k.as_bytes()).into_owned();
                        let state = if set {
                            format!("leaving the wait for node attribute {k}")
                        } else {
                            format!("waiting for node attribute {k}")
                        };
                        row.attr = Some(k);
                        ("waiting_attr", state, since)
                    }
                    None => ("waiting_attr", "waiting for a node attribute".into(), since),
                },
                Some(RankPhase::Finalized) => ("finalized", "finalized".into(), since),
                Some(RankPhase::Exited) => ("exited", "exited".into(), since),
                _ => ("running", "running".into(), since),
            }
        } else {
            match &sock.state {
                // A process that cannot run is not "running" without PMI.
                SockState::NoPmi if cannot_run.is_some() => {
                    ("no_pmi", "not yet in PMI".into(), proc.since_ns)
                }
                SockState::NoPmi => ("no_pmi", "running without PMI".into(), proc.since_ns),
                SockState::HeldInInit => ("held_in_init", "held in init".into(), sock_since),
                // A PMI-2 client between `init` and `fullinit`.
                SockState::Running if sock.last_op == "init" && sock.fences == 0 => {
                    ("in_init", "in PMI init".into(), sock_since)
                }
                SockState::Running => ("running", "running".into(), sock_since),
                SockState::InFence(n) => {
                    row.fence = Some(*n);
                    ("in_fence", format!("in fence {n}"), sock_since)
                }
                SockState::WaitingAttr(k) => {
                    row.attr = Some(k.clone());
                    (
                        "waiting_attr",
                        format!("waiting for node attribute {k}"),
                        sock_since,
                    )
                }
                SockState::Finalized => ("finalized", "finalized".into(), sock_since),
            }
        };
        row.kind = kind.into();
        row.state = state;
        row.seconds = secs(now, since);
        rows.push(row);
    }
    // Fences completed: read after the ranks' records, so no rank read in
    // a fence is past the fence in progress. The segment's barrier counts
    // every rank's arrivals (the server arrives there for socket ranks);
    // a job without a segment has only the server's count.
    let completed = seg.map_or(st.fences_completed, |s| {
        u64::from(s.fence().generation()).max(st.fences_completed)
    });
    let group_fences = group_fences(&st.groups, seg, &mut rows);
    between_fences(&mut rows, completed);
    let mut t = JobTable {
        id: st.id.clone(),
        size: st.size,
        spawner: st.spawner.clone(),
        held: st.holding,
        failed: st.failed.clone(),
        fences_completed: completed,
        missing: Vec::new(),
        group_fences,
        summary: Vec::new(),
        ranks: rows,
    };
    if let Some((_, _, missing)) = fence_progress(&t) {
        t.missing = missing.iter().map(|r| r.rank).collect();
    }
    t.summary = summary(&t);
    t
}

/// The group fences in progress. A rank of this job that arrived at a
/// server-barrier group fence and otherwise runs is "in fence of group G"
/// (kind `in_group_fence`) since its arrival. A segment barrier counts its
/// arrivals without recording whose: its rows stay as they are.
fn group_fences(
    groups: &[GroupFence],
    seg: Option<shm_layout::SegmentRef<'_>>,
    rows: &mut [RankRow],
) -> Vec<GroupFenceRow> {
    let mut out = Vec::new();
    for g in groups.iter().filter(|g| g.failed.is_none()) {
        let size = g.members.iter().filter(|m| !m.left).count() as u32;
        if g.in_segment {
            let Some(b) = g.slot.zip(seg).and_then(|(slot, s)| s.group(slot)) else {
                continue;
            };
            let arrived = b.arrived();
            if arrived > 0 {
                out.push(GroupFenceRow {
                    group: g.id.clone(),
                    barrier: "segment".into(),
                    arrived,
                    size: b.parties(),
                    missing: Vec::new(),
                    seconds: 0.0,
                });
            }
            continue;
        }
        let first = g.members.iter().filter_map(|m| m.arrived).min();
        let Some(first) = first else {
            continue;
        };
        let now = mono_ns();
        let mut missing = Vec::new();
        let mut arrived = 0;
        for m in g.members.iter().filter(|m| !m.left) {
            match (m.arrived, m.here) {
                (Some(at), true) => {
                    arrived += 1;
                    if let Some(r) = rows.get_mut(m.rank as usize) {
                        if r.kind == "running" {
                            r.kind = "in_group_fence".into();
                            r.state = format!("in fence of group {}", g.id);
                            r.seconds = secs(now, instant_ns(at));
                        }
                    }
                }
                (Some(_), false) => arrived += 1,
                (None, true) => missing.push(format!("rank {}", m.rank)),
                (None, false) => missing.push(format!("rank {} of job {}", m.rank, m.job)),
            }
        }
        out.push(GroupFenceRow {
            group: g.id.clone(),
            barrier: "server".into(),
            arrived,
            size,
            missing,
            seconds: secs(now, instant_ns(first)),
        });
    }
    out
}

/// Ranks between two fences, once `completed` fences are known: one whose
/// fence has completed but which has not returned from it (stopped, or not
/// scheduled since the release) is "leaving fence n", with `fence` = n;
/// while another fence is in progress, a rank that returned from fence n
/// and has not entered the next is "between fences n and n+1".
fn between_fences(rows: &mut [RankRow], completed: u64) {
    for r in rows.iter_mut() {
        if r.kind == "in_fence" && r.fence.is_some_and(|n| n <= completed) {
            r.kind = "between_fences".into();
            r.state = format!("leaving fence {}", r.fence.unwrap_or(0));
        }
    }
    let next = completed + 1;
    if !rows
        .iter()
        .any(|r| r.kind == "in_fence" && r.fence == Some(next))
    {
        return;
    }
    for r in rows.iter_mut() {
        if r.kind == "running" && r.fences >= 1 {
            r.kind = "between_fences".into();
            r.state = format!("between fences {} and {}", r.fences, r.fences + 1);
        }
    }
}

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
    if g.barrier == "segment" {
        return format!(
            "group {} fence (in the job segment): {}/{} arrived (the segment counts arrivals, not whose)",
            g.group, g.arrived, g.size
        );
    }
    format!("group {} fence: {}/{} arrived", g.group, g.arrived, g.size)
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

fn summary(t: &JobTable) -> Vec<String> {
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
        out += &format!("fastpmi: {name}: {}", group_head(g));
        if g.barrier == "server" {
            out += &format!(", waiting for {:.1} s", g.seconds);
        }
        out += "\n";
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

#[cfg(test)]
mod tests {
    use super::*;

    fn row(rank: u32, kind: &str, fence: Option<u64>, fences: u64) -> RankRow {
        RankRow {
            rank,
            pid: Some(1000 + rank),
            executable: "x".into(),
            appnum: 0,
            transport: "shm".into(),
            kind: kind.into(),
            state: match fence {
                Some(n) => format!("in fence {n}"),
                None => kind.into(),
            },
            fence,
            attr: None,
            seconds: 1.0,
            last_op: Some("kvs-fence".into()),
            fences,
            exit: None,
            cpus: None,
            process: Some("sleeping".into()),
            process_last_ran: None,
            process_wchan: None,
        }
    }

    fn table(mut rows: Vec<RankRow>, completed: u64) -> JobTable {
        between_fences(&mut rows, completed);
        let mut t = JobTable {
            id: "j".into(),
            size: rows.len() as u32,
            spawner: None,
            held: false,
            failed: None,
            fences_completed: completed,
            missing: Vec::new(),
            group_fences: Vec::new(),
            summary: Vec::new(),
            ranks: rows,
        };
        t.summary = summary(&t);
        t
    }

    /// The case of issue 32: rank 3 stopped after fence 7 completed, before
    /// it saw the release (its record still says "in fence 7"), the others
    /// in fence 8. The smallest fence any rank shows is 7, but 7 is done:
    /// fence 8 is in progress and rank 3 is the one it waits for.
    #[test]
    fn a_rank_that_has_not_returned_from_a_completed_fence_is_the_missing_one() {
        let mut rows: Vec<RankRow> = (0..16).map(|r| row(r, "in_fence", Some(8), 8)).collect();
        rows[3] = row(3, "in_fence", Some(7), 7);
        rows[3].process = Some("stopped".into());
        rows[3].process_last_ran = Some(2.5);
        let t = table(rows, 7);
        let (k, inside, missing) = fence_progress(&t).unwrap();
        assert_eq!(k, 8);
        assert_eq!(inside.len(), 15);
        assert_eq!(missing.iter().map(|r| r.rank).collect::<Vec<_>>(), [3]);
        assert_eq!(t.ranks[3].kind, "between_fences");
        assert_eq!(t.ranks[3].state, "leaving fence 7");
        assert_eq!(
            t.summary[0],
            "fence 8: 15/16 arrived, missing: rank 3 (pid 1003, leaving fence 7 for 1.0 s, \
             process stopped, last ran 2.5 s ago)"
        );
        let report = report(&t);
        assert!(
            report.contains("fastpmi:   rank 3: leaving fence 7 (last op kvs-fence, 7 fences), process stopped\n"),
            "{report}"
        );
    }

    /// A rank that returned from fence 7 and has not entered fence 8 while
    /// the others are in it: "between fences 7 and 8", with its last
    /// operation.
    #[test]
    fn a_rank_that_returned_is_between_fences() {
        let mut rows: Vec<RankRow> = (0..4).map(|r| row(r, "in_fence", Some(8), 8)).collect();
        rows[2] = row(2, "running", None, 7);
        rows[2].last_op = Some("kvs-put".into());
        let t = table(rows, 7);
        assert_eq!(t.ranks[2].kind, "between_fences");
        assert_eq!(t.ranks[2].state, "between fences 7 and 8");
        assert!(
            t.summary[0].starts_with(
                "fence 8: 3/4 arrived, missing: rank 2 (pid 1002, between fences 7 and 8 for 1.0 s, last op kvs-put, process sleeping)"
            ),
            "{:?}",
            t.summary
        );
    }

    /// Nobody in the fence after the last completed one: no fence in
    /// progress, running ranks stay "running"; a stopped one is still named.
    #[test]
    fn no_fence_in_progress() {
        let mut rows: Vec<RankRow> = (0..4).map(|r| row(r, "running", None, 7)).collect();
        rows[1].process = Some("traced".into());
        let t = table(rows, 7);
        assert!(fence_progress(&t).is_none());
        assert!(t.ranks.iter().all(|r| r.kind == "running"));
        assert_eq!(t.summary.len(), 1, "{:?}", t.summary);
        assert!(
            t.summary[0].starts_with("processes stopped or blocked: rank 1 (pid 1001, running for 1.0 s, last op kvs-fence, process traced)"),
            "{:?}",
            t.summary
        );
    }
}
