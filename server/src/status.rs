//! What the server knows of each socket rank, for diagnostics (`fastpmi
//! ps`, the fence-timeout report, failure details): phase and activity, when
//! they last changed, the last request, fences entered.

use std::time::Instant;

use super::{Activity, ConnId, JobIdx, Phase, RankSlot, Server};
use fastpmi_codec as wire;

/// A socket rank's state as the server sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SockState {
    /// No PMI request yet.
    NoPmi,
    /// Init reply held (`--stop-in-init`).
    HeldInInit,
    /// Initialized, not waiting for anything.
    Running,
    /// In fence number n (1-based) of its job.
    InFence(u64),
    /// Waiting for a node attribute.
    WaitingAttr(String),
    Finalized,
}

/// One rank, from the server's side.
#[derive(Debug, Clone)]
pub struct SockRank {
    pub state: SockState,
    pub since: Instant,
    /// The last request (wire command), empty when none.
    pub last_op: String,
    /// Fences entered over the socket.
    pub fences: u64,
    /// It has a PMI connection open now.
    pub connected: bool,
    /// It is a PMIx client (the launcher's PMIx server serves it).
    pub pmix: bool,
}

/// What the launcher's PMIx server saw a PMIx rank do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmixStep {
    /// It will be a PMIx client (registered before it starts).
    Registered,
    /// `PMIx_Init`: it connected.
    Connected,
    /// `PMIx_Finalize`.
    Finalized,
}

/// A process group with a member in the job, as its fence stands.
#[derive(Debug, Clone)]
pub struct GroupFence {
    pub id: String,
    /// Its barrier slot in this job's segment (its members fence there
    /// without the server: who arrived is not recorded, the slot counts).
    pub slot: Option<u32>,
    /// It fences in a job segment (this job's: `slot`).
    pub in_segment: bool,
    pub failed: Option<String>,
    pub members: Vec<GroupMember>,
}

/// One member of a [`GroupFence`].
#[derive(Debug, Clone)]
pub struct GroupMember {
    /// Its job's id.
    pub job: String,
    pub rank: u32,
    /// It is a rank of the job whose status this is.
    pub here: bool,
    /// It left the group (no longer expected in its fences).
    pub left: bool,
    /// Server barrier: when it arrived at the round in progress.
    pub arrived: Option<Instant>,
}

/// One job, from the server's side.
#[derive(Debug, Clone)]
pub struct JobStatus {
    pub id: String,
    /// Ranks on this launcher (this node's, for a job over node servers).
    pub size: u32,
    /// The job's rank of this launcher's first (docs/nested.md; else 0):
    /// reports name ranks by it.
    pub first_rank: u32,
    pub spawner: Option<String>,
    pub appnum: Vec<i32>,
    /// Fences of the job completed so far.
    pub fences_completed: u64,
    /// Why it failed, if it did.
    pub failed: Option<String>,
    /// Init replies are held.
    pub holding: bool,
    pub ranks: Vec<SockRank>,
    /// Its members' process groups that fence in its segment or are in a
    /// server-barrier fence round.
    pub groups: Vec<GroupFence>,
}

impl RankSlot {
    /// Change the activity, noting when.
    pub(super) fn set_activity(&mut self, a: Activity) {
        if self.activity != a {
            self.activity = a;
            self.since = Instant::now();
        }
    }

    /// Change the phase, noting when.
    pub(super) fn set_phase(&mut self, p: Phase) {
        if self.phase != p {
            self.phase = p;
            self.since = Instant::now();
        }
    }
}

impl Server {
    /// Note the command a bound rank just sent (kept short: it comes from
    /// the client).
    pub(super) fn note_op(&mut self, conn: ConnId, cmd: &str) {
        if let Some((job, rank)) = self.conns.get(&conn).and_then(|c| c.bound) {
            if let Some(slot) = self.jobs[job].ranks.get_mut(rank as usize) {
                if slot.last_op != cmd {
                    slot.last_op = cmd.chars().take(32).collect();
                }
            }
        }
    }

    /// A PMIx rank's progress, from the launcher's PMIx server: its phase
    /// then follows PMI's (a rank that connected and exits before
    /// finalizing fails the job, as a PMI rank does).
    pub fn pmix_rank(&mut self, job: JobIdx, rank: u32, step: PmixStep) {
        let Some(slot) = self
            .jobs
            .get_mut(job)
            .and_then(|j| j.ranks.get_mut(rank as usize))
        else {
            return;
        };
        slot.pmix = true;
        match step {
            PmixStep::Registered => {}
            PmixStep::Connected => {
                if slot.phase == Phase::Idle {
                    slot.set_phase(Phase::Initialized);
                }
                slot.last_op = "PMIx_Init".into();
                self.pmix_connected_held(job, rank);
            }
            PmixStep::Finalized => {
                slot.set_phase(Phase::Finalized);
                slot.last_op = "PMIx_Finalize".into();
                self.pmix_left_init(job, rank);
            }
        }
    }

    /// Whether rank `rank` of `job` has connected (initialized PMI or PMIx)
    /// and not finalized yet.
    pub fn rank_connected(&self, job: JobIdx, rank: u32) -> bool {
        self.jobs
            .get(job)
            .and_then(|j| j.ranks.get(rank as usize))
            .is_some_and(|s| s.phase == Phase::Initialized)
    }

    /// The PMI connection of rank `rank` of `job`, while it has one.
    pub fn rank_conn(&self, job: JobIdx, rank: u32) -> Option<ConnId> {
        self.jobs.get(job)?.ranks.get(rank as usize)?.conn
    }

    /// Whether `job` has PMIx ranks.
    pub fn is_pmix_job(&self, job: JobIdx) -> bool {
        self.jobs
            .get(job)
            .is_some_and(|j| j.ranks.iter().any(|r| r.pmix))
    }

    /// Whether rank `rank` of `job` is a PMIx client (registered with the
    /// launcher's PMIx server).
    pub fn is_pmix_rank(&self, job: JobIdx, rank: u32) -> bool {
        self.jobs
            .get(job)
            .and_then(|j| j.ranks.get(rank as usize))
            .is_some_and(|r| r.pmix)
    }

    /// Whether some rank of `job` waits over the socket for a node attribute.
    pub fn waits_for_attr(&self, job: JobIdx) -> bool {
        !self.jobs[job].attr_waiters.is_empty()
    }

    /// Whether `job` has failed.
    pub fn job_failed(&self, job: JobIdx) -> bool {
        self.jobs[job].failed.is_some()
    }

    /// Fences of `job` completed so far (from its store).
    pub fn fences_completed(&self, job: JobIdx) -> u64 {
        self.jobs[job].store.fences_completed()
    }

    /// Ranks arrived in `job`'s current fence (socket and shared memory).
    pub fn fence_arrivals(&self, job: JobIdx) -> u32 {
        self.jobs[job].store.fence_arrivals()
    }

    /// The state of every rank of `job`. For a failed job, what each rank
    /// was doing when it failed.
    pub fn job_status(&self, job: JobIdx) -> JobStatus {
        let j = &self.jobs[job];
        let ranks = j
            .ranks
            .iter()
            .enumerate()
            .map(|(r, slot)| {
                let activity = j
                    .at_failure
                    .as_ref()
                    .and_then(|a| a.get(r))
                    .unwrap_or(&slot.activity);
                let state = if self.init_held(job, r as u32) {
                    SockState::HeldInInit
                } else {
                    match (slot.phase, activity) {
                        (Phase::Idle, _) => SockState::NoPmi,
                        (Phase::Finalized, _) => SockState::Finalized,
                        (_, Activity::InFence(n)) => SockState::InFence(*n),
                        (_, Activity::WaitingAttr(k)) => SockState::WaitingAttr(wire::show(k)),
                        (_, Activity::Running) => SockState::Running,
                    }
                };
                SockRank {
                    state,
                    since: slot.since,
                    last_op: slot.last_op.clone(),
                    fences: slot.fences,
                    connected: slot.conn.is_some(),
                    pmix: slot.pmix,
                }
            })
            .collect();
        JobStatus {
            id: j.id.clone(),
            size: j.size,
            first_rank: j.global_rank(0),
            spawner: j.spawner.clone(),
            appnum: j.appnum.clone(),
            fences_completed: j.store.fences_completed(),
            failed: j.failed.clone(),
            holding: self.is_holding(job),
            ranks,
            groups: self.group_fences(job),
        }
    }

    /// The process groups of `job` as their fences stand ([`JobStatus`]'s
    /// `groups` alone: what the fence time-out checks).
    pub fn group_fence_status(&self, job: JobIdx) -> Vec<GroupFence> {
        self.group_fences(job)
    }
}
