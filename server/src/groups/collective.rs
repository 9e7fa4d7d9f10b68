//! The collective group commands over an explicit member list:
//! construct (every member calls), destruct, the server's barrier fence
//! and leave. A round completes when every member still in the group has
//! called; leaving or finalizing can complete it for the others.

use super::types::{err, Group, Member};
use crate::{reply, Event, ReplyTo, Server};
use fastpmi_codec::group::MemberSpec;
use fastpmi_codec::Response;

pub(super) fn construct(
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
    if let Some(dead) = s.dead_member(&members) {
        return err(format!("group {id}: member {dead} died"));
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

/// Why the caller of `what` (a group command) cannot act on group `id`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum NotMember {
    #[error("{what}: no group {id}")]
    NoGroup { what: &'static str, id: String },
    #[error("{what}: group {id} is still being constructed")]
    Constructing { what: &'static str, id: String },
    #[error("{what}: {name} left group {id}")]
    Left {
        what: &'static str,
        name: String,
        id: String,
    },
    #[error("{what}: {name} is not a member of group {id}")]
    Outsider {
        what: &'static str,
        name: String,
        id: String,
    },
}

/// The live, not-left member position of the caller in group `id`.
fn member_of<'a>(
    s: &'a mut Server,
    me: Member,
    id: &str,
    what: &'static str,
) -> Result<(&'a mut Group, usize), NotMember> {
    let name = s.member_name(me);
    let Some(g) = s.groups.groups.get_mut(id) else {
        return Err(NotMember::NoGroup {
            what,
            id: id.to_string(),
        });
    };
    match g.pos(me) {
        Some(i) if !g.left[i] => {
            if !g.live && g.failed.is_none() {
                return Err(NotMember::Constructing {
                    what,
                    id: id.to_string(),
                });
            }
            Ok((g, i))
        }
        Some(_) => Err(NotMember::Left {
            what,
            name,
            id: id.to_string(),
        }),
        None => Err(NotMember::Outsider {
            what,
            name,
            id: id.to_string(),
        }),
    }
}

pub(super) fn destruct(
    s: &mut Server,
    me: Member,
    to: &ReplyTo,
    id: &str,
    out: &mut Vec<Event>,
) -> Option<Response> {
    let lost = s.groups.lost.clone();
    let (g, i) = match member_of(s, me, id, "group-destruct") {
        Ok(x) => x,
        Err(e) => return err(e.to_string()),
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

pub(super) fn check_destruct(s: &mut Server, id: &str, out: &mut Vec<Event>) {
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

pub(super) fn remove_group(s: &mut Server, id: &str) {
    if let Some(g) = s.groups.groups.remove(id) {
        s.free_slot(g.slot);
        tracing::debug!(group = id, ctxid = g.ctxid, "group removed");
    }
}

pub(super) fn fence(
    s: &mut Server,
    me: Member,
    to: &ReplyTo,
    id: &str,
    out: &mut Vec<Event>,
) -> Option<Response> {
    let (g, i) = match member_of(s, me, id, "group-fence") {
        Ok(x) => x,
        Err(e) => return err(e.to_string()),
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
    g.fence_at[i] = Some(std::time::Instant::now());
    check_fence(s, id, out);
    None
}

pub(super) fn check_fence(s: &mut Server, id: &str, out: &mut Vec<Event>) {
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

pub(super) fn leave(
    s: &mut Server,
    me: Member,
    id: &str,
    out: &mut Vec<Event>,
) -> Option<Response> {
    let (g, i) = match member_of(s, me, id, "group-leave") {
        Ok(x) => x,
        Err(e) => return err(e.to_string()),
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
