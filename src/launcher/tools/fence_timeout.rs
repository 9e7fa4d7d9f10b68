//! `--fence-timeout`: a fence or node-attribute wait incomplete for that
//! long fails its job, with the report of who is missing.

use std::time::{Duration, Instant};

use super::{ToolsRt, View};
use crate::ranges::ranges;
use crate::tools::group_view;
use crate::tools::proto::{GroupFenceRow, JobTable};
use crate::tools::report;
use crate::tools::view;
use fastpmi_server::JobIdx;

/// A wait past `--fence-timeout`: its job fails, blaming `rank` (of this
/// launcher's part of the job) with `message`.
pub(in crate::launcher) struct TimedOut {
    pub(in crate::launcher) job: JobIdx,
    pub(in crate::launcher) rank: u32,
    pub(in crate::launcher) message: String,
}

impl ToolsRt {
    /// `--fence-timeout` (`limit`): whether it is time to look for waits
    /// past it; then the limit, and the moment they are measured at.
    pub(in crate::launcher) fn fence_check_due(
        &mut self,
        limit: Option<Duration>,
    ) -> Option<(Duration, Instant)> {
        let limit = limit?;
        let now = Instant::now();
        if now < self.next_check {
            return None;
        }
        self.next_check =
            now + (limit / 4).clamp(Duration::from_millis(10), Duration::from_millis(100));
        Some((limit, now))
    }

    /// Whether `job`'s fence or node-attribute wait has been incomplete for
    /// `limit` at `now` (from [`ToolsRt::fence_check_due`]): then the
    /// failure of the job, the who-is-missing report printed.
    pub(in crate::launcher) fn fence_timeout(
        &mut self,
        job: JobIdx,
        (limit, now): (Duration, Instant),
        view: View<'_>,
    ) -> Option<TimedOut> {
        let (server, jobs) = (view.server, view.jobs);
        if jobs.live(job) == 0 || jobs.torn_down(job) || server.job_failed(job) {
            self.waiting.remove(&job);
            return None;
        }
        // A group fence counts from its first member's arrival.
        let groups = server.group_fence_status(job);
        if !groups.is_empty() {
            let seg = jobs.segment(job).map(|s| s.seg());
            let late = group_view::group_fences(&groups, seg, None)
                .into_iter()
                .find(|g| g.seconds >= limit.as_secs_f64());
            if let Some(g) = late {
                self.waiting.remove(&job);
                return Some(self.group_fence_timed_out(job, &g, limit, view));
            }
        }
        let shm_waits = jobs.segment(job).is_some_and(|s| {
            s.seg()
                .ranks()
                .iter()
                .any(|r| r.phase() == Ok(shm_layout::RankPhase::WaitingNodeAttr))
        });
        let waiting = server.fence_arrivals(job) > 0 || server.waits_for_attr(job) || shm_waits;
        if !waiting {
            self.waiting.remove(&job);
            return None;
        }
        let gen = server.fences_completed(job);
        let e = self.waiting.entry(job).or_insert((gen, now));
        if e.0 != gen {
            *e = (gen, now);
        }
        if now.duration_since(e.1) >= limit {
            self.waiting.remove(&job);
            return Some(self.fence_timed_out(job, limit, view));
        }
        None
    }

    fn fence_timed_out(&self, job: JobIdx, limit: Duration, view: View<'_>) -> TimedOut {
        let t = view::job_table(&self.job_snap(job, view));
        let report = report::report(&t);
        let progress = report::fence_progress(&t);
        let what = match &progress {
            Some((k, inside, _)) => format!("fence {k} ({}/{} arrived)", inside.len(), t.size),
            None => "a node-attribute wait".to_string(),
        };
        let verb = if progress.is_some() {
            "missing"
        } else {
            "waiting"
        };
        let missing: Vec<&crate::tools::proto::RankRow> = match progress {
            Some((_, _, m)) => m,
            None => report::attr_waiters(&t),
        };
        let named: Vec<String> = missing
            .iter()
            .take(8)
            .map(|r| report::describe(r))
            .collect();
        let mut who = named.join(", ");
        if missing.len() > 8 {
            let rest: Vec<u32> = missing[8..].iter().map(|r| r.rank).collect();
            who += &format!(" and {} more (ranks {})", rest.len(), ranges(&rest));
        }
        if who.is_empty() && progress_here(&t) && view.server.place(job).is_some() {
            // A node server holds its ranks until the other nodes' arrive.
            who = "no rank of this node (all arrived): the other node servers' ranks".into();
        } else if who.is_empty() {
            // Every rank's record says it arrived while the barrier has not
            // completed: one stopped between recording its arrival and
            // making it (a window of a few instructions).
            who = "no rank identified (see the processes above)".into();
        }
        let message = format!(
            "{what} of job {} incomplete for {:.1} s (--fence-timeout {}); {verb}: {who}",
            t.id,
            limit.as_secs_f64(),
            limit.as_secs_f64()
        );
        // The row names the job's rank; the failure takes this launcher's.
        let first = view.server.global_rank(job, 0);
        let rank = missing.first().map_or(0, |r| r.rank.saturating_sub(first));
        timed_out(job, rank, &report, message)
    }

    /// `g`, a group fence of `job`, has waited `limit` since its first
    /// member arrived: the failure of the job, naming the members that did
    /// not.
    fn group_fence_timed_out(
        &self,
        job: JobIdx,
        g: &GroupFenceRow,
        limit: Duration,
        view: View<'_>,
    ) -> TimedOut {
        let t = view::job_table(&self.job_snap(job, view));
        let report = report::report(&t);
        let this_job = |m: &String| -> Option<u32> { m.strip_prefix("rank ")?.parse().ok() };
        let mut named: Vec<String> = g
            .missing
            .iter()
            .take(8)
            .map(
                |m| match this_job(m).and_then(|r| t.ranks.get(r as usize)) {
                    Some(r) => report::describe(r),
                    None => m.clone(),
                },
            )
            .collect();
        if g.missing.len() > 8 {
            named.push(format!("and {} more", g.missing.len() - 8));
        }
        if named.is_empty() {
            named.push("no member identified (see the processes above)".into());
        }
        let message = format!(
            "fence of group {} ({}/{} arrived) of job {} incomplete for {:.1} s (--fence-timeout {}); missing: {}",
            g.group,
            g.arrived,
            g.size,
            t.id,
            limit.as_secs_f64(),
            limit.as_secs_f64(),
            named.join(", ")
        );
        let rank = g.missing.iter().find_map(this_job).unwrap_or(0);
        timed_out(job, rank, &report, message)
    }
}

/// The failure of `job` for a wait past `--fence-timeout`, blaming
/// `rank`, after printing `report`.
fn timed_out(job: JobIdx, rank: u32, report: &str, message: String) -> TimedOut {
    crate::errln!("fastpmi: fence timeout:");
    eprint!("{report}");
    TimedOut { job, rank, message }
}

/// Every rank of this launcher's part of the job is in the fence.
fn progress_here(t: &JobTable) -> bool {
    t.ranks.iter().all(|r| r.kind == "in_fence")
}
