//! Client side: a [`Request`] encoded in either protocol, and its name for
//! messages.

use super::reply::bool_str;
use super::Request;
use crate::{pmi1, pmi2, Message, Protocol};

/// Client side: a PMI-2 request carrying `thrid`, which the server echoes
/// so a client with several threads can match replies to requests.
///
/// A request longer than one frame comes back as its continued parts
/// (docs/continued.md), under continuation id `c<thrid>`.
pub fn encode_request_thrid(req: &Request, thrid: &[u8]) -> Vec<u8> {
    let mut m = pmi2_request(req);
    m.thrid = Some(thrid.to_vec());
    let body = pmi2::encode_body(&m);
    if body.len() <= crate::PMI2_BODY_MAX {
        return crate::continued::frames(body, "", None)
            .pop()
            .unwrap_or_default();
    }
    let id = format!("c{}", String::from_utf8_lossy(thrid));
    crate::continued::frames(body, &id, Some(thrid)).concat()
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
        Request::InitOob {
            version,
            signal,
            pmiid,
            auth,
        } => {
            let mut m = Message::new(crate::oob::INIT_OOB)
                .with("pmi_version", version.to_string())
                .with("signal", signal.unwrap_or("NONE"));
            if let Some(r) = pmiid {
                m.push("pmiid", r.to_string());
            }
            if let Some(a) = auth {
                m.push("authtype", a);
            }
            m
        }
        Request::AuthComplete { authinfo } => {
            Message::new("auth-response-complete").with("authinfo", authinfo)
        }
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
            continued,
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
            if *continued {
                m.push(crate::continued::FULLINIT_KEY, "TRUE");
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
        Request::GetAll { jobid } => {
            let m = Message::new("kvs-getall");
            match jobid {
                Some(j) => m.with("jobid", j),
                None => m,
            }
        }
        Request::PutAll { paircount } => {
            Message::new("kvs-putall").with("paircount", paircount.to_string())
        }
        Request::PutAllPair { key, value } => Message::new("kvs-putall-pair")
            .with("key", key)
            .with("value", value),
        Request::Group(g) => crate::group::encode_request(g),
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
        Request::InitOob { .. } => "init_oob",
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
        Request::GetAll { .. } => "kvs-getall",
        Request::PutAll { .. } => "kvs-putall",
        Request::PutAllPair { .. } => "kvs-putall-pair",
        Request::AuthComplete { .. } => "auth-response-complete",
        Request::Group(g) => g.name(),
    }
}
