//! The out-of-band channel on the wire: opening it (FD and port mode),
//! misuse, and the abort and checkpoint notices with their signals.

use super::*;

/// FD mode: rank r's channel is connection 100 + r.
fn with_channels(s: &mut Server, job: JobIdx, n: u32) {
    for r in 0..n {
        s.connect_oob(100 + r as ConnId, job, r);
    }
}

fn line(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

fn signals(out: &[Event]) -> Vec<(ConnId, u32, &'static str)> {
    out.iter()
        .filter_map(|e| match e {
            Event::Signal {
                conn, rank, signal, ..
            } => Some((*conn, *rank, *signal)),
            _ => None,
        })
        .collect()
}

#[test]
fn init_oob_before_init_is_an_error_and_the_channel_opens_after() {
    let (mut s, job) = server(2);
    with_channels(&mut s, job, 2);
    let out = send1(&mut s, 100, "cmd=init_oob pmi_version=2 signal=SIGUSR2");
    let r = line(&sent(&out, 100)[0]);
    assert!(
        r.starts_with("cmd=response_to_init_oob rc=-1 msg=init_oob_before_init"),
        "{r}"
    );
    assert!(
        !out.iter().any(|e| matches!(e, Event::Close { .. })),
        "the channel stays"
    );
    init_all(&mut s, 2);
    let out = send1(&mut s, 100, "cmd=init_oob pmi_version=2 signal=SIGUSR2");
    assert_eq!(line(&sent(&out, 100)[0]), "cmd=response_to_init_oob rc=0\n");
    let out = send1(&mut s, 101, "cmd=init_oob pmi_version=2 signal=NONE");
    assert_eq!(line(&sent(&out, 101)[0]), "cmd=response_to_init_oob rc=0\n");
}

#[test]
fn misuse_of_the_channel_gets_clear_errors_and_the_job_goes_on() {
    let (mut s, job) = server(2);
    with_channels(&mut s, job, 2);
    init_all(&mut s, 2);
    let err = |out: &[Event], conn| line(&sent(out, conn)[0]);
    // Signals that cannot be caught or mean a fault are refused.
    for bad in ["SIGKILL", "SIGSTOP", "SIGSEGV", "9", ""] {
        let out = send1(
            &mut s,
            100,
            &format!("cmd=init_oob pmi_version=2 signal={bad}"),
        );
        assert!(err(&out, 100).contains("rc=-1"), "{bad}");
    }
    let out = send1(&mut s, 100, "cmd=init_oob pmi_version=3 signal=NONE");
    assert!(err(&out, 100).contains("PMI_version_3_not_supported"));
    let out = send1(
        &mut s,
        100,
        "cmd=init_oob pmi_version=2 signal=NONE pmiid=1",
    );
    assert!(err(&out, 100).contains("rc=-1"));
    // init_oob on the PMI connection itself.
    let out = send1(&mut s, 0, "cmd=init_oob pmi_version=2 signal=NONE");
    assert!(
        err(&out, 0).contains("connection_of_its_own"),
        "{}",
        err(&out, 0)
    );
    // Requests on the channel.
    let out = send1(&mut s, 101, "cmd=init pmi_version=2 pmi_subversion=0");
    assert!(err(&out, 101).contains("out-of-band_channel"));
    let out = send2(&mut s, 101, "cmd=kvs-get;jobid=;key=k;");
    let m = pmi2_body(&sent(&out, 101)[0]);
    assert!(m.get_str("errmsg").unwrap().contains("out-of-band channel"));
    // Garbage on it: an error, nothing failed.
    let out = send1(&mut s, 101, "hello");
    assert!(!out.iter().any(|e| matches!(e, Event::JobFailed { .. })));
    // Closing a channel fails nothing; the rank may open it again.
    send1(&mut s, 100, "cmd=init_oob pmi_version=2 signal=NONE");
    let mut out = Vec::new();
    s.on_closed(100, &mut out);
    assert!(out.is_empty(), "{out:?}");
    s.connect_oob(200, job, 0);
    let out = send1(&mut s, 200, "cmd=init_oob pmi_version=2 signal=NONE");
    assert_eq!(err(&out, 200), "cmd=response_to_init_oob rc=0\n");
    // But holds one at a time.
    s.connect_oob(201, job, 0);
    let out = send1(&mut s, 201, "cmd=init_oob pmi_version=2 signal=NONE");
    assert!(err(&out, 201).contains("already_has_an_out-of-band_channel"));
    // The job still serves its ranks.
    let out = send2(&mut s, 1, "cmd=kvs-put;key=k;value=v;");
    assert_eq!(pmi2_body(&sent(&out, 1)[0]).get_str("rc"), Some("0"));
}

#[test]
fn a_failing_job_sends_abort_then_the_signal_to_ranks_with_a_channel() {
    let (mut s, job) = server(3);
    with_channels(&mut s, job, 3);
    init_all(&mut s, 3);
    send1(&mut s, 100, "cmd=init_oob pmi_version=2 signal=SIGUSR2");
    send1(&mut s, 101, "cmd=init_oob pmi_version=1 signal=NONE");
    // Rank 2 opened none.
    let out = send2(&mut s, 2, "cmd=abort;exitcode=7;message=disk full;");
    let a0 = line(&sent(&out, 100)[0]);
    assert_eq!(
        a0,
        "cmd=abort jobid=fastpmi_test_0 rank=2 exitcode=7 message=rank 2 called abort with code 7: disk full\n"
    );
    assert_eq!(line(&sent(&out, 101)[0]), a0);
    assert!(sent(&out, 102).is_empty());
    assert_eq!(signals(&out), vec![(100, 0, "SIGUSR2")]);
    // The notice is queued before its signal.
    let at = |f: &dyn Fn(&Event) -> bool| out.iter().position(f).unwrap();
    assert!(
        at(&|e| matches!(e, Event::Send { conn: 100, .. }))
            < at(&|e| matches!(e, Event::Signal { .. }))
    );
    let m = pmi1::decode(a0.trim_end().as_bytes()).unwrap();
    assert!(matches!(
        fastpmi_codec::oob::Notice::decode(&m).unwrap(),
        fastpmi_codec::oob::Notice::Abort {
            rank: Some(2),
            exitcode: 7,
            ..
        }
    ));
    // Failing it again sends nothing more.
    let mut out = Vec::new();
    s.fail_job(job, None, 1, "again", &mut out);
    assert!(sent(&out, 100).is_empty());
}

#[test]
fn the_launcher_failing_a_job_names_no_rank() {
    let (mut s, job) = server(1);
    with_channels(&mut s, job, 1);
    init_all(&mut s, 1);
    send1(&mut s, 100, "cmd=init_oob pmi_version=2 signal=TERM");
    let mut out = Vec::new();
    s.fail_job(job, None, 130, "launcher received SIGINT", &mut out);
    assert_eq!(
        line(&sent(&out, 100)[0]),
        "cmd=abort jobid=fastpmi_test_0 rank=-1 exitcode=130 message=launcher received SIGINT\n"
    );
    assert_eq!(signals(&out), vec![(100, 0, "SIGTERM")]);
}

#[test]
fn checkpoint_requests_are_numbered_and_reach_open_channels_only() {
    let (mut s, job) = server(3);
    with_channels(&mut s, job, 3);
    init_all(&mut s, 3);
    send1(&mut s, 100, "cmd=init_oob pmi_version=2 signal=USR1");
    send1(&mut s, 102, "cmd=init_oob pmi_version=2 signal=NONE");
    let mut out = Vec::new();
    let r = s.checkpoint("fastpmi_test_0", &mut out).unwrap();
    assert_eq!((r.seq, r.ranks, r.size), (1, 2, 3));
    assert_eq!(
        line(&sent(&out, 100)[0]),
        "cmd=checkpoint jobid=fastpmi_test_0 seq=1\n"
    );
    assert_eq!(
        line(&sent(&out, 102)[0]),
        "cmd=checkpoint jobid=fastpmi_test_0 seq=1\n"
    );
    assert_eq!(signals(&out), vec![(100, 0, "SIGUSR1")]);
    let mut out = Vec::new();
    assert_eq!(s.checkpoint("fastpmi_test_0", &mut out).unwrap().seq, 2);
    let mut out = Vec::new();
    assert!(matches!(
        s.checkpoint("nope", &mut out),
        Err(crate::oob::CheckpointError::NoJob(_))
    ));
    s.fail_job(job, Some(1), 1, "x", &mut out);
    assert!(matches!(
        s.checkpoint("fastpmi_test_0", &mut out),
        Err(crate::oob::CheckpointError::Failed(_))
    ));
}

#[test]
fn port_mode_channels_authenticate_like_fullinit() {
    let mut s = Server::new();
    let job = s.add_job(JobSpec {
        id: "j".into(),
        apps: vec![2],
        universe_size: 2,
        spawner: None,
        store: Box::new(MemStore::new(2, VALLEN)),
    });
    s.set_job_secret(job, "s3cret".into());
    // Rank 0 connects and authenticates its PMI connection (conn 1).
    s.connect(1, None, Some(job));
    s.set_peer(1, auth::Trust::Remote, "10.1.1.1:1".into());
    send1(&mut s, 1, "cmd=init pmi_version=2 pmi_subversion=0");
    let out = send2(
        &mut s,
        1,
        "cmd=fullinit;pmirank=0;authtype=challenge-sha256;",
    );
    let nonce = pmi2_body(&sent(&out, 1)[0])
        .get_str("authinfo")
        .unwrap()
        .to_string();
    let good = fastpmi_codec::auth::answer("s3cret", &nonce);
    send2(
        &mut s,
        1,
        &format!("cmd=auth-response-complete;authinfo={good};"),
    );
    let open = |s: &mut Server, c: ConnId, rank: u32, secret: &str| -> Vec<Event> {
        s.connect(c, None, Some(job));
        s.set_peer(c, auth::Trust::Remote, format!("10.1.1.1:{c}"));
        let out = send1(
            s,
            c,
            &format!(
                "cmd=init_oob pmi_version=2 signal=NONE pmiid={rank} authtype=challenge-sha256"
            ),
        );
        let ch = line(&sent(&out, c)[0]);
        assert!(ch.starts_with("cmd=auth-response rc=0 authinfo="), "{ch}");
        let nonce = ch.trim_end().rsplit('=').next().unwrap().to_string();
        let answer = fastpmi_codec::auth::answer(secret, &nonce);
        send1(
            s,
            c,
            &format!("cmd=auth-response-complete authinfo={answer}"),
        )
    };
    // A wrong secret is refused and closed.
    let out = open(&mut s, 2, 0, "guess");
    assert!(out.iter().any(
        |e| matches!(e, Event::Refuse { conn: 2, reason } if reason.contains("wrong answer"))
    ));
    // Rank 1 has not initialized: refused.
    let out = open(&mut s, 3, 1, "s3cret");
    assert!(out
        .iter()
        .any(|e| matches!(e, Event::Refuse { conn: 3, reason } if reason.contains("before init"))));
    // Rank 0: open, and its notices arrive.
    let out = open(&mut s, 4, 0, "s3cret");
    assert_eq!(line(&sent(&out, 4)[0]), "cmd=response_to_init_oob rc=0\n");
    let mut out = Vec::new();
    assert_eq!(s.checkpoint("j", &mut out).unwrap().ranks, 1);
    assert_eq!(line(&sent(&out, 4)[0]), "cmd=checkpoint jobid=j seq=1\n");
    // Unauthenticated and remote: refused; without pmiid: refused.
    s.connect(5, None, Some(job));
    s.set_peer(5, auth::Trust::Remote, "10.1.1.1:5".into());
    let out = send1(&mut s, 5, "cmd=init_oob pmi_version=2 signal=NONE pmiid=0");
    assert!(out.iter().any(|e| matches!(e, Event::Refuse { conn: 5, reason } if reason.contains("without authenticating"))));
    s.connect(6, None, Some(job));
    let out = send1(&mut s, 6, "cmd=init_oob pmi_version=2 signal=NONE");
    assert!(out.iter().any(
        |e| matches!(e, Event::Refuse { conn: 6, reason } if reason.contains("without pmiid"))
    ));
    // Local and vouched for by the launcher.
    s.connect(7, None, Some(job));
    s.set_peer(7, auth::Trust::Local, "127.0.0.1:7".into());
    s.on_closed(4, &mut Vec::new());
    let out = send1(&mut s, 7, "cmd=init_oob pmi_version=2 signal=USR2 pmiid=0");
    assert!(matches!(
        out[..],
        [Event::CheckPeer {
            conn: 7,
            rank: 0,
            ..
        }]
    ));
    let mut out = Vec::new();
    s.peer_checked(7, true, &mut out);
    assert_eq!(line(&sent(&out, 7)[0]), "cmd=response_to_init_oob rc=0\n");
    // The PMI connection of rank 0 is still its own: closing the channel
    // failed nothing, and it is served.
    let out = send2(&mut s, 1, "cmd=kvs-put;key=k;value=v;");
    assert_eq!(pmi2_body(&sent(&out, 1)[0]).get_str("rc"), Some("0"));
}
