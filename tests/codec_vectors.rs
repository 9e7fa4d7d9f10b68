//! Replays the client side of every captured transcript in
//! `../shared/vectors/` (found through `FASTPMI_VECTORS` or the repository's
//! sibling `shared/vectors`) against the server core, with companion ranks
//! standing in for the rest of a 4-rank job, and checks every reply by the
//! rules of the client that produced the transcript.

use std::path::PathBuf;

use fastpmi_codec::{frame::parse_length, pmi1, pmi2, Message};
use fastpmi_server::store::MemStore;
use fastpmi_server::{ConnId, Event, JobSpec, Server};

const SIZE: u32 = 4;

fn vectors_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("FASTPMI_VECTORS") {
        return PathBuf::from(d);
    }
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for cand in [here.join("tests/vectors"), here.join("../shared/vectors")] {
        if cand.is_dir() {
            return cand;
        }
    }
    panic!("test vectors not found: set FASTPMI_VECTORS or keep tests/vectors")
}

/// One strace line: direction, bytes, and whether strace truncated it.
#[derive(Debug, Clone)]
struct Io {
    write: bool,
    bytes: Vec<u8>,
    truncated: bool,
}

/// Undo strace's C-style escaping of the quoted argument.
fn unescape(s: &[u8]) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'"' => return (out, false),
            b'\\' if i + 1 < s.len() => {
                let c = s[i + 1];
                i += 2;
                match c {
                    b'n' => out.push(b'\n'),
                    b't' => out.push(b'\t'),
                    b'r' => out.push(b'\r'),
                    b'v' => out.push(0x0b),
                    b'f' => out.push(0x0c),
                    b'x' => {
                        let h = std::str::from_utf8(&s[i..i + 2]).unwrap();
                        out.push(u8::from_str_radix(h, 16).unwrap());
                        i += 2;
                    }
                    b'0'..=b'7' => {
                        let mut v = (c - b'0') as u32;
                        let mut k = 0;
                        while k < 2 && i < s.len() && (b'0'..=b'7').contains(&s[i]) {
                            v = v * 8 + (s[i] - b'0') as u32;
                            i += 1;
                            k += 1;
                        }
                        out.push(v as u8);
                    }
                    other => out.push(other),
                }
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    (out, true)
}

fn parse_transcript(text: &str) -> Vec<Io> {
    let mut out = Vec::new();
    for line in text.lines() {
        let (write, pos) = match (line.find(" write("), line.find(" read(")) {
            (Some(p), _) => (true, p),
            (None, Some(p)) => (false, p),
            _ => continue,
        };
        let q = line[pos..]
            .find('"')
            .map(|q| pos + q + 1)
            .expect("quoted data");
        let (bytes, truncated) = unescape(&line.as_bytes()[q..]);
        out.push(Io {
            write,
            bytes,
            truncated,
        });
    }
    out
}

/// What the transcript's client sent, as messages, in order. PMI-2 writes
/// are re-framed after identifier substitution; truncated PMI-1 lines get
/// their newline back.
#[derive(Debug, Clone)]
enum Sent {
    Pmi1(Vec<u8>),
    Pmi2 { body: Vec<u8>, left_aligned: bool },
}

fn client_messages(ios: &[Io]) -> Vec<(Sent, Option<Vec<u8>>)> {
    // Pair each write with the server's captured reply (the reads up to the next write).
    let mut out = Vec::new();
    let mut i = 0;
    while i < ios.len() {
        if !ios[i].write {
            i += 1;
            continue;
        }
        let w = &ios[i];
        let mut reply = Vec::new();
        let mut j = i + 1;
        while j < ios.len() && !ios[j].write {
            reply.extend_from_slice(&ios[j].bytes);
            j += 1;
        }
        let sent = if w.bytes.starts_with(b"cmd=") || w.bytes.starts_with(b"mcmd=") {
            let mut l = w.bytes.clone();
            if w.truncated || !l.ends_with(b"\n") {
                l.push(b'\n');
            }
            Sent::Pmi1(l)
        } else {
            let declared = parse_length(&w.bytes[..6]).expect("PMI-2 length");
            let body = w.bytes[6..].to_vec();
            assert!(
                w.truncated || body.len() == declared,
                "length mismatch in vector"
            );
            Sent::Pmi2 {
                body,
                left_aligned: w.bytes[0] != b' ',
            }
        };
        out.push((sent, if reply.is_empty() { None } else { Some(reply) }));
        i = j;
    }
    out
}

fn replace_all(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    if from.is_empty() {
        return hay.to_vec();
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < hay.len() {
        if hay[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    out
}

/// Parse a captured or produced reply into messages (PMI-1 lines or PMI-2 frames).
fn reply_messages(bytes: &[u8]) -> Vec<(bool, Message)> {
    let mut out = Vec::new();
    let mut d = fastpmi_codec::Deframer::new();
    d.feed(bytes);
    while let Ok(Some(f)) = d.next_frame() {
        match f {
            fastpmi_codec::Frame::Pmi1(l) => out.push((false, pmi1::decode(&l).unwrap())),
            fastpmi_codec::Frame::Pmi2(b) => out.push((true, pmi2::decode(&b).unwrap())),
            fastpmi_codec::Frame::Pmi1Spawn(_) => panic!("server sent a spawn block"),
        }
    }
    out
}

/// The real server's reply as captured: strace may show a PMI-2 body
/// without its length header (read separately and not captured).
fn captured_messages(bytes: &[u8], pmi2_reply: bool) -> Vec<(bool, Message)> {
    if !pmi2_reply {
        let mut b = bytes.to_vec();
        if !b.ends_with(b"\n") {
            b.push(b'\n'); // strace truncated the line
        }
        return reply_messages(&b);
    }
    let body = match bytes.get(..6).and_then(parse_length) {
        Some(_) => &bytes[6..],
        None => bytes,
    };
    vec![(true, pmi2::decode(body).expect("captured PMI-2 reply"))]
}

struct Harness {
    server: Server,
    job: usize,
}

impl Harness {
    fn new() -> Self {
        let mut server = Server::new();
        let job = server.add_job(JobSpec {
            id: "fastpmi_vec_0".into(),
            apps: vec![SIZE],
            universe_size: SIZE,
            spawner: None,
            store: Box::new(MemStore::new(SIZE, fastpmi_codec::VALLEN_MAX)),
        });
        for r in 0..SIZE {
            server.connect(r as ConnId, Some((job, r)), None);
        }
        Harness { server, job }
    }

    fn send(&mut self, conn: ConnId, bytes: &[u8]) -> Vec<Event> {
        let mut out = Vec::new();
        self.server.on_bytes(conn, bytes, &mut out);
        out
    }
}

fn sent_to(events: &[Event], conn: ConnId) -> Vec<u8> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Send { conn: c, bytes } if *c == conn => Some(bytes.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

fn frame2(body: &[u8]) -> Vec<u8> {
    let mut v = format!("{:<6}", body.len()).into_bytes();
    v.extend_from_slice(body);
    v
}

/// Replay one transcript as rank `me`; returns how many replies were checked.
fn replay(name: &str, text: &str) -> usize {
    let me: u32 = if name.contains("rank1") { 1 } else { 0 };
    let ios = parse_transcript(text);
    let msgs = client_messages(&ios);
    assert!(!msgs.is_empty(), "{name}: no client writes found");
    let pmi2_client = msgs.iter().any(|(s, _)| matches!(s, Sent::Pmi2 { .. }));

    // Values the companions must provide: keys the transcript reads but
    // never wrote itself, with the value its real server returned.
    let mut own_puts: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut provide_kvs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut provide_attr: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for (sent, reply) in &msgs {
        let m = match sent {
            Sent::Pmi1(l) => pmi1::decode(&l[..l.len() - 1]).unwrap(),
            Sent::Pmi2 { body, .. } => pmi2::decode(body).unwrap(),
        };
        let key = m.get("key").map(<[u8]>::to_vec);
        match m.cmd.as_str() {
            "put" | "kvs-put" | "info-putnodeattr" => {
                own_puts.push((key.unwrap(), m.get("value").unwrap().to_vec()))
            }
            "get" | "kvs-get" | "info-getnodeattr" => {
                let key = key.unwrap();
                if key.starts_with(b"PMI_") || own_puts.iter().any(|(k, _)| *k == key) {
                    continue;
                }
                let captured = captured_messages(
                    reply.as_deref().unwrap_or_default(),
                    matches!(sent, Sent::Pmi2 { .. }),
                );
                let v = captured
                    .first()
                    .and_then(|(_, r)| r.get("value").map(<[u8]>::to_vec))
                    .expect("captured value");
                if m.cmd == "info-getnodeattr" {
                    provide_attr.push((key, v));
                } else {
                    provide_kvs.push((key, v));
                }
            }
            _ => {}
        }
    }

    let mut h = Harness::new();
    let companions: Vec<u32> = (0..SIZE).filter(|&r| r != me).collect();
    // Companions are PMI-2 clients (a mixed job must work anyway).
    for &c in &companions {
        h.send(c as ConnId, b"cmd=init pmi_version=2 pmi_subversion=0\n");
        h.send(c as ConnId, &frame2(b"cmd=fullinit;threaded=FALSE;"));
        for (k, v) in &provide_kvs {
            let mut b = b"cmd=kvs-put;key=".to_vec();
            b.extend_from_slice(k);
            b.extend_from_slice(b";value=");
            b.extend_from_slice(v);
            b.push(b';');
            let ev = h.send(c as ConnId, &frame2(&b));
            assert!(String::from_utf8_lossy(&sent_to(&ev, c as ConnId)).contains("rc=0;"));
        }
    }

    let mut subst: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut checked = 0;
    let mut companion_fences = 0usize;
    let mut my_fences = 0usize;
    for (idx, (sent, captured)) in msgs.iter().enumerate() {
        let bytes = match sent {
            Sent::Pmi1(l) => subst
                .iter()
                .fold(l.clone(), |acc, (a, b)| replace_all(&acc, a, b)),
            Sent::Pmi2 { body, left_aligned } => {
                let b = subst
                    .iter()
                    .fold(body.clone(), |acc, (a, b)| replace_all(&acc, a, b));
                let mut v = if *left_aligned {
                    format!("{:<6}", b.len())
                } else {
                    format!("{:>6}", b.len())
                }
                .into_bytes();
                v.extend_from_slice(&b);
                v
            }
        };
        let req = match sent {
            Sent::Pmi1(_) => pmi1::decode(&bytes[..bytes.len() - 1]).unwrap(),
            Sent::Pmi2 { .. } => pmi2::decode(&bytes[6..]).unwrap(),
        };
        let mut events = h.send(me as ConnId, &bytes);
        let mut got = sent_to(&events, me as ConnId);
        let is_fence = matches!(req.cmd.as_str(), "barrier_in" | "kvs-fence");
        if is_fence {
            my_fences += 1;
            assert!(
                got.is_empty(),
                "{name}: fence {my_fences} replied before the other ranks arrived"
            );
            while companion_fences < my_fences {
                for &c in &companions {
                    events = h.send(c as ConnId, &frame2(b"cmd=kvs-fence;"));
                    got.extend(sent_to(&events, me as ConnId));
                }
                companion_fences += 1;
            }
        }
        if req.cmd == "info-getnodeattr" && got.is_empty() {
            assert_eq!(
                req.get_bool("wait"),
                Some(true),
                "{name}: non-waiting getnodeattr held"
            );
            let key = req.get("key").unwrap();
            let (_, v) = provide_attr
                .iter()
                .find(|(k, _)| k == key)
                .expect("companion attr");
            let mut b = b"cmd=info-putnodeattr;key=".to_vec();
            b.extend_from_slice(key);
            b.extend_from_slice(b";value=");
            b.extend_from_slice(v);
            b.push(b';');
            events = h.send(companions[0] as ConnId, &frame2(&b));
            got.extend(sent_to(&events, me as ConnId));
        }
        if captured.is_none() {
            assert!(
                got.is_empty(),
                "{name}: reply to a message that had none: {}",
                String::from_utf8_lossy(&got)
            );
            continue;
        }
        let captured = captured_messages(
            captured.as_ref().unwrap(),
            matches!(sent, Sent::Pmi2 { .. }),
        );
        let ours = reply_messages(&got);
        assert_eq!(
            ours.len(),
            captured.len().max(1),
            "{name} msg {idx}: {} replies to {}",
            ours.len(),
            req.cmd
        );
        let (framed2, reply) = &ours[0];
        let (cap2, cap) = &captured[0];
        assert_eq!(
            framed2, cap2,
            "{name}: reply framing differs from what the client reads"
        );
        // Rules every client family enforces.
        assert_eq!(reply.cmd, cap.cmd, "{name}: reply command for {}", req.cmd);
        assert_eq!(
            reply.get_str("rc"),
            Some("0"),
            "{name}: {} needs rc=0, got {:?}",
            reply.cmd,
            reply
        );
        if !*framed2 {
            let line = got.split(|&b| b == b'\n').next().unwrap();
            assert!(
                line.len() < 1023,
                "{name}: PMI-1 reply line of {} bytes",
                line.len()
            );
        } else {
            let declared = parse_length(&got[..6]).expect("6-byte length");
            assert_eq!(declared, got.len() - 6, "{name}: PMI-2 length header");
        }
        // Every key the real server sent, the client may read: we send it too.
        for (k, _) in &cap.pairs {
            let k = String::from_utf8_lossy(k);
            if k == "msg" {
                continue; // Hydra's "msg=success" is informational
            }
            assert!(
                reply.get(&k).is_some(),
                "{name}: {} lacks {k} (real server sent it)",
                reply.cmd
            );
        }
        match reply.cmd.as_str() {
            "response_to_init" => {
                let want = if pmi2_client { ("2", "0") } else { ("1", "1") };
                assert_eq!(
                    (
                        reply.get_str("pmi_version"),
                        reply.get_str("pmi_subversion")
                    ),
                    (Some(want.0), Some(want.1))
                );
            }
            "fullinit-response" => {
                for k in [
                    "rc",
                    "pmi-version",
                    "pmi-subversion",
                    "rank",
                    "size",
                    "appnum",
                    "debugged",
                    "pmiverbose",
                ] {
                    assert!(
                        reply.get(k).is_some(),
                        "{name}: fullinit-response lacks {k}"
                    );
                }
                assert_eq!(reply.get_int("rank"), Some(me as i64));
                assert_eq!(reply.get_int("size"), Some(SIZE as i64));
            }
            "my_kvsname" | "job-getid-response" => {
                let key = if reply.cmd == "my_kvsname" {
                    "kvsname"
                } else {
                    "jobid"
                };
                subst.push((
                    cap.get(key).unwrap().to_vec(),
                    reply.get(key).unwrap().to_vec(),
                ));
            }
            "get_result"
            | "kvs-get-response"
            | "info-getjobattr-response"
            | "info-getnodeattr-response" => {
                let key = req.get("key").unwrap();
                let want: Vec<u8> = if key == b"PMI_process_mapping" {
                    format!("(vector,(0,1,{SIZE}))").into_bytes()
                } else if let Some((_, v)) = own_puts.iter().rev().find(|(k, _)| k == key) {
                    v.clone()
                } else {
                    provide_kvs
                        .iter()
                        .chain(&provide_attr)
                        .find(|(k, _)| k == key)
                        .unwrap()
                        .1
                        .clone()
                };
                if reply.cmd != "get_result" {
                    assert_eq!(
                        reply.get_str("found"),
                        Some("TRUE"),
                        "{name}: {}",
                        String::from_utf8_lossy(key)
                    );
                }
                assert_eq!(
                    reply.get("value"),
                    Some(&want[..]),
                    "{name}: value of {}",
                    String::from_utf8_lossy(key)
                );
            }
            _ => {}
        }
        checked += 1;
    }
    let _ = h.job;
    checked
}

#[test]
fn every_vector_replays_with_accepted_replies() {
    let dir = vectors_dir();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 9,
        "expected the 9 captured transcripts in {}",
        dir.display()
    );
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&f).unwrap();
        let n = replay(&name, &text);
        assert!(n >= 5, "{name}: only {n} replies checked");
        eprintln!("{name}: {n} replies accepted");
    }
}

#[test]
fn every_prefix_of_every_vector_message_is_safe() {
    // Truncated input: the server must neither panic nor answer a partial message.
    let dir = vectors_dir();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_none_or(|x| x != "txt") {
            continue;
        }
        let ios = parse_transcript(&std::fs::read_to_string(&p).unwrap());
        for io in ios.iter().filter(|io| io.write) {
            for cut in 0..io.bytes.len() {
                let mut h = Harness::new();
                h.send(0, b"cmd=init pmi_version=2 pmi_subversion=0\n");
                let ev = h.send(0, &io.bytes[..cut]);
                let complete_pmi1 = io.bytes[..cut].contains(&b'\n');
                if !complete_pmi1 {
                    assert!(
                        sent_to(&ev, 0).is_empty() || !io.bytes.starts_with(b"cmd="),
                        "{}: partial message answered",
                        p.display()
                    );
                }
            }
        }
    }
}
