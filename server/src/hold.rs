//! `--stop-in-init`: the reply that completes a rank's PMI init (PMI-1
//! `response_to_init`, PMI-2 `fullinit-response`) is held while its job is
//! held, so that no rank gets past init until the launcher releases the
//! job (`fastpmi release`, or a debugger continuing from `MPIR_Breakpoint`).
//! fastpmi's own client does its init over the socket before it maps the
//! job segment, so shared-memory ranks are held the same way.

use std::collections::{BTreeSet, HashMap};

use super::{reply, ConnId, Event, JobIdx, ReplyTo, Server};
use fastpmi_codec::Response;

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
    /// PMIx ranks waiting in `PMIx_Init` (the launcher's PMIx server holds
    /// them; the launcher sends their release).
    pmix: HashMap<JobIdx, BTreeSet<u32>>,
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
            || self.held.pmix.get(&job).is_some_and(|s| s.contains(&rank))
    }

    /// PMIx rank `rank` of `job` finalized: past init whoever released it
    /// (a PMIx tool may, without the launcher).
    pub(super) fn pmix_left_init(&mut self, job: JobIdx, rank: u32) {
        if let Some(s) = self.held.pmix.get_mut(&job) {
            s.remove(&rank);
        }
    }

    /// PMIx rank `rank` of `job` connected: held in `PMIx_Init` when its
    /// job is held.
    pub(super) fn pmix_connected_held(&mut self, job: JobIdx, rank: u32) {
        if self.held.holding.contains(&job) {
            self.held.pmix.entry(job).or_default().insert(rank);
        }
    }

    /// Stop holding `job`: send every held init reply. Returns how many
    /// ranks were released.
    pub fn release_init(&mut self, job: JobIdx, out: &mut Vec<Event>) -> usize {
        self.held.holding.remove(&job);
        let held = self.held.replies.remove(&job).unwrap_or_default();
        for h in &held {
            reply(out, &h.to, &h.resp, None);
        }
        held.len() + self.held.pmix.remove(&job).map_or(0, |s| s.len())
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
        self.held.pmix.remove(&job);
        for h in self.held.replies.remove(&job).unwrap_or_default() {
            reply(out, &h.to, &Response::error(msg), None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::status::SockState;
    use super::super::tests::support::{send1 as line, send2 as pmi2, sent};
    use super::super::JobSpec;
    use super::*;
    use crate::store::MemStore;

    fn held_server(n: u32) -> (Server, JobIdx) {
        let mut s = Server::new();
        let job = s.add_job(JobSpec {
            id: "fastpmi_hold_0".into(),
            apps: vec![n],
            universe_size: n,
            spawner: None,
            store: Box::new(MemStore::new(n, fastpmi_codec::VALLEN_MAX)),
        });
        s.hold_init(job);
        for r in 0..n {
            s.connect(r as ConnId, Some((job, r)), None);
        }
        (s, job)
    }

    fn sends(out: &[Event], conn: ConnId) -> Vec<String> {
        sent(out, conn)
            .iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect()
    }

    #[test]
    fn init_replies_held_until_release() {
        let (mut s, job) = held_server(2);
        // Rank 0 speaks PMI-2: its init is answered, fullinit held.
        let out = line(&mut s, 0, "cmd=init pmi_version=2 pmi_subversion=0");
        assert!(sends(&out, 0)[0].contains("response_to_init"));
        assert!(sends(&pmi2(&mut s, 0, "cmd=fullinit;threaded=FALSE;"), 0).is_empty());
        // Rank 1 speaks PMI-1: its init is held.
        assert!(sends(
            &line(&mut s, 1, "cmd=init pmi_version=1 pmi_subversion=1"),
            1
        )
        .is_empty());
        let st = s.job_status(job);
        assert!(st.holding);
        assert!(st.ranks.iter().all(|r| r.state == SockState::HeldInInit));
        assert_eq!(st.ranks[0].last_op, "fullinit");
        let mut out = Vec::new();
        assert_eq!(s.release_init(job, &mut out), 2);
        assert!(sends(&out, 0)[0].contains("fullinit-response;rc=0;"));
        assert!(sends(&out, 1)[0].contains("cmd=response_to_init rc=0"));
        assert!(!s.is_holding(job));
        assert_eq!(s.job_status(job).ranks[1].state, SockState::Running);
    }

    #[test]
    fn pmix_ranks_of_a_held_job_are_held_until_release() {
        let (mut s, job) = held_server(3);
        s.pmix_rank(job, 0, crate::status::PmixStep::Connected);
        s.pmix_rank(job, 2, crate::status::PmixStep::Connected);
        assert!(s.init_held(job, 0) && s.init_held(job, 2));
        assert!(!s.init_held(job, 1));
        let st = s.job_status(job);
        assert_eq!(st.ranks[0].state, SockState::HeldInInit);
        assert_eq!(st.ranks[0].last_op, "PMIx_Init");
        let mut out = Vec::new();
        assert_eq!(s.release_init(job, &mut out), 2);
        assert!(out.is_empty(), "PMIx ranks get no PMI reply");
        assert!(!s.init_held(job, 0));
        // Not held any more: a rank connecting now is not held either.
        // (A finalized rank is past init whoever released it.)
        s.pmix_rank(job, 1, crate::status::PmixStep::Connected);
        assert!(!s.init_held(job, 1));
        let (mut s, job) = held_server(1);
        s.pmix_rank(job, 0, crate::status::PmixStep::Connected);
        s.pmix_rank(job, 0, crate::status::PmixStep::Finalized);
        assert!(!s.init_held(job, 0), "released by a tool, then finalized");
    }

    #[test]
    fn a_failed_job_answers_held_inits_with_an_error() {
        let (mut s, job) = held_server(2);
        line(&mut s, 0, "cmd=init pmi_version=1 pmi_subversion=1");
        let mut out = Vec::new();
        s.fail_job(job, Some(1), 1, "rank 1 died", &mut out);
        let r = sends(&out, 0);
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(
            r[0].contains("rc=-1") && r[0].contains("rank_1_died"),
            "{r:?}"
        );
        assert!(!s.init_held(job, 0));
    }

    #[test]
    fn a_closed_connection_is_forgotten() {
        let (mut s, job) = held_server(1);
        line(&mut s, 0, "cmd=init pmi_version=1 pmi_subversion=1");
        assert!(s.init_held(job, 0));
        let mut out = Vec::new();
        s.on_closed(0, &mut out);
        assert!(!s.init_held(job, 0));
        let mut out = Vec::new();
        assert_eq!(s.release_init(job, &mut out), 0);
        assert!(sends(&out, 0).is_empty());
    }
}
