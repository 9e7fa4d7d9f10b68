//! Client side: a [`Request`] encoded in either protocol, and its name for
//! messages. The forms come from the table (`table.rs`).

use super::{table, Request};
use crate::{pmi1, pmi2, Message, Protocol};

/// Client side: a PMI-2 request carrying `thrid`, which the server echoes
/// so a client with several threads can match replies to requests.
///
/// A request longer than one frame comes back as its continued parts
/// (docs/continued.md), under continuation id `c<thrid>`.
pub fn encode_request_thrid(req: &Request, thrid: &[u8]) -> Vec<u8> {
    let mut m = message(Protocol::Pmi2, req);
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
    // Both protocols open with `init` as a PMI-1 line.
    let proto = match req {
        Request::Init { .. } => Protocol::Pmi1,
        _ => proto,
    };
    let m = message(proto, req);
    match proto {
        Protocol::Pmi1 => pmi1::encode(&m),
        Protocol::Pmi2 => pmi2::encode(&m),
    }
}

/// The request's message in `proto`; a command the protocol lacks goes out
/// under a name no server knows, which it refuses.
fn message(proto: Protocol, req: &Request) -> Message {
    table::encode(proto, req)
        .unwrap_or_else(|| Message::new(format!("unsupported-{}", req.label())))
}

/// Short name of a request for logs and errors.
pub fn request_name(r: &Request) -> &'static str {
    r.label()
}
