//! The out-of-band channel (docs/oob.md): a second connection per rank on
//! which the server sends notices the rank did not ask for (the job is
//! being aborted, a checkpoint is requested), each followed by the signal
//! the rank chose.
//!
//! In FD mode the launcher hands each rank a socket of its own for it
//! (`PMI_OOB_FD`, [`Server::connect_oob`]); in port mode the rank opens a
//! new connection and proves which rank it is as `fullinit` does
//! ([`super::auth`]). Either way the rank must have initialized PMI first,
//! and holds at most one channel. Closing it never fails the job.

use super::auth::{self, Claim};
use super::{ConnId, Event, JobIdx, ReplyTo, Server};
use fastpmi_codec::oob::Notice;
use fastpmi_codec::{Request, Response};

/// What [`Server::checkpoint`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointSent {
    /// The request's number in this job (from 1).
    pub seq: u64,
    /// Ranks that got it (those with an open channel).
    pub ranks: u32,
    /// Ranks of the job.
    pub size: u32,
}

/// Why a checkpoint request was not sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    #[error("no job {0} in this launcher")]
    NoJob(String),
    #[error("job {0} has failed")]
    Failed(String),
}

impl Server {
    /// The launcher's end of rank `rank`'s `PMI_OOB_FD` socket (FD mode).
    pub fn connect_oob(&mut self, conn: ConnId, job: JobIdx, rank: u32) {
        self.connect(conn, Some((job, rank)), None);
        if let Some(c) = self.conns.get_mut(&conn) {
            c.oob = true;
        }
    }

    /// Send `cmd=checkpoint` (and its signal) to every rank of `job` with
    /// an open channel.
    pub fn checkpoint(
        &mut self,
        job: &str,
        out: &mut Vec<Event>,
    ) -> Result<CheckpointSent, CheckpointError> {
        let idx = self
            .job_index(job)
            .ok_or_else(|| CheckpointError::NoJob(job.to_string()))?;
        let j = &mut self.jobs[idx];
        if j.failed.is_some() {
            return Err(CheckpointError::Failed(job.to_string()));
        }
        j.checkpoints += 1;
        let notice = Notice::Checkpoint {
            jobid: j.id.clone(),
            seq: j.checkpoints,
        };
        let ranks = self.notify(idx, &notice, out);
        Ok(CheckpointSent {
            seq: self.jobs[idx].checkpoints,
            ranks,
            size: self.jobs[idx].size,
        })
    }

    /// Send `notice` to every rank of `job` with an open channel, each
    /// followed by its signal; returns how many got it.
    pub(super) fn notify(&mut self, job: JobIdx, notice: &Notice, out: &mut Vec<Event>) -> u32 {
        let bytes = notice.encode();
        let mut sent = 0;
        for (rank, slot) in self.jobs[job].ranks.iter().enumerate() {
            let Some(ch) = slot.oob else { continue };
            if slot.exited || !self.conns.contains_key(&ch.conn) {
                continue;
            }
            if tracing::enabled!(tracing::Level::DEBUG) {
                let text = fastpmi_codec::show(&bytes);
                tracing::debug!(
                    "rank {rank} (out of band) <- {}",
                    text.trim_end_matches("\\n")
                );
            }
            out.push(Event::Send {
                conn: ch.conn,
                bytes: bytes.clone(),
            });
            if let Some(signal) = ch.signal {
                out.push(Event::Signal {
                    conn: ch.conn,
                    job,
                    rank: rank as u32,
                    signal,
                });
            }
            sent += 1;
        }
        sent
    }

    /// An out-of-band connection closed: the rank has no channel now.
    pub(super) fn oob_closed(&mut self, conn: ConnId, bound: Option<(JobIdx, u32)>) {
        let Some((job, rank)) = bound else { return };
        if let Some(slot) = self.jobs[job].ranks.get_mut(rank as usize) {
            if slot.oob.is_some_and(|ch| ch.conn == conn) {
                slot.oob = None;
            }
        }
    }
}

/// Whether a request goes to [`handle`]: anything on an out-of-band
/// connection, and `init_oob` anywhere.
pub(super) fn routes_here(s: &Server, conn: ConnId, req: &Request) -> bool {
    matches!(req, Request::InitOob { .. }) || s.conns.get(&conn).is_some_and(|c| c.oob)
}

pub(super) fn handle(
    s: &mut Server,
    conn: ConnId,
    to: &ReplyTo,
    req: Request,
    out: &mut Vec<Event>,
) -> Option<Response> {
    let c = s.conns.get(&conn)?;
    let (oob, bound, port, inited) = (c.oob, c.bound, c.port_job.is_some(), c.inited);
    match req {
        Request::InitOob {
            version,
            signal,
            pmiid,
            auth: authtype,
        } => {
            if !(1..=2).contains(&version) {
                return Some(Response::error(format!(
                    "init_oob: PMI version {version} not supported (1 and 2 are)"
                )));
            }
            // FD mode: the launcher's socket for this rank's channel.
            if oob && !port {
                let (job, rank) = bound?;
                if pmiid.is_some_and(|p| p != rank as i64) {
                    return Some(Response::error(format!(
                        "init_oob: pmiid={} on rank {rank}'s channel",
                        pmiid.unwrap_or_default()
                    )));
                }
                return Some(match auth::bind_oob(s, conn, job, rank, signal) {
                    Ok(()) => Response::Ok,
                    Err(why) => Response::error(why.to_string()),
                });
            }
            // Port mode: a fresh connection that claims a rank.
            if port && bound.is_none() && !inited && !oob {
                let Some(rank) = pmiid else {
                    auth::refuse(s, conn, Some(to), "init_oob without pmiid".into(), out);
                    return None;
                };
                if let Some(c) = s.conns.get_mut(&conn) {
                    c.oob = true;
                }
                return auth::claim_rank(s, conn, to, rank, authtype, Claim::Oob { signal }, out);
            }
            Some(Response::error(if oob {
                "init_oob: this out-of-band channel is already open".to_string()
            } else {
                "init_oob opens a connection of its own (PMI_OOB_FD, or a new connection to PMI_PORT), not on the PMI connection".to_string()
            }))
        }
        // Port mode: the answer to the channel's challenge.
        Request::AuthComplete { authinfo } if port => auth::complete(s, conn, to, &authinfo, out),
        other => Some(Response::error(format!(
            "{} on an out-of-band channel (it serves init_oob only)",
            fastpmi_codec::command::request_name(&other)
        ))),
    }
}
