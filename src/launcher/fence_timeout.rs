//! `--fence-timeout`: a fence or node-attribute wait incomplete for that
//! long fails its job, with the report of who is missing.

use std::time::{Duration, Instant};

use super::Launcher;
use crate::ranges::ranges;
use crate::tools::group_view;
use crate::tools::proto::{GroupFenceRow, JobTable};
use crate::tools::report;
use crate::tools::view;
use fastpmi_server::JobIdx;

impl Launcher {
    /// `--fence-timeout`: fail jobs whose fence or node-attribute wait has
    /// been incomplete for that long, with the who-is-missing report.
    pub(super) fn check_fence_timeouts(&mut self) {
        let Some(limit) = self.cfg.fence_timeout else {
            return;
        };
        let now = Instant::now();
        if now < self.tools.next_check {
            return;
        }
        self.tools.next_check =
            now + (limit / 4).clamp(Duration::from_millis(10), Duration::from_millis(100));
        for job in 0..self.jobs.len() {
            if self.jobs.live(job) == 0 || self.jobs.torn_down(job) || self.server.job_failed(job) {
                self.tools.waiting.remove(&job);
                continue;
            }
            // A group fence counts from its first member's arrival.
            let groups = self.server.group_fence_status(job);
            if !groups.is_empty() {
                let seg = self.jobs.segment(job).map(|s| s.seg());
                let late = group_view::group_fences(&groups, seg, None)
                    .into_iter()
                    .find(|g| g.seconds >= limit.as_secs_f64());
                if let Some(g) = late {
                    self.tools.waiting.remove(&job);
                    self.group_fence_timed_out(job, &g, limit);
                    continue;
                }
            }
            let shm_waits = self.jobs.segment(job).is_some_and(|s| {
                s.seg()
                    .ranks()
                    .iter()
                    .any(|r| r.phase() == Ok(shm_layout::RankPhase::WaitingNodeAttr))
            });
            let waiting =
                self.server.fence_arrivals(job) > 0 || self.server.waits_for_attr(job) || shm_waits;
            if !waiting {
                self.tools.waiting.remove(&job);
                continue;
            }
            let gen = self.server.fences_completed(job);
            let e = self.tools.waiting.entry(job).or_insert((gen, now));
            if e.0 != gen {
                *e = (gen, now);
            }
            if now.duration_since(e.1) >= limit {
                self.tools.waiting.remove(&job);
                self.fence_timed_out(job, limit);
            }
        }
    }

    fn fence_timed_out(&mut self, job: JobIdx, limit: Duration) {
        let t = view::job_table(&self.job_snap(job));
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
        if who.is_empty() && progress_here(&t) && self.server.place(job).is_some() {
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
        let first = self.server.global_rank(job, 0);
        let rank = missing.first().map_or(0, |r| r.rank.saturating_sub(first));
        self.fail_timed_out(job, rank, &report, message);
    }

    /// `g`, a group fence of `job`, has waited `limit` since its first
    /// member arrived: fail the job, naming the members that did not.
    fn group_fence_timed_out(&mut self, job: JobIdx, g: &GroupFenceRow, limit: Duration) {
        let t = view::job_table(&self.job_snap(job));
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
        self.fail_timed_out(job, rank, &report, message);
    }

    /// Fail `job` for a wait past `--fence-timeout`, blaming `rank`, after
    /// printing `report`.
    fn fail_timed_out(&mut self, job: JobIdx, rank: u32, report: &str, message: String) {
        crate::errln!("fastpmi: fence timeout:");
        eprint!("{report}");
        // Recorded first: its `--verbose` report is taken now, before the
        // failure releases the ranks (which then end).
        self.record_failure(job, rank, message.clone(), 1, String::new(), false);
        self.server
            .fail_job(job, Some(rank), 1, &message, &mut self.events);
        self.fail_group(job, 1, &message);
        self.apply_events();
    }
}

/// Every rank of this launcher's part of the job is in the fence.
fn progress_here(t: &JobTable) -> bool {
    t.ranks.iter().all(|r| r.kind == "in_fence")
}
