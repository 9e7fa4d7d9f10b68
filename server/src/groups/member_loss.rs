//! What happens to groups when a member goes: a member that dies or loses
//! its connection fails its groups and the invitations it leads (a dead
//! invitee just does not join; with `--tolerate-group-failures` its job
//! goes on), a failed job fails every group operation of its ranks, and a
//! finalized member leaves its groups.

use super::collective::{check_destruct, check_fence, remove_group};
use super::types::{send_err, Answer, EarlyJoin, Member};
use crate::{Event, JobIdx, ReplyTo, Server};

impl Server {
    /// Whether `rank` of `job` died as a tolerated group member.
    pub fn is_lost_member(&self, job: JobIdx, rank: u32) -> bool {
        self.groups.lost.contains(&(job, rank))
    }

    /// `rank` of `job` died or lost its connection before finalize: its
    /// groups fail (pending operations of the other members return an error
    /// naming it, shared-memory waiters are woken). Returns true when the
    /// death is tolerated (`--tolerate-group-failures` and it was in a
    /// group): the job goes on.
    pub fn group_member_lost(
        &mut self,
        job: JobIdx,
        rank: u32,
        why: &str,
        out: &mut Vec<Event>,
    ) -> bool {
        let me = (job, rank);
        if self.groups.lost.contains(&me) {
            return true;
        }
        let tolerated = self.fail_groups_of(job, rank, why, out) && self.groups.tolerate;
        if tolerated {
            self.groups.lost.insert(me);
        }
        tolerated
    }

    /// `rank` of `job` died in a fault-tolerant job: its groups fail as in
    /// [`Server::group_member_lost`]; the job goes on whatever groups it
    /// was in (its death is recorded as such, not as a lost member). The
    /// dead leave their groups, so a group goes once its survivors left
    /// it; a group that failed while being built goes at once (a later
    /// construct listing the dead fails anyway: [`Server::dead_member`]).
    /// What groups hold thus stays bounded by the living.
    pub(crate) fn group_member_died(
        &mut self,
        job: JobIdx,
        rank: u32,
        why: &str,
        out: &mut Vec<Event>,
    ) {
        self.fail_groups_of(job, rank, why, out);
        let me = (job, rank);
        let ids: Vec<String> = self
            .groups
            .groups
            .iter()
            .filter(|(_, g)| g.pos(me).is_some())
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            let g = self.groups.groups.get_mut(&id).expect("present");
            let i = g.pos(me).expect("member");
            g.left[i] = true;
            g.destructed[i] = true;
            if !g.live || g.size() == 0 {
                remove_group(self, &id);
            }
        }
    }

    /// In a fault-tolerant job, the first dead member of `members`, named:
    /// a group of the dead can never be built.
    pub(crate) fn dead_member(&self, members: &[Member]) -> Option<String> {
        members
            .iter()
            .find(|&&(j, r)| self.is_dead(j, r))
            .map(|&m| self.member_name(m))
    }

    /// Fail the groups and invitations of `rank` of `job`, which died or
    /// lost its connection (`why`); true if it was in any.
    fn fail_groups_of(&mut self, job: JobIdx, rank: u32, why: &str, out: &mut Vec<Event>) -> bool {
        let me = (job, rank);
        let ids: Vec<String> = self
            .groups
            .groups
            .iter()
            .filter(|(_, g)| g.pos(me).is_some_and(|i| !g.left[i] && !g.destructed[i]))
            .map(|(id, _)| id.clone())
            .collect();
        let in_invite: Vec<String> = self
            .groups
            .invites
            .iter()
            .filter(|(_, i)| i.leader == me || i.invitees.contains(&me))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &ids {
            let msg = format!("group {id} failed: member {why}");
            self.fail_group(id, me, &msg, out);
        }
        for id in &in_invite {
            let Some(inv) = self.groups.invites.get_mut(id) else {
                continue;
            };
            if inv.leader == me {
                let inv = self.groups.invites.remove(id).expect("present");
                let msg = format!("group-join {id}: the leader {why}");
                for a in inv.answers {
                    if let Answer::Accepted(t, _) = a {
                        send_err(out, &t, &msg);
                    }
                }
            } else if let Some(i) = inv.invitees.iter().position(|&m| m == me) {
                // A dead invitee does not join.
                if matches!(inv.answers[i], Answer::Accepted(..)) {
                    inv.answers[i] = Answer::Pending;
                }
            }
        }
        !(ids.is_empty() && in_invite.is_empty())
    }

    fn fail_group(&mut self, id: &str, who: Member, msg: &str, out: &mut Vec<Event>) {
        let Some(g) = self.groups.groups.get_mut(id) else {
            return;
        };
        if g.failed.is_some() {
            return;
        }
        g.failed = Some(msg.to_string());
        let mut waiters: Vec<ReplyTo> = g.fencing.iter_mut().filter_map(Option::take).collect();
        waiters.extend(g.destructing.iter_mut().filter_map(Option::take));
        waiters.extend(
            g.constructing
                .iter_mut()
                .filter_map(Option::take)
                .map(|(t, _)| t),
        );
        if let Some((job, slot)) = g.slot {
            self.jobs[job].store.group_fail(slot, who.1);
        }
        tracing::debug!("{msg}");
        for t in waiters {
            send_err(out, &t, msg);
        }
    }

    /// `job` failed: pending group operations of its ranks get `msg`.
    pub(crate) fn groups_job_failed(&mut self, job: JobIdx, msg: &str, out: &mut Vec<Event>) {
        let ids: Vec<String> = self
            .groups
            .groups
            .iter()
            .filter(|(_, g)| g.members.iter().any(|m| m.0 == job))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            let who = self.groups.groups[&id]
                .members
                .iter()
                .copied()
                .find(|m| m.0 == job)
                .expect("member of job");
            self.fail_group(&id, who, msg, out);
        }
        let joins: Vec<EarlyJoin> = {
            let (mine, rest) = std::mem::take(&mut self.groups.early_joins)
                .into_iter()
                .partition(|j| j.member.0 == job);
            self.groups.early_joins = rest;
            mine
        };
        for j in joins {
            send_err(out, &j.to, msg);
        }
        let invs: Vec<String> = self
            .groups
            .invites
            .iter()
            .filter(|(_, i)| i.leader.0 == job || i.invitees.iter().any(|m| m.0 == job))
            .map(|(id, _)| id.clone())
            .collect();
        for id in invs {
            if let Some(inv) = self.groups.invites.remove(&id) {
                send_err(out, &inv.leader_to, msg);
                for a in inv.answers {
                    if let Answer::Accepted(t, _) = a {
                        send_err(out, &t, msg);
                    }
                }
            }
        }
    }

    /// `rank` of `job` finalized: it leaves every group it is still in (a
    /// finalized member could never take part in a fence or destruct).
    pub(crate) fn groups_member_finalized(&mut self, job: JobIdx, rank: u32, out: &mut Vec<Event>) {
        let me = (job, rank);
        let ids: Vec<String> = self
            .groups
            .groups
            .iter()
            .filter(|(_, g)| g.pos(me).is_some_and(|i| !g.left[i]))
            .map(|(id, _)| id.clone())
            .collect();
        let name = self.member_name(me);
        for id in ids {
            let g = self.groups.groups.get_mut(&id).expect("present");
            if !g.live && g.failed.is_none() {
                // Construction can never complete now.
                let msg =
                    format!("group {id} failed: member {name} finalized during its construction");
                self.fail_group(&id, me, &msg, out);
                continue;
            }
            let i = g.pos(me).expect("member");
            g.left[i] = true;
            g.destructed[i] = true;
            let (slot, empty, failed) = (g.slot, g.size() == 0, g.failed.is_some());
            if let (Some((j, s)), false) = (slot, failed) {
                self.jobs[j].store.group_leave(s);
            }
            if empty {
                remove_group(self, &id);
            } else {
                check_fence(self, &id, out);
                check_destruct(self, &id, out);
            }
        }
    }
}
