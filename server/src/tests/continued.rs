//! Continued commands on the wire (docs/continued.md): a put of a value
//! larger than one message and its get, a spawn with 20 000 arguments,
//! and every way a continuation can go wrong, with the job going on.

use std::time::{Duration, Instant};

use super::*;
use fastpmi_codec::continued::{frames, Reassembly, IDLE_MAX, PART_DATA_MAX};

/// The whole of `body`, sent the way fastpmi's client sends it.
fn send_long(s: &mut Server, conn: ConnId, body: &str, id: &str) -> Vec<Event> {
    let mut out = Vec::new();
    for f in frames(body.as_bytes().to_vec(), id, Some(b"7")) {
        s.on_bytes(conn, &f, &mut out);
    }
    out
}

/// The messages of `conn`'s replies, continued ones put back together.
fn replies(out: &[Event], conn: ConnId) -> Vec<fastpmi_codec::Message> {
    let mut d = fastpmi_codec::Deframer::new();
    for b in sent(out, conn) {
        d.feed(&b);
    }
    let mut r = Reassembly::default();
    let mut msgs = Vec::new();
    while let Some(Frame::Pmi2(b)) = d.next_frame().unwrap() {
        let m = pmi2::decode(&b).unwrap();
        if m.cmd == "continued" {
            if let Some(whole) = r.feed(&m, Instant::now()).unwrap() {
                msgs.push(pmi2::decode(&whole).unwrap());
            }
        } else {
            msgs.push(m);
        }
    }
    msgs
}

fn big_value() -> String {
    // Semicolons double when escaped: the worst case for the split.
    (0..600_000).map(|i| format!("{};", i % 10)).collect()
}

#[test]
fn a_value_larger_than_a_message_is_put_and_got_in_parts() {
    let (mut s, _) = server(2);
    init_all(&mut s, 2);
    let v = big_value();
    let out = send_long(
        &mut s,
        0,
        &format!(
            "cmd=kvs-put;thrid=7;value={};key=big;",
            v.replace(';', ";;")
        ),
        "c7",
    );
    let r = replies(&out, 0);
    assert_eq!(r.len(), 1, "one reply to the whole");
    assert_eq!(
        (r[0].cmd.as_str(), r[0].get_str("rc")),
        ("kvs-put-response", Some("0")),
        "{:?}",
        r[0].get_str("errmsg")
    );
    assert_eq!(r[0].thrid.as_deref(), Some(&b"7"[..]));
    send2(&mut s, 0, "cmd=kvs-fence;");
    let out = send2(&mut s, 1, "cmd=kvs-fence;");
    assert!(!sent(&out, 1).is_empty());
    // Rank 0 speaks continued commands: its get comes back in parts.
    let out = send2(&mut s, 0, "cmd=kvs-get;thrid=9;jobid=;srcid=0;key=big;");
    assert!(sent(&out, 0).len() == 1 && sent(&out, 0)[0].len() > 999_999 + 6);
    let r = replies(&out, 0);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].get("value"), Some(v.as_bytes()));
    assert_eq!(r[0].thrid.as_deref(), Some(&b"9"[..]));
    // Rank 1 never said it reads them: a clear error instead.
    let out = send2(&mut s, 1, "cmd=kvs-get;jobid=;srcid=0;key=big;");
    let m = pmi2_body(&sent(&out, 1)[0]);
    assert_eq!(m.get_str("rc"), Some("-1"));
    assert!(m
        .get_str("errmsg")
        .unwrap()
        .contains("longer than this client reads"));
    let out = send2(&mut s, 1, "cmd=kvs-getall;");
    let m = pmi2_body(&sent(&out, 1)[0]);
    assert_eq!(
        (m.cmd.as_str(), m.get_str("rc")),
        ("kvs-getall-response", Some("-1"))
    );
    // A value over the bound is refused even so.
    let huge = "x".repeat(fastpmi_codec::LARGE_VALUE_MAX + 1);
    let out = send_long(
        &mut s,
        0,
        &format!("cmd=kvs-put;value={huge};key=huge;"),
        "c8",
    );
    let r = replies(&out, 0);
    assert_eq!(r[0].get_str("rc"), Some("-1"));
    // A client that said so in fullinit may get it too.
    s.connect(50, Some((0, 1)), None);
    send1(&mut s, 50, "cmd=init pmi_version=2 pmi_subversion=0");
    send2(
        &mut s,
        50,
        "cmd=fullinit;threaded=TRUE;fastpmi-continued=TRUE;",
    );
    let out = send2(&mut s, 50, "cmd=kvs-get;jobid=;srcid=0;key=big;");
    assert_eq!(replies(&out, 50)[0].get("value"), Some(v.as_bytes()));
}

#[test]
fn a_spawn_of_20000_arguments_arrives_whole() {
    let (mut s, _) = server(1);
    init_all(&mut s, 1);
    let arg = |i: usize| format!("argument-{i:05}-{}", "x".repeat(50));
    let mut body = String::from(
        "cmd=spawn;thrid=7;ncmds=1;preputcount=0;subcmd=/bin/echo;maxprocs=1;argc=20000;",
    );
    for i in 0..20_000 {
        body += &format!("argv{i}={};", arg(i));
    }
    body += "infokeycount=0;";
    assert!(body.len() > 999_999);
    let out = send_long(&mut s, 0, &body, "c7");
    let req = out
        .iter()
        .find_map(|e| match e {
            Event::Spawn { req, .. } => Some(req.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no spawn: {:?}", replies(&out, 0)));
    let args = &req.cmds[0].args;
    assert_eq!(args.len(), 20_000);
    assert!(args.iter().enumerate().all(|(i, a)| *a == arg(i)));
}

#[test]
fn bad_continuations_get_errors_and_the_job_goes_on() {
    let (mut s, _) = server(2);
    init_all(&mut s, 2);
    let part = |id: &str, k: u64, n: u64, data: &str| {
        let mut m = fastpmi_codec::Message::new("continued")
            .with("contid", id)
            .with("contdata", data)
            .with("contpart", k.to_string())
            .with("contparts", n.to_string());
        m.thrid = Some(b"5".to_vec());
        pmi2::encode(&m)
    };
    let err = |s: &mut Server, bytes: Vec<u8>| -> String {
        let mut out = Vec::new();
        s.on_bytes(0, &bytes, &mut out);
        let m = pmi2_body(&sent(&out, 0)[0]);
        assert_eq!(m.cmd, "continued-response");
        assert_eq!(m.get_str("rc"), Some("-1"));
        assert_eq!(m.thrid.as_deref(), Some(&b"5"[..]));
        m.get_str("errmsg").unwrap().to_string()
    };
    // Out of order, and a part of nothing.
    assert!(err(&mut s, part("a", 2, 3, "x")).contains("part 2 where part 1"));
    let mut out = Vec::new();
    s.on_bytes(0, &part("a", 1, 3, "cmd=kvs-"), &mut out);
    assert!(out.is_empty(), "a first part is not answered");
    assert!(err(&mut s, part("a", 3, 3, "x")).contains("part 3 where part 2"));
    // Nested, and a whole that is no message.
    let inner = String::from_utf8(part("b", 1, 1, "cmd=kvs-fence;")).unwrap();
    assert!(err(&mut s, part("n", 1, 1, &inner[6..])).contains("may not hold another"));
    let mut out = Vec::new();
    s.on_bytes(0, &part("g", 1, 1, "garbage"), &mut out);
    assert_eq!(pmi2_body(&sent(&out, 0)[0]).get_str("rc"), Some("-1"));
    // Past the bound.
    let chunk = "z".repeat(PART_DATA_MAX);
    let n = (fastpmi_codec::continued::BODY_MAX / PART_DATA_MAX + 2) as u64;
    let mut why = None;
    for k in 1..=n {
        let mut out = Vec::new();
        s.on_bytes(0, &part("big", k, n, &chunk), &mut out);
        if let Some(b) = sent(&out, 0).first() {
            why = Some(pmi2_body(b).get_str("errmsg").unwrap().to_string());
            break;
        }
    }
    assert!(why.unwrap().contains("more than 67108864 bytes"));
    assert!(!s.has_continuations(), "nothing held after the refusal");
    // One that never ends: dropped with an error once idle too long.
    let mut out = Vec::new();
    s.on_bytes(0, &part("slow", 1, 2, "cmd=kvs-"), &mut out);
    assert!(s.has_continuations());
    s.expire_continuations(Instant::now() + IDLE_MAX - Duration::from_secs(1), &mut out);
    assert!(out.is_empty());
    s.expire_continuations(Instant::now() + IDLE_MAX + Duration::from_secs(1), &mut out);
    let m = pmi2_body(&sent(&out, 0)[0]);
    assert!(m
        .get_str("errmsg")
        .unwrap()
        .contains("continuation slow: 1 of 2 parts"));
    assert!(!s.has_continuations());
    // The job goes on: both ranks fence and a plain put works.
    assert!(!out.iter().any(|e| matches!(e, Event::JobFailed { .. })));
    let out = send2(&mut s, 0, "cmd=kvs-put;key=k;value=v;");
    assert_eq!(pmi2_body(&sent(&out, 0)[0]).get_str("rc"), Some("0"));
    // Parts of a command interleave with other commands of the connection.
    let mut out = Vec::new();
    s.on_bytes(0, &part("i", 1, 2, "cmd=kvs-put;key=j;"), &mut out);
    let out2 = send2(&mut s, 0, "cmd=kvs-get;jobid=;srcid=0;key=k;");
    assert_eq!(pmi2_body(&sent(&out2, 0)[0]).get_str("value"), Some("v"));
    s.on_bytes(0, &part("i", 2, 2, "value=w;"), &mut out);
    assert_eq!(pmi2_body(&sent(&out, 0)[0]).get_str("rc"), Some("0"));
    // Closing a connection drops what it held.
    s.on_bytes(1, &part("x", 1, 2, "cmd="), &mut Vec::new());
    assert!(s.has_continuations());
    s.on_closed(1, &mut Vec::new());
    assert!(!s.has_continuations());
}
