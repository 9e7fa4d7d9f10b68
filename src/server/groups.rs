//! Process groups (PMIx RFC0033 in PMI-2 clothes, `docs/groups.md`):
//! collective construct/destruct, invite/join, leave, the group fence and
//! what happens when a member dies.
//!
//! A group whose members are all shared-memory ranks of one job gets a
//! barrier slot in that job's segment (while the pool lasts) and its
//! members fence there without the server; every other group fences
//! through the server ("the server's barrier"). Construct, destruct,
//! invite, join and leave always come through the server.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use super::{reply, Event, JobIdx, ReplyTo, Server};
use crate::wire::group::{GroupReply, GroupRequest, InviteOutcome, MemberSpec};
use crate::wire::Response;

/// A member: (job, rank).
pub(crate) type Member = (JobIdx, u32);

/// The launcher-wide group table.
#[derive(Default)]
pub(crate) struct Groups {
    /// Last context id handed out (ids start at 1, never reused).
    last_ctxid: u64,
    groups: HashMap<String, Group>,
    invites: HashMap<String, Invite>,
    /// Joins that came before their invitation.
    early_joins: Vec<EarlyJoin>,
    /// Slots in use, per job.
    slots_used: HashMap<JobIdx, HashSet<u32>>,
    /// `--tolerate-group-failures`.
    pub(crate) tolerate: bool,
    /// Members whose death was tolerated.
    lost: HashSet<Member>,
    pub(crate) psets: super::psets::Psets,
}

struct Group {
    members: Vec<Member>,
    live: bool,
    ctxid: u64,
    /// (job, slot) of the segment barrier, if any.
    slot: Option<(JobIdx, u32)>,
    left: Vec<bool>,
    failed: Option<String>,
    /// Construction: the members that called, and their shm flag.
    constructing: Vec<Option<(ReplyTo, bool)>>,
    /// The current server-barrier fence round.
    fencing: Vec<Option<ReplyTo>>,
    /// The current destruct round (or, failed group: who destructed).
    destructing: Vec<Option<ReplyTo>>,
    destructed: Vec<bool>,
}

impl Group {
    fn new(members: Vec<Member>) -> Group {
        let n = members.len();
        Group {
            members,
            live: false,
            ctxid: 0,
            slot: None,
            left: vec![false; n],
            failed: None,
            constructing: vec![None; n],
            fencing: vec![None; n],
            destructing: vec![None; n],
            destructed: vec![false; n],
        }
    }

    fn pos(&self, m: Member) -> Option<usize> {
        self.members.iter().position(|&x| x == m)
    }

    /// Members still expected in collective rounds.
    fn active(&self, i: usize) -> bool {
        !self.left[i]
    }

    fn size(&self) -> u32 {
        self.left.iter().filter(|l| !**l).count() as u32
    }
}

enum Answer {
    Pending,
    Accepted(ReplyTo, bool),
    Declined,
}

struct Invite {
    leader: Member,
    leader_to: ReplyTo,
    leader_shm: bool,
    invitees: Vec<Member>,
    answers: Vec<Answer>,
    deadline: Instant,
}

struct EarlyJoin {
    id: String,
    member: Member,
    leader: Member,
    accept: bool,
    shm: bool,
    to: ReplyTo,
    deadline: Instant,
    timeout_ms: u64,
}

fn err(msg: impl Into<String>) -> Option<Response> {
    Some(Response::Error {
        rc: -1,
        msg: msg.into(),
    })
}

fn send_err(out: &mut Vec<Event>, to: &ReplyTo, msg: &str) {
    reply(
        out,
        to,
        &Response::Error {
            rc: -1,
            msg: msg.to_string(),
        },
        None,
    );
}

impl Server {
    /// `--tolerate-group-failures`: a member's death fails its groups, not
    /// its job.
    pub fn set_tolerate_group_failures(&mut self, on: bool) {
        self.groups.tolerate = on;
    }

    fn member_name(&self, m: Member) -> String {
        super::rank_label(m.0, &self.jobs[m.0].id, m.1)
    }

    /// A member spec of `job`'s request as (job, rank): its own job, or a
    /// job it is connected to.
    fn resolve(&self, job: JobIdx, spec: &MemberSpec) -> Result<Member, String> {
        let target = match &spec.job {
            None => job,
            Some(id) if *id == self.jobs[job].id => job,
            Some(id) => match self.job_index(id) {
                Some(t) if self.jobs[job].connected.contains(&t) => t,
                Some(_) => return Err(format!("member {spec}: job {id} is not connected")),
                None => return Err(format!("member {spec}: no job {id}")),
            },
        };
        let size = self.jobs[target].size;
        if spec.rank >= size {
            return Err(format!(
                "member {spec}: rank {} is not below the job size {size}",
                spec.rank
            ));
        }
        Ok((target, spec.rank))
    }

    fn resolve_all(&self, job: JobIdx, specs: &[MemberSpec]) -> Result<Vec<Member>, String> {
        let mut seen = HashSet::with_capacity(specs.len());
        let mut out = Vec::with_capacity(specs.len());
        for s in specs {
            let m = self.resolve(job, s)?;
            if !seen.insert(m) {
                return Err(format!("member {s} is listed twice"));
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

fn construct(
    s: &mut Server,
    me: Member,
    to: &ReplyTo,
    id: String,
    specs: Vec<MemberSpec>,
    shm: bool,
    out: &mut Vec<Event>,
) -> Option<Response> {
    if specs.is_empty() {
        return err(format!("group {id}: empty member list"));
    }
    let members = match s.resolve_all(me.0, &specs) {
        Ok(m) => m,
        Err(e) => return err(format!("group {id}: {e}")),
    };
    let Some(pos) = members.iter().position(|&m| m == me) else {
        return err(format!(
            "group {id}: the caller ({}) is not in the member list",
            s.member_name(me)
        ));
    };
    if let Some(e) = s.id_clash(&id) {
        return err(e);
    }
    if s.groups.invites.contains_key(&id) {
        return err(format!("group {id}: an invitation with this id is pending"));
    }
    match s.groups.groups.get(&id) {
        Some(g) if g.live => return err(format!("group {id} already exists")),
        Some(g) if g.failed.is_some() => {
            return err(format!(
                "group {id} failed: {}",
                g.failed.as_deref().unwrap_or_default()
            ))
        }
        Some(g) if g.members != members => {
            return err(format!(
                "group {id}: member list differs from the one its construction started with"
            ))
        }
        Some(g) if g.constructing[pos].is_some() => {
            return err(format!("group {id}: the caller is already constructing it"))
        }
        Some(_) => {}
        None => {
            s.groups
                .groups
                .insert(id.clone(), Group::new(members.clone()));
        }
    }
    let g = s.groups.groups.get_mut(&id).expect("inserted");
    g.constructing[pos] = Some((to.clone(), shm));
    if g.constructing.iter().any(Option::is_none) {
        return None;
    }
    let all_shm = g.constructing.iter().flatten().all(|(_, shm)| *shm);
    s.build(&id, all_shm);
    let g = s.groups.groups.get_mut(&id).expect("built");
    let waiting: Vec<_> = g.constructing.iter_mut().map(Option::take).collect();
    for (i, w) in waiting.into_iter().enumerate() {
        if let Some((t, _)) = w {
            reply(out, &t, &Server::built_reply(g, i, None), None);
        }
    }
    None
}

/// The live, not-left member position of the caller in group `id`.
fn member_of<'a>(
    s: &'a mut Server,
    me: Member,
    id: &str,
    what: &str,
) -> Result<(&'a mut Group, usize), String> {
    let name = s.member_name(me);
    let Some(g) = s.groups.groups.get_mut(id) else {
        return Err(format!("{what}: no group {id}"));
    };
    match g.pos(me) {
        Some(i) if !g.left[i] => {
            if !g.live && g.failed.is_none() {
                return Err(format!("{what}: group {id} is still being constructed"));
            }
            Ok((g, i))
        }
        Some(_) => Err(format!("{what}: {name} left group {id}")),
        None => Err(format!("{what}: {name} is not a member of group {id}")),
    }
}

fn destruct(
    s: &mut Server,
    me: Member,
    to: &ReplyTo,
    id: &str,
    out: &mut Vec<Event>,
) -> Option<Response> {
    let lost = s.groups.lost.clone();
    let (g, i) = match member_of(s, me, id, "group-destruct") {
        Ok(x) => x,
        Err(e) => return err(e),
    };
    if g.failed.is_some() {
        // A failed group cannot hold a collective round: each surviving
        // member lets go of it on its own.
        if g.destructed[i] {
            return err(format!("group-destruct: group {id} already destructed"));
        }
        g.destructed[i] = true;
        let done = (0..g.members.len())
            .all(|k| g.destructed[k] || g.left[k] || lost.contains(&g.members[k]));
        if done {
            remove_group(s, id);
        }
        return Some(Response::Ok);
    }
    if g.destructing[i].is_some() {
        return err(format!("group-destruct: already destructing group {id}"));
    }
    g.destructing[i] = Some(to.clone());
    check_destruct(s, id, out);
    None
}

fn check_destruct(s: &mut Server, id: &str, out: &mut Vec<Event>) {
    let Some(g) = s.groups.groups.get_mut(id) else {
        return;
    };
    if !g.live || g.failed.is_some() {
        return;
    }
    let complete = (0..g.members.len()).all(|k| !g.active(k) || g.destructing[k].is_some());
    if !complete || g.destructing.iter().all(Option::is_none) {
        return;
    }
    let waiters: Vec<ReplyTo> = g.destructing.iter_mut().filter_map(Option::take).collect();
    remove_group(s, id);
    for t in waiters {
        reply(out, &t, &Response::Ok, None);
    }
}

fn remove_group(s: &mut Server, id: &str) {
    if let Some(g) = s.groups.groups.remove(id) {
        s.free_slot(g.slot);
        tracing::debug!(group = id, ctxid = g.ctxid, "group removed");
    }
}

fn fence(
    s: &mut Server,
    me: Member,
    to: &ReplyTo,
    id: &str,
    out: &mut Vec<Event>,
) -> Option<Response> {
    let (g, i) = match member_of(s, me, id, "group-fence") {
        Ok(x) => x,
        Err(e) => return err(e),
    };
    if let Some(f) = &g.failed {
        return err(format!("group-fence: group {id} failed: {f}"));
    }
    if let Some((_, slot)) = g.slot {
        return err(format!(
            "group-fence: group {id} fences in the job segment (barrier slot {slot})"
        ));
    }
    if g.fencing[i].is_some() {
        return err(format!("group-fence: already in a fence of group {id}"));
    }
    g.fencing[i] = Some(to.clone());
    check_fence(s, id, out);
    None
}

fn check_fence(s: &mut Server, id: &str, out: &mut Vec<Event>) {
    let Some(g) = s.groups.groups.get_mut(id) else {
        return;
    };
    if g.failed.is_some() || g.fencing.iter().all(Option::is_none) {
        return;
    }
    if (0..g.members.len()).all(|k| !g.active(k) || g.fencing[k].is_some()) {
        for t in g.fencing.iter_mut().filter_map(Option::take) {
            reply(out, &t, &Response::Ok, None);
        }
    }
}

fn leave(s: &mut Server, me: Member, id: &str, out: &mut Vec<Event>) -> Option<Response> {
    let (g, i) = match member_of(s, me, id, "group-leave") {
        Ok(x) => x,
        Err(e) => return err(e),
    };
    if g.fencing[i].is_some() || g.destructing[i].is_some() {
        return err(format!(
            "group-leave: the caller is in a fence or destruct of group {id}"
        ));
    }
    g.left[i] = true;
    let slot = g.slot;
    let empty = g.size() == 0;
    if let Some((job, sl)) = slot {
        s.jobs[job].store.group_leave(sl);
    }
    if empty {
        remove_group(s, id);
    } else {
        check_fence(s, id, out);
        check_destruct(s, id, out);
    }
    Some(Response::Ok)
}

#[allow(clippy::too_many_arguments)]
fn invite(
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
fn join(
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
        let tolerated = self.groups.tolerate && !(ids.is_empty() && in_invite.is_empty());
        if tolerated {
            self.groups.lost.insert(me);
        }
        tolerated
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
    pub(super) fn groups_job_failed(&mut self, job: JobIdx, msg: &str, out: &mut Vec<Event>) {
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
    pub(super) fn groups_member_finalized(&mut self, job: JobIdx, rank: u32, out: &mut Vec<Event>) {
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
