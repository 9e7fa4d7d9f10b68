//! Typed PMI requests and responses, and their mapping to wire messages.
//!
//! Both protocols share one [`Request`] enum where they mean the same thing
//! (PMI-1 `put` and PMI-2 `kvs-put` are both [`Request::Put`]); the reply is
//! encoded back in the protocol and with the command name the client expects.

use super::spawn::{pmi1_spawn, pmi2_spawn};
pub use super::spawn::{SpawnCmd, SpawnRequest};
use super::{pmi1, pmi2, Frame, Message, Protocol, WireError, KEYLEN_MAX};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `cmd=init pmi_version=V pmi_subversion=S` (both protocols start so).
    Init {
        version: u32,
        subversion: u32,
    },
    /// PMI-1 port mode: `cmd=initack pmiid=R` before `init`.
    InitAck {
        pmiid: i64,
    },
    /// PMI-2 `fullinit`: rank from `pmirank`, or `srcid` (Slurm with only `PMI_ID`).
    FullInit {
        rank: Option<i64>,
        jobid: Option<String>,
        threaded: bool,
        /// `authtype`: the client wants to authenticate (port mode).
        auth: Option<String>,
        /// `fastpmi-continued=TRUE`: fastpmi's client, which reads continued
        /// replies (docs/continued.md); sent to fastpmi's launcher only.
        continued: bool,
    },
    /// `cmd=init_oob pmi_version=V signal=S [pmiid=R] [authtype=T]`: opens
    /// a rank's out-of-band channel (always a PMI-1 line; docs/oob.md).
    InitOob {
        version: u32,
        /// The signal to follow each notice, or None (`signal=NONE`).
        signal: Option<&'static str>,
        /// Port mode: the rank this connection claims.
        pmiid: Option<i64>,
        auth: Option<String>,
    },
    /// `auth-response-complete;authinfo=H;`: the answer to a challenge.
    AuthComplete {
        authinfo: Vec<u8>,
    },
    GetMaxes,
    GetAppnum,
    /// PMI-1 `get_my_kvsname` / PMI-2 `job-getid`.
    GetJobId,
    GetUniverseSize,
    Put {
        key: Vec<u8>,
        value: Vec<u8>,
    },
    /// `jobid` None or empty = own job; `src` is a hint only.
    Get {
        jobid: Option<String>,
        src: Option<i64>,
        key: Vec<u8>,
    },
    /// PMI-1 `barrier_in` / PMI-2 `kvs-fence`.
    Barrier,
    PutNodeAttr {
        key: Vec<u8>,
        value: Vec<u8>,
    },
    GetNodeAttr {
        key: Vec<u8>,
        wait: bool,
    },
    GetJobAttr {
        key: Vec<u8>,
    },
    Finalize,
    Abort {
        /// As sent (any integer); the server clamps it to an exit status.
        exitcode: Option<i64>,
        message: String,
        isworld: bool,
    },
    Publish {
        service: String,
        port: String,
    },
    Unpublish {
        service: String,
    },
    Lookup {
        service: String,
    },
    Spawn(SpawnRequest),
    JobConnect {
        jobid: String,
    },
    JobDisconnect {
        jobid: String,
    },
    /// `kvs-getall;[jobid=J;]`: every pair of the caller's job's KVS (or of
    /// connected job J), answered by a pair count, one message per pair and
    /// an end ([`Response::GetAllCount`], [`Response::GetAllPair`],
    /// [`Response::GetAllDone`]).
    GetAll {
        jobid: Option<String>,
    },
    /// `kvs-putall;paircount=N;`: the next N messages of the connection
    /// are `kvs-putall-pair`s, put as one ([`Response::PutAllDone`] after
    /// the last).
    PutAll {
        paircount: u64,
    },
    /// `kvs-putall-pair;key=K;value=V;`: one pair of a `kvs-putall`.
    PutAllPair {
        key: Vec<u8>,
        value: Vec<u8>,
    },
    /// The group extension (`group-*`, `docs/groups.md`).
    Group(super::group::GroupRequest),
}

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
            cmd: "spawn".into(),
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

fn need<'a>(msg: &'a Message, key: &'static str) -> Result<&'a [u8], WireError> {
    msg.get(key).ok_or_else(|| WireError::MissingKey {
        cmd: msg.cmd.clone(),
        key,
    })
}

fn need_str(msg: &Message, key: &'static str) -> Result<String, WireError> {
    let v = need(msg, key)?;
    std::str::from_utf8(v)
        .map(str::to_string)
        .map_err(|_| WireError::BadValue {
            cmd: msg.cmd.clone(),
            key,
            value: super::show(v),
        })
}

fn need_int(msg: &Message, key: &'static str) -> Result<i64, WireError> {
    let v = need_str(msg, key)?;
    v.trim().parse().map_err(|_| WireError::BadValue {
        cmd: msg.cmd.clone(),
        key,
        value: v,
    })
}

fn opt_int(msg: &Message, key: &'static str) -> Result<Option<i64>, WireError> {
    match msg.get(key) {
        None => Ok(None),
        Some([]) => Ok(None),
        Some(_) => need_int(msg, key).map(Some),
    }
}

fn key_of(msg: &Message, name: &'static str) -> Result<Vec<u8>, WireError> {
    let k = need(msg, name)?;
    if k.is_empty() {
        return Err(WireError::EmptyKey);
    }
    if k.len() > KEYLEN_MAX {
        return Err(WireError::KeyTooLong {
            len: k.len(),
            max: KEYLEN_MAX,
        });
    }
    Ok(k.to_vec())
}

/// Map a decoded message to a typed request (protocol-specific names).
pub fn request_from(proto: Protocol, msg: &Message) -> Result<Request, WireError> {
    use Protocol::*;
    let r = match (proto, msg.cmd.as_str()) {
        (_, "init") => Request::Init {
            version: need_int(msg, "pmi_version")?.clamp(0, u32::MAX as i64) as u32,
            subversion: opt_int(msg, "pmi_subversion")?
                .unwrap_or(0)
                .clamp(0, u32::MAX as i64) as u32,
        },
        (Pmi1, "init_oob") => Request::InitOob {
            version: need_int(msg, "pmi_version")?.clamp(0, u32::MAX as i64) as u32,
            signal: {
                let v = need_str(msg, "signal")?;
                super::oob::parse_signal(&v).map_err(|_| WireError::BadValue {
                    cmd: msg.cmd.clone(),
                    key: "signal",
                    value: v,
                })?
            },
            pmiid: opt_int(msg, "pmiid")?,
            auth: msg
                .get_str("authtype")
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        },
        (Pmi1, "initack") => Request::InitAck {
            pmiid: need_int(msg, "pmiid")?,
        },
        (Pmi1, "get_maxes") => Request::GetMaxes,
        (Pmi1, "get_appnum") => Request::GetAppnum,
        (Pmi1, "get_my_kvsname") | (Pmi2, "job-getid") => Request::GetJobId,
        (Pmi1, "get_universe_size") => Request::GetUniverseSize,
        (Pmi1, "put") | (Pmi2, "kvs-put") => Request::Put {
            key: key_of(msg, "key")?,
            value: need(msg, "value")?.to_vec(),
        },
        (Pmi1, "get") => Request::Get {
            jobid: msg.get_str("kvsname").map(str::to_string),
            src: None,
            key: key_of(msg, "key")?,
        },
        (Pmi2, "kvs-get") => Request::Get {
            jobid: msg
                .get_str("jobid")
                .filter(|s| !s.is_empty())
                .map(str::to_string),
            src: opt_int(msg, "srcid")?,
            key: key_of(msg, "key")?,
        },
        (Pmi1, "barrier_in") | (Pmi2, "kvs-fence") => Request::Barrier,
        (Pmi1, "finalize") | (Pmi2, "finalize") => Request::Finalize,
        (Pmi1, "abort") => Request::Abort {
            exitcode: opt_int(msg, "exitcode")?,
            message: msg
                .get("message")
                .map(|m| String::from_utf8_lossy(m).into_owned())
                .unwrap_or_default(),
            isworld: true,
        },
        (Pmi2, "abort") => Request::Abort {
            exitcode: opt_int(msg, "exitcode")?,
            message: msg
                .get("message")
                .or_else(|| msg.get("msg"))
                .map(|m| String::from_utf8_lossy(m).into_owned())
                .unwrap_or_default(),
            isworld: msg.get_bool("isworld").unwrap_or(true),
        },
        (Pmi2, "fullinit") => Request::FullInit {
            rank: match opt_int(msg, "pmirank")? {
                Some(r) => Some(r),
                None => opt_int(msg, "srcid")?,
            },
            jobid: msg
                .get_str("pmijobid")
                .filter(|s| !s.is_empty())
                .map(str::to_string),
            threaded: msg.get_bool("threaded").unwrap_or(false),
            auth: msg
                .get_str("authtype")
                .filter(|s| !s.is_empty())
                .map(str::to_string),
            continued: msg
                .get_bool(crate::continued::FULLINIT_KEY)
                .unwrap_or(false),
        },
        (_, "auth-response-complete") => Request::AuthComplete {
            authinfo: need(msg, "authinfo")?.to_vec(),
        },
        (Pmi2, "info-putnodeattr") => Request::PutNodeAttr {
            key: key_of(msg, "key")?,
            value: need(msg, "value")?.to_vec(),
        },
        (Pmi2, "info-getnodeattr") => Request::GetNodeAttr {
            key: key_of(msg, "key")?,
            wait: msg.get_bool("wait").unwrap_or(false),
        },
        (Pmi2, "info-getjobattr") => Request::GetJobAttr {
            key: key_of(msg, "key")?,
        },
        (Pmi1, "publish_name") => Request::Publish {
            service: need_str(msg, "service")?,
            port: need_str(msg, "port")?,
        },
        (Pmi2, "name-publish") => Request::Publish {
            service: need_str(msg, "name")?,
            port: need_str(msg, "port")?,
        },
        (Pmi1, "unpublish_name") => Request::Unpublish {
            service: need_str(msg, "service")?,
        },
        (Pmi2, "name-unpublish") => Request::Unpublish {
            service: need_str(msg, "name")?,
        },
        (Pmi1, "lookup_name") => Request::Lookup {
            service: need_str(msg, "service")?,
        },
        (Pmi2, "name-lookup") => Request::Lookup {
            service: need_str(msg, "name")?,
        },
        (Pmi2, "spawn") => Request::Spawn(pmi2_spawn(msg)?),
        (Pmi2, "job-connect") => Request::JobConnect {
            jobid: need_str(msg, "jobid")?,
        },
        (Pmi2, "job-disconnect") => Request::JobDisconnect {
            jobid: need_str(msg, "jobid")?,
        },
        (Pmi2, "kvs-getall") => Request::GetAll {
            jobid: msg
                .get_str("jobid")
                .filter(|j| !j.is_empty())
                .map(str::to_string),
        },
        (Pmi2, "kvs-putall") => Request::PutAll {
            paircount: match need_int(msg, "paircount")? {
                n if n >= 0 => n as u64,
                n => {
                    return Err(WireError::BadValue {
                        cmd: msg.cmd.clone(),
                        key: "paircount",
                        value: n.to_string(),
                    })
                }
            },
        },
        (Pmi2, "kvs-putall-pair") => Request::PutAllPair {
            key: key_of(msg, "key")?,
            value: need(msg, "value")?.to_vec(),
        },
        (Pmi2, c) if c.starts_with("group-") => match super::group::decode_request(msg) {
            Some(r) => Request::Group(r?),
            None => return Err(WireError::UnknownCommand(c.to_string())),
        },
        (_, other) => return Err(WireError::UnknownCommand(other.to_string())),
    };
    Ok(r)
}

mod reply;
mod request;
#[cfg(test)]
mod tests;

pub use reply::{encode_response, encode_response_body, pmi1_reply_name};
pub use request::{encode_request, encode_request_thrid, request_name};
