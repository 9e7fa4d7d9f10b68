//! Port mode: who may claim a rank (local peers the launcher confirms, or
//! the job secret's challenge-response).

use super::*;

fn port_server(n: u32) -> (Server, JobIdx) {
    let mut s = Server::new();
    let job = s.add_job(JobSpec {
        id: "j".into(),
        apps: vec![n],
        universe_size: n,
        spawner: None,
        store: Box::new(MemStore::new(n, VALLEN)),
    });
    s.set_job_secret(job, "s3cret".into());
    (s, job)
}

fn refused(out: &[Event], conn: ConnId) -> Option<String> {
    let closed = out
        .iter()
        .any(|e| matches!(e, Event::Close { conn: c } if *c == conn));
    out.iter().find_map(|e| match e {
        Event::Refuse { conn: c, reason } if *c == conn && closed => Some(reason.clone()),
        _ => None,
    })
}

#[test]
fn port_mode_unauthenticated_claims_need_a_local_peer_the_launcher_confirms() {
    let (mut s, job) = port_server(2);
    for c in [10, 11, 12] {
        s.connect(c, None, Some(job));
    }
    s.set_peer(10, auth::Trust::Local, "127.0.0.1:5000".into());
    s.set_peer(11, auth::Trust::Local, "127.0.0.1:5001".into());
    s.set_peer(12, auth::Trust::Remote, "10.9.9.9:5002".into());
    // A remote peer may not claim a rank without authenticating.
    let out = send1(&mut s, 12, "cmd=initack pmiid=0");
    let why = refused(&out, 12).expect("refused");
    assert!(
        why.starts_with("10.9.9.9:5002: claims rank 0 without authenticating"),
        "{why}"
    );
    // A local one: the launcher checks the socket is that rank's.
    let out = send1(&mut s, 10, "cmd=initack pmiid=1");
    assert!(sent(&out, 10).is_empty(), "held until checked");
    assert!(matches!(out[..], [Event::CheckPeer { conn: 10, job: j, rank: 1 }] if j == job));
    let mut out = Vec::new();
    s.peer_checked(10, true, &mut out);
    assert_eq!(
        sent(&out, 10)[0],
        b"cmd=initack rc=0\ncmd=set size=2\ncmd=set rank=1\ncmd=set debug=0\n"
    );
    // Rank 1 is taken; rank 0 claimed by a process that is not rank 0.
    let out = send1(&mut s, 11, "cmd=initack pmiid=1");
    assert!(refused(&out, 11)
        .unwrap()
        .contains("rank 1 is already connected"));
    s.connect(13, None, Some(job));
    s.set_peer(13, auth::Trust::Local, "127.0.0.1:5003".into());
    send1(&mut s, 13, "cmd=init pmi_version=2 pmi_subversion=0");
    send2(&mut s, 13, "cmd=fullinit;srcid=0;threaded=FALSE;");
    let mut out = Vec::new();
    s.peer_checked(13, false, &mut out);
    assert!(refused(&out, 13)
        .unwrap()
        .contains("not that rank's process"));
    // Rank 0 is still free for the real one.
    s.connect(14, None, Some(job));
    s.set_peer(14, auth::Trust::Local, "127.0.0.1:5004".into());
    send1(&mut s, 14, "cmd=init pmi_version=2 pmi_subversion=0");
    send2(&mut s, 14, "cmd=fullinit;srcid=0;threaded=FALSE;");
    let mut out = Vec::new();
    s.peer_checked(14, true, &mut out);
    let m = pmi2_body(&sent(&out, 14)[0]);
    assert_eq!((m.get_str("rc"), m.get_str("rank")), (Some("0"), Some("0")));
}

#[test]
fn port_mode_challenge_response_with_the_job_secret() {
    let (mut s, job) = port_server(2);
    for c in [20, 21] {
        s.connect(c, None, Some(job));
        s.set_peer(c, auth::Trust::Remote, format!("10.1.1.1:{c}"));
        send1(&mut s, c, "cmd=init pmi_version=2 pmi_subversion=0");
    }
    let challenge = |s: &mut Server, c: ConnId, rank: u32| {
        let out = send2(
            s,
            c,
            &format!(
                "cmd=fullinit;thrid=t{c};pmirank={rank};threaded=TRUE;authtype=challenge-sha256;"
            ),
        );
        let m = pmi2_body(&sent(&out, c)[0]);
        assert_eq!(m.cmd, "auth-response");
        m.get_str("authinfo").unwrap().to_string()
    };
    // Wrong secret: refused, the rank stays free.
    let n = challenge(&mut s, 21, 1);
    let bad = fastpmi_codec::auth::answer("guess", &n);
    let out = send2(
        &mut s,
        21,
        &format!("cmd=auth-response-complete;authinfo={bad};"),
    );
    assert!(refused(&out, 21)
        .unwrap()
        .contains("wrong answer to the challenge for rank 1"));
    // Right secret: the fullinit is answered (with its thrid).
    let n = challenge(&mut s, 20, 1);
    let good = fastpmi_codec::auth::answer("s3cret", &n);
    let out = send2(
        &mut s,
        20,
        &format!("cmd=auth-response-complete;authinfo={good};"),
    );
    let m = pmi2_body(&sent(&out, 20)[0]);
    assert_eq!(m.cmd, "fullinit-response");
    assert_eq!(m.thrid.as_deref(), Some(&b"t20"[..]));
    assert_eq!((m.get_str("rc"), m.get_str("rank")), (Some("0"), Some("1")));
    // An answer without a challenge, and unidentified requests, get nothing
    // but an error, and the connection is closed and logged.
    s.connect(22, None, Some(job));
    send1(&mut s, 22, "cmd=init pmi_version=2 pmi_subversion=0");
    let out = send2(&mut s, 22, "cmd=kvs-get;jobid=;key=k;");
    let r = pmi2_body(&sent(&out, 22)[0]);
    assert!(r.get_str("errmsg").unwrap().contains("identified"));
    assert!(r.get("value").is_none());
    assert!(refused(&out, 22)
        .unwrap()
        .contains("get before the rank identified"));
    s.connect(23, None, Some(job));
    send1(&mut s, 23, "cmd=init pmi_version=2 pmi_subversion=0");
    let out = send2(&mut s, 23, "cmd=auth-response-complete;authinfo=00;");
    assert!(refused(&out, 23).unwrap().contains("without a challenge"));
}
