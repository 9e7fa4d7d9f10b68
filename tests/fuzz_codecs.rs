//! Random and mutated input to both parsers and to the server core: no
//! panic, and every complete malformed message gets an error reply.

use fastpmi_codec::command::decode_frame;
use fastpmi_codec::{pmi1, pmi2, Deframer, Frame};
use fastpmi_server::store::MemStore;
use fastpmi_server::{ConnId, Event, JobSpec, Server};
use proptest::prelude::*;

fn server() -> Server {
    let mut s = Server::new();
    let job = s.add_job(JobSpec {
        id: "fz".into(),
        apps: vec![2],
        universe_size: 2,
        spawner: None,
        store: Box::new(MemStore::new(2, 1024)),
    });
    s.connect(0, Some((job, 0)), None);
    s.connect(1, Some((job, 1)), None);
    s
}

/// Pieces real messages are made of, so mutations reach deep code paths.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"cmd=".to_vec()),
        Just(b"mcmd=spawn\n".to_vec()),
        Just(b"endcmd\n".to_vec()),
        Just(b";".to_vec()),
        Just(b";;".to_vec()),
        Just(b"=".to_vec()),
        Just(b"\n".to_vec()),
        Just(b" ".to_vec()),
        Just(b"\0".to_vec()),
        Just(b"    38".to_vec()),
        Just(b"999999".to_vec()),
        Just(b"kvs-put;key=a;value=b;".to_vec()),
        Just(b"kvs-get;key=a;".to_vec()),
        Just(b"kvs-fence;".to_vec()),
        Just(b"fullinit;pmirank=1;".to_vec()),
        Just(b"put kvsname=fz key=a value=b\n".to_vec()),
        Just(b"init pmi_version=2 pmi_subversion=0\n".to_vec()),
        Just(b"spawn;ncmds=1;subcmd=x;maxprocs=-3;argv0=;".to_vec()),
        Just(b"totspawns=99999999999\n".to_vec()),
        Just(b"abort;isworld=TRUE;".to_vec()),
        Just(b"info-getnodeattr;key=x;wait=TRUE;".to_vec()),
        prop::collection::vec(any::<u8>(), 0..40),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn parsers_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = pmi1::decode(&bytes);
        let _ = pmi2::decode(&bytes);
        let _ = pmi1::decode_spawn_block(&bytes);
        let mut d = Deframer::new();
        d.feed(&bytes);
        for _ in 0..64 {
            match d.next_frame() {
                Ok(Some(f)) => { let _ = decode_frame(&f); }
                Ok(None) => break,
                Err(_) => {}
            }
        }
    }

    #[test]
    fn server_survives_structured_garbage(pieces in prop::collection::vec(piece(), 0..30), split in 1usize..17) {
        let mut s = server();
        let bytes: Vec<u8> = pieces.concat();
        let mut out: Vec<Event> = Vec::new();
        for chunk in bytes.chunks(split) {
            s.on_bytes(0, chunk, &mut out);
        }
        s.on_closed(0 as ConnId, &mut out);
        // Every reply the server produced is a well-formed frame.
        for e in &out {
            if let Event::Send { bytes, .. } = e {
                let mut d = Deframer::new();
                d.feed(bytes);
                let f = d.next_frame();
                prop_assert!(matches!(f, Ok(Some(_))), "unframeable reply {:?}", String::from_utf8_lossy(bytes));
            }
        }
    }
}

#[test]
fn every_complete_malformed_message_gets_an_error_reply() {
    let framed = |b: &str| format!("{:<6}{b}", b.len()).into_bytes();
    let cases: Vec<Vec<u8>> = vec![
        b"cmd=nonsense\n".to_vec(),
        b"cmd=put key\n".to_vec(),
        b"cmd=get\n".to_vec(),
        framed("cmd=kvs-get;"),
        framed("cmd=kvs-put;a=b;"),
        framed("cmd=boguz;"),
        framed("junk!"),
        framed("cmd=info-getnodeattr;key=;"),
        framed("cmd=fullinit;pmirank=notanumber;"),
    ];
    for c in &cases {
        let mut s = server();
        let mut out = Vec::new();
        s.on_bytes(1, c, &mut out);
        let replies: Vec<_> = out
            .iter()
            .filter_map(|e| match e {
                Event::Send { bytes, .. } => Some(bytes.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(replies.len(), 1, "{:?}", String::from_utf8_lossy(c));
        let r = String::from_utf8_lossy(&replies[0]);
        assert!(
            r.contains("rc=-1") && (r.contains("msg=") || r.contains("errmsg=")),
            "{:?} -> {r}",
            String::from_utf8_lossy(c)
        );
    }
}

#[test]
fn oversize_key_and_value_are_rejected_with_a_message() {
    let mut s = server();
    let mut out = Vec::new();
    // Commands are served after init only.
    s.on_bytes(0, b"cmd=init pmi_version=2 pmi_subversion=0\n", &mut out);
    out.clear();
    let key = "k".repeat(65);
    let body = format!("cmd=kvs-put;key={key};value=v;");
    s.on_bytes(0, format!("{:<6}{body}", body.len()).as_bytes(), &mut out);
    let val = "v".repeat(1025);
    let body = format!("cmd=kvs-put;key=k;value={val};");
    s.on_bytes(0, format!("{:<6}{body}", body.len()).as_bytes(), &mut out);
    let r: Vec<String> = out
        .iter()
        .filter_map(|e| match e {
            Event::Send { bytes, .. } => Some(String::from_utf8_lossy(bytes).into_owned()),
            _ => None,
        })
        .collect();
    assert_eq!(r.len(), 2);
    assert!(
        r[0].contains("rc=-1") && r[0].contains("65 bytes"),
        "{}",
        r[0]
    );
    assert!(
        r[1].contains("rc=-1") && r[1].contains("1025 bytes"),
        "{}",
        r[1]
    );
}

/// Replies the server sends for `input` on connection `conn`.
fn replies(s: &mut Server, conn: ConnId, input: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    s.on_bytes(conn, input, &mut out);
    out.into_iter()
        .filter_map(|e| match e {
            Event::Send { bytes, .. } => Some(bytes),
            _ => None,
        })
        .collect()
}

/// A server whose two ranks have sent `init` (commands are served after it).
fn inited_server() -> Server {
    let mut s = server();
    for conn in [0, 1] {
        replies(&mut s, conn, b"cmd=init pmi_version=2 pmi_subversion=0\n");
    }
    s
}

fn framed(body: &[u8]) -> Vec<u8> {
    let mut f = format!("{:<6}", body.len()).into_bytes();
    f.extend_from_slice(body);
    f
}

// Found by fuzz/fuzz_targets/command.rs: `;;` put a `;` into the command
// name, which the reply echoed raw, so the reply's first pair ended early.
#[test]
fn pmi2_command_name_with_semicolon_gets_a_parseable_error() {
    let mut s = inited_server();
    let r = replies(&mut s, 0, &framed(b"cmd=kvs;;put;key=k;value=v;"));
    assert_eq!(r.len(), 1);
    let m = pmi2::decode(&r[0][6..]).unwrap();
    assert_eq!(
        m.cmd,
        "error-response",
        "{}",
        String::from_utf8_lossy(&r[0])
    );
    assert_eq!(m.get_str("rc"), Some("-1"));
    assert!(m.get_str("errmsg").unwrap().contains("command name"));
}

// Found by the command target: `put ... value=` is legal input, but a
// PMI-1 reply never carries an empty value.
#[test]
fn pmi1_get_of_an_empty_value_sends_no_empty_value() {
    let mut s = inited_server();
    let r = replies(&mut s, 0, b"cmd=put kvsname=fz key=e value=\n");
    assert_eq!(r, vec![b"cmd=put_result rc=0\n".to_vec()]);
    let r = replies(&mut s, 0, b"cmd=get kvsname=fz key=e\n");
    let line = String::from_utf8(r[0].clone()).unwrap();
    assert!(line.starts_with("cmd=get_result rc=1 msg="), "{line}");
    assert!(!line.contains("value=\n") && !line.contains("= "), "{line}");
    // PMI-2 says found=TRUE with an empty value: its framing carries it.
    let r = replies(&mut s, 1, &framed(b"cmd=kvs-get;key=e;"));
    let m = pmi2::decode(&r[0][6..]).unwrap();
    assert_eq!(
        (m.get_str("found"), m.get_str("value")),
        (Some("TRUE"), Some(""))
    );
}

// Found by the command target: error messages quote client bytes escaped
// (up to 4x longer); the errmsg stays under PMI2_MAX_VALLEN.
#[test]
fn pmi2_error_message_is_bounded() {
    let mut s = inited_server();
    let mut body = b"cmd=kvs-get;srcid=".to_vec();
    body.extend(std::iter::repeat_n(0xff, 2000));
    body.extend_from_slice(b";key=k;");
    let r = replies(&mut s, 0, &framed(&body));
    let m = pmi2::decode(&r[0][6..]).unwrap();
    assert_eq!(m.get_str("rc"), Some("-1"));
    let msg = m.get_str("errmsg").unwrap();
    assert!(
        msg.contains("srcid") && msg.len() <= 900,
        "{} bytes",
        msg.len()
    );
}

// Found by the command target: the reply to an unknown PMI-1 command
// echoed its whole name, past MPICH 4.0's 1024-byte line.
#[test]
fn pmi1_reply_to_a_long_unknown_command_fits_a_line() {
    let mut s = inited_server();
    let line = format!("cmd={} a=b\n", "x".repeat(5000));
    let r = replies(&mut s, 0, line.as_bytes());
    assert_eq!(r.len(), 1);
    let reply = String::from_utf8(r[0].clone()).unwrap();
    assert!(reply.len() < 1024, "{} bytes", reply.len());
    assert!(
        reply.contains(" rc=-1 ") && reply.contains("unknown_command"),
        "{reply}"
    );
}

// Found by the command target: a published port that a PMI-1 line cannot
// carry (over 1023 bytes with the reply, or empty) must be a failed lookup,
// not a reply line past MPICH 4.0's 1024 bytes or an empty value.
#[test]
fn pmi1_lookup_of_a_port_a_line_cannot_carry_fails() {
    let mut s = inited_server();
    let port = "p".repeat(1000);
    for (name, port) in [("long", port.as_str()), ("empty", "")] {
        let body = format!("cmd=name-publish;name={name};port={port};");
        let r = replies(&mut s, 0, &framed(body.as_bytes()));
        assert_eq!(pmi2::decode(&r[0][6..]).unwrap().get_str("rc"), Some("0"));
        let r = replies(
            &mut s,
            1,
            format!("cmd=lookup_name service={name}\n").as_bytes(),
        );
        let reply = String::from_utf8(r[0].clone()).unwrap();
        assert!(reply.len() < 1024, "{} bytes", reply.len());
        assert!(
            reply.starts_with("cmd=lookup_result rc=1 info=fail msg="),
            "{reply}"
        );
    }
    // PMI-2 has no line limit.
    let r = replies(&mut s, 1, &framed(b"cmd=name-lookup;name=long;"));
    let m = pmi2::decode(&r[0][6..]).unwrap();
    assert_eq!(m.get_str("port"), Some(port.as_str()));
}

// Found by fuzz/fuzz_targets/deframer.rs (a 10 s input): the deframer
// rescanned the whole pending message on every read, so a spawn block near
// its 1 MiB limit or a 64 KiB PMI-1 line arriving in small reads cost
// quadratic time in the single-threaded event loop (minutes for this
// input). Now each byte is scanned once; the frames must not change.
#[test]
fn large_messages_in_small_reads_frame_like_one_read() {
    let mut input = b"mcmd=spawn\nnprocs=1\nexecname=./a\ntotspawns=1\n".to_vec();
    let mut i = 0;
    while input.len() < 1000 * 1024 {
        input.extend_from_slice(format!("arg{i}=0123456789abcdef\n").as_bytes());
        i += 1;
    }
    input.extend_from_slice(format!("argcnt={i}\nendcmd\n").as_bytes());
    let mut line = b"cmd=put kvsname=fz key=k value=".to_vec();
    line.extend(std::iter::repeat_n(b'V', 60 * 1024));
    input.extend_from_slice(&line);
    input.extend_from_slice(b"\ncmd=barrier_in\n");

    let frames = |chunk: usize| {
        let mut d = Deframer::new();
        let mut out = Vec::new();
        for piece in input.chunks(chunk) {
            d.feed(piece);
            while let Some(f) = d.next_frame().unwrap() {
                out.push(f);
            }
        }
        out
    };
    let whole = frames(input.len());
    assert_eq!(whole.len(), 3);
    assert!(matches!(&whole[0], Frame::Pmi1Spawn(b) if b.len() > 1000 * 1024));
    assert_eq!(whole[1], Frame::Pmi1(line.clone()));
    for chunk in [1, 7, 4096] {
        assert!(frames(chunk) == whole, "reads of {chunk} bytes");
    }
}

// Found while writing the command target's round trip: a value whose 5th
// byte from the end is ';' (written ';;') put the escaped pair exactly 7
// bytes before the end of the body, where MPICH 3.3-4.0's over-declared
// length puts its garbage, so the server cut the value short ("x;abcd" was
// stored as "x"); the same held for the reply on its way back. Values now
// travel before a last pair that cannot hold ';'.
#[test]
fn pmi2_values_with_semicolons_survive_the_round_trip() {
    use fastpmi_codec::command::encode_request;
    use fastpmi_codec::{Protocol, Request};
    let mut s = inited_server();
    for value in ["x;abcd", "x;", ";", "a;;b;c;d;e;f", "k=v;x=1234"] {
        for (put, get) in [
            (
                Request::Put {
                    key: b"k".to_vec(),
                    value: value.into(),
                },
                Request::Get {
                    jobid: None,
                    src: None,
                    key: b"k".to_vec(),
                },
            ),
            (
                Request::PutNodeAttr {
                    key: b"k".to_vec(),
                    value: value.into(),
                },
                Request::GetNodeAttr {
                    key: b"k".to_vec(),
                    wait: false,
                },
            ),
        ] {
            let r = replies(&mut s, 0, &encode_request(Protocol::Pmi2, &put));
            assert_eq!(pmi2::decode(&r[0][6..]).unwrap().get_str("rc"), Some("0"));
            let r = replies(&mut s, 1, &encode_request(Protocol::Pmi2, &get));
            let m = pmi2::decode(&r[0][6..]).unwrap();
            assert_eq!(m.get_str("found"), Some("TRUE"), "{value}");
            assert_eq!(m.get_str("value"), Some(value), "{put:?}");
        }
    }
    // A published port comes back whole too.
    let body = b"cmd=name-publish;name=svc;port=x;;abcd;infokeycount=0;";
    let r = replies(&mut s, 0, &framed(body));
    assert_eq!(pmi2::decode(&r[0][6..]).unwrap().get_str("rc"), Some("0"));
    let r = replies(&mut s, 1, &framed(b"cmd=name-lookup;name=svc;"));
    let m = pmi2::decode(&r[0][6..]).unwrap();
    assert_eq!(
        (m.get_str("port"), m.get_str("value")),
        (Some("x;abcd"), Some("x;abcd"))
    );
}
