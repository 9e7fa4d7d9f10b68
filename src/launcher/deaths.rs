//! Fault-tolerant jobs on the launcher's side (`--fault-tolerant`): a rank
//! that dies ends alone. The server core records the death and answers the
//! other ranks ([`fastpmi_server::deaths`]); here the launcher says once
//! which rank died and how, ends the rank's process if it still runs (a
//! rank that aborted itself or lost its connection), tells the job's PMIx
//! clients, and keeps what the exit status needs.

use std::process::ExitStatus;
use std::time::{Duration, Instant};

use fastpmi_server::deaths::DeathCause;
use fastpmi_server::{Event, JobIdx, Server};
use rustix::process::Signal;

use super::os;
use super::supervise::{Procs, RankEnd};

/// How long a rank declared dead may still run (to flush its output and
/// exit by itself, as a `PMI2_Abort(0, ...)` caller does) before SIGKILL.
const DEAD_GRACE: Duration = Duration::from_millis(1000);

/// How a rank died, as `fastpmi ps` says it: "exited 3", "killed by
/// SIGKILL", "aborted itself (code 1)", "lost its PMI connection".
pub(super) fn death_text(cause: DeathCause) -> String {
    match cause {
        DeathCause::Exited(c) => format!("exited {c}"),
        DeathCause::Signaled(s) => format!("killed by {}", os::signal_name(s)),
        DeathCause::Aborted(c) => format!("aborted itself (code {c})"),
        DeathCause::ConnectionLost => "lost its PMI connection".into(),
        DeathCause::NodeLost => "lost with its node server".into(),
    }
}

/// How `status` ended a rank, as a death.
pub(super) fn cause_of(status: ExitStatus) -> DeathCause {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => DeathCause::Exited(c),
        (None, Some(s)) => DeathCause::Signaled(s),
        _ => DeathCause::Exited(1),
    }
}

/// What the launcher keeps of its jobs' deaths: the ranks declared dead
/// that still run (SIGKILL once their grace is over) and the first death's
/// status, for `--fail-on-death`.
#[derive(Default)]
pub(super) struct Deaths {
    /// Process index and when it gets SIGKILL.
    doomed: Vec<(usize, Instant)>,
    first_status: Option<i32>,
    /// Dead of a lost connection, said when reaped (its status says more).
    unannounced: Vec<(JobIdx, u32)>,
}

impl Deaths {
    /// How long until the next doomed rank's SIGKILL.
    pub(super) fn wait(&self) -> Option<Duration> {
        self.doomed
            .iter()
            .map(|(_, at)| at.saturating_duration_since(Instant::now()))
            .min()
    }

    /// The first death's exit status, if any rank died.
    pub(super) fn first_status(&self) -> Option<i32> {
        self.first_status
    }

    /// A rank of a fault-tolerant job died; the job goes on. (The other
    /// node servers hear of it from the caller.)
    pub(super) fn on_rank_died(
        &mut self,
        procs: &Procs,
        job: JobIdx,
        rank: u32,
        cause: DeathCause,
        message: &str,
    ) {
        let running = procs
            .running_rank(job, rank)
            .and_then(|p| procs.index_of(p.pid));
        if cause == DeathCause::ConnectionLost && running.is_some() {
            // Most often it is exiting: its status, when reaped, says how.
            self.unannounced.push((job, rank));
        } else {
            crate::errln!("fastpmi: {message}; the job goes on (fault tolerant)");
            self.first_status
                .get_or_insert(fastpmi_server::deaths::exit_status(cause));
        }
        if let Some(i) = running {
            self.doomed.push((i, Instant::now() + DEAD_GRACE));
        }
        // PMIx clients hear of it once the PMIx server let go of the dead
        // client (`PmixHost::rank_ended`).
    }

    /// SIGKILL to the ranks declared dead whose grace is over.
    pub(super) fn kill_doomed(&mut self, procs: &mut Procs) {
        let now = Instant::now();
        let (due, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut self.doomed)
            .into_iter()
            .partition(|(_, at)| *at <= now);
        self.doomed = wait;
        for (i, _) in due {
            procs.signal_one(i, Signal::KILL);
        }
    }

    /// A rank ended as `end` says. In a fault-tolerant job, a rank
    /// recorded dead already, or one that ended badly on its own, is a
    /// death: true, the job goes on. Else false. `tell_death` tells the
    /// other node servers a death's cause that its status made more
    /// precise.
    pub(super) fn ended_as_death(
        &mut self,
        server: &mut Server,
        events: &mut Vec<Event>,
        end: &RankEnd,
        tell_death: impl FnOnce(DeathCause),
    ) -> bool {
        let RankEnd {
            job,
            rank,
            status,
            by_us,
        } = *end;
        if !server.is_fault_tolerant(job) {
            return false;
        }
        let activity = server.rank_activity(job, rank);
        let how = format!("{} {activity}", os::describe_status(status));
        let how = how.trim_end();
        if server.is_dead(job, rank) {
            let refined = !by_us && server.refine_death(job, rank, cause_of(status));
            if refined {
                tell_death(cause_of(status));
            }
            // Its lost connection was read as it was reaped: the notice of
            // it is still waiting in `events`. Its status says it better.
            let notice = events.iter().position(|e| {
                matches!(e, Event::RankDied { job: j, rank: r, cause: DeathCause::ConnectionLost, .. } if (*j, *r) == (job, rank))
            });
            if let Some(n) = notice.filter(|_| refined) {
                events.remove(n);
                let name = server.rank_name(job, rank);
                crate::errln!("fastpmi: {name} {how}; the job goes on (fault tolerant)");
                self.first_status.get_or_insert(os::status_code(status));
            } else if let Some(i) = self.unannounced.iter().position(|&d| d == (job, rank)) {
                self.unannounced.swap_remove(i);
                let name = server.rank_name(job, rank);
                let how = if by_us {
                    format!("closed its PMI connection before finalize {activity}; ended by the launcher")
                } else {
                    how.to_string()
                };
                crate::errln!(
                    "fastpmi: {name} {}; the job goes on (fault tolerant)",
                    how.trim_end()
                );
                let code = if by_us { 1 } else { os::status_code(status) };
                self.first_status.get_or_insert(code);
            }
            return true;
        }
        if status.success() || by_us {
            return false;
        }
        server.rank_died(job, rank, cause_of(status), how, events)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use fastpmi_server::store::MemStore;
    use fastpmi_server::JobSpec;

    use super::*;

    fn tolerant_job(n: u32) -> (Server, JobIdx) {
        let mut s = Server::new();
        let job = s.add_job(JobSpec {
            id: "fastpmi_ft_0".into(),
            apps: vec![n],
            universe_size: n,
            spawner: None,
            store: Box::new(MemStore::new(n, fastpmi_codec::VALLEN_MAX)),
        });
        s.set_fault_tolerant(job, true);
        (s, job)
    }

    #[test]
    fn a_connection_lost_as_the_rank_is_reaped_is_said_by_its_status() {
        let (mut s, job) = tolerant_job(4);
        let mut events = Vec::new();
        // Its connection's end read while reaping it: the notice waits.
        assert!(s.rank_died(job, 1, DeathCause::ConnectionLost, "closed", &mut events));
        assert!(events
            .iter()
            .any(|e| matches!(e, Event::RankDied { rank: 1, .. })));
        let mut deaths = Deaths::default();
        let mut told = None;
        let end = RankEnd {
            job,
            rank: 1,
            status: ExitStatus::from_raw(3 << 8),
            by_us: false,
        };
        assert!(deaths.ended_as_death(&mut s, &mut events, &end, |c| told = Some(c)));
        // Said once, by its status: the notice is gone, the cause refined.
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, Event::RankDied { rank: 1, .. })),
            "{events:?}"
        );
        assert_eq!(told, Some(DeathCause::Exited(3)));
        assert_eq!(deaths.first_status(), Some(3));
    }

    #[test]
    fn a_connection_lost_before_the_reaping_is_said_at_the_reaping() {
        let (mut s, job) = tolerant_job(4);
        let mut events = Vec::new();
        assert!(s.rank_died(job, 2, DeathCause::ConnectionLost, "closed", &mut events));
        events.clear();
        let mut deaths = Deaths::default();
        // The notice came while it ran (`on_rank_died`): said when reaped.
        deaths.unannounced.push((job, 2));
        let end = RankEnd {
            job,
            rank: 2,
            status: ExitStatus::from_raw(9),
            by_us: false,
        };
        assert!(deaths.ended_as_death(&mut s, &mut events, &end, |_| {}));
        assert!(deaths.unannounced.is_empty());
        assert_eq!(deaths.first_status(), Some(137));
    }
}
