//! Server side: a [`Response`] encoded in the protocol and under the reply
//! name the client expects.

use super::Response;
use crate::{pmi1, pmi2, Message, Protocol, KEYLEN_MAX};

/// PMI-1 reply command name for a request command name.
pub fn pmi1_reply_name(cmd: &str) -> String {
    match cmd {
        "init" => "response_to_init".into(),
        crate::oob::INIT_OOB => crate::oob::INIT_OOB_RESPONSE.into(),
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

/// The PMI-2 body of a response (any length: one longer than a frame goes
/// out as continued parts, [`crate::continued::frames`]).
pub fn encode_response_body(cmd: &str, thrid: Option<&[u8]>, resp: &Response) -> Vec<u8> {
    let mut m = pmi2_message(cmd, resp);
    m.thrid = thrid.map(<[u8]>::to_vec);
    pmi2::encode_body(&m)
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

pub(super) fn bool_str(b: bool) -> &'static str {
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
        Response::Ok | Response::Connected | Response::Group(_) | Response::FullInit { .. } => {
            m.push("rc", "0");
            if cmd == "publish_name" || cmd == "unpublish_name" {
                m.push("info", "ok");
            }
        }
        Response::AuthChallenge { nonce } => {
            // Its own command, as in PMI-2 (the out-of-band channel's
            // challenge); the answer to the request follows it.
            m.cmd = "auth-response".into();
            m.push("rc", "0");
            m.push("authinfo", nonce);
        }
        Response::Value {
            key,
            value: Some(v),
        } => {
            // MPICH 4.0 reads 1024-byte lines: a longer reply would desync it.
            // An empty value (a legal `put ... value=`) is never sent.
            let len = "cmd=get_result rc=0 value=\n".len() + v.len();
            if v.is_empty() || !pmi1::value_is_safe(v) || len > crate::PMI1_REPLY_MAX {
                m.push("rc", "1");
                m.push(
                    "msg",
                    pmi1::message_token(&format!(
                        "value of key {} cannot be sent over PMI-1 ({} bytes or contains blanks)",
                        crate::show(key),
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
                pmi1::message_token(&format!("key_{}_not_found", crate::show(key))),
            );
        }
        Response::Lookup(Some(port)) => {
            let len = "cmd=lookup_result rc=0 info=ok port=\n".len() + port.len();
            if port.is_empty()
                || !pmi1::value_is_safe(port.as_bytes())
                || len > crate::PMI1_REPLY_MAX
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
        // PMI-2 commands only: never the answer to a PMI-1 request.
        Response::GetAllCount(_)
        | Response::GetAllPair { .. }
        | Response::GetAllDone
        | Response::PutAllDone(_) => {
            m.push("rc", "-1");
            m.push("msg", "not_a_PMI-1_reply");
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
            // Jobs of one launcher read each other's KVS through it.
            m.push("kvscopy", "FALSE");
        }
        Response::GetAllCount(n) => {
            m.cmd = "kvs-getall-paircount-response".into();
            m.push("rc", "0");
            m.push("paircount", n.to_string());
        }
        Response::GetAllPair { key, value } => {
            m.cmd = "kvs-getall-pair-response".into();
            m.push("rc", "0");
            m.push("key", key);
            m.push("value", value);
        }
        Response::GetAllDone => {
            m.cmd = "kvs-getall-response".into();
            m.push("rc", "0");
        }
        Response::PutAllDone(r) => {
            m.cmd = "kvs-putall-response".into();
            match r {
                Ok(()) => m.push("rc", "0"),
                Err((rc, msg)) => {
                    m.push("rc", rc.to_string());
                    m.push("errmsg", errmsg(msg));
                }
            }
        }
        Response::Group(g) => {
            m.push("rc", "0");
            crate::group::encode_reply(&mut m, g);
        }
        Response::Error { rc, msg } => {
            m.push("rc", rc.to_string());
            m.push("errmsg", errmsg(msg));
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
