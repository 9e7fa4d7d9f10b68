//! Process groups (PMIx RFC0033 in PMI-2 clothes, `docs/groups.md`):
//! collective construct/destruct, invite/join, leave, the group fence and
//! what happens when a member dies.
//!
//! A group whose members are all shared-memory ranks of one job gets a
//! barrier slot in that job's segment (while the pool lasts) and its
//! members fence there without the server; every other group fences
//! through the server ("the server's barrier"). Construct, destruct,
//! invite, join and leave always come through the server.
//!
//! This file holds what every group command shares (resolving members,
//! context ids, barrier slots, the built reply) and the dispatch; the group
//! table and its records are in `types`. The commands live in `collective`
//! (construct, destruct, fence, leave) and `invite` (invite, join, their
//! deadlines); `member_loss` is what a dead, failed or finalized member
//! does to its groups.

mod collective;
mod invite;
mod member_loss;
mod types;

use std::collections::HashSet;

use self::collective::{construct, destruct, fence, leave};
use self::invite::{invite, join};
pub(crate) use self::types::Groups;
use self::types::{Group, Member};
use super::{Event, JobIdx, ReplyTo, Server};
use fastpmi_codec::group::{GroupReply, GroupRequest, InviteOutcome, MemberSpec};
use fastpmi_codec::Response;

/// Why a member of a request's list is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BadMember {
    /// Another job's rank, of a job not connected to the caller's.
    #[error("member {0}: job {job} is not connected", job = .0.job.as_deref().unwrap_or_default())]
    NotConnected(MemberSpec),
    #[error("member {0}: no job {job}", job = .0.job.as_deref().unwrap_or_default())]
    NoJob(MemberSpec),
    #[error("member {spec}: rank {rank} is not below the job size {size}", rank = spec.rank)]
    RankTooHigh { spec: MemberSpec, size: u32 },
    #[error("member {0} is listed twice")]
    Twice(MemberSpec),
}

impl Server {
    /// The live groups with a member in `job` that fence in its segment,
    /// or through the server with a round in progress (for `fastpmi ps`).
    pub(crate) fn group_fences(&self, job: JobIdx) -> Vec<super::status::GroupFence> {
        use super::status::{GroupFence, GroupMember};
        let mut out: Vec<GroupFence> = self
            .groups
            .groups
            .iter()
            .filter(|(_, g)| g.live && g.members.iter().any(|m| m.0 == job))
            .filter(|(_, g)| g.slot.is_some() || g.fencing.iter().any(Option::is_some))
            .map(|(id, g)| GroupFence {
                id: id.clone(),
                slot: g.slot.filter(|(j, _)| *j == job).map(|(_, s)| s),
                in_segment: g.slot.is_some(),
                failed: g.failed.clone(),
                members: g
                    .members
                    .iter()
                    .enumerate()
                    .map(|(i, &(j, rank))| GroupMember {
                        job: self.jobs[j].id.clone(),
                        rank,
                        here: j == job,
                        left: g.left[i],
                        arrived: g.fencing[i].as_ref().and(g.fence_at[i]),
                    })
                    .collect(),
            })
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }

    /// Groups the server holds (built, being built or failed), for
    /// diagnostics: what a job's groups cost the launcher.
    pub fn group_count(&self) -> usize {
        self.groups.groups.len()
    }

    /// `--tolerate-group-failures`: a member's death fails its groups, not
    /// its job.
    pub fn set_tolerate_group_failures(&mut self, on: bool) {
        self.groups.tolerate = on;
    }

    fn member_name(&self, m: Member) -> String {
        self.jobs[m.0].rank_label(m.0, m.1)
    }

    /// A member spec of `job`'s request as (job, rank): its own job, or a
    /// job it is connected to.
    fn resolve(&self, job: JobIdx, spec: &MemberSpec) -> Result<Member, BadMember> {
        let target = match &spec.job {
            None => job,
            Some(id) if *id == self.jobs[job].id => job,
            Some(id) => match self.job_index(id) {
                Some(t) if self.jobs[job].connected.contains(&t) => t,
                Some(_) => return Err(BadMember::NotConnected(spec.clone())),
                None => return Err(BadMember::NoJob(spec.clone())),
            },
        };
        let size = self.jobs[target].size;
        if spec.rank >= size {
            return Err(BadMember::RankTooHigh {
                spec: spec.clone(),
                size,
            });
        }
        Ok((target, spec.rank))
    }

    fn resolve_all(&self, job: JobIdx, specs: &[MemberSpec]) -> Result<Vec<Member>, BadMember> {
        let mut seen = HashSet::with_capacity(specs.len());
        let mut out = Vec::with_capacity(specs.len());
        for s in specs {
            let m = self.resolve(job, s)?;
            if !seen.insert(m) {
                return Err(BadMember::Twice(s.clone()));
            }
            out.push(m);
        }
        Ok(out)
    }

    fn id_clash(&self, id: &str) -> Option<String> {
        if self.job_index(id).is_some() {
            return Some(format!("group id {id} is the id of a job"));
        }
        None
    }

    /// A new context id for a group of the launcher's PMIx server: from
    /// the counter PMI-2 groups use, so none is given twice.
    pub fn alloc_ctxid(&mut self) -> u64 {
        self.next_ctxid()
    }

    fn next_ctxid(&mut self) -> u64 {
        self.groups.last_ctxid += 1;
        self.groups.last_ctxid
    }

    /// A free barrier slot in `job`'s segment for a group of `parties`.
    fn take_slot(&mut self, job: JobIdx, ctxid: u64, parties: u32) -> Option<u32> {
        let n = self.jobs[job].store.group_slots();
        let used = self.groups.slots_used.entry(job).or_default();
        let slot = (0..n).find(|s| !used.contains(s))?;
        used.insert(slot);
        self.jobs[job].store.group_assign(slot, ctxid, parties);
        Some(slot)
    }

    fn free_slot(&mut self, slot: Option<(JobIdx, u32)>) {
        if let Some((job, s)) = slot {
            self.jobs[job].store.group_release(s);
            if let Some(u) = self.groups.slots_used.get_mut(&job) {
                u.remove(&s);
            }
        }
    }

    /// Give a newly built group its context id and, when every member is a
    /// shared-memory rank of one job, a barrier slot.
    fn build(&mut self, id: &str, all_shm: bool) -> (u64, Option<(JobIdx, u32)>) {
        let ctxid = self.next_ctxid();
        let members = self.groups.groups[id].members.clone();
        let job = members[0].0;
        let one_job = members.iter().all(|m| m.0 == job);
        let slot = if all_shm && one_job {
            self.take_slot(job, ctxid, members.len() as u32)
                .map(|s| (job, s))
        } else {
            None
        };
        let g = self.groups.groups.get_mut(id).expect("group exists");
        g.live = true;
        g.ctxid = ctxid;
        g.slot = slot;
        tracing::debug!(
            group = id,
            ctxid,
            size = members.len(),
            slot = ?slot,
            "group built"
        );
        (ctxid, slot)
    }

    fn built_reply(g: &Group, i: usize, outcome: Option<InviteOutcome>) -> Response {
        Response::Group(GroupReply::Built {
            rank: i as u32,
            size: g.members.len() as u32,
            ctxid: g.ctxid,
            slot: g.slot.map(|(_, s)| s),
            outcome,
        })
    }
}

/// A group request from `rank` of `job`. `None`: the reply is held.
pub(super) fn handle(
    s: &mut Server,
    job: JobIdx,
    rank: u32,
    to: &ReplyTo,
    req: GroupRequest,
    out: &mut Vec<Event>,
) -> Option<Response> {
    let me = (job, rank);
    match req {
        GroupRequest::Construct { id, members, shm } => construct(s, me, to, id, members, shm, out),
        GroupRequest::Destruct { id } => destruct(s, me, to, &id, out),
        GroupRequest::Fence { id } => fence(s, me, to, &id, out),
        GroupRequest::Leave { id } => leave(s, me, &id, out),
        GroupRequest::Invite {
            id,
            members,
            timeout_ms,
            shm,
        } => invite(s, me, to, id, members, timeout_ms, shm, out),
        GroupRequest::Join {
            id,
            leader,
            accept,
            timeout_ms,
            shm,
        } => join(s, me, to, id, leader, accept, timeout_ms, shm, out),
    }
}
