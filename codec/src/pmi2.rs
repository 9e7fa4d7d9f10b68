//! PMI-2: a 6-byte decimal length, then `cmd=NAME;key=value;...;`.
//!
//! Decoding is byte-oriented and forgiving in the ways real clients need:
//! MPICH 3.3–4.0 declare 6 bytes too many and send stack garbage after the
//! final `;`; old clients write `;` inside a value as `;;`; `thrid` may
//! follow `cmd=` and is echoed back.

use super::frame::PMI2_HEADER;
use super::{Message, WireError};

/// Decode one body (the bytes after the length header).
pub fn decode(body: &[u8]) -> Result<Message, WireError> {
    let pairs = split_pairs(body);
    let mut iter = pairs.into_iter();
    let (k, v) = iter.next().ok_or(WireError::NoCommand)?;
    if k != b"cmd" {
        return Err(WireError::NoCommand);
    }
    // A `;` (written `;;`) cannot be in a command name: the reply names
    // the command, and it would end the reply's first pair early.
    let cmd = std::str::from_utf8(&v)
        .ok()
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic() && b != b';'))
        .ok_or(WireError::BadCommandName)?
        .to_string();
    let mut msg = Message::new(cmd);
    for (k, v) in iter {
        if k == b"thrid" && msg.thrid.is_none() && msg.pairs.is_empty() {
            msg.thrid = Some(v);
        } else {
            msg.pairs.push((k, v));
        }
    }
    Ok(msg)
}

/// Split a body into pairs. Pieces without `=`, with an empty key, or
/// starting with NUL are garbage and ignored. `;;` inside a value decodes to
/// `;`, except where the first `;` sits exactly 7 bytes before the end: that
/// is where the real body ends when an MPICH 3.3–4.0 client over-declares
/// its length by 6, and the garbage after it may well begin with `;`.
fn split_pairs(body: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let garbage_at = body.len().checked_sub(7);
    let mut out = Vec::new();
    let mut i = 0;
    while i < body.len() {
        // Key: up to '=' or ';'.
        let start = i;
        while i < body.len() && body[i] != b'=' && body[i] != b';' {
            i += 1;
        }
        if i >= body.len() || body[i] == b';' {
            // A piece with no '=' is garbage (or an empty piece from ";;").
            i += 1;
            continue;
        }
        let key = &body[start..i];
        i += 1; // '='
        let mut value = Vec::new();
        while i < body.len() {
            if body[i] == b';' {
                if i + 1 < body.len() && body[i + 1] == b';' && Some(i) != garbage_at {
                    value.push(b';');
                    i += 2;
                    continue;
                }
                i += 1;
                break;
            }
            value.push(body[i]);
            i += 1;
        }
        if key.is_empty() || key[0] == 0 {
            continue;
        }
        out.push((key.to_vec(), value));
    }
    out
}

/// Encode a message as a full PMI-2 frame: right-aligned 6-byte length,
/// `cmd=NAME;`, `thrid` if any, then every pair. A `;` in a value is written
/// `;;` so the frame stays parseable (fastpmi never produces one itself).
pub fn encode(msg: &Message) -> Vec<u8> {
    let body = encode_body(msg);
    let mut out = Vec::with_capacity(PMI2_HEADER + body.len());
    out.extend_from_slice(format!("{:>6}", body.len()).as_bytes());
    out.extend_from_slice(&body);
    out
}

/// The body [`encode`] frames: any length (one longer than
/// [`crate::PMI2_BODY_MAX`] travels as continued parts, [`crate::continued`]).
pub fn encode_body(msg: &Message) -> Vec<u8> {
    let mut body = Vec::with_capacity(64);
    body.extend_from_slice(b"cmd=");
    body.extend_from_slice(msg.cmd.as_bytes());
    body.push(b';');
    if let Some(t) = &msg.thrid {
        body.extend_from_slice(b"thrid=");
        push_escaped(&mut body, t);
        body.push(b';');
    }
    for (k, v) in &msg.pairs {
        body.extend_from_slice(k);
        body.push(b'=');
        push_escaped(&mut body, v);
        body.push(b';');
    }
    if ends_like_mpich_garbage(&body) {
        // An escaped `;;` exactly 7 bytes before the end reads as the end of
        // the message followed by MPICH 3.3-4.0's 6 garbage bytes (see
        // `split_pairs`): a trailing pair no reader asks for moves it away.
        body.extend_from_slice(PAD_PAIR);
    }
    body
}

/// Appended to a body that would otherwise be misread (see [`encode`]).
const PAD_PAIR: &[u8] = b"fastpmi-pad=1;";

/// Whether [`split_pairs`] would take the `;` 7 bytes before the end of
/// `body` for the end of an over-declared MPICH message.
fn ends_like_mpich_garbage(body: &[u8]) -> bool {
    body.len()
        .checked_sub(7)
        .is_some_and(|i| body[i] == b';' && body[i + 1] == b';')
}

fn push_escaped(out: &mut Vec<u8>, v: &[u8]) {
    for &b in v {
        out.push(b);
        if b == b';' {
            out.push(b';');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain() {
        let m = decode(b"cmd=kvs-get;jobid=kvs_1;srcid=-1;key=k-0;").unwrap();
        assert_eq!(m.cmd, "kvs-get");
        assert_eq!(m.get_str("jobid"), Some("kvs_1"));
        assert_eq!(m.get_int("srcid"), Some(-1));
        assert_eq!(m.get_str("key"), Some("k-0"));
    }

    #[test]
    fn mpich_trailing_garbage() {
        // Declared 6 bytes too many: garbage with ';', '=', NUL, bad UTF-8.
        for garbage in [
            &b";=\0\xff\xfe;"[..],
            b"\0\0\0\0\0\0",
            b";;;;;;",
            b"x=y;\x80\x81",
            b"cmd=zz",
        ] {
            let mut body = b"cmd=fullinit;pmirank=3;threaded=FALSE;".to_vec();
            body.extend_from_slice(garbage);
            let m = decode(&body).unwrap();
            assert_eq!(m.cmd, "fullinit", "{garbage:?}");
            assert_eq!(m.get_int("pmirank"), Some(3));
            assert_eq!(m.get_bool("threaded"), Some(false), "{garbage:?}");
        }
    }

    #[test]
    fn a_value_ending_in_semicolons_survives_the_garbage_rule() {
        // Found by the fuzzer: `;;` escapes ending 7 bytes before the end.
        for n in 0..30 {
            let value = format!("FLA{}", ";".repeat(n));
            let m = Message::new("fullinit")
                .with("threaded", "FALSE")
                .with("authtype", value.as_str());
            let wire = encode(&m);
            let back = decode(&wire[6..]).unwrap();
            assert_eq!(
                back.get_str("authtype"),
                Some(value.as_str()),
                "{n} semicolons"
            );
        }
    }

    #[test]
    fn escaped_semicolon() {
        let m = decode(b"cmd=kvs-put;key=k;value=a;;b;;cdefgh;").unwrap();
        assert_eq!(m.get("value"), Some(&b"a;b;cdefgh"[..]));
    }

    #[test]
    fn thrid_echo_roundtrip() {
        let m = decode(b"cmd=kvs-fence;thrid=0x7f00;").unwrap();
        assert_eq!(m.thrid.as_deref(), Some(&b"0x7f00"[..]));
        let mut r = Message::new("kvs-fence-response").with("rc", "0");
        r.thrid = m.thrid.clone();
        assert_eq!(
            encode(&r),
            b"    41cmd=kvs-fence-response;thrid=0x7f00;rc=0;"
        );
    }

    #[test]
    fn encode_escapes_and_decodes_back() {
        let m = Message::new("kvs-get-response")
            .with("rc", "0")
            .with("value", "x;y");
        let wire = encode(&m);
        assert_eq!(decode(&wire[6..]).unwrap(), m);
    }

    #[test]
    fn no_cmd() {
        assert_eq!(decode(b"key=x;cmd=foo;"), Err(WireError::NoCommand));
        assert_eq!(decode(b""), Err(WireError::NoCommand));
        assert_eq!(decode(b"cmd=;"), Err(WireError::BadCommandName));
        assert_eq!(
            decode(b"cmd=kvs;;put;key=k;"),
            Err(WireError::BadCommandName)
        );
    }
}
