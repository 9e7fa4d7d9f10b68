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
    /// A group request succeeded (PMI-2 only).
    Group(super::group::GroupReply),
    /// Any failure: `rc` non-zero and a one-line message.
    Error {
        rc: i32,
        msg: String,
    },
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
        },
        (Pmi2, "auth-response-complete") => Request::AuthComplete {
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
        (Pmi2, c) if c.starts_with("group-") => match super::group::decode_request(msg) {
            Some(r) => Request::Group(r?),
            None => return Err(WireError::UnknownCommand(c.to_string())),
        },
        (_, other) => return Err(WireError::UnknownCommand(other.to_string())),
    };
    Ok(r)
}

/// PMI-1 reply command name for a request command name.
pub fn pmi1_reply_name(cmd: &str) -> String {
    match cmd {
        "init" => "response_to_init".into(),
        "initack" => "initack".into(),
        "get_maxes" => "maxes".into(),
        "get_appnum" => "appnum".into(),
        "get_my_kvsname" => "my_kvsname".into(),
        "get_universe_size" => "universe_size".into(),
        "barrier_in" => "barrier_out".into(),
        "finalize" => "finalize_ack".into(),
        "put" | "get" | "publish_name" | "unpublish_name" | "lookup_name" | "spawn" => {
            let base = cmd.strip_suffix("_name").unwrap_or(cmd);
            format!("{base}_result")
        }
        // Only unknown commands get here: a long name would push the reply
        // past MPICH 4.0's 1024-byte line.
        other => {
            let cut = (0..=other.len().min(KEYLEN_MAX))
                .rev()
                .find(|&i| other.is_char_boundary(i))
                .unwrap_or(0);
            format!("{}_result", &other[..cut])
        }
    }
}

/// Encode a response to the request `cmd` (as sent) in protocol `proto`.
/// Returns the complete wire bytes (PMI-1 line(s) or PMI-2 frame).
pub fn encode_response(
    proto: Protocol,
    cmd: &str,
    thrid: Option<&[u8]>,
    resp: &Response,
) -> Vec<u8> {
    match proto {
        Protocol::Pmi1 => encode_pmi1(cmd, resp),
        Protocol::Pmi2 => {
            let mut m = pmi2_message(cmd, resp);
            m.thrid = thrid.map(<[u8]>::to_vec);
            pmi2::encode(&m)
        }
    }
}

fn bool_str(b: bool) -> &'static str {
    if b {
        "TRUE"
    } else {
        "FALSE"
    }
}

fn encode_pmi1(cmd: &str, resp: &Response) -> Vec<u8> {
    // `init` is answered in PMI-1 form by both protocols.
    let mut m = Message::new(pmi1_reply_name(cmd));
    match resp {
        Response::Init {
            version,
            subversion,
        } => {
            m.push("rc", "0");
            m.push("pmi_version", version.to_string());
            m.push("pmi_subversion", subversion.to_string());
        }
        Response::InitAck { size, rank } => {
            m.push("rc", "0");
            let mut out = pmi1::encode(&m);
            for (k, v) in [
                ("size", size.to_string()),
                ("rank", rank.to_string()),
                ("debug", "0".into()),
            ] {
                out.extend(pmi1::encode(&Message::new("set").with(k, v)));
            }
            return out;
        }
        Response::Maxes {
            kvsname_max,
            keylen_max,
            vallen_max,
        } => {
            m.push("rc", "0");
            m.push("kvsname_max", kvsname_max.to_string());
            m.push("keylen_max", keylen_max.to_string());
            m.push("vallen_max", vallen_max.to_string());
        }
        Response::Appnum(a) => {
            m.push("rc", "0");
            m.push("appnum", a.to_string());
        }
        Response::JobId(j) => {
            m.push("rc", "0");
            m.push("kvsname", j);
        }
        Response::UniverseSize(n) => {
            m.push("rc", "0");
            m.push("size", n.to_string());
        }
        Response::Ok
        | Response::Connected
        | Response::Group(_)
        | Response::FullInit { .. }
        | Response::AuthChallenge { .. } => {
            m.push("rc", "0");
            if cmd == "publish_name" || cmd == "unpublish_name" {
                m.push("info", "ok");
            }
        }
        Response::Value {
            key,
            value: Some(v),
        } => {
            // MPICH 4.0 reads 1024-byte lines: a longer reply would desync it.
            // An empty value (a legal `put ... value=`) is never sent.
            let len = "cmd=get_result rc=0 value=\n".len() + v.len();
            if v.is_empty() || !pmi1::value_is_safe(v) || len > super::PMI1_REPLY_MAX {
                m.push("rc", "1");
                m.push(
                    "msg",
                    pmi1::message_token(&format!(
                        "value of key {} cannot be sent over PMI-1 ({} bytes or contains blanks)",
                        super::show(key),
                        v.len()
                    )),
                );
            } else {
                m.push("rc", "0");
                m.push("value", v);
            }
        }
        Response::Value { key, value: None } => {
            m.push("rc", "1");
            m.push(
                "msg",
                pmi1::message_token(&format!("key_{}_not_found", super::show(key))),
            );
        }
        Response::Lookup(Some(port)) => {
            let len = "cmd=lookup_result rc=0 info=ok port=\n".len() + port.len();
            if port.is_empty()
                || !pmi1::value_is_safe(port.as_bytes())
                || len > super::PMI1_REPLY_MAX
            {
                m.push("rc", "1");
                m.push("info", "fail");
                m.push(
                    "msg",
                    pmi1::message_token(&format!(
                        "port of {} bytes cannot be sent over PMI-1 (empty, over a line, or with blanks)",
                        port.len()
                    )),
                );
            } else {
                m.push("rc", "0");
                m.push("info", "ok");
                m.push("port", port);
            }
        }
        Response::Lookup(None) => {
            m.push("rc", "1");
            m.push("info", "fail");
        }
        Response::Spawned { jobid, errcodes } => {
            m.push("rc", "0");
            m.push("jobid", jobid);
            if !errcodes.is_empty() {
                m.push(
                    "errcodes",
                    errcodes
                        .iter()
                        .map(i32::to_string)
                        .collect::<Vec<_>>()
                        .join(","),
                );
            }
        }
        Response::Error { rc, msg } => {
            m.push("rc", rc.to_string());
            if matches!(cmd, "publish_name" | "unpublish_name" | "lookup_name") {
                m.push("info", "fail");
            }
            let mut token = pmi1::message_token(msg);
            token.truncate(900);
            m.push("msg", token);
        }
    }
    pmi1::encode(&m)
}

fn pmi2_message(cmd: &str, resp: &Response) -> Message {
    let mut m = Message::new(format!("{cmd}-response"));
    match resp {
        Response::AuthChallenge { nonce } => {
            // Its own command, not `fullinit-response` (that follows it).
            m.cmd = "auth-response".into();
            m.push("rc", "0");
            m.push("authinfo", nonce);
        }
        Response::Init {
            version,
            subversion,
        } => {
            // Never reached: init is always answered in PMI-1 form.
            m.push("rc", "0");
            m.push("pmi-version", version.to_string());
            m.push("pmi-subversion", subversion.to_string());
        }
        Response::FullInit {
            rank,
            size,
            appnum,
            spawner_jobid,
            debugged,
            verbose,
            extra,
        } => {
            m.push("rc", "0");
            m.push("pmi-version", "2");
            m.push("pmi-subversion", "0");
            m.push("rank", rank.to_string());
            m.push("size", size.to_string());
            m.push("appnum", appnum.to_string());
            if let Some(p) = spawner_jobid {
                m.push("spawner-jobid", p);
            }
            m.push("debugged", bool_str(*debugged));
            m.push("pmiverbose", bool_str(*verbose));
            for (k, v) in extra {
                m.push(k, v);
            }
        }
        Response::JobId(j) => {
            m.push("rc", "0");
            m.push("jobid", j);
        }
        Response::Value { value: Some(v), .. } => {
            // The value is not last: see `pmi2_request`.
            m.push("rc", "0");
            m.push("value", v);
            m.push("found", "TRUE");
        }
        Response::Value { value: None, .. } => {
            m.push("rc", "0");
            m.push("found", "FALSE");
        }
        Response::Lookup(Some(port)) => {
            // MPICH reads `port`, Slurm's client reads `value`; not last.
            m.push("rc", "0");
            m.push("port", port);
            m.push("value", port);
            m.push("found", "TRUE");
        }
        Response::Lookup(None) => {
            // A miss is not an error (as for kvs-get): the client tells it
            // from a failure of the name service. MPICH and Slurm's clients
            // turn found=FALSE into their "name not found" error.
            m.push("rc", "0");
            m.push("found", "FALSE");
        }
        Response::Spawned { jobid, errcodes } => {
            m.push("rc", "0");
            m.push("jobid", jobid);
            if !errcodes.is_empty() {
                m.push(
                    "errcodes",
                    errcodes
                        .iter()
                        .map(i32::to_string)
                        .collect::<Vec<_>>()
                        .join(","),
                );
            }
        }
        Response::Connected => {
            m.push("rc", "0");
            m.push("kvscopy", "FALSE");
        }
        Response::Group(g) => {
            m.push("rc", "0");
            super::group::encode_reply(&mut m, g);
        }
        Response::Error { rc, msg } => {
            m.push("rc", rc.to_string());
            // Never produce a ';' in a value. Messages quote client bytes
            // (escaped, up to 4x longer): keep them under PMI2_MAX_VALLEN.
            let mut text = msg.replace(';', ",");
            if text.len() > 900 {
                let cut = (0..=900).rev().find(|&i| text.is_char_boundary(i));
                text.truncate(cut.unwrap_or(0));
            }
            m.push("errmsg", text);
        }
        Response::InitAck { .. }
        | Response::Maxes { .. }
        | Response::Appnum(_)
        | Response::UniverseSize(_)
        | Response::Ok => {
            m.push("rc", "0");
        }
    }
    m
}

/// Client side: a PMI-2 request carrying `thrid`, which the server echoes
/// so a client with several threads can match replies to requests.
pub fn encode_request_thrid(req: &Request, thrid: &[u8]) -> Vec<u8> {
    let mut m = pmi2_request(req);
    m.thrid = Some(thrid.to_vec());
    pmi2::encode(&m)
}

/// Client side: encode a request in `proto` (used by the Rust client).
pub fn encode_request(proto: Protocol, req: &Request) -> Vec<u8> {
    let m = match (proto, req) {
        (
            _,
            Request::Init {
                version,
                subversion,
            },
        ) => {
            return pmi1::encode(
                &Message::new("init")
                    .with("pmi_version", version.to_string())
                    .with("pmi_subversion", subversion.to_string()),
            )
        }
        (Protocol::Pmi1, r) => return pmi1::encode(&pmi1_request(r)),
        (Protocol::Pmi2, r) => pmi2_request(r),
    };
    pmi2::encode(&m)
}

fn pmi1_request(r: &Request) -> Message {
    match r {
        Request::InitAck { pmiid } => Message::new("initack").with("pmiid", pmiid.to_string()),
        Request::GetMaxes => Message::new("get_maxes"),
        Request::GetAppnum => Message::new("get_appnum"),
        Request::GetJobId => Message::new("get_my_kvsname"),
        Request::GetUniverseSize => Message::new("get_universe_size"),
        Request::Put { key, value } => Message::new("put").with("key", key).with("value", value),
        Request::Get { jobid, key, .. } => {
            let mut m = Message::new("get");
            if let Some(j) = jobid {
                m.push("kvsname", j);
            }
            m.with("key", key)
        }
        Request::Barrier => Message::new("barrier_in"),
        Request::Finalize => Message::new("finalize"),
        Request::Abort {
            exitcode, message, ..
        } => Message::new("abort")
            .with("exitcode", exitcode.unwrap_or(1).to_string())
            .with("message", message),
        Request::Publish { service, port } => Message::new("publish_name")
            .with("service", service)
            .with("port", port),
        Request::Unpublish { service } => Message::new("unpublish_name").with("service", service),
        Request::Lookup { service } => Message::new("lookup_name").with("service", service),
        other => Message::new(format!("unsupported-{}", request_name(other))),
    }
}

fn pmi2_request(r: &Request) -> Message {
    match r {
        Request::FullInit {
            rank,
            jobid,
            threaded,
            auth,
        } => {
            let mut m = Message::new("fullinit");
            if let Some(j) = jobid {
                m.push("pmijobid", j);
            }
            if let Some(r) = rank {
                m.push("pmirank", r.to_string());
            }
            m.push("threaded", bool_str(*threaded));
            if let Some(a) = auth {
                m.push("authtype", a);
            }
            m
        }
        Request::AuthComplete { authinfo } => {
            Message::new("auth-response-complete").with("authinfo", authinfo)
        }
        Request::GetJobId => Message::new("job-getid"),
        // A client value goes before the key: a `;` in a value is written
        // `;;`, and one that ends up 7 bytes before the end of the body is
        // where MPICH 3.3-4.0's 6 bytes of garbage start, so a decoder must
        // take it as the end of the message ("x;abcd" would arrive as "x").
        // A last pair of 6 or more bytes without `;` (the key) rules it out.
        Request::Put { key, value } => Message::new("kvs-put")
            .with("value", value)
            .with("key", key),
        Request::Get { jobid, src, key } => Message::new("kvs-get")
            .with("jobid", jobid.as_deref().unwrap_or(""))
            .with("srcid", src.unwrap_or(-1).to_string())
            .with("key", key),
        Request::Barrier => Message::new("kvs-fence"),
        Request::PutNodeAttr { key, value } => Message::new("info-putnodeattr")
            .with("value", value)
            .with("key", key),
        Request::GetNodeAttr { key, wait } => Message::new("info-getnodeattr")
            .with("key", key)
            .with("wait", bool_str(*wait)),
        Request::GetJobAttr { key } => Message::new("info-getjobattr").with("key", key),
        Request::Finalize => Message::new("finalize"),
        Request::Abort {
            exitcode,
            message,
            isworld,
        } => {
            let mut m = Message::new("abort").with("isworld", bool_str(*isworld));
            if let Some(c) = exitcode {
                m.push("exitcode", c.to_string());
            }
            m.with("message", message.replace(';', ","))
        }
        Request::Publish { service, port } => Message::new("name-publish")
            .with("name", service)
            .with("port", port)
            .with("infokeycount", "0"),
        Request::Unpublish { service } => Message::new("name-unpublish").with("name", service),
        Request::Lookup { service } => Message::new("name-lookup").with("name", service),
        Request::JobConnect { jobid } => Message::new("job-connect").with("jobid", jobid),
        Request::JobDisconnect { jobid } => Message::new("job-disconnect").with("jobid", jobid),
        Request::Group(g) => super::group::encode_request(g),
        Request::Spawn(s) => {
            let mut m = Message::new("spawn")
                .with("ncmds", s.cmds.len().to_string())
                .with("preputcount", s.preput.len().to_string());
            for (i, (k, v)) in s.preput.iter().enumerate() {
                m.push(&format!("ppkey{i}"), k);
                m.push(&format!("ppval{i}"), v);
            }
            for c in &s.cmds {
                m.push("subcmd", &c.exe);
                m.push("maxprocs", c.maxprocs.to_string());
                m.push("argc", c.args.len().to_string());
                for (i, a) in c.args.iter().enumerate() {
                    m.push(&format!("argv{i}"), a);
                }
                m.push("infokeycount", c.info.len().to_string());
                for (i, (k, v)) in c.info.iter().enumerate() {
                    m.push(&format!("infokey{i}"), k);
                    m.push(&format!("infoval{i}"), v);
                }
            }
            m
        }
        other => Message::new(format!("unsupported-{}", request_name(other))),
    }
}

/// Short name of a request for logs and errors.
pub fn request_name(r: &Request) -> &'static str {
    match r {
        Request::Init { .. } => "init",
        Request::InitAck { .. } => "initack",
        Request::FullInit { .. } => "fullinit",
        Request::GetMaxes => "get_maxes",
        Request::GetAppnum => "get_appnum",
        Request::GetJobId => "get-jobid",
        Request::GetUniverseSize => "get_universe_size",
        Request::Put { .. } => "put",
        Request::Get { .. } => "get",
        Request::Barrier => "fence",
        Request::PutNodeAttr { .. } => "putnodeattr",
        Request::GetNodeAttr { .. } => "getnodeattr",
        Request::GetJobAttr { .. } => "getjobattr",
        Request::Finalize => "finalize",
        Request::Abort { .. } => "abort",
        Request::Publish { .. } => "publish",
        Request::Unpublish { .. } => "unpublish",
        Request::Lookup { .. } => "lookup",
        Request::Spawn(_) => "spawn",
        Request::JobConnect { .. } => "job-connect",
        Request::JobDisconnect { .. } => "job-disconnect",
        Request::AuthComplete { .. } => "auth-response-complete",
        Request::Group(g) => g.name(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec1(line: &str) -> Request {
        request_from(Protocol::Pmi1, &pmi1::decode(line.as_bytes()).unwrap()).unwrap()
    }
    fn dec2(body: &str) -> Request {
        request_from(Protocol::Pmi2, &pmi2::decode(body.as_bytes()).unwrap()).unwrap()
    }

    #[test]
    fn fullinit_rank_forms() {
        assert_eq!(
            dec2("cmd=fullinit;pmirank=3;threaded=FALSE;"),
            Request::FullInit {
                rank: Some(3),
                jobid: None,
                threaded: false,
                auth: None,
            }
        );
        assert_eq!(
            dec2("cmd=fullinit;srcid=5;threaded=true;"),
            Request::FullInit {
                rank: Some(5),
                jobid: None,
                threaded: true,
                auth: None,
            }
        );
        assert_eq!(
            dec2("cmd=fullinit;pmijobid=46.0;pmirank=0;threaded=FALSE;authtype=challenge-sha256;"),
            Request::FullInit {
                rank: Some(0),
                jobid: Some("46.0".into()),
                threaded: false,
                auth: Some("challenge-sha256".into()),
            }
        );
        assert_eq!(
            dec2("cmd=auth-response-complete;authinfo=ab12;"),
            Request::AuthComplete {
                authinfo: b"ab12".to_vec()
            }
        );
    }

    #[test]
    fn gets() {
        assert_eq!(
            dec2("cmd=kvs-get;jobid=;srcid=-1;key=k;"),
            Request::Get {
                jobid: None,
                src: Some(-1),
                key: b"k".to_vec()
            }
        );
        assert_eq!(
            dec2("cmd=kvs-get;key=k;"),
            Request::Get {
                jobid: None,
                src: None,
                key: b"k".to_vec()
            }
        );
        assert_eq!(
            dec1("cmd=get kvsname=x key=PMI_process_mapping"),
            Request::Get {
                jobid: Some("x".into()),
                src: None,
                key: b"PMI_process_mapping".to_vec()
            }
        );
    }

    #[test]
    fn key_limits() {
        let long = "k".repeat(65);
        let m = pmi1::decode(format!("cmd=put kvsname=a key={long} value=v").as_bytes()).unwrap();
        assert_eq!(
            request_from(Protocol::Pmi1, &m),
            Err(WireError::KeyTooLong { len: 65, max: 64 })
        );
        let m = pmi2::decode(b"cmd=kvs-put;key=;value=v;").unwrap();
        assert_eq!(request_from(Protocol::Pmi2, &m), Err(WireError::EmptyKey));
    }

    #[test]
    fn abort_forms() {
        assert_eq!(
            dec2("cmd=abort;isworld=TRUE;msg=boom;"),
            Request::Abort {
                exitcode: None,
                message: "boom".into(),
                isworld: true
            }
        );
        assert_eq!(
            dec2("cmd=abort;exitcode=-1;message=m;"),
            Request::Abort {
                exitcode: Some(-1),
                message: "m".into(),
                isworld: true
            }
        );
        assert_eq!(
            dec1("cmd=abort exitcode=7 message=a b"),
            Request::Abort {
                exitcode: Some(7),
                message: "a b".into(),
                isworld: true
            }
        );
    }

    #[test]
    fn unknown_is_error() {
        let m = pmi2::decode(b"cmd=frobnicate;").unwrap();
        assert_eq!(
            request_from(Protocol::Pmi2, &m),
            Err(WireError::UnknownCommand("frobnicate".into()))
        );
    }

    #[test]
    fn pmi2_spawn_roundtrip() {
        let req = SpawnRequest {
            cmds: vec![
                SpawnCmd {
                    exe: "./a".into(),
                    maxprocs: 2,
                    args: vec!["x".into(), "y".into()],
                    info: vec![("wdir".into(), "/tmp".into())],
                },
                SpawnCmd {
                    exe: "./b".into(),
                    maxprocs: 1,
                    args: vec![],
                    info: vec![],
                },
            ],
            preput: vec![("pk".into(), "pv".into())],
        };
        let wire = encode_request(Protocol::Pmi2, &Request::Spawn(req.clone()));
        assert_eq!(
            dec2(std::str::from_utf8(&wire[6..]).unwrap()),
            Request::Spawn(req)
        );
    }

    #[test]
    fn pmi1_spawn_block() {
        let block = b"mcmd=spawn\nnprocs=2\nexecname=./a\ntotspawns=1\nspawnssofar=1\nargcnt=2\narg1=x\narg2=y\npreput_num=1\npreput_key_0=k\npreput_val_0=v\ninfo_num=1\ninfo_key_0=wdir\ninfo_val_0=/tmp\nendcmd\n";
        let d = decode_frame(&Frame::Pmi1Spawn(block.to_vec())).unwrap();
        let Ok(Request::Spawn(s)) = d.request else {
            panic!("{d:?}")
        };
        assert_eq!(s.cmds[0].args, vec!["x", "y"]);
        assert_eq!(s.cmds[0].maxprocs, 2);
        assert_eq!(s.preput, vec![("k".into(), "v".into())]);
        assert_eq!(s.cmds[0].info, vec![("wdir".into(), "/tmp".into())]);
    }

    #[test]
    fn replies_pmi1() {
        let r = encode_response(
            Protocol::Pmi1,
            "get",
            None,
            &Response::Value {
                key: b"k".to_vec(),
                value: None,
            },
        );
        assert_eq!(r, b"cmd=get_result rc=1 msg=key_k_not_found\n");
        let r = encode_response(
            Protocol::Pmi1,
            "init",
            None,
            &Response::Init {
                version: 1,
                subversion: 1,
            },
        );
        assert_eq!(
            r,
            b"cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n"
        );
        let r = encode_response(
            Protocol::Pmi1,
            "initack",
            None,
            &Response::InitAck { size: 4, rank: 2 },
        );
        assert_eq!(
            r,
            b"cmd=initack rc=0\ncmd=set size=4\ncmd=set rank=2\ncmd=set debug=0\n"
        );
        let big = vec![b'A'; 1000];
        let r = encode_response(
            Protocol::Pmi1,
            "get",
            None,
            &Response::Value {
                key: b"k".to_vec(),
                value: Some(big),
            },
        );
        assert!(
            r.len() < 1024 && r.starts_with(b"cmd=get_result rc=1 "),
            "{}",
            String::from_utf8_lossy(&r)
        );
    }

    #[test]
    fn replies_pmi2() {
        let r = encode_response(
            Protocol::Pmi2,
            "kvs-get",
            None,
            &Response::Value {
                key: b"k".to_vec(),
                value: None,
            },
        );
        assert_eq!(&r[6..], b"cmd=kvs-get-response;rc=0;found=FALSE;");
        let r = encode_response(
            Protocol::Pmi2,
            "kvs-put",
            None,
            &Response::Error {
                rc: 1,
                msg: "a;b".into(),
            },
        );
        assert_eq!(&r[6..], b"cmd=kvs-put-response;rc=1;errmsg=a,b;");
    }
}
