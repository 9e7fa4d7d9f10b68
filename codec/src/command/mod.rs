//! Typed PMI requests and responses, and their mapping to wire messages.
//!
//! Both protocols share one [`Request`] enum where they mean the same thing
//! (PMI-1 `put` and PMI-2 `kvs-put` are both [`Request::Put`]); the reply is
//! encoded back in the protocol and with the command name the client expects.
//! Every command is one row of the table in `table.rs`, which makes the
//! [`Request`] enum, its decoder and encoder and every command's and
//! reply's name; each [`Response`] is described once for both protocols
//! (`reply.rs`).

use super::spawn::pmi1_spawn;
pub use super::spawn::{SpawnCmd, SpawnRequest};
use super::{pmi1, pmi2, Frame, Message, Protocol, WireError};

/// What the server answers; encoded per protocol by [`encode_response`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    Init {
        version: u32,
        subversion: u32,
    },
    /// PMI-1 port-mode handshake: `initack` then `set size/rank/debug`.
    InitAck {
        size: u32,
        rank: u32,
    },
    FullInit {
        rank: u32,
        size: u32,
        appnum: i32,
        spawner_jobid: Option<String>,
        debugged: bool,
        verbose: bool,
        /// Keys for fastpmi's own clients (job id, segment description),
        /// so that they need no further round trip; other clients look up
        /// the keys they know and ignore these.
        extra: Vec<(String, String)>,
    },
    /// Port mode: the challenge (`auth-response;authinfo=N;`).
    AuthChallenge {
        nonce: String,
    },
    Maxes {
        kvsname_max: usize,
        keylen_max: usize,
        vallen_max: usize,
    },
    Appnum(i32),
    JobId(String),
    UniverseSize(u32),
    /// Success with nothing to say (put, node-attr put, fence, finalize, ...).
    Ok,
    /// A lookup result: found value or a miss (PMI-1 miss is `rc=1`).
    Value {
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    },
    Lookup(Option<String>),
    Spawned {
        jobid: String,
        errcodes: Vec<i32>,
    },
    Connected,
    /// `kvs-getall`: how many pairs follow (`kvs-getall-paircount-response`).
    GetAllCount(u64),
    /// `kvs-getall`: one pair (`kvs-getall-pair-response`).
    GetAllPair {
        key: Vec<u8>,
        value: Vec<u8>,
    },
    /// `kvs-getall`: the end (`kvs-getall-response`); a failed getall sends
    /// only this, with the error ([`Response::Error`] to `kvs-getall`).
    GetAllDone,
    /// `kvs-putall`: the end (`kvs-putall-response`), success or failure.
    PutAllDone(Result<(), (i32, String)>),
    /// A group request succeeded (PMI-2 only).
    Group(super::group::GroupReply),
    /// Any failure: `rc` non-zero and a one-line message.
    Error {
        rc: i32,
        msg: String,
    },
}

impl Response {
    /// A failure reply: `rc` = [`codes::FAIL`](crate::codes::FAIL) and a
    /// one-line message.
    pub fn error(msg: impl Into<String>) -> Response {
        Response::error_rc(crate::codes::FAIL, msg)
    }

    /// A failure reply with another `rc` than [`Response::error`]'s.
    pub fn error_rc(rc: i32, msg: impl Into<String>) -> Response {
        Response::Error {
            rc,
            msg: msg.into(),
        }
    }
}

/// The request as decoded plus what is needed to address the reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub proto: Protocol,
    /// Command name as sent, for logs and the reply name.
    pub cmd: String,
    pub thrid: Option<Vec<u8>>,
    pub request: Result<Request, WireError>,
}

/// Decode a frame into a request. Malformed or unknown commands are kept as
/// `Err` with the command name so the server can still address a reply.
pub fn decode_frame(frame: &Frame) -> Result<Decoded, WireError> {
    match frame {
        Frame::Pmi1(line) => {
            let msg = pmi1::decode(line)?;
            let request = request_from(Protocol::Pmi1, &msg);
            Ok(Decoded {
                proto: Protocol::Pmi1,
                cmd: msg.cmd,
                thrid: None,
                request,
            })
        }
        Frame::Pmi1Spawn(block) => Ok(Decoded {
            proto: Protocol::Pmi1,
            cmd: PMI1_SPAWN.into(),
            thrid: None,
            request: pmi1_spawn(block).map(Request::Spawn),
        }),
        Frame::Pmi2(body) => {
            let msg = pmi2::decode(body)?;
            let request = request_from(Protocol::Pmi2, &msg);
            Ok(Decoded {
                proto: Protocol::Pmi2,
                cmd: msg.cmd,
                thrid: msg.thrid,
                request,
            })
        }
    }
}

/// `init`, which opens both protocols as a PMI-1 line.
const INIT: &str = Command::Init.forms(Protocol::Pmi1)[0].name;
/// PMI-1's spawn, an `mcmd=spawn` block rather than a line.
const PMI1_SPAWN: &str = Command::Spawn.forms(Protocol::Pmi1)[0].name;

/// Map a decoded message to a typed request (protocol-specific names).
pub fn request_from(proto: Protocol, msg: &Message) -> Result<Request, WireError> {
    // Both protocols open with `init` as a PMI-1 line (wire-protocol.md
    // section 1): one that comes in a PMI-2 frame is read as that line.
    let proto = if msg.cmd == INIT {
        Protocol::Pmi1
    } else {
        proto
    };
    table::decode(proto, msg)?.ok_or_else(|| WireError::UnknownCommand(msg.cmd.clone()))
}

#[macro_use]
mod reply;
mod request;
mod table;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_table;

pub use crate::form::{Form, Info, WireCodec, PMI2_REPLY_SUFFIX};
pub use reply::{encode_response, encode_response_body, pmi1_reply_name, pmi2_reply_name};
pub use request::{encode_request, encode_request_thrid, request_name};
pub use table::{form_named, replies, Command, Request};
