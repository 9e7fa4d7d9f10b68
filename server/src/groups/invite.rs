//! Invitation-built groups: the leader invites (`group-invite`), each
//! invitee accepts or declines (`group-join`), and the group is built with
//! those who accepted once all answered or the deadline passed. A join may
//! come before its invitation (held as an early join until its own
//! timeout).

use std::time::{Duration, Instant};

use super::types::{err, send_err, Answer, EarlyJoin, Group, Invite, Member};
use crate::{reply, Event, ReplyTo, Server};
use fastpmi_codec::group::{GroupReply, InviteOutcome, MemberSpec};
use fastpmi_codec::Response;

#[allow(clippy::too_many_arguments)]
pub(super) fn invite(
    s: &mut Server,
    me: Member,
    to: &ReplyTo,
    id: String,
    specs: Vec<MemberSpec>,
    timeout_ms: u64,
    shm: bool,
    out: &mut Vec<Event>,
) -> Option<Response> {
    let invitees = match s.resolve_all(me.0, &specs) {
        Ok(m) => m,
        Err(e) => return err(format!("group-invite {id}: {e}")),
    };
    if invitees.contains(&me) {
        return err(format!(
            "group-invite {id}: the leader ({}) invites itself",
            s.member_name(me)
        ));
    }
    if let Some(e) = s.id_clash(&id) {
        return err(e);
    }
    if s.groups.groups.contains_key(&id) || s.groups.invites.contains_key(&id) {
        return err(format!("group-invite: group {id} already exists"));
    }
    let n = invitees.len();
    s.groups.invites.insert(
        id.clone(),
        Invite {
            leader: me,
            leader_to: to.clone(),
            leader_shm: shm,
            invitees,
            answers: (0..n).map(|_| Answer::Pending).collect(),
            deadline: Instant::now() + Duration::from_millis(timeout_ms),
        },
    );
    // Joins that came first.
    let early: Vec<EarlyJoin> = {
        let (mine, rest) = std::mem::take(&mut s.groups.early_joins)
            .into_iter()
            .partition(|j| j.id == id);
        s.groups.early_joins = rest;
        mine
    };
    for j in early {
        if let Some(r) = answer(s, j.member, &j.to, &id, j.leader, j.accept, j.shm) {
            reply(out, &j.to, &r, None);
        }
    }
    check_invite(s, &id, false, out);
    None
}

/// Record an invitee's answer to invitation `id`; the reply to the joiner
/// now (decline, error) or None (held until the group is built).
fn answer(
    s: &mut Server,
    me: Member,
    to: &ReplyTo,
    id: &str,
    leader: Member,
    accept: bool,
    shm: bool,
) -> Option<Response> {
    let name = s.member_name(me);
    let leader_name = s.member_name(leader);
    let real = s.member_name(s.groups.invites[id].leader);
    let inv = s.groups.invites.get_mut(id).expect("invite exists");
    if inv.leader != leader {
        return err(format!(
            "group-join {id}: the invitation comes from {real}, not {leader_name}"
        ));
    }
    let Some(i) = inv.invitees.iter().position(|&m| m == me) else {
        return err(format!("group-join {id}: {name} is not invited"));
    };
    if !matches!(inv.answers[i], Answer::Pending) {
        return err(format!("group-join {id}: {name} already answered"));
    }
    if accept {
        inv.answers[i] = Answer::Accepted(to.clone(), shm);
        None
    } else {
        inv.answers[i] = Answer::Declined;
        Some(Response::Group(GroupReply::Declined))
    }
}

/// Build the group of invitation `id` once every invitee answered, or at
/// its deadline (`expired`) with those who accepted.
fn check_invite(s: &mut Server, id: &str, expired: bool, out: &mut Vec<Event>) {
    let Some(inv) = s.groups.invites.get(id) else {
        return;
    };
    if !expired && inv.answers.iter().any(|a| matches!(a, Answer::Pending)) {
        return;
    }
    let inv = s.groups.invites.remove(id).expect("present");
    let mut outcome = InviteOutcome::default();
    let mut members = vec![inv.leader];
    let mut tos: Vec<ReplyTo> = vec![inv.leader_to.clone()];
    let mut all_shm = inv.leader_shm;
    let spec = |s: &Server, m: Member| MemberSpec {
        job: (m.0 != inv.leader.0).then(|| s.jobs[m.0].id.clone()),
        rank: m.1,
    };
    for (m, a) in inv.invitees.iter().zip(inv.answers) {
        match a {
            Answer::Accepted(t, shm) => {
                members.push(*m);
                tos.push(t);
                all_shm &= shm;
            }
            Answer::Declined => outcome.declined.push(spec(s, *m)),
            Answer::Pending => outcome.timed_out.push(spec(s, *m)),
        }
    }
    outcome.members = members.iter().map(|&m| spec(s, m)).collect();
    s.groups.groups.insert(id.to_string(), Group::new(members));
    s.build(id, all_shm);
    let g = &s.groups.groups[id];
    for (i, t) in tos.iter().enumerate() {
        let o = (i == 0).then(|| outcome.clone());
        reply(out, t, &Server::built_reply(g, i, o), None);
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn join(
    s: &mut Server,
    me: Member,
    to: &ReplyTo,
    id: String,
    leader: MemberSpec,
    accept: bool,
    timeout_ms: u64,
    shm: bool,
    out: &mut Vec<Event>,
) -> Option<Response> {
    let leader = match s.resolve(me.0, &leader) {
        Ok(l) => l,
        Err(e) => return err(format!("group-join {id}: leader {e}")),
    };
    if s.groups.invites.contains_key(&id) {
        let r = answer(s, me, to, &id, leader, accept, shm);
        if r.is_none() {
            check_invite(s, &id, false, out);
        }
        return r;
    }
    if s.groups.groups.contains_key(&id) {
        return err(format!(
            "group-join: group {id} was built without {}",
            s.member_name(me)
        ));
    }
    if s.groups
        .early_joins
        .iter()
        .any(|j| j.id == id && j.member == me)
    {
        return err(format!(
            "group-join {id}: already waiting for this invitation"
        ));
    }
    if timeout_ms == 0 {
        return err(format!(
            "group-join: no invitation to group {id} from {}",
            s.member_name(leader)
        ));
    }
    s.groups.early_joins.push(EarlyJoin {
        id,
        member: me,
        leader,
        accept,
        shm,
        to: to.clone(),
        deadline: Instant::now() + Duration::from_millis(timeout_ms),
        timeout_ms,
    });
    None
}

impl Server {
    /// When [`Server::group_timers`] next has something to do.
    pub fn next_group_deadline(&self) -> Option<Instant> {
        let inv = self.groups.invites.values().map(|i| i.deadline);
        let joins = self.groups.early_joins.iter().map(|j| j.deadline);
        inv.chain(joins).min()
    }

    /// Invitations and early joins whose time is up.
    pub fn group_timers(&mut self, now: Instant, out: &mut Vec<Event>) {
        let due: Vec<String> = self
            .groups
            .invites
            .iter()
            .filter(|(_, i)| i.deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            check_invite(self, &id, true, out);
        }
        let (expired, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.groups.early_joins)
            .into_iter()
            .partition(|j| j.deadline <= now);
        self.groups.early_joins = rest;
        for j in expired {
            let msg = format!(
                "group-join: no invitation to group {} from {} within {} ms",
                j.id,
                self.member_name(j.leader),
                j.timeout_ms
            );
            send_err(out, &j.to, &msg);
        }
    }
}
