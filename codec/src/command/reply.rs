//! Server side: a [`Response`] encoded in the protocol and under the reply
//! name the client expects.
//!
//! Each response is described once, for both protocols ([`describe`]): a
//! pair both carry, one only PMI-1 (or PMI-2) carries, one each names its
//! own way. A [`Reply`] keeps what its protocol carries, so the PMI-1 and
//! the PMI-2 encoder are the same description written out twice.

use super::table::{form_named, replies};
use super::Response;
use crate::form::fields::bool_str;
use crate::form::{Info, PMI2_REPLY_SUFFIX};
use crate::{pmi1, pmi2, Message, Protocol, KEYLEN_MAX};

/// What follows `<name>` in a PMI-1 reply name MPICH does not rename.
const PMI1_REPLY_SUFFIX: &str = pmi1_reply!("");

/// PMI-1 reply command name for a request command name.
pub fn pmi1_reply_name(cmd: &str) -> String {
    form_named(Protocol::Pmi1, cmd).map_or_else(|| pmi1_rule(cmd), |f| f.reply.to_string())
}

/// PMI-2 reply command name for a request command name.
pub fn pmi2_reply_name(cmd: &str) -> String {
    form_named(Protocol::Pmi2, cmd).map_or_else(|| pmi2_rule(cmd), |f| f.reply.to_string())
}

/// The reply to a command the table does not have. Only unknown commands
/// get here: a long name would push the reply past MPICH 4.0's 1024-byte
/// line.
fn pmi1_rule(cmd: &str) -> String {
    let cut = (0..=cmd.len().min(KEYLEN_MAX))
        .rev()
        .find(|&i| cmd.is_char_boundary(i))
        .unwrap_or(0);
    format!("{}{PMI1_REPLY_SUFFIX}", &cmd[..cut])
}

/// The reply to a command the table does not have.
fn pmi2_rule(cmd: &str) -> String {
    format!("{cmd}{PMI2_REPLY_SUFFIX}")
}

/// Encode a response to the request `cmd` (as sent) in protocol `proto`.
/// Returns the complete wire bytes (PMI-1 line(s) or PMI-2 frame).
pub fn encode_response(
    proto: Protocol,
    cmd: &str,
    thrid: Option<&[u8]>,
    resp: &Response,
) -> Vec<u8> {
    let mut r = Reply::new(proto, cmd);
    describe(&mut r, resp);
    match proto {
        Protocol::Pmi1 => {
            let mut out = pmi1::encode(&r.m);
            for line in &r.then {
                out.extend(pmi1::encode(line));
            }
            out
        }
        Protocol::Pmi2 => {
            r.m.thrid = thrid.map(<[u8]>::to_vec);
            pmi2::encode(&r.m)
        }
    }
}

/// The PMI-2 body of a response (any length: one longer than a frame goes
/// out as continued parts, [`crate::continued::frames`]).
pub fn encode_response_body(cmd: &str, thrid: Option<&[u8]>, resp: &Response) -> Vec<u8> {
    let mut r = Reply::new(Protocol::Pmi2, cmd);
    describe(&mut r, resp);
    r.m.thrid = thrid.map(<[u8]>::to_vec);
    pmi2::encode_body(&r.m)
}

/// An error message as a PMI-2 value: never a ';' (messages quote client
/// bytes, escaped, up to 4x longer: kept under PMI2_MAX_VALLEN).
fn errmsg(msg: &str) -> String {
    let mut text = msg.replace(';', ",");
    if text.len() > 900 {
        let cut = (0..=900).rev().find(|&i| text.is_char_boundary(i));
        text.truncate(cut.unwrap_or(0));
    }
    text
}

fn list(errcodes: &[i32]) -> String {
    errcodes
        .iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// A reply being written in one protocol: what [`describe`] says for both,
/// kept where it concerns this one.
struct Reply {
    proto: Protocol,
    /// PMI-1's name service: what the request's replies add to `rc=`.
    info: Info,
    m: Message,
    /// PMI-1 lines that follow the reply (port mode's `set`s).
    then: Vec<Message>,
    /// A reply the protocol does not have: refused, the rest ignored.
    foreign: bool,
}

impl Reply {
    fn new(proto: Protocol, cmd: &str) -> Reply {
        let (name, info) = match (proto, form_named(proto, cmd)) {
            (_, Some(f)) => (f.reply.to_string(), f.info),
            (Protocol::Pmi1, None) => (pmi1_rule(cmd), Info::None),
            (Protocol::Pmi2, None) => (pmi2_rule(cmd), Info::None),
        };
        Reply {
            proto,
            info,
            m: Message::new(name),
            then: Vec::new(),
            foreign: false,
        }
    }

    fn is(&self, proto: Protocol) -> bool {
        self.proto == proto && !self.foreign
    }

    /// `key=value` in both protocols.
    fn both(&mut self, key: &str, value: impl AsRef<[u8]>) -> &mut Self {
        if !self.foreign {
            self.m.push(key, value);
        }
        self
    }

    /// `key=value` in PMI-1 only.
    fn pmi1(&mut self, key: &str, value: impl AsRef<[u8]>) -> &mut Self {
        if self.is(Protocol::Pmi1) {
            self.m.push(key, value);
        }
        self
    }

    /// `key=value` in PMI-2 only.
    fn pmi2(&mut self, key: &str, value: impl AsRef<[u8]>) -> &mut Self {
        if self.is(Protocol::Pmi2) {
            self.m.push(key, value);
        }
        self
    }

    /// One value under each protocol's key (PMI-1's, PMI-2's).
    fn each(&mut self, (pmi1, pmi2): (&str, &str), value: impl AsRef<[u8]>) -> &mut Self {
        let key = match self.proto {
            Protocol::Pmi1 => pmi1,
            Protocol::Pmi2 => pmi2,
        };
        self.both(key, value)
    }

    fn rc(&mut self, rc: i32) -> &mut Self {
        self.both("rc", rc.to_string())
    }

    fn ok(&mut self) -> &mut Self {
        self.rc(0)
    }

    /// A reply of its own, not its request's, in both protocols.
    fn named(&mut self, name: &str) -> &mut Self {
        self.m.cmd = name.to_string();
        self
    }

    /// A reply of its own that only PMI-2 has: never the answer to a PMI-1
    /// request, which gets a refusal instead.
    fn pmi2_only(&mut self, name: &str) -> &mut Self {
        match self.proto {
            Protocol::Pmi2 => self.m.cmd = name.to_string(),
            Protocol::Pmi1 => {
                self.m.push("rc", "-1");
                self.m.push("msg", "not_a_PMI-1_reply");
                self.foreign = true;
            }
        }
        self
    }

    /// Nothing found: an error in PMI-1 (`rc=1`), not in PMI-2
    /// (`rc=0;found=FALSE;`, what PMI-2 clients expect of a miss).
    fn miss(&mut self) -> &mut Self {
        match self.proto {
            Protocol::Pmi1 => self.rc(1),
            Protocol::Pmi2 => self.rc(0).pmi2("found", "FALSE"),
        }
    }

    /// Whether PMI-1 cannot carry `value` in a line of `line` bytes
    /// without it: MPICH 4.0 reads 1024-byte lines (a longer reply would
    /// desync it), a value ends at a blank, and an empty one is never sent.
    fn pmi1_refuses(&self, value: &[u8], line: usize) -> bool {
        self.is(Protocol::Pmi1)
            && (value.is_empty()
                || !pmi1::value_is_safe(value)
                || line + value.len() > crate::PMI1_REPLY_MAX)
    }

    /// A success of PMI-1's publish or unpublish: `info=ok`.
    fn info_ok(&mut self) -> &mut Self {
        if self.info == Info::OkAndFail {
            self.pmi1("info", "ok");
        }
        self
    }

    /// A failure of PMI-1's name service: `info=fail`.
    fn info_fail(&mut self) -> &mut Self {
        if self.info != Info::None {
            self.pmi1("info", "fail");
        }
        self
    }

    /// Why it failed: PMI-1's `msg` (one token), PMI-2's `errmsg`.
    fn error_text(&mut self, msg: &str) -> &mut Self {
        let mut token = pmi1::message_token(msg);
        token.truncate(900);
        self.pmi1("msg", token).pmi2("errmsg", errmsg(msg))
    }

    /// A PMI-1 `cmd=set key=value` line after the reply.
    fn pmi1_set(&mut self, key: &str, value: impl AsRef<[u8]>) -> &mut Self {
        if self.is(Protocol::Pmi1) {
            self.then.push(Message::new("set").with(key, value));
        }
        self
    }

    /// PMI-2 pairs an extension writes itself.
    fn pmi2_with(&mut self, write: impl FnOnce(&mut Message)) -> &mut Self {
        if self.is(Protocol::Pmi2) {
            write(&mut self.m);
        }
        self
    }
}

/// What each response carries, in both protocols.
fn describe(r: &mut Reply, resp: &Response) {
    match resp {
        Response::Init {
            version,
            subversion,
        } => {
            // PMI-2 only for an `init` in a PMI-2 frame; clients send a line.
            r.ok()
                .each(("pmi_version", "pmi-version"), version.to_string())
                .each(("pmi_subversion", "pmi-subversion"), subversion.to_string());
        }
        Response::InitAck { size, rank } => {
            r.ok()
                .pmi1_set("size", size.to_string())
                .pmi1_set("rank", rank.to_string())
                .pmi1_set("debug", "0");
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
            r.ok()
                .info_ok()
                .pmi2("pmi-version", "2")
                .pmi2("pmi-subversion", "0")
                .pmi2("rank", rank.to_string())
                .pmi2("size", size.to_string())
                .pmi2("appnum", appnum.to_string());
            if let Some(p) = spawner_jobid {
                r.pmi2("spawner-jobid", p);
            }
            r.pmi2("debugged", bool_str(*debugged))
                .pmi2("pmiverbose", bool_str(*verbose));
            for (k, v) in extra {
                r.pmi2(k, v);
            }
        }
        // Its own command (as the out-of-band channel's in PMI-1); the
        // answer to the request follows it.
        Response::AuthChallenge { nonce } => {
            r.named(replies::AUTH_CHALLENGE)
                .ok()
                .both("authinfo", nonce);
        }
        Response::Maxes {
            kvsname_max,
            keylen_max,
            vallen_max,
        } => {
            r.ok()
                .pmi1("kvsname_max", kvsname_max.to_string())
                .pmi1("keylen_max", keylen_max.to_string())
                .pmi1("vallen_max", vallen_max.to_string());
        }
        Response::Appnum(a) => {
            r.ok().pmi1("appnum", a.to_string());
        }
        Response::JobId(j) => {
            r.ok().each(("kvsname", "jobid"), j);
        }
        Response::UniverseSize(n) => {
            r.ok().pmi1("size", n.to_string());
        }
        Response::Ok => {
            r.ok().info_ok();
        }
        Response::Connected => {
            // Jobs of one launcher read each other's KVS through it.
            r.ok().info_ok().pmi2("kvscopy", "FALSE");
        }
        Response::Group(g) => {
            r.ok()
                .info_ok()
                .pmi2_with(|m| crate::group::encode_reply(m, g));
        }
        Response::Value {
            key,
            value: Some(v),
        } => {
            if r.pmi1_refuses(v, "cmd=get_result rc=0 value=\n".len()) {
                let why = format!(
                    "value of key {} cannot be sent over PMI-1 ({} bytes or contains blanks)",
                    crate::show(key),
                    v.len()
                );
                r.rc(1).pmi1("msg", pmi1::message_token(&why));
            } else {
                // The value is not last in PMI-2: see the table's `kvs-put`.
                r.ok().both("value", v).pmi2("found", "TRUE");
            }
        }
        Response::Value { key, value: None } => {
            let why = format!("key_{}_not_found", crate::show(key));
            r.miss().pmi1("msg", pmi1::message_token(&why));
        }
        Response::Lookup(Some(port)) => {
            let line = "cmd=lookup_result rc=0 info=ok port=\n".len();
            if r.pmi1_refuses(port.as_bytes(), line) {
                let why = format!(
                    "port of {} bytes cannot be sent over PMI-1 (empty, over a line, or with blanks)",
                    port.len()
                );
                r.rc(1)
                    .pmi1("info", "fail")
                    .pmi1("msg", pmi1::message_token(&why));
            } else {
                // MPICH reads `port`, Slurm's client reads `value`; not last.
                r.ok()
                    .pmi1("info", "ok")
                    .both("port", port)
                    .pmi2("value", port)
                    .pmi2("found", "TRUE");
            }
        }
        // A miss is not an error in PMI-2 (as for kvs-get): the client
        // tells it from a failure of the name service. MPICH and Slurm's
        // clients turn found=FALSE into their "name not found" error.
        Response::Lookup(None) => {
            r.miss().pmi1("info", "fail");
        }
        Response::Spawned { jobid, errcodes } => {
            r.ok().both("jobid", jobid);
            if !errcodes.is_empty() {
                r.both("errcodes", list(errcodes));
            }
        }
        Response::GetAllCount(n) => {
            r.pmi2_only(replies::GETALL_COUNT)
                .ok()
                .pmi2("paircount", n.to_string());
        }
        Response::GetAllPair { key, value } => {
            r.pmi2_only(replies::GETALL_PAIR)
                .ok()
                .pmi2("key", key)
                .pmi2("value", value);
        }
        Response::GetAllDone => {
            r.pmi2_only(replies::GETALL_END).ok();
        }
        Response::PutAllDone(done) => {
            r.pmi2_only(replies::PUTALL_END);
            match done {
                Ok(()) => r.ok(),
                Err((rc, msg)) => r.rc(*rc).error_text(msg),
            };
        }
        Response::Error { rc, msg } => {
            r.rc(*rc).info_fail().error_text(msg);
        }
    }
}
