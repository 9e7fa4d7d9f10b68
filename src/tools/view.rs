//! The proc table: each rank's row, built from a snapshot (the report
//! over it is [`super::report`]).
//!
//! The launcher's event loop hands out a [`Snapshot`]: the server's view of
//! every socket rank, the process table and each job's segment. Turning it
//! into [`JobTable`]s reads the shared-memory ranks' state words with plain
//! atomic loads (no lock a rank takes, no wake-up), so it can run on any
//! thread.

use std::sync::Arc;

use shm_layout::{RankOp, RankPhase};

use super::procfs::{self, ProcState, SchedNow};
use super::proto::{JobTable, RankRow};
use super::report::{fence_progress, summary};
use super::{mono_ns, secs};
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
    /// How it died, in a fault-tolerant job ("exited 3", "killed by
    /// SIGKILL", ...), as the launcher words it.
    pub death: Option<String>,
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
            transport: if sock.pmix {
                "pmix"
            } else if attached {
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
        } else if let Some(death) = &proc.death {
            // A fault-tolerant job's dead rank, reaped or still ending.
            if let Some((how, _)) = &proc.ended {
                row.exit = Some(how.clone());
            }
            let at = proc.ended.as_ref().map_or(sock_since, |(_, at)| *at);
            ("dead", death.clone(), at)
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
    let group_fences = super::group_view::group_fences(&st.groups, seg, Some(&mut rows));
    between_fences(&mut rows, completed);
    // Rows stay in this launcher's order; they show the job's ranks.
    for row in &mut rows {
        row.rank += st.first_rank;
    }
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

#[cfg(test)]
mod tests {
    use super::super::report::report;
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
