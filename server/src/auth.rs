//! Identification of a connection: which job and rank it is.
//!
//! A socketpair (`PMI_FD`) is bound to its rank by the launcher before the
//! rank runs. A port-mode connection names its rank (`initack pmiid=`,
//! `fullinit pmirank=`) and must prove it:
//! * by the challenge-response ([`fastpmi_codec::auth`]) with its job's
//!   secret, from anywhere;
//! * or, for clients that cannot authenticate (MPICH's built-in PMI-1,
//!   Slurm's libpmi2), only when the launcher vouches for the peer
//!   ([`Trust::Local`]: loopback, same uid) and confirms that the socket
//!   belongs to the process it started as that rank ([`Event::CheckPeer`],
//!   answered with [`Server::peer_checked`]).
//!
//! Anything else is refused ([`Event::Refuse`]) and the connection closed;
//! the rank it claimed is untouched and may still connect.

use super::{ConnId, Event, JobIdx, OobChannel, Phase, ReplyTo, Server};
use fastpmi_codec::auth::{self, AUTHTYPE};
use fastpmi_codec::names::attr;
use fastpmi_codec::Response;

/// What the launcher knows of a port-mode peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// Unknown peer: it must authenticate.
    Remote,
    /// Loopback and the launcher's own uid: an unmodified client may claim
    /// a rank, if the launcher confirms the socket is that rank's.
    Local,
}

/// How an identification in progress will be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    InitAck,
    FullInit,
    /// The rank's out-of-band channel (`init_oob`, [`super::oob`]).
    Oob {
        signal: Option<&'static str>,
    },
}

/// An identification waiting for the next step.
#[derive(Debug, Clone)]
pub(crate) enum Pending {
    Challenge {
        nonce: String,
        rank: i64,
        to: ReplyTo,
        claim: Claim,
    },
    Check {
        rank: i64,
        to: ReplyTo,
        claim: Claim,
    },
}

impl Server {
    /// Tell the server who is on the other end of port-mode connection
    /// `conn` (`peer` is its address, for messages).
    pub fn set_peer(&mut self, conn: ConnId, trust: Trust, peer: String) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.trust = trust;
            c.peer = Some(peer);
        }
    }

    /// The secret this job's ranks authenticate with in port mode.
    pub fn set_job_secret(&mut self, job: JobIdx, secret: String) {
        self.jobs[job].secret = Some(secret);
    }

    /// The launcher's answer to [`Event::CheckPeer`]: whether the socket of
    /// `conn` belongs to the process started as the rank it claims.
    pub fn peer_checked(&mut self, conn: ConnId, ok: bool, out: &mut Vec<Event>) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let Some(Pending::Check { rank, to, claim }) = c.pending.take() else {
            return;
        };
        if !ok {
            let reason = format!("claims rank {rank}, but its socket is not that rank's process");
            refuse(self, conn, Some(&to), reason, out);
            return;
        }
        answer_claim(self, conn, &to, rank, claim, out);
    }

    fn peer_name(&self, conn: ConnId) -> String {
        self.conns
            .get(&conn)
            .and_then(|c| c.peer.clone())
            .unwrap_or_else(|| format!("connection {conn}"))
    }
}

/// Close `conn` with an error reply (when there is a request to answer)
/// and tell the launcher why, for its log.
pub(super) fn refuse(
    s: &mut Server,
    conn: ConnId,
    to: Option<&ReplyTo>,
    reason: String,
    out: &mut Vec<Event>,
) {
    s.stats.errors += 1;
    if let Some(to) = to {
        super::reply(
            out,
            to,
            &Response::error(format!("refused: {reason}")),
            None,
        );
    }
    let reason = format!("{}: {reason}", s.peer_name(conn));
    s.conns.remove(&conn);
    out.push(Event::Refuse { conn, reason });
    out.push(Event::Close { conn });
}

/// The claim of `conn` to be `rank` is proven: bind it and answer `to`.
fn answer_claim(
    s: &mut Server,
    conn: ConnId,
    to: &ReplyTo,
    rank: i64,
    claim: Claim,
    out: &mut Vec<Event>,
) {
    if let Claim::Oob { signal } = claim {
        let opened = match s.conns.get(&conn).and_then(|c| c.port_job) {
            Some(job) => bind_oob(s, conn, job, rank as u32, signal).map_err(|e| e.to_string()),
            None => Err(Unclaimable::NoJob.to_string()),
        };
        match opened {
            Ok(()) => super::reply(out, to, &Response::Ok, None),
            Err(why) => refuse(s, conn, Some(to), why, out),
        }
        return;
    }
    let resp = match bind(s, conn, rank) {
        Ok((job, r)) => match claim {
            Claim::InitAck => Response::InitAck {
                size: s.jobs[job].world_size(),
                rank: s.jobs[job].global_rank(r),
            },
            _ => fullinit_response(s, job, r),
        },
        Err(why) => {
            refuse(s, conn, Some(to), why.to_string(), out);
            return;
        }
    };
    // --stop-in-init may hold the reply that completes init.
    if let Some(resp) = s.deliver_init(conn, to, resp) {
        super::reply(out, to, &resp, None);
    }
}

/// Why a connection cannot be the rank it claims (the reason it is refused).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum Unclaimable {
    #[error("unknown connection")]
    UnknownConnection,
    #[error("connection belongs to no job")]
    NoJob,
    #[error("rank {rank} out of range for a job of {size} ranks")]
    OutOfRange { rank: i64, size: u32 },
    #[error("rank {0} is already connected")]
    Taken(i64),
}

/// The rank `rank` of the connection's job, if it may still connect (an
/// out-of-band channel: if it exists; [`bind_oob`] checks more).
fn free_rank(s: &Server, conn: ConnId, rank: i64, claim: Claim) -> Result<JobIdx, Unclaimable> {
    let c = s.conns.get(&conn).ok_or(Unclaimable::UnknownConnection)?;
    let job = c.port_job.ok_or(Unclaimable::NoJob)?;
    let j = &s.jobs[job];
    if rank < 0 || rank >= j.size as i64 {
        return Err(Unclaimable::OutOfRange { rank, size: j.size });
    }
    let slot = &j.ranks[rank as usize];
    if matches!(claim, Claim::Oob { .. }) {
        return Ok(job);
    }
    if slot.conn.is_some() || slot.phase != Phase::Idle {
        return Err(Unclaimable::Taken(rank));
    }
    Ok(job)
}

/// Bind the connection to the rank it proved to be.
fn bind(s: &mut Server, conn: ConnId, rank: i64) -> Result<(JobIdx, u32), Unclaimable> {
    let job = free_rank(s, conn, rank, Claim::FullInit)?;
    let b = (job, rank as u32);
    if let Some(c) = s.conns.get_mut(&conn) {
        c.bound = Some(b);
    }
    s.mark_initialized(job, b.1, conn);
    Ok(b)
}

/// Node attributes a fastpmi client needs at init, sent with fullinit.
const FULLINIT_ATTRS: &[&str] = &[
    attr::MEM_POOL_TYPE,
    attr::MEM_ANON_MMAP_FD,
    attr::MEM_SYSV_ID,
    fastpmi_codec::names::attr::PARENT_SEGMENT,
];

fn fullinit_response(s: &Server, job: JobIdx, rank: u32) -> Response {
    let j = &s.jobs[job];
    let mut extra = vec![(
        fastpmi_codec::names::fullinit::JOBID.to_string(),
        j.id.clone(),
    )];
    for a in FULLINIT_ATTRS {
        if let Some(v) = j.store.get_node_attr(a.as_bytes()) {
            let k = a
                .strip_prefix(fastpmi_codec::names::fullinit::PREFIX)
                .unwrap_or(a);
            extra.push((
                format!("{}{k}", fastpmi_codec::names::fullinit::PREFIX),
                String::from_utf8_lossy(&v).into_owned(),
            ));
        }
    }
    Response::FullInit {
        rank: j.global_rank(rank),
        size: j.world_size(),
        appnum: j.appnum[rank as usize],
        spawner_jobid: j.spawner.clone(),
        debugged: false,
        verbose: false,
        extra,
    }
}

/// PMI-1 `initack pmiid=R` (port mode, before `init`).
pub(super) fn initack(
    s: &mut Server,
    conn: ConnId,
    to: &ReplyTo,
    pmiid: i64,
    out: &mut Vec<Event>,
) -> Option<Response> {
    if let Some((job, rank)) = s.conns.get(&conn).and_then(|c| c.bound) {
        let j = &s.jobs[job];
        let rank = j.global_rank(rank);
        if rank as i64 != pmiid {
            tracing::warn!("rank {rank} announced itself as rank {pmiid}; keeping {rank}");
        }
        return Some(Response::InitAck {
            size: j.world_size(),
            rank,
        });
    }
    let rank = local_claim(s, conn, to, pmiid, out)?;
    claim(s, conn, to, rank, Claim::InitAck, out)
}

/// PMI-2 `fullinit`, with or without `authtype`.
pub(super) fn fullinit(
    s: &mut Server,
    conn: ConnId,
    to: &ReplyTo,
    rank: Option<i64>,
    authtype: Option<String>,
    out: &mut Vec<Event>,
) -> Option<Response> {
    if let Some((job, r)) = s.conns.get(&conn).and_then(|c| c.bound) {
        s.mark_initialized(job, r, conn);
        return Some(fullinit_response(s, job, r));
    }
    let Some(rank) = rank else {
        refuse(
            s,
            conn,
            Some(to),
            "fullinit without pmirank or srcid".into(),
            out,
        );
        return None;
    };
    claim_rank(s, conn, to, rank, authtype, Claim::FullInit, out)
}

/// A port-mode connection claims `rank`: with `authtype`, by the
/// challenge; without, if the launcher vouches for it.
pub(super) fn claim_rank(
    s: &mut Server,
    conn: ConnId,
    to: &ReplyTo,
    rank: i64,
    authtype: Option<String>,
    what: Claim,
    out: &mut Vec<Event>,
) -> Option<Response> {
    let rank = local_claim(s, conn, to, rank, out)?;
    match authtype.as_deref() {
        None => claim(s, conn, to, rank, what, out),
        Some(AUTHTYPE) => challenge(s, conn, to, rank, what, out),
        Some(other) => {
            let reason = format!("authtype {other} is not supported (use {AUTHTYPE})");
            refuse(s, conn, Some(to), reason, out);
            None
        }
    }
}

/// The node's index of the job's rank a port-mode connection claims (the
/// same number unless the job spans several node servers); a rank that
/// does not run here is refused.
fn local_claim(
    s: &mut Server,
    conn: ConnId,
    to: &ReplyTo,
    rank: i64,
    out: &mut Vec<Event>,
) -> Option<i64> {
    let Some(j) = s
        .conns
        .get(&conn)
        .and_then(|c| c.port_job)
        .map(|j| &s.jobs[j])
    else {
        return Some(rank);
    };
    if j.place.is_none() {
        return Some(rank);
    }
    match j.local_rank(rank) {
        Some(r) => Some(r.into()),
        None => {
            let why = format!(
                "rank {rank} does not run on this node (it serves ranks {}..{} of {})",
                j.global_rank(0),
                j.global_rank(j.size),
                j.world_size()
            );
            refuse(s, conn, Some(to), why, out);
            None
        }
    }
}

/// An unauthenticated claim: allowed only for a local peer the launcher
/// then confirms.
fn claim(
    s: &mut Server,
    conn: ConnId,
    to: &ReplyTo,
    rank: i64,
    claim: Claim,
    out: &mut Vec<Event>,
) -> Option<Response> {
    let job = match free_rank(s, conn, rank, claim) {
        Ok(j) => j,
        Err(why) => {
            refuse(s, conn, Some(to), why.to_string(), out);
            return None;
        }
    };
    let c = s.conns.get_mut(&conn).expect("checked by free_rank");
    if c.trust != Trust::Local {
        let reason = format!(
            "claims rank {rank} without authenticating (authtype={AUTHTYPE} is required \
             from this address)"
        );
        refuse(s, conn, Some(to), reason, out);
        return None;
    }
    c.pending = Some(Pending::Check {
        rank,
        to: to.clone(),
        claim,
    });
    out.push(Event::CheckPeer {
        conn,
        job,
        rank: rank as u32,
    });
    None
}

fn challenge(
    s: &mut Server,
    conn: ConnId,
    to: &ReplyTo,
    rank: i64,
    claim: Claim,
    out: &mut Vec<Event>,
) -> Option<Response> {
    let job = match free_rank(s, conn, rank, claim) {
        Ok(j) => j,
        Err(why) => {
            refuse(s, conn, Some(to), why.to_string(), out);
            return None;
        }
    };
    if s.jobs[job].secret.is_none() {
        refuse(
            s,
            conn,
            Some(to),
            "this job has no secret to authenticate with".into(),
            out,
        );
        return None;
    }
    let mut raw = [0u8; 16];
    if let Err(e) = getrandom::fill(&mut raw) {
        refuse(
            s,
            conn,
            Some(to),
            format!("no randomness for a challenge: {e}"),
            out,
        );
        return None;
    }
    let nonce: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    let c = s.conns.get_mut(&conn).expect("checked by free_rank");
    c.pending = Some(Pending::Challenge {
        nonce: nonce.clone(),
        rank,
        to: to.clone(),
        claim,
    });
    Some(Response::AuthChallenge { nonce })
}

/// `auth-response-complete`: check the answer, then answer the `fullinit`.
pub(super) fn complete(
    s: &mut Server,
    conn: ConnId,
    to: &ReplyTo,
    authinfo: &[u8],
    out: &mut Vec<Event>,
) -> Option<Response> {
    let pending = s.conns.get_mut(&conn).and_then(|c| c.pending.take());
    let Some(Pending::Challenge {
        nonce,
        rank,
        to: init,
        claim,
    }) = pending
    else {
        refuse(
            s,
            conn,
            Some(to),
            "auth-response-complete without a challenge".into(),
            out,
        );
        return None;
    };
    let secret = s
        .conns
        .get(&conn)
        .and_then(|c| c.port_job)
        .and_then(|j| s.jobs[j].secret.clone());
    if !secret.is_some_and(|sec| auth::verify(&sec, &nonce, authinfo)) {
        refuse(
            s,
            conn,
            Some(&init),
            format!("wrong answer to the challenge for rank {rank}"),
            out,
        );
        return None;
    }
    answer_claim(s, conn, &init, rank, claim, out);
    None
}

/// Why a connection cannot become a rank's out-of-band channel.
#[derive(Debug, thiserror::Error)]
pub(super) enum OobRefused {
    #[error("init_oob before init: rank {rank} has not initialized PMI")]
    BeforeInit { rank: u32 },
    #[error("init_oob after rank {rank} finalized PMI")]
    AfterFinalize { rank: u32 },
    #[error("rank {rank} already has an out-of-band channel (connection {conn})")]
    Taken { rank: u32, conn: ConnId },
}

/// Make `conn` rank `rank`'s out-of-band channel ([`super::oob`]): the
/// rank must have initialized PMI and hold no other.
pub(super) fn bind_oob(
    s: &mut Server,
    conn: ConnId,
    job: JobIdx,
    rank: u32,
    signal: Option<&'static str>,
) -> Result<(), OobRefused> {
    s.sync_from_segment(job, rank);
    let slot = &s.jobs[job].ranks[rank as usize];
    match slot.phase {
        Phase::Idle => return Err(OobRefused::BeforeInit { rank }),
        Phase::Finalized => return Err(OobRefused::AfterFinalize { rank }),
        Phase::Initialized => {}
    }
    if let Some(ch) = slot
        .oob
        .filter(|ch| ch.conn != conn && s.conns.contains_key(&ch.conn))
    {
        return Err(OobRefused::Taken {
            rank,
            conn: ch.conn,
        });
    }
    s.jobs[job].ranks[rank as usize].oob = Some(OobChannel { conn, signal });
    if let Some(c) = s.conns.get_mut(&conn) {
        c.bound = Some((job, rank));
    }
    Ok(())
}
