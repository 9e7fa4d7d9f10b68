//! Decoding and encoding of requests and responses in both protocols.

use super::*;

fn dec1(line: &str) -> Request {
    request_from(Protocol::Pmi1, &pmi1::decode(line.as_bytes()).unwrap()).unwrap()
}
fn dec2(body: &str) -> Request {
    request_from(Protocol::Pmi2, &pmi2::decode(body.as_bytes()).unwrap()).unwrap()
}

#[test]
fn fullinit_rank_forms() {
    assert_eq!(
        dec2("cmd=fullinit;pmirank=3;threaded=FALSE;"),
        Request::FullInit {
            rank: Some(3),
            jobid: None,
            threaded: false,
            auth: None,
            continued: false,
        }
    );
    assert_eq!(
        dec2("cmd=fullinit;srcid=5;threaded=true;"),
        Request::FullInit {
            rank: Some(5),
            jobid: None,
            threaded: true,
            auth: None,
            continued: false,
        }
    );
    assert_eq!(
        dec2("cmd=fullinit;pmijobid=46.0;pmirank=0;threaded=FALSE;authtype=challenge-sha256;"),
        Request::FullInit {
            rank: Some(0),
            jobid: Some("46.0".into()),
            threaded: false,
            auth: Some("challenge-sha256".into()),
            continued: false,
        }
    );
    assert_eq!(
        dec2("cmd=auth-response-complete;authinfo=ab12;"),
        Request::AuthComplete {
            authinfo: b"ab12".to_vec()
        }
    );
}

#[test]
fn gets() {
    assert_eq!(
        dec2("cmd=kvs-get;jobid=;srcid=-1;key=k;"),
        Request::Get {
            jobid: None,
            src: Some(-1),
            key: b"k".to_vec()
        }
    );
    assert_eq!(
        dec2("cmd=kvs-get;key=k;"),
        Request::Get {
            jobid: None,
            src: None,
            key: b"k".to_vec()
        }
    );
    assert_eq!(
        dec1("cmd=get kvsname=x key=PMI_process_mapping"),
        Request::Get {
            jobid: Some("x".into()),
            src: None,
            key: b"PMI_process_mapping".to_vec()
        }
    );
}

#[test]
fn key_limits() {
    let long = "k".repeat(65);
    let m = pmi1::decode(format!("cmd=put kvsname=a key={long} value=v").as_bytes()).unwrap();
    assert_eq!(
        request_from(Protocol::Pmi1, &m),
        Err(WireError::KeyTooLong { len: 65, max: 64 })
    );
    let m = pmi2::decode(b"cmd=kvs-put;key=;value=v;").unwrap();
    assert_eq!(request_from(Protocol::Pmi2, &m), Err(WireError::EmptyKey));
}

#[test]
fn abort_forms() {
    assert_eq!(
        dec2("cmd=abort;isworld=TRUE;msg=boom;"),
        Request::Abort {
            exitcode: None,
            message: "boom".into(),
            isworld: true
        }
    );
    assert_eq!(
        dec2("cmd=abort;exitcode=-1;message=m;"),
        Request::Abort {
            exitcode: Some(-1),
            message: "m".into(),
            isworld: true
        }
    );
    assert_eq!(
        dec1("cmd=abort exitcode=7 message=a b"),
        Request::Abort {
            exitcode: Some(7),
            message: "a b".into(),
            isworld: true
        }
    );
}

#[test]
fn unknown_is_error() {
    let m = pmi2::decode(b"cmd=frobnicate;").unwrap();
    assert_eq!(
        request_from(Protocol::Pmi2, &m),
        Err(WireError::UnknownCommand("frobnicate".into()))
    );
}

#[test]
fn pmi2_spawn_roundtrip() {
    let req = SpawnRequest {
        cmds: vec![
            SpawnCmd {
                exe: "./a".into(),
                maxprocs: 2,
                args: vec!["x".into(), "y".into()],
                info: vec![("wdir".into(), "/tmp".into())],
            },
            SpawnCmd {
                exe: "./b".into(),
                maxprocs: 1,
                args: vec![],
                info: vec![],
            },
        ],
        preput: vec![("pk".into(), "pv".into())],
    };
    let wire = encode_request(Protocol::Pmi2, &Request::Spawn(req.clone()));
    assert_eq!(
        dec2(std::str::from_utf8(&wire[6..]).unwrap()),
        Request::Spawn(req)
    );
}

#[test]
fn pmi1_spawn_block() {
    let block = b"mcmd=spawn\nnprocs=2\nexecname=./a\ntotspawns=1\nspawnssofar=1\nargcnt=2\narg1=x\narg2=y\npreput_num=1\npreput_key_0=k\npreput_val_0=v\ninfo_num=1\ninfo_key_0=wdir\ninfo_val_0=/tmp\nendcmd\n";
    let d = decode_frame(&Frame::Pmi1Spawn(block.to_vec())).unwrap();
    let Ok(Request::Spawn(s)) = d.request else {
        panic!("{d:?}")
    };
    assert_eq!(s.cmds[0].args, vec!["x", "y"]);
    assert_eq!(s.cmds[0].maxprocs, 2);
    assert_eq!(s.preput, vec![("k".into(), "v".into())]);
    assert_eq!(s.cmds[0].info, vec![("wdir".into(), "/tmp".into())]);
}

#[test]
fn replies_pmi1() {
    let r = encode_response(
        Protocol::Pmi1,
        "get",
        None,
        &Response::Value {
            key: b"k".to_vec(),
            value: None,
        },
    );
    assert_eq!(r, b"cmd=get_result rc=1 msg=key_k_not_found\n");
    let r = encode_response(
        Protocol::Pmi1,
        "init",
        None,
        &Response::Init {
            version: 1,
            subversion: 1,
        },
    );
    assert_eq!(
        r,
        b"cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n"
    );
    let r = encode_response(
        Protocol::Pmi1,
        "initack",
        None,
        &Response::InitAck { size: 4, rank: 2 },
    );
    assert_eq!(
        r,
        b"cmd=initack rc=0\ncmd=set size=4\ncmd=set rank=2\ncmd=set debug=0\n"
    );
    let big = vec![b'A'; 1000];
    let r = encode_response(
        Protocol::Pmi1,
        "get",
        None,
        &Response::Value {
            key: b"k".to_vec(),
            value: Some(big),
        },
    );
    assert!(
        r.len() < 1024 && r.starts_with(b"cmd=get_result rc=1 "),
        "{}",
        String::from_utf8_lossy(&r)
    );
}

#[test]
fn replies_pmi2() {
    let r = encode_response(
        Protocol::Pmi2,
        "kvs-get",
        None,
        &Response::Value {
            key: b"k".to_vec(),
            value: None,
        },
    );
    assert_eq!(&r[6..], b"cmd=kvs-get-response;rc=0;found=FALSE;");
    let r = encode_response(
        Protocol::Pmi2,
        "kvs-put",
        None,
        &Response::error_rc(1, "a;b"),
    );
    assert_eq!(&r[6..], b"cmd=kvs-put-response;rc=1;errmsg=a,b;");
}

#[test]
fn getall_and_putall_requests() {
    assert_eq!(dec2("cmd=kvs-getall;"), Request::GetAll { jobid: None });
    assert_eq!(
        dec2("cmd=kvs-getall;jobid=;"),
        Request::GetAll { jobid: None }
    );
    assert_eq!(
        dec2("cmd=kvs-getall;jobid=J1;"),
        Request::GetAll {
            jobid: Some("J1".into())
        }
    );
    assert_eq!(
        dec2("cmd=kvs-putall;paircount=3;"),
        Request::PutAll { paircount: 3 }
    );
    assert_eq!(
        dec2("cmd=kvs-putall-pair;key=k;value=v;;w;"),
        Request::PutAllPair {
            key: b"k".to_vec(),
            value: b"v;w".to_vec()
        }
    );
    let bad = |body: &str| {
        request_from(Protocol::Pmi2, &pmi2::decode(body.as_bytes()).unwrap()).unwrap_err()
    };
    for body in [
        "cmd=kvs-putall;",
        "cmd=kvs-putall;paircount=-1;",
        "cmd=kvs-putall;paircount=x;",
        "cmd=kvs-putall-pair;value=v;",
        "cmd=kvs-putall-pair;key=;value=v;",
    ] {
        bad(body);
    }
    // Not in PMI-1.
    assert!(request_from(Protocol::Pmi1, &pmi1::decode(b"cmd=kvs-getall\n").unwrap()).is_err());
    // Each request round-trips through its encoding.
    for r in [
        Request::GetAll { jobid: None },
        Request::GetAll {
            jobid: Some("J".into()),
        },
        Request::PutAll { paircount: 7 },
        Request::PutAllPair {
            key: b"a".to_vec(),
            value: b"x;y".to_vec(),
        },
    ] {
        let bytes = encode_request(Protocol::Pmi2, &r);
        let body = std::str::from_utf8(&bytes[6..]).unwrap();
        assert_eq!(dec2(body), r, "{body}");
    }
}

#[test]
fn getall_and_putall_replies() {
    let enc = |cmd: &str, r: &Response| {
        String::from_utf8(encode_response(Protocol::Pmi2, cmd, None, r)[6..].to_vec()).unwrap()
    };
    assert_eq!(
        enc("kvs-getall", &Response::GetAllCount(2)),
        "cmd=kvs-getall-paircount-response;rc=0;paircount=2;"
    );
    assert_eq!(
        enc(
            "kvs-getall",
            &Response::GetAllPair {
                key: b"k".to_vec(),
                value: b"a;b".to_vec()
            }
        ),
        "cmd=kvs-getall-pair-response;rc=0;key=k;value=a;;b;"
    );
    assert_eq!(
        enc("kvs-getall", &Response::GetAllDone),
        "cmd=kvs-getall-response;rc=0;"
    );
    assert_eq!(
        enc("kvs-getall", &Response::error("no job J")),
        "cmd=kvs-getall-response;rc=-1;errmsg=no job J;"
    );
    // The end of a putall answers its last pair, under the putall's name.
    assert_eq!(
        enc("kvs-putall-pair", &Response::PutAllDone(Ok(()))),
        "cmd=kvs-putall-response;rc=0;"
    );
    assert_eq!(
        enc(
            "kvs-putall-pair",
            &Response::PutAllDone(Err((1, "pair 2; too long".into())))
        ),
        "cmd=kvs-putall-response;rc=1;errmsg=pair 2, too long;"
    );
}

#[test]
fn init_oob_requests() {
    assert_eq!(
        dec1("cmd=init_oob pmi_version=2 signal=usr2 pmiid=3 authtype=challenge-sha256"),
        Request::InitOob {
            version: 2,
            signal: Some("SIGUSR2"),
            pmiid: Some(3),
            auth: Some("challenge-sha256".into()),
        }
    );
    let none = Request::InitOob {
        version: 1,
        signal: None,
        pmiid: None,
        auth: None,
    };
    assert_eq!(dec1("cmd=init_oob pmi_version=1 signal=NONE"), none);
    // What the client sends decodes to what it meant.
    let line = encode_request(Protocol::Pmi1, &none);
    assert_eq!(line, b"cmd=init_oob pmi_version=1 signal=NONE\n");
    assert_eq!(dec1(std::str::from_utf8(&line).unwrap().trim_end()), none);
    for bad in [
        "cmd=init_oob pmi_version=2",
        "cmd=init_oob pmi_version=2 signal=SIGKILL",
        "cmd=init_oob signal=NONE",
        "cmd=init_oob pmi_version=2 signal=NONE pmiid=x",
    ] {
        let d = decode_frame(&Frame::Pmi1(bad.as_bytes().to_vec())).unwrap();
        assert!(d.request.is_err(), "{bad}");
    }
    // The channel's replies: its own names in PMI-1.
    assert_eq!(
        encode_response(Protocol::Pmi1, "init_oob", None, &Response::Ok),
        b"cmd=response_to_init_oob rc=0\n"
    );
    assert_eq!(
        encode_response(
            Protocol::Pmi1,
            "init_oob",
            None,
            &Response::AuthChallenge { nonce: "ab".into() }
        ),
        b"cmd=auth-response rc=0 authinfo=ab\n"
    );
    assert_eq!(
        dec1("cmd=auth-response-complete authinfo=cd"),
        Request::AuthComplete {
            authinfo: b"cd".to_vec()
        }
    );
}

#[test]
fn put_of_tab_only_key_and_value_round_trips_whole() {
    let put = Request::Put {
        key: b"\t".to_vec(),
        value: b"\t".to_vec(),
    };
    let line = encode_request(Protocol::Pmi1, &put);
    assert_eq!(line, b"cmd=put key=\t value=\t\n");
    let d = decode_frame(&Frame::Pmi1(line[..line.len() - 1].to_vec())).unwrap();
    assert_eq!(d.request, Ok(put));
    // A found tab-only value reaches the client whole.
    let found = Response::Value {
        key: b"\t".to_vec(),
        value: Some(b"\t".to_vec()),
    };
    let reply = encode_response(Protocol::Pmi1, "get", None, &found);
    assert_eq!(reply, b"cmd=get_result rc=0 value=\t\n");
    let m = pmi1::decode(&reply[..reply.len() - 1]).unwrap();
    assert_eq!(m.get("value"), Some(&b"\t"[..]));
    // A space-only one cannot be sent: refused with rc=1, never as `value= `.
    let spaces = Response::Value {
        key: b"k".to_vec(),
        value: Some(b" ".to_vec()),
    };
    let reply = encode_response(Protocol::Pmi1, "get", None, &spaces);
    let m = pmi1::decode(&reply[..reply.len() - 1]).unwrap();
    assert_eq!((m.get_str("rc"), m.get("value")), (Some("1"), None));
}

/// The `command` fuzz target's crash of 2026-12-02 (a group id cut inside
/// a character while its error was made) decodes to an error.
#[test]
fn the_group_id_fuzz_crash_is_an_error() {
    let crash =
        include_bytes!("../../../fuzz/corpus/command/regression-group-id-cut-in-a-character");
    let decoded = crate::pmi2::decode(crash);
    assert!(decoded.is_err() || request_from(Protocol::Pmi2, &decoded.unwrap()).is_err());
}
