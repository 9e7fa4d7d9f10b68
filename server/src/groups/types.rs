//! The group table and its records: groups, pending invitations, early
//! joins, and the small reply helpers every group command uses.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use crate::{reply, Event, JobIdx, ReplyTo};
use fastpmi_codec::Response;

/// A member: (job, rank).
pub(crate) type Member = (JobIdx, u32);

/// The launcher-wide group table.
#[derive(Default)]
pub(crate) struct Groups {
    /// Last context id handed out (ids start at 1, never reused).
    pub(super) last_ctxid: u64,
    pub(super) groups: HashMap<String, Group>,
    pub(super) invites: HashMap<String, Invite>,
    /// Joins that came before their invitation.
    pub(super) early_joins: Vec<EarlyJoin>,
    /// Slots in use, per job.
    pub(super) slots_used: HashMap<JobIdx, HashSet<u32>>,
    /// `--tolerate-group-failures`.
    pub(crate) tolerate: bool,
    /// Members whose death was tolerated.
    pub(super) lost: HashSet<Member>,
    pub(crate) psets: crate::psets::Psets,
}

pub(super) struct Group {
    pub(super) members: Vec<Member>,
    pub(super) live: bool,
    pub(super) ctxid: u64,
    /// (job, slot) of the segment barrier, if any.
    pub(super) slot: Option<(JobIdx, u32)>,
    pub(super) left: Vec<bool>,
    pub(super) failed: Option<String>,
    /// Construction: the members that called, and their shm flag.
    pub(super) constructing: Vec<Option<(ReplyTo, bool)>>,
    /// The current server-barrier fence round.
    pub(super) fencing: Vec<Option<ReplyTo>>,
    /// When each member arrived at its last server-barrier fence (for
    /// `fastpmi ps`; meaningful while `fencing` holds it).
    pub(super) fence_at: Vec<Option<Instant>>,
    /// The current destruct round (or, failed group: who destructed).
    pub(super) destructing: Vec<Option<ReplyTo>>,
    pub(super) destructed: Vec<bool>,
}

impl Group {
    pub(super) fn new(members: Vec<Member>) -> Group {
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
            fence_at: vec![None; n],
            destructing: vec![None; n],
            destructed: vec![false; n],
        }
    }

    pub(super) fn pos(&self, m: Member) -> Option<usize> {
        self.members.iter().position(|&x| x == m)
    }

    /// Members still expected in collective rounds.
    pub(super) fn active(&self, i: usize) -> bool {
        !self.left[i]
    }

    pub(super) fn size(&self) -> u32 {
        self.left.iter().filter(|l| !**l).count() as u32
    }
}

pub(super) enum Answer {
    Pending,
    Accepted(ReplyTo, bool),
    Declined,
}

pub(super) struct Invite {
    pub(super) leader: Member,
    pub(super) leader_to: ReplyTo,
    pub(super) leader_shm: bool,
    pub(super) invitees: Vec<Member>,
    pub(super) answers: Vec<Answer>,
    pub(super) deadline: Instant,
}

pub(super) struct EarlyJoin {
    pub(super) id: String,
    pub(super) member: Member,
    pub(super) leader: Member,
    pub(super) accept: bool,
    pub(super) shm: bool,
    pub(super) to: ReplyTo,
    pub(super) deadline: Instant,
    pub(super) timeout_ms: u64,
}

pub(super) fn err(msg: impl Into<String>) -> Option<Response> {
    Some(Response::error(msg))
}

pub(super) fn send_err(out: &mut Vec<Event>, to: &ReplyTo, msg: &str) {
    reply(out, to, &Response::error(msg), None);
}
