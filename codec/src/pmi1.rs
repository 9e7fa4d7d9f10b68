//! PMI-1: one command per `\n`-terminated line, `cmd=NAME key=value ...`.
//!
//! Values end at a space; there is no escaping. The one exception real
//! clients rely on: `cmd=abort ... message=text with spaces`, where the
//! message runs to the end of the line (so does the message of the
//! launcher's `cmd=died` notice on the out-of-band channel).
//!
//! Only a space separates pairs: a tab is an ordinary byte of a key or
//! value, as in every real peer (MPICH's `PMIU_parse_keyvals`, MPICH 4.1+'s
//! `parse_v1`, Hydra's `strtok(buf, " ")`), so a tab-only value travels
//! whole.

use super::{Message, WireError};

/// Decode one line (without its newline).
pub fn decode(line: &[u8]) -> Result<Message, WireError> {
    let mut rest = trim_blanks(line);
    let first_end = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
    let first = &rest[..first_end];
    let name = first.strip_prefix(b"cmd=").ok_or(WireError::NoCommand)?;
    let cmd = std::str::from_utf8(name)
        .ok()
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic()))
        .ok_or(WireError::BadCommandName)?
        .to_string();
    rest = &rest[first_end..];
    let mut msg = Message::new(cmd);
    loop {
        while let [b' ', tail @ ..] = rest {
            rest = tail;
        }
        if rest.is_empty() {
            break;
        }
        let end = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
        let token = &rest[..end];
        let eq = token
            .iter()
            .position(|&b| b == b'=')
            .filter(|&i| i > 0)
            .ok_or_else(|| WireError::BadToken(super::show(token)))?;
        let key = &token[..eq];
        if (msg.cmd == "abort" || msg.cmd == "died") && key == b"message" {
            // The abort message (a client's abort, or the launcher's notice
            // on the out-of-band channel) and the death notice's may
            // contain spaces: it is the rest of the line.
            msg.pairs
                .push((key.to_vec(), trim_blanks(&rest[eq + 1..]).to_vec()));
            break;
        }
        msg.pairs.push((key.to_vec(), token[eq + 1..].to_vec()));
        rest = &rest[end..];
    }
    Ok(msg)
}

/// Encode a message as one PMI-1 line with its newline. Values must not
/// contain spaces or newlines (the caller checks with [`value_is_safe`]).
pub fn encode(msg: &Message) -> Vec<u8> {
    let mut out = Vec::with_capacity(
        32 + msg
            .pairs
            .iter()
            .map(|(k, v)| k.len() + v.len() + 2)
            .sum::<usize>(),
    );
    out.extend_from_slice(b"cmd=");
    out.extend_from_slice(msg.cmd.as_bytes());
    for (k, v) in &msg.pairs {
        out.push(b' ');
        out.extend_from_slice(k);
        out.push(b'=');
        out.extend_from_slice(v);
    }
    out.push(b'\n');
    out
}

/// Can `value` travel in a PMI-1 line unchanged?
pub fn value_is_safe(value: &[u8]) -> bool {
    !value
        .iter()
        .any(|&b| b == b' ' || b == b'\n' || b == b'\r' || b == 0)
}

/// PMI-1 error messages are single tokens on the wire: spaces become `_`.
pub fn message_token(text: &str) -> Vec<u8> {
    let t: Vec<u8> = text
        .bytes()
        .map(|b| {
            if b.is_ascii_whitespace() || b == b'=' {
                b'_'
            } else {
                b
            }
        })
        .collect();
    if t.is_empty() {
        b"error".to_vec()
    } else {
        t
    }
}

/// Split an `mcmd=spawn` block into its segments, one list of pairs per
/// `endcmd`. Lines are `key=value`; the value runs to the end of the line.
/// The pairs of one spawn segment, in order.
pub type Segment = Vec<(Vec<u8>, Vec<u8>)>;

pub fn decode_spawn_block(block: &[u8]) -> Result<Vec<Segment>, WireError> {
    let mut segments = Vec::new();
    let mut cur = Vec::new();
    for raw in block.split(|&b| b == b'\n') {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.is_empty() {
            continue;
        }
        if line == b"endcmd" {
            segments.push(std::mem::take(&mut cur));
            continue;
        }
        let eq = line
            .iter()
            .position(|&b| b == b'=')
            .filter(|&i| i > 0)
            .ok_or_else(|| {
                WireError::BadSpawn(format!("line {:?} is not key=value", super::show(line)))
            })?;
        cur.push((line[..eq].to_vec(), line[eq + 1..].to_vec()));
    }
    if !cur.is_empty() {
        return Err(WireError::BadSpawn("segment without endcmd".into()));
    }
    Ok(segments)
}

/// Strip line-end padding: spaces, and the `\r`/`\n` of CRLF senders. Not
/// tabs: a tab ending a value is part of it ([`value_is_safe`] lets it
/// through, and real peers keep it).
fn trim_blanks(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\r' | b'\n', tail @ ..] = s {
        s = tail;
    }
    while let [head @ .., b' ' | b'\r' | b'\n'] = s {
        s = head;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_put() {
        let m = decode(b"cmd=put kvsname=kvs_1 key=-bcast-1-0 value=2F64").unwrap();
        assert_eq!(m.cmd, "put");
        assert_eq!(m.get_str("kvsname"), Some("kvs_1"));
        assert_eq!(m.get_str("key"), Some("-bcast-1-0"));
        assert_eq!(m.get_str("value"), Some("2F64"));
    }

    #[test]
    fn empty_value_and_extra_spaces() {
        let m = decode(b"cmd=put  kvsname=a   key=k value= ").unwrap();
        assert_eq!(m.get("value"), Some(&b""[..]));
        assert_eq!(m.get_str("key"), Some("k"));
    }

    #[test]
    fn tab_only_value_round_trips_whole() {
        for v in [&b"\t"[..], b"\t\t", b"a\t", b"\tb"] {
            // Last pair (where line-end padding is trimmed) and before another.
            let last = Message::new("get_result").with("rc", "0").with("value", v);
            let mid = Message::new("put").with("value", v).with("key", v);
            for m in [last, mid] {
                assert!(value_is_safe(v));
                let line = encode(&m);
                assert_eq!(decode(&line[..line.len() - 1]).unwrap(), m);
            }
        }
    }

    #[test]
    fn space_only_value_is_not_safe() {
        // `value= ` is an empty value on the wire: spaces cannot be carried.
        assert_eq!(
            decode(b"cmd=put key=k value= ").unwrap().get("value"),
            Some(&b""[..])
        );
        for v in [&b" "[..], b" \t", b"\t "] {
            assert!(!value_is_safe(v));
        }
    }

    #[test]
    fn abort_message_keeps_spaces() {
        let m =
            decode(b"cmd=abort exitcode=7 message=application called MPI_Abort(comm, 7)").unwrap();
        assert_eq!(m.get_int("exitcode"), Some(7));
        assert_eq!(
            m.get_str("message"),
            Some("application called MPI_Abort(comm, 7)")
        );
    }

    #[test]
    fn malformed() {
        assert_eq!(decode(b"put key=x"), Err(WireError::NoCommand));
        assert_eq!(decode(b"cmd= key=x"), Err(WireError::BadCommandName));
        assert!(matches!(
            decode(b"cmd=put junk"),
            Err(WireError::BadToken(_))
        ));
        assert!(matches!(decode(b"cmd=put =x"), Err(WireError::BadToken(_))));
    }

    #[test]
    fn roundtrip() {
        let m = Message::new("get_result")
            .with("rc", "0")
            .with("value", "abc=d");
        assert_eq!(encode(&m), b"cmd=get_result rc=0 value=abc=d\n");
        assert_eq!(decode(&encode(&m)[..encode(&m).len() - 1]).unwrap(), m);
    }

    #[test]
    fn spawn_segments() {
        let b = b"mcmd=spawn\nnprocs=2\nexecname=./a\nargcnt=1\narg1=x y\nendcmd\n";
        let segs = decode_spawn_block(b).unwrap();
        assert_eq!(segs.len(), 1);
        assert!(segs[0].contains(&(b"arg1".to_vec(), b"x y".to_vec())));
    }
}
