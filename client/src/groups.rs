//! Process groups and process sets in the Rust client (`docs/groups.md`).
//!
//! ```no_run
//! let pmi = fastpmi_client::Pmi::init()?;
//! // Every even rank builds a group; each gets its group rank and the
//! // group's context id.
//! if pmi.rank() % 2 == 0 {
//!     let evens: Vec<u32> = (0..pmi.size()).step_by(2).collect();
//!     let g = pmi.group_construct("evens", &evens)?;
//!     pmi.put(format!("k{}", pmi.rank()), "v")?;
//!     pmi.group_fence("evens")?; // the other evens' puts are visible now
//!     let _ = (g.rank, g.size, g.ctxid);
//!     pmi.group_destruct("evens")?;
//! }
//! # Ok::<(), fastpmi_client::PmiError>(())
//! ```
//!
//! Groups are named by their id; this process remembers the groups it is
//! in, so the group fence of a group with a barrier slot in the job segment
//! runs there without the server. Servers other than fastpmi's do not have
//! the extension: every call then returns [`PmiError::Unsupported`] ("not
//! supported by this PMI server") without sending a group command (Hydra 4
//! ends the job on an unknown command, slurmstepd never answers one).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use shm_layout::{GroupWaitError, RankOp, RankPhase};

use super::conn::lock;
use super::transport::Peer;
use super::{Pmi, PmiError, TransportKind};
pub use fastpmi_codec::group::MemberSpec;
use fastpmi_codec::group::{self as wg, GroupReply, GroupRequest};
use fastpmi_codec::{Message, Protocol, Request};
use fastpmi_segment::SharedFutex;

/// A group this process is a member of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub id: String,
    /// This process's rank in the group (its position in the member list).
    pub rank: u32,
    pub size: u32,
    /// Unique among every group the launcher ever made; never reused.
    pub ctxid: u64,
    /// Barrier slot in the job segment (None: fences go through the server).
    pub slot: Option<u32>,
}

/// What the leader of an invitation learns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invitation {
    pub group: Group,
    /// Members in group-rank order (the leader first).
    pub members: Vec<MemberSpec>,
    pub declined: Vec<MemberSpec>,
    pub timed_out: Vec<MemberSpec>,
}

/// Per-process group state (in [`Pmi`]).
#[derive(Default)]
pub(super) struct GroupState {
    supported: OnceLock<Result<(), NoExtension>>,
    mine: Mutex<HashMap<String, Group>>,
}

/// Why the server has no usable group extension (asked once, kept).
#[derive(Debug, Clone, thiserror::Error)]
enum NoExtension {
    #[error("the server's group extension is version {0}, this client speaks {v}", v = wg::SUPPORT_VALUE)]
    Version(String),
    #[error("the server does not offer fastpmi's group extension")]
    Absent,
    /// The job-attribute request failed (shared: the answer is kept for
    /// every later call, and [`PmiError`] is not `Clone`).
    #[error("cannot ask the server for the group extension: {0}")]
    Unanswered(std::sync::Arc<PmiError>),
}

/// The message every group call returns on a server without the extension.
pub const NOT_SUPPORTED: &str = "not supported by this PMI server";

/// Room a request needs besides its member list (command, id, keys).
const REQUEST_OVERHEAD: usize = 1024;

impl Pmi {
    /// Whether the server has the group extension (asked once, as the job
    /// attribute `fastpmi-groups`, which other servers report missing).
    fn groups_supported(&self, what: &str) -> Result<(), PmiError> {
        self.live()?;
        if self.transport() == TransportKind::Singleton {
            return Err(PmiError::Unsupported(format!(
                "{what}: {NOT_SUPPORTED} (this process is a singleton, with no PMI server)"
            )));
        }
        if self.server == super::ServerKind::SlurmStepd {
            return Err(PmiError::Unsupported(format!(
                "{what}: {NOT_SUPPORTED} (Slurm's slurmstepd has no group extension)"
            )));
        }
        let r = self
            .groups
            .supported
            .get_or_init(|| match self.job_attr(wg::SUPPORT_ATTR) {
                Ok(Some(v)) if v == wg::SUPPORT_VALUE.as_bytes() => Ok(()),
                Ok(Some(v)) => Err(NoExtension::Version(
                    String::from_utf8_lossy(&v).into_owned(),
                )),
                Ok(None) => Err(NoExtension::Absent),
                Err(e) => Err(NoExtension::Unanswered(e.into())),
            });
        r.clone()
            .map_err(|why| PmiError::Unsupported(format!("{what}: {NOT_SUPPORTED} ({why})")))
    }

    /// A group request; `None` for a plain `rc=0` reply (destruct, fence, leave).
    fn group_call(&self, req: GroupRequest) -> Result<Option<GroupReply>, PmiError> {
        let name = req.name();
        self.groups_supported(name)?;
        let req = Request::Group(req);
        let expect = req.response();
        let m: Message = self
            .with(|t| match t {
                Peer::Wire(c) => c.call(Protocol::Pmi2, &req, expect),
                other => Err(other.unusable()),
            })
            .map_err(|e| match e {
                // A server that claimed the extension but does not know the
                // command after all.
                PmiError::Server { msg, .. } if msg.contains("unknown command") => {
                    PmiError::Unsupported(format!("{name}: {NOT_SUPPORTED} ({msg})"))
                }
                e => e,
            })?;
        if m.get("joined").is_none() {
            return Ok(None);
        }
        wg::decode_reply(&m)
            .map(Some)
            .map_err(|e| PmiError::Protocol(e.to_string()))
    }

    fn check_group_id(id: &str) -> Result<(), PmiError> {
        wg::check_id(id.as_bytes()).map_err(|e| PmiError::InvalidArg(e.to_string()))
    }

    /// Own-job ranks as members, checked: not empty, below the job size, no
    /// duplicates, and a list the wire can carry.
    fn local_members(&self, ranks: &[u32], what: &str) -> Result<Vec<MemberSpec>, PmiError> {
        if ranks.is_empty() {
            return Err(PmiError::InvalidArg(format!("{what}: empty member list")));
        }
        let mut seen = vec![false; self.size as usize];
        for &r in ranks {
            match seen.get_mut(r as usize) {
                None => {
                    return Err(PmiError::InvalidArg(format!(
                        "{what}: rank {r} is not below the job size {}",
                        self.size
                    )))
                }
                Some(true) => {
                    return Err(PmiError::InvalidArg(format!(
                        "{what}: rank {r} is listed twice"
                    )))
                }
                Some(s) => *s = true,
            }
        }
        Ok(ranks.iter().map(|&r| MemberSpec::local(r)).collect())
    }

    fn check_list_len(members: &[MemberSpec], what: &str) -> Result<(), PmiError> {
        let len = wg::format_members(members).len();
        if len + REQUEST_OVERHEAD > fastpmi_codec::PMI2_BODY_MAX {
            return Err(PmiError::InvalidArg(format!(
                "{what}: a member list of {len} bytes does not fit a PMI-2 message"
            )));
        }
        Ok(())
    }

    fn remember(&self, id: &str, r: Option<GroupReply>) -> Result<Group, PmiError> {
        let Some(GroupReply::Built {
            rank,
            size,
            ctxid,
            slot,
            ..
        }) = r
        else {
            return Err(PmiError::Protocol(format!(
                "group {id}: the server's reply describes no group"
            )));
        };
        let g = Group {
            id: id.to_string(),
            rank,
            size,
            ctxid,
            slot,
        };
        lock(&self.groups.mine).insert(id.to_string(), g.clone());
        Ok(g)
    }

    fn uses_shm(&self) -> bool {
        self.shm().is_some()
    }

    /// Build group `id` of these ranks of this job, collectively: every
    /// member calls it with the same list; each gets its group rank (its
    /// position in the list), the size and the context id.
    pub fn group_construct(&self, id: &str, ranks: &[u32]) -> Result<Group, PmiError> {
        // A server without the extension: that error first, whatever the arguments.
        self.groups_supported("group-construct")?;
        let members = self.local_members(ranks, "group_construct")?;
        self.group_construct_members(id, &members)
    }

    /// [`Pmi::group_construct`] with members of connected jobs too.
    pub fn group_construct_members(
        &self,
        id: &str,
        members: &[MemberSpec],
    ) -> Result<Group, PmiError> {
        self.groups_supported("group-construct")?;
        Self::check_group_id(id)?;
        if members.is_empty() {
            return Err(PmiError::InvalidArg(
                "group_construct: empty member list".into(),
            ));
        }
        let me = |m: &MemberSpec| {
            m.rank == self.rank && m.job.as_deref().is_none_or(|j| j == self.jobid)
        };
        if !members.iter().any(me) {
            return Err(PmiError::InvalidArg(format!(
                "group_construct: this process (rank {}) is not in the member list",
                self.rank
            )));
        }
        Self::check_list_len(members, "group_construct")?;
        let r = self.group_call(GroupRequest::Construct {
            id: id.to_string(),
            members: members.to_vec(),
            shm: self.uses_shm(),
        })?;
        self.remember(id, r)
    }

    /// Destruct group `id`, collectively over its members.
    pub fn group_destruct(&self, id: &str) -> Result<(), PmiError> {
        // A server without the extension: that error first, whatever the arguments.
        self.groups_supported("group-destruct")?;
        Self::check_group_id(id)?;
        self.group_call(GroupRequest::Destruct { id: id.to_string() })?;
        lock(&self.groups.mine).remove(id);
        Ok(())
    }

    /// Barrier over the members of `id`; afterwards every member's puts made
    /// before it are visible to this process.
    pub fn group_fence(&self, id: &str) -> Result<(), PmiError> {
        // A server without the extension: that error first, whatever the arguments.
        self.groups_supported("group-fence")?;
        Self::check_group_id(id)?;
        self.live()?;
        let g = lock(&self.groups.mine).get(id).cloned();
        if let (Some(g), Some(shm)) = (&g, self.shm()) {
            if let Some((slot, b)) = g.slot.and_then(|s| Some((s, shm.seg.seg().group(s)?))) {
                // Who arrived, for `fastpmi ps` and the fence time-out: the
                // barrier itself only counts arrivals.
                let st = self.state();
                if let Some(st) = st {
                    st.set_last_op(RankOp::GroupFence);
                    st.enter_group_fence(slot, b.generation(), self.stamp());
                }
                let r = b
                    .with_spin_limit(shm.cfg.spins)
                    .with_yield_limit(shm.cfg.yields)
                    .fence(g.ctxid, &SharedFutex);
                if let Some(st) = st {
                    st.set_phase_at(RankPhase::Running, self.stamp());
                }
                return r.map(|_| ()).map_err(|e| match e {
                    GroupWaitError::Aborted(a) => super::aborted(a),
                    GroupWaitError::MemberFailed { rank } => PmiError::Server {
                        cmd: "group-fence".into(),
                        rc: fastpmi_codec::codes::FAIL,
                        msg: format!("group {id} failed: member rank {rank} died"),
                    },
                    GroupWaitError::NotOwner { .. } => {
                        PmiError::InvalidArg(format!("group_fence: group {id} no longer exists"))
                    }
                });
            }
        }
        self.group_call(GroupRequest::Fence { id: id.to_string() })
            .map(|_| ())
    }

    /// Leave group `id` (the others go on without this process).
    pub fn group_leave(&self, id: &str) -> Result<(), PmiError> {
        // A server without the extension: that error first, whatever the arguments.
        self.groups_supported("group-leave")?;
        Self::check_group_id(id)?;
        self.group_call(GroupRequest::Leave { id: id.to_string() })?;
        lock(&self.groups.mine).remove(id);
        Ok(())
    }

    /// Invite these ranks of this job into a new group `id` led by this
    /// process; returns once each answered or `timeout` passed, with the
    /// group built from the leader and those who accepted.
    pub fn group_invite(
        &self,
        id: &str,
        ranks: &[u32],
        timeout: Duration,
    ) -> Result<Invitation, PmiError> {
        // A server without the extension: that error first, whatever the arguments.
        self.groups_supported("group-invite")?;
        Self::check_group_id(id)?;
        let members = if ranks.is_empty() {
            Vec::new()
        } else {
            self.local_members(ranks, "group_invite")?
        };
        if ranks.contains(&self.rank) {
            return Err(PmiError::InvalidArg(
                "group_invite: the leader invites itself".into(),
            ));
        }
        Self::check_list_len(&members, "group_invite")?;
        let r = self.group_call(GroupRequest::Invite {
            id: id.to_string(),
            members,
            timeout_ms: timeout_ms(timeout),
            shm: self.uses_shm(),
        })?;
        let outcome = match &r {
            Some(GroupReply::Built {
                outcome: Some(o), ..
            }) => o.clone(),
            _ => {
                return Err(PmiError::Protocol(
                    "group-invite-response without its outcome".into(),
                ))
            }
        };
        let group = self.remember(id, r)?;
        Ok(Invitation {
            group,
            members: outcome.members,
            declined: outcome.declined,
            timed_out: outcome.timed_out,
        })
    }

    /// Answer an invitation to `id` from `leader` (waiting up to `timeout`
    /// for it to arrive). Accepting returns the group once it is built;
    /// declining returns `None` at once.
    pub fn group_join(
        &self,
        id: &str,
        leader: u32,
        accept: bool,
        timeout: Duration,
    ) -> Result<Option<Group>, PmiError> {
        // A server without the extension: that error first, whatever the arguments.
        self.groups_supported("group-join")?;
        Self::check_group_id(id)?;
        if leader >= self.size {
            return Err(PmiError::InvalidArg(format!(
                "group_join: leader rank {leader} is not below the job size {}",
                self.size
            )));
        }
        let r = self.group_call(GroupRequest::Join {
            id: id.to_string(),
            leader: MemberSpec::local(leader),
            accept,
            timeout_ms: timeout_ms(timeout),
            shm: self.uses_shm(),
        })?;
        match r {
            Some(GroupReply::Declined) => Ok(None),
            r => self.remember(id, r).map(Some),
        }
    }

    /// The group `id` as this process knows it, if it is a member.
    pub fn group(&self, id: &str) -> Option<Group> {
        lock(&self.groups.mine).get(id).cloned()
    }

    /// Names of the job's process sets (`--pset`), in command-line order.
    pub fn pset_names(&self) -> Result<Vec<String>, PmiError> {
        Ok(list(self.job_attr(fastpmi_codec::names::attr::PSET_NAMES)?))
    }

    /// The ranks of process set `name` (None: no such set).
    pub fn pset_members(&self, name: &str) -> Result<Option<Vec<u32>>, PmiError> {
        let key = format!("{}{name}", fastpmi_codec::names::attr::PSET_PREFIX);
        let Some(v) = self.job_attr(key)? else {
            return Ok(None);
        };
        let text = String::from_utf8_lossy(&v);
        let ms = wg::parse_members(&text)
            .map_err(|e| PmiError::Protocol(format!("bad {name} member list {text:?}: {e}")))?;
        Ok(Some(ms.into_iter().map(|m| m.rank).collect()))
    }

    /// The process sets this rank is in.
    pub fn my_psets(&self) -> Result<Vec<String>, PmiError> {
        Ok(list(self.job_attr(fastpmi_codec::names::attr::MY_PSETS)?))
    }
}

fn list(v: Option<Vec<u8>>) -> Vec<String> {
    v.map(|v| {
        String::from_utf8_lossy(&v)
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    })
    .unwrap_or_default()
}

fn timeout_ms(t: Duration) -> u64 {
    (t.as_millis() as u64).min(wg::TIMEOUT_MAX_MS)
}
