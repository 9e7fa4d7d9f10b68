//! `--stop-in-init`: the reply that completes a rank's PMI init (PMI-1
//! `response_to_init`, PMI-2 `fullinit-response`) is held while its job is
//! held, so that no rank gets past init until the launcher releases the
//! job (`fastpmi release`, or a debugger continuing from `MPIR_Breakpoint`).
//! fastpmi's own client does its init over the socket before it maps the
//! job segment, so shared-memory ranks are held the same way.

use std::collections::{BTreeSet, HashMap};

use super::{reply, ConnId, Event, JobIdx, ReplyTo, Server};
use crate::wire::Response;

/// One held reply.
struct HeldReply {
    rank: u32,
    to: ReplyTo,
    resp: Response,
}

#[derive(Default)]
pub(super) struct Held {
    /// Jobs whose init replies are held.
    holding: BTreeSet<JobIdx>,
    replies: HashMap<JobIdx, Vec<HeldReply>>,
}

impl Server {
    /// Hold the init replies of `job` from now on.
    pub fn hold_init(&mut self, job: JobIdx) {
        self.held.holding.insert(job);
    }

    /// Whether `job`'s init replies are held.
    pub fn is_holding(&self, job: JobIdx) -> bool {
        self.held.holding.contains(&job)
    }

    /// Whether `rank` of `job` is held inside init right now.
    pub fn init_held(&self, job: JobIdx, rank: u32) -> bool {
        self.held
            .replies
            .get(&job)
            .is_some_and(|v| v.iter().any(|h| h.rank == rank))
    }

    /// Stop holding `job`: send every held init reply. Returns how many
    /// ranks were released.
    pub fn release_init(&mut self, job: JobIdx, out: &mut Vec<Event>) -> usize {
        self.held.holding.remove(&job);
        let held = self.held.replies.remove(&job).unwrap_or_default();
        for h in &held {
            reply(out, &h.to, &h.resp, None);
        }
        held.len()
    }

    /// The reply `resp` to a request on `conn`: `None` when it completes
    /// init for a rank of a held job (then kept until release).
    pub(super) fn deliver_init(
        &mut self,
        conn: ConnId,
        to: &ReplyTo,
        resp: Response,
    ) -> Option<Response> {
        let completes_init = match &resp {
            Response::FullInit { .. } => true,
            // A PMI-2 client's first line: its init completes with fullinit.
            Response::Init { version, .. } => *version == 1,
            _ => false,
        };
        if !completes_init {
            return Some(resp);
        }
        let Some((job, rank)) = self.conns.get(&conn).and_then(|c| c.bound) else {
            return Some(resp);
        };
        if !self.held.holding.contains(&job) || self.jobs[job].failed.is_some() {
            return Some(resp);
        }
        tracing::debug!(job, rank, "holding init reply (--stop-in-init)");
        self.held.replies.entry(job).or_default().push(HeldReply {
            rank,
            to: to.clone(),
            resp,
        });
        None
    }

    /// `conn` is gone: forget what was held for it.
    pub(super) fn forget_held(&mut self, conn: ConnId) {
        for v in self.held.replies.values_mut() {
            v.retain(|h| h.to.conn != conn);
        }
    }

    /// `job` failed: its held ranks get the error instead of a stuck init.
    pub(super) fn fail_held(&mut self, job: JobIdx, msg: &str, out: &mut Vec<Event>) {
        self.held.holding.remove(&job);
        for h in self.held.replies.remove(&job).unwrap_or_default() {
            reply(
                out,
                &h.to,
                &Response::Error {
                    rc: -1,
                    msg: msg.to_string(),
                },
                None,
            );
        }
    }
}
