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
