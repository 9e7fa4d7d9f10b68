//! A job's whole KVS in one exchange: `kvs-getall` and `kvs-putall`
//! (docs/dynamic-jobs.md), for a program that carries pairs between PMI
//! servers that cannot reach each other, or a node server feeding an
//! outer one.

use super::conn::check_reply;
use super::transport::Peer;
use super::{Pmi, PmiError};
use fastpmi_codec::command::replies::{GETALL_COUNT, GETALL_END, GETALL_PAIR, PUTALL_END};
use fastpmi_codec::{Message, Request};

/// A key and its value.
pub type Pair = (Vec<u8>, Vec<u8>);

impl Pmi {
    /// Every pair of this job's KVS (`jobid` None), or of job `jobid`
    /// connected to it, as the server holds them now (put before the last
    /// fence, or since: a fence first makes every rank's puts part of it).
    /// On shared memory this job's pairs are read from the segment, with
    /// no word to the server.
    pub fn kvs_getall(&self, jobid: Option<&str>) -> Result<Vec<Pair>, PmiError> {
        self.live()?;
        let own = jobid.is_none_or(|j| j.is_empty() || j == self.jobid);
        // This job's pairs on shared memory: read from the segment, unless
        // some overflowed it into the launcher (then the server has them
        // all).
        if let Some(shm) = self.shm().filter(|_| own) {
            if !self.overflowed(&shm.seg) {
                return Ok(shm
                    .seg
                    .seg()
                    .kvs()
                    .entries()
                    .map(|(k, v)| (k.to_vec(), v.to_vec()))
                    .collect());
            }
        }
        self.with(|t| match t {
            Peer::Wire(c) => {
                let req = Request::GetAll {
                    jobid: jobid.map(str::to_string),
                };
                let replies = c.exchange(
                    std::slice::from_ref(&req),
                    req.response(),
                    req.responses_before(),
                )?;
                getall_pairs(replies)
            }
            Peer::Local(l) => match jobid {
                Some(j) if !j.is_empty() && j != self.jobid => Err(PmiError::Protocol(format!(
                    "no job {j} here: a singleton has only its own KVS"
                ))),
                _ => Ok(l.kvs.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
            },
        })
    }

    /// Put `pairs` into this job's KVS in one exchange: the server checks
    /// every pair before it puts any (at most
    /// `fastpmi_server::PUTALL_PAIRS_MAX` pairs and `PUTALL_BYTES_MAX`
    /// bytes); visible to the other ranks after their next fence, as puts.
    pub fn kvs_putall(&self, pairs: &[(&[u8], &[u8])]) -> Result<(), PmiError> {
        self.live()?;
        self.with(|t| match t {
            Peer::Wire(c) => {
                let mut reqs = Vec::with_capacity(pairs.len() + 1);
                reqs.push(Request::PutAll {
                    paircount: pairs.len() as u64,
                });
                reqs.extend(pairs.iter().map(|(k, v)| Request::PutAllPair {
                    key: k.to_vec(),
                    value: v.to_vec(),
                }));
                let mut replies = c.exchange(&reqs, PUTALL_END, &[])?;
                let m = replies.pop().ok_or_else(|| {
                    PmiError::Protocol("no kvs-putall-response from the PMI server".into())
                })?;
                check_reply(m, PUTALL_END).map(drop)
            }
            Peer::Local(l) => {
                for (k, v) in pairs {
                    l.kvs.insert(k.to_vec(), v.to_vec());
                }
                Ok(())
            }
        })
    }
}

/// The pairs of a getall's replies: its count, the pairs, the end (or an
/// error in place of all).
fn getall_pairs(mut replies: Vec<Message>) -> Result<Vec<Pair>, PmiError> {
    let last = replies
        .pop()
        .ok_or_else(|| PmiError::Protocol("no kvs-getall-response from the PMI server".into()))?;
    check_reply(last, GETALL_END)?;
    let mut it = replies.into_iter();
    let count = it
        .next()
        .filter(|m| m.cmd == GETALL_COUNT)
        .and_then(|m| m.get_str("paircount")?.parse::<usize>().ok())
        .ok_or_else(|| PmiError::Protocol("kvs-getall without its pair count".into()))?;
    let pairs: Vec<Pair> = it
        .map(|m| {
            let m = check_reply(m, GETALL_PAIR)?;
            match (m.get("key"), m.get("value")) {
                (Some(k), Some(v)) => Ok((k.to_vec(), v.to_vec())),
                _ => Err(PmiError::Protocol(
                    "kvs-getall-pair-response without key or value".into(),
                )),
            }
        })
        .collect::<Result<_, _>>()?;
    if pairs.len() != count {
        return Err(PmiError::Protocol(format!(
            "kvs-getall announced {count} pairs and sent {}",
            pairs.len()
        )));
    }
    Ok(pairs)
}
