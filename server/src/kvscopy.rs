//! `kvs-getall` and `kvs-putall`: a job's whole KVS read or written in one
//! exchange, for a client that carries pairs between PMI servers that
//! cannot reach each other (the `kvscopy` of `job-connect`) or a node
//! server feeding an outer one. docs/dynamic-jobs.md gives the messages.
//!
//! A putall is `kvs-putall;paircount=N;` followed by N `kvs-putall-pair`s
//! on the same connection; the server answers once, after the last pair.
//! The pairs are checked as they come and held (at most
//! [`PUTALL_PAIRS_MAX`] pairs and [`PUTALL_BYTES_MAX`] bytes), then put
//! together; one bad pair fails the putall and none is put. Any other
//! command before the last pair ends the putall with an error (its count
//! lied): nothing is put, the command is served, and pairs after it are
//! errors of their own.

use super::{reply, ConnId, Event, JobIdx, ReplyTo, Server};
use fastpmi_codec::{codes, Response};

/// Pairs one `kvs-putall` may announce.
pub const PUTALL_PAIRS_MAX: u64 = 1 << 20;
/// Bytes of keys and values one `kvs-putall` may hold until its last pair.
pub const PUTALL_BYTES_MAX: usize = 64 << 20;

/// A `kvs-putall` waiting for its pairs.
#[derive(Debug, Default)]
pub(crate) struct PutAll {
    remaining: u64,
    /// Pairs seen so far.
    seen: u64,
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
    bytes: usize,
    /// The first bad pair: the putall fails once all have come.
    error: Option<String>,
}

/// `kvs-getall`: the pair count, every pair, the end (an error instead,
/// alone, for a job that is not this one or connected to it).
pub(super) fn getall(
    s: &mut Server,
    job: JobIdx,
    to: &ReplyTo,
    jobid: Option<String>,
    out: &mut Vec<Event>,
) -> Response {
    let target = match super::connect::target(s, job, jobid.as_deref()) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let pairs = s.jobs[target].store.entries();
    if !s.speaks_continued(to.conn) {
        if let Some((k, v)) = pairs
            .iter()
            .find(|(_, v)| v.len() > fastpmi_codec::VALLEN_MAX)
        {
            return Response::error(format!(
                "the value of key {} is {} bytes, longer than this client reads ({})",
                fastpmi_codec::show(k),
                v.len(),
                fastpmi_codec::VALLEN_MAX
            ));
        }
    }
    s.stats.gets += pairs.len() as u64;
    reply(out, to, &Response::GetAllCount(pairs.len() as u64), None);
    for (key, value) in pairs {
        reply(out, to, &Response::GetAllPair { key, value }, None);
    }
    Response::GetAllDone
}

/// `kvs-putall;paircount=N;`: expect N pairs on `conn` (an empty putall is
/// done at once).
pub(super) fn putall(s: &mut Server, conn: ConnId, paircount: u64) -> Option<Response> {
    // A previous putall of this connection was ended by this request
    // (`interrupt_putall`).
    let c = s.conns.get_mut(&conn)?;
    if paircount > PUTALL_PAIRS_MAX {
        return Some(Response::error(format!(
            "kvs-putall of {paircount} pairs: at most {PUTALL_PAIRS_MAX}"
        )));
    }
    if paircount == 0 {
        return Some(Response::PutAllDone(Ok(())));
    }
    c.putall = Some(PutAll {
        remaining: paircount,
        ..PutAll::default()
    });
    None
}

/// `req` came on the connection of `to` while its putall waits for pairs:
/// the putall fails (its count lied), answered before `req` is.
pub(super) fn interrupt_putall(
    s: &mut Server,
    to: &ReplyTo,
    req: &fastpmi_codec::Request,
    out: &mut Vec<Event>,
) {
    let Some(p) = s.conns.get_mut(&to.conn).and_then(|c| c.putall.take()) else {
        return;
    };
    let msg = format!(
        "kvs-putall announced {} pairs, {} came before {}: nothing put",
        p.seen + p.remaining,
        p.seen,
        fastpmi_codec::command::request_name(req)
    );
    reply(
        out,
        to,
        &Response::PutAllDone(Err((codes::FAIL, msg))),
        None,
    );
}

/// One `kvs-putall-pair`: held until the last, then all are put as `rank`
/// of `job`.
pub(super) fn putall_pair(
    s: &mut Server,
    job: JobIdx,
    rank: u32,
    conn: ConnId,
    key: Vec<u8>,
    value: Vec<u8>,
) -> Option<Response> {
    let max_value = s.jobs[job].store.max_value();
    let Some(p) = s.conns.get_mut(&conn).and_then(|c| c.putall.as_mut()) else {
        return Some(Response::error(
            "kvs-putall-pair without a kvs-putall announcing it",
        ));
    };
    p.seen += 1;
    if p.error.is_none() {
        let size = key.len() + value.len();
        if value.len() > max_value {
            p.error = Some(format!(
                "pair {} ({}): value of {} bytes, at most {max_value}",
                p.seen,
                fastpmi_codec::show(&key),
                value.len()
            ));
        } else if p.bytes + size > PUTALL_BYTES_MAX {
            p.error = Some(format!(
                "pair {}: the putall holds more than {PUTALL_BYTES_MAX} bytes",
                p.seen
            ));
        } else {
            p.bytes += size;
            p.pairs.push((key, value));
        }
    }
    p.remaining -= 1;
    if p.remaining > 0 {
        return None;
    }
    let p = s.conns.get_mut(&conn)?.putall.take()?;
    if let Some(e) = p.error {
        return Some(Response::PutAllDone(Err((codes::FAIL, e))));
    }
    let store = &mut s.jobs[job].store;
    for (i, (k, v)) in p.pairs.iter().enumerate() {
        if let Err(e) = store.put(rank, k, v) {
            // The store refused (full, aborted): the pairs before stay.
            return Some(Response::PutAllDone(Err((
                codes::FAIL,
                format!("pair {} ({}): {e}", i + 1, fastpmi_codec::show(k)),
            ))));
        }
    }
    s.stats.puts += p.pairs.len() as u64;
    Some(Response::PutAllDone(Ok(())))
}
