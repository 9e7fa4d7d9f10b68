//! Random and mutated input to both parsers and to the server core: no
//! panic, and every complete malformed message gets an error reply.

use fastpmi::server::{ConnId, Event, JobSpec, Server};
use fastpmi::store::MemStore;
use fastpmi::wire::command::decode_frame;
use fastpmi::wire::{pmi1, pmi2, Deframer};
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

fn framed(body: &[u8]) -> Vec<u8> {
    let mut f = format!("{:<6}", body.len()).into_bytes();
    f.extend_from_slice(body);
    f
}

// Found by fuzz/fuzz_targets/command.rs: `;;` put a `;` into the command
// name, which the reply echoed raw, so the reply's first pair ended early.
#[test]
fn pmi2_command_name_with_semicolon_gets_a_parseable_error() {
    let mut s = server();
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
    let mut s = server();
    replies(&mut s, 0, b"cmd=init pmi_version=1 pmi_subversion=1\n");
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
    let mut s = server();
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
    let mut s = server();
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

// Name-service fields are bounded (no megabyte entries in the launcher's
// table) and a port a PMI-1 line cannot carry is a failed lookup, not a
// reply line past 1024 bytes.
#[test]
fn name_service_fields_are_bounded() {
    let mut s = server();
    let long = "p".repeat(1025);
    for bad in [
        format!("cmd=name-publish;name=svc;port={long};"),
        "cmd=name-publish;name=svc;port=;".to_string(),
        "cmd=name-publish;name=;port=p;".to_string(),
    ] {
        let r = replies(&mut s, 0, &framed(bad.as_bytes()));
        let m = pmi2::decode(&r[0][6..]).unwrap();
        assert_eq!(m.get_str("rc"), Some("-1"), "{bad}");
    }
    let port = "p".repeat(1000);
    let r = replies(
        &mut s,
        0,
        &framed(format!("cmd=name-publish;name=svc;port={port};").as_bytes()),
    );
    assert_eq!(pmi2::decode(&r[0][6..]).unwrap().get_str("rc"), Some("0"));
    let r = replies(&mut s, 1, b"cmd=lookup_name service=svc\n");
    let reply = String::from_utf8(r[0].clone()).unwrap();
    assert!(reply.len() < 1024, "{} bytes", reply.len());
    assert!(
        reply.starts_with("cmd=lookup_result rc=1 info=fail "),
        "{reply}"
    );
    let r = replies(&mut s, 1, &framed(b"cmd=name-lookup;name=svc;"));
    let m = pmi2::decode(&r[0][6..]).unwrap();
    assert_eq!(m.get_str("port"), Some(port.as_str()));
}
