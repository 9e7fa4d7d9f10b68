//! The proc table and the who-is-missing report.
//!
//! The launcher's event loop hands out a [`Snapshot`]: the server's view of
//! every socket rank, the process table and each job's segment. Turning it
//! into [`JobTable`]s reads the shared-memory ranks' state words with plain
//! atomic loads (no lock a rank takes, no wake-up), so it can run on any
//! thread.

use std::sync::Arc;

use shm_layout::{RankOp, RankPhase};

use super::mono_ns;
use super::proto::{JobTable, RankRow};
use crate::ranges::ranges;
use fastpmi_segment::JobSegment;
use fastpmi_server::status::{JobStatus, SockState};

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
        };
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
                        let k = String::from_utf8_lossy(k.as_bytes()).into_owned();
                        let state = format!("waiting for node attribute {k}");
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
    let mut t = JobTable {
        id: st.id.clone(),
        size: st.size,
        spawner: st.spawner.clone(),
        held: st.holding,
        failed: st.failed.clone(),
        fences_completed: st.fences_completed,
        summary: Vec::new(),
        ranks: rows,
    };
    t.summary = summary(&t);
    t
}

/// "rank 17 (pid 4242, running without PMI for 12.3 s)"
pub fn describe(r: &RankRow) -> String {
    let pid = r
        .pid
        .map_or("not started".to_string(), |p| format!("pid {p}"));
    format!(
        "rank {} ({pid}, {} for {:.1} s)",
        r.rank, r.state, r.seconds
    )
}

/// How many missing ranks a summary line names one by one.
const SUMMARY_DETAIL: usize = 8;

/// The fence in progress, if any: (number, ranks in it, ranks not in it).
pub fn fence_progress(t: &JobTable) -> Option<(u64, Vec<&RankRow>, Vec<&RankRow>)> {
    let k = t.ranks.iter().filter_map(|r| r.fence).min()?;
    let (inside, missing): (Vec<&RankRow>, Vec<&RankRow>) =
        t.ranks.iter().partition(|r| r.fence == Some(k));
    Some((k, inside, missing))
}

/// Ranks waiting for a node attribute, if any.
pub fn attr_waiters(t: &JobTable) -> Vec<&RankRow> {
    t.ranks
        .iter()
        .filter(|r| r.kind == "waiting_attr")
        .collect()
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
        let key = format!(
            "{} (last op {}, {} fences)",
            r.state,
            r.last_op.as_deref().unwrap_or("none"),
            r.fences
        );
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
