use super::*;
use crate::store::MemStore;

/// Helpers shared with the group tests.
pub(super) mod support {
    pub(in crate::server) use super::{init_all, pmi2_body, send2, sent, server};
}
use crate::wire::{frame::Frame, pmi1, pmi2};

pub(super) fn server(n: u32) -> (Server, JobIdx) {
    let mut s = Server::new();
    let job = s.add_job(JobSpec {
        id: "fastpmi_test_0".into(),
        apps: vec![n],
        universe_size: n,
        spawner: None,
        store: Box::new(MemStore::new(n, VALLEN)),
    });
    for r in 0..n {
        s.connect(r as ConnId, Some((job, r)), None);
    }
    (s, job)
}
const VALLEN: usize = crate::wire::VALLEN_MAX;

pub(super) fn sent(out: &[Event], conn: ConnId) -> Vec<Vec<u8>> {
    out.iter()
        .filter_map(|e| match e {
            Event::Send { conn: c, bytes } if *c == conn => Some(bytes.clone()),
            _ => None,
        })
        .collect()
}

pub(super) fn pmi2_body(bytes: &[u8]) -> crate::wire::Message {
    assert_eq!(
        crate::wire::frame::parse_length(&bytes[..6]),
        Some(bytes.len() - 6)
    );
    pmi2::decode(&bytes[6..]).unwrap()
}

pub(super) fn send2(s: &mut Server, conn: ConnId, body: &str) -> Vec<Event> {
    let mut out = Vec::new();
    s.on_bytes(
        conn,
        format!("{:<6}{body}", body.len()).as_bytes(),
        &mut out,
    );
    out
}

fn send1(s: &mut Server, conn: ConnId, line: &str) -> Vec<Event> {
    let mut out = Vec::new();
    s.on_bytes(conn, format!("{line}\n").as_bytes(), &mut out);
    out
}

pub(super) fn init_all(s: &mut Server, n: u32) {
    for r in 0..n as ConnId {
        send1(s, r, "cmd=init pmi_version=2 pmi_subversion=0");
        send2(s, r, "cmd=fullinit;threaded=FALSE;");
    }
}

#[test]
fn fence_is_a_barrier_and_puts_are_visible_after_it() {
    let (mut s, _) = server(3);
    init_all(&mut s, 3);
    for r in 0..3 {
        let out = send2(&mut s, r, &format!("cmd=kvs-put;key=k{r};value=v{r};"));
        assert_eq!(pmi2_body(&sent(&out, r)[0]).get_str("rc"), Some("0"));
    }
    assert!(sent(&send2(&mut s, 0, "cmd=kvs-fence;"), 0).is_empty());
    assert!(sent(&send2(&mut s, 1, "cmd=kvs-fence;"), 1).is_empty());
    let out = send2(&mut s, 2, "cmd=kvs-fence;");
    for r in 0..3 {
        let replies = sent(&out, r);
        assert_eq!(replies.len(), 1, "rank {r} released once");
        assert_eq!(pmi2_body(&replies[0]).cmd, "kvs-fence-response");
    }
    let out = send2(&mut s, 0, "cmd=kvs-get;jobid=;srcid=2;key=k2;");
    let m = pmi2_body(&sent(&out, 0)[0]);
    assert_eq!(
        (m.get_str("found"), m.get_str("value")),
        (Some("TRUE"), Some("v2"))
    );
}

#[test]
fn pmi1_and_pmi2_ranks_share_one_barrier() {
    let (mut s, _) = server(2);
    send1(&mut s, 0, "cmd=init pmi_version=1 pmi_subversion=1");
    send1(&mut s, 1, "cmd=init pmi_version=2 pmi_subversion=0");
    send2(&mut s, 1, "cmd=fullinit;pmirank=1;");
    send1(&mut s, 0, "cmd=put kvsname=x key=a value=1");
    assert!(send1(&mut s, 0, "cmd=barrier_in").is_empty());
    let out = send2(&mut s, 1, "cmd=kvs-fence;");
    assert_eq!(sent(&out, 0), vec![b"cmd=barrier_out rc=0\n".to_vec()]);
    let m = pmi2_body(&sent(&send2(&mut s, 1, "cmd=kvs-get;key=a;"), 1)[0]);
    assert_eq!(m.get_str("value"), Some("1"));
}

#[test]
fn node_attr_wait_is_held_until_put() {
    let (mut s, _) = server(2);
    init_all(&mut s, 2);
    let out = send2(&mut s, 1, "cmd=info-getnodeattr;key=bc;wait=TRUE;");
    assert!(sent(&out, 1).is_empty());
    let m = pmi2_body(
        &sent(
            &send2(&mut s, 1, "cmd=info-getnodeattr;key=other;wait=FALSE;"),
            1,
        )[0],
    );
    assert_eq!(m.get_str("found"), Some("FALSE"));
    let out = send2(&mut s, 0, "cmd=info-putnodeattr;key=bc;value=xyz;");
    let m = pmi2_body(&sent(&out, 1)[0]);
    assert_eq!(
        (m.cmd.as_str(), m.get_str("value")),
        ("info-getnodeattr-response", Some("xyz"))
    );
}

#[test]
fn process_mapping_and_fullinit_keys() {
    let (mut s, _) = server(4);
    send1(&mut s, 2, "cmd=init pmi_version=2 pmi_subversion=0");
    let m = pmi2_body(
        &sent(
            &send2(&mut s, 2, "cmd=fullinit;pmirank=2;threaded=FALSE;"),
            2,
        )[0],
    );
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
        assert!(m.get(k).is_some(), "fullinit-response lacks {k}");
    }
    // fastpmi's clients take the job id from here instead of a job-getid;
    // this store has no segment, so no segment description either.
    assert_eq!(m.get_str("fastpmi-jobid"), Some("fastpmi_test_0"));
    assert!(m.get("fastpmi-memPoolType").is_none());
    let m = pmi2_body(
        &sent(
            &send2(&mut s, 2, "cmd=info-getjobattr;key=PMI_process_mapping;"),
            2,
        )[0],
    );
    assert_eq!(m.get_str("value"), Some("(vector,(0,1,4))"));
    let r = &sent(
        &send1(
            &mut s,
            2,
            "cmd=get kvsname=fastpmi_test_0 key=PMI_process_mapping",
        ),
        2,
    )[0];
    assert_eq!(r, b"cmd=get_result rc=0 value=(vector,(0,1,4))\n");
}

#[test]
fn unknown_and_malformed_commands_get_errors_and_conn_stays_usable() {
    let (mut s, _) = server(1);
    init_all(&mut s, 1);
    let r = pmi2_body(&sent(&send2(&mut s, 0, "cmd=frobnicate;thrid=7;"), 0)[0]);
    assert_eq!(r.cmd, "frobnicate-response");
    assert_eq!(r.thrid.as_deref(), Some(&b"7"[..]));
    assert_ne!(r.get_str("rc"), Some("0"));
    assert!(r.get("errmsg").is_some());
    let r = &sent(&send1(&mut s, 0, "cmd=bogus a=b"), 0)[0];
    assert!(
        r.starts_with(b"cmd=bogus_result rc=-1 msg="),
        "{}",
        String::from_utf8_lossy(r)
    );
    let r = &sent(&send1(&mut s, 0, "cmd=put notapair"), 0)[0];
    assert!(r.windows(5).any(|w| w == b"rc=-1"));
    let r = pmi2_body(
        &sent(
            &send2(&mut s, 0, "cmd=spawn;ncmds=1;subcmd=x;maxprocs=0;"),
            0,
        )[0],
    );
    assert_eq!(r.get_str("rc"), Some("-1"));
    assert!(r.get_str("errmsg").unwrap().contains("maxprocs=0"));
    // Still usable.
    let r = pmi2_body(&sent(&send2(&mut s, 0, "cmd=job-getid;"), 0)[0]);
    assert_eq!(r.get_str("jobid"), Some("fastpmi_test_0"));
}

#[test]
fn abort_fails_job_and_releases_waiters_with_errors() {
    let (mut s, job) = server(3);
    init_all(&mut s, 3);
    send2(&mut s, 0, "cmd=kvs-fence;");
    send2(&mut s, 1, "cmd=info-getnodeattr;key=never;wait=TRUE;");
    let out = send2(&mut s, 2, "cmd=abort;isworld=TRUE;msg=boom;");
    assert!(out.iter().any(|e| matches!(e, Event::JobFailed { job: j, rank: 2, cause: FailCause::Abort { code: 1 }, .. } if *j == job)));
    for r in 0..2 {
        let m = pmi2_body(&sent(&out, r)[0]);
        assert_eq!(m.get_str("rc"), Some("-1"));
        assert!(m.get_str("errmsg").unwrap().contains("rank 2"));
    }
    assert!(sent(&out, 2).is_empty(), "abort has no reply");
}

#[test]
fn lost_connection_fails_job_naming_rank() {
    let (mut s, _) = server(2);
    init_all(&mut s, 2);
    send2(&mut s, 0, "cmd=kvs-fence;");
    let mut out = Vec::new();
    s.on_closed(1, &mut out);
    let failed = out.iter().find_map(|e| match e {
        Event::JobFailed {
            rank,
            message,
            cause: FailCause::ConnectionLost,
            ..
        } => Some((*rank, message.clone())),
        _ => None,
    });
    let (rank, message) = failed.expect("job failed");
    assert_eq!(rank, 1);
    assert!(message.contains("rank 1"), "{message}");
    assert_eq!(pmi2_body(&sent(&out, 0)[0]).get_str("rc"), Some("-1"));
}

#[test]
fn non_pmi_rank_exit_is_fine_but_not_during_a_fence() {
    let (mut s, job) = server(2);
    let mut out = Vec::new();
    s.rank_exited(job, 1, true, &mut out);
    assert!(out.is_empty());
    let (mut s, job) = server(2);
    send1(&mut s, 0, "cmd=init pmi_version=1 pmi_subversion=1");
    send1(&mut s, 0, "cmd=barrier_in");
    let mut out = Vec::new();
    s.rank_exited(job, 1, true, &mut out);
    assert!(out
        .iter()
        .any(|e| matches!(e, Event::JobFailed { rank: 1, .. })));
    assert!(sent(&out, 0)[0].starts_with(b"cmd=barrier_out rc=-1"));
}

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
    let bad = crate::wire::auth::answer("guess", &n);
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
    let good = crate::wire::auth::answer("s3cret", &n);
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

#[test]
fn frames_split_anywhere() {
    let (mut s, _) = server(1);
    let input = b"cmd=init pmi_version=1 pmi_subversion=1\ncmd=get_maxes\ncmd=get_appnum\n";
    let mut out = Vec::new();
    for b in input {
        s.on_bytes(0, &[*b], &mut out);
    }
    let replies: Vec<_> = sent(&out, 0);
    assert_eq!(replies.len(), 3);
    assert_eq!(
        replies[1],
        b"cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=1024\n"
    );
    let _ = Frame::Pmi1(vec![]);
    let _ = pmi1::decode(b"cmd=x");
}

#[test]
fn a_fence_that_a_finalized_rank_cannot_join_fails_the_job() {
    let (mut s, _) = server(2);
    init_all(&mut s, 2);
    let out = send2(&mut s, 1, "cmd=finalize;");
    assert_eq!(pmi2_body(&sent(&out, 1)[0]).cmd, "finalize-response");
    let out = send2(&mut s, 0, "cmd=kvs-fence;");
    let m = pmi2_body(&sent(&out, 0)[0]);
    assert_eq!(m.get_str("rc"), Some("-1"));
    assert!(
        m.get_str("errmsg").unwrap().contains("rank 1 finalized"),
        "{m:?}"
    );
    assert!(out
        .iter()
        .any(|e| matches!(e, Event::JobFailed { rank: 1, .. })));
}

#[test]
fn spawn_is_handed_to_the_launcher_and_answered_by_thrid() {
    let (mut s, job) = server(2);
    init_all(&mut s, 2);
    let out = send2(
        &mut s,
        1,
        "cmd=spawn;thrid=9;ncmds=1;preputcount=1;ppkey0=k;ppval0=v;subcmd=./child;maxprocs=3;argc=1;argv0=x;infokeycount=0;",
    );
    assert!(sent(&out, 1).is_empty(), "held until the launcher answers");
    let (id, req) = match &out[..] {
        [Event::Spawn {
            id,
            job: j,
            rank: 1,
            req,
        }] if *j == job => (*id, req.clone()),
        other => panic!("{other:?}"),
    };
    assert_eq!(req.cmds[0].maxprocs, 3);
    assert_eq!(req.preput, vec![("k".to_string(), "v".to_string())]);
    // Other traffic flows meanwhile.
    let r = pmi2_body(&sent(&send2(&mut s, 0, "cmd=job-getid;"), 0)[0]);
    assert_eq!(r.get_str("rc"), Some("0"));
    // The launcher made the job: a spawned job is connected to its parent.
    let child = s.add_job(JobSpec {
        id: "fastpmi_test_1".into(),
        apps: vec![3],
        universe_size: 2,
        spawner: Some("fastpmi_test_0".into()),
        store: Box::new(MemStore::new(3, VALLEN)),
    });
    assert_eq!(s.connected_group(job), vec![job, child]);
    let mut out = Vec::new();
    s.finish_spawn(
        id,
        SpawnOutcome::Started {
            jobid: "fastpmi_test_1".into(),
            errcodes: vec![0, 0, 0],
        },
        &mut out,
    );
    let r = pmi2_body(&sent(&out, 1)[0]);
    assert_eq!(r.cmd, "spawn-response");
    assert_eq!(r.thrid.as_deref(), Some(&b"9"[..]));
    assert_eq!(
        (r.get_str("rc"), r.get_str("jobid"), r.get("errcodes")),
        (Some("0"), Some("fastpmi_test_1"), None)
    );
}

#[test]
fn cross_job_gets_need_a_connection() {
    let (mut s, _) = server(1);
    init_all(&mut s, 1);
    let other = s.add_job(JobSpec {
        id: "other".into(),
        apps: vec![1],
        universe_size: 1,
        spawner: None,
        store: Box::new(MemStore::new(1, VALLEN)),
    });
    s.connect(100, Some((other, 0)), None);
    send1(&mut s, 100, "cmd=init pmi_version=2 pmi_subversion=0");
    send2(&mut s, 100, "cmd=fullinit;threaded=FALSE;");
    send2(&mut s, 100, "cmd=kvs-put;key=card;value=x1;");
    let get = "cmd=kvs-get;jobid=other;srcid=0;key=card;";
    let r = pmi2_body(&sent(&send2(&mut s, 0, get), 0)[0]);
    assert_eq!(r.get_str("rc"), Some("-1"));
    assert!(r.get_str("errmsg").unwrap().contains("not connected"));
    let r = pmi2_body(&sent(&send2(&mut s, 0, "cmd=kvs-get;jobid=nosuch;key=card;"), 0)[0]);
    assert!(r.get_str("errmsg").unwrap().contains("no job nosuch"));
    let r = pmi2_body(&sent(&send2(&mut s, 0, "cmd=job-connect;jobid=other;"), 0)[0]);
    assert_eq!(r.get_str("rc"), Some("0"));
    let r = pmi2_body(&sent(&send2(&mut s, 0, get), 0)[0]);
    assert_eq!(
        (r.get_str("found"), r.get_str("value")),
        (Some("TRUE"), Some("x1"))
    );
    let r = pmi2_body(&sent(&send2(&mut s, 0, "cmd=job-disconnect;jobid=other;"), 0)[0]);
    assert_eq!(r.get_str("rc"), Some("0"));
    let r = pmi2_body(&sent(&send2(&mut s, 0, get), 0)[0]);
    assert_eq!(r.get_str("rc"), Some("-1"));
}

#[test]
fn names_are_shared_by_jobs_and_owned_by_their_publisher() {
    let (mut s, _) = server(1);
    init_all(&mut s, 1);
    let other = s.add_job(JobSpec {
        id: "other".into(),
        apps: vec![1],
        universe_size: 1,
        spawner: None,
        store: Box::new(MemStore::new(1, VALLEN)),
    });
    s.connect(100, Some((other, 0)), None);
    send1(&mut s, 100, "cmd=init pmi_version=2 pmi_subversion=0");
    send2(&mut s, 100, "cmd=fullinit;threaded=FALSE;");
    let r = pmi2_body(
        &sent(
            &send2(&mut s, 100, "cmd=name-publish;name=svc;port=p1;"),
            100,
        )[0],
    );
    assert_eq!(r.get_str("rc"), Some("0"));
    let r = pmi2_body(&sent(&send2(&mut s, 0, "cmd=name-lookup;name=svc;"), 0)[0]);
    assert_eq!(r.get_str("port"), Some("p1"));
    let r = pmi2_body(&sent(&send2(&mut s, 0, "cmd=name-publish;name=svc;port=p2;"), 0)[0]);
    assert!(r.get_str("errmsg").unwrap().contains("already published"));
    let r = pmi2_body(&sent(&send2(&mut s, 0, "cmd=name-unpublish;name=svc;"), 0)[0]);
    assert!(r.get_str("errmsg").unwrap().contains("another job"));
    let r = pmi2_body(&sent(&send2(&mut s, 0, "cmd=info-getjobattr;key=hasNameServ;"), 0)[0]);
    assert_eq!(r.get_str("value"), Some("TRUE"));
    // Unidentified connections get nothing.
    s.connect(200, None, None);
    let r = &sent(&send1(&mut s, 200, "cmd=lookup_name service=svc"), 200)[0];
    assert!(
        r.windows(5).any(|w| w == b"rc=-1"),
        "{}",
        String::from_utf8_lossy(r)
    );
}

#[test]
fn commands_before_init_are_refused() {
    let (mut s, _) = server(1);
    let r = &sent(&send1(&mut s, 0, "cmd=get_maxes"), 0)[0];
    assert!(
        r.starts_with(b"cmd=maxes rc=-1 msg=get_maxes_before_init"),
        "{}",
        String::from_utf8_lossy(r)
    );
    let r = pmi2_body(&sent(&send2(&mut s, 0, "cmd=kvs-put;key=k;value=v;"), 0)[0]);
    assert_eq!(r.get_str("rc"), Some("-1"));
    assert!(r.get_str("errmsg").unwrap().contains("before init"));
    init_all(&mut s, 1);
    let r = pmi2_body(&sent(&send2(&mut s, 0, "cmd=kvs-put;key=k;value=v;"), 0)[0]);
    assert_eq!(r.get_str("rc"), Some("0"));
}

#[test]
fn abort_codes_are_clamped_to_an_exit_status() {
    for (sent_code, status, text) in [
        ("7", 7, "code 7"),
        ("99999999999", 255, "code 99999999999 (exit status 255)"),
        ("-1", 255, "code -1 (exit status 255)"),
        ("256", 255, "code 256 (exit status 255)"),
    ] {
        let (mut s, _) = server(1);
        init_all(&mut s, 1);
        let out = send2(
            &mut s,
            0,
            &format!("cmd=abort;exitcode={sent_code};message=m;"),
        );
        let failed = out.iter().find_map(|e| match e {
            Event::JobFailed {
                cause: FailCause::Abort { code },
                message,
                ..
            } => Some((*code, message.clone())),
            _ => None,
        });
        let (code, message) = failed.expect("abort fails the job");
        assert_eq!(code, status, "{sent_code}");
        assert!(message.contains(text), "{message}");
    }
}

#[test]
fn a_connection_the_server_drops_is_reported_as_such() {
    let (mut s, _) = server(1);
    init_all(&mut s, 1);
    let out = {
        let mut out = Vec::new();
        s.on_bytes(0, b"xx;cmd=kvs-put;", &mut out);
        out
    };
    assert!(out.iter().any(|e| matches!(e, Event::Close { conn: 0 })));
    let msg = out
        .iter()
        .find_map(|e| match e {
            Event::JobFailed {
                cause: FailCause::ProtocolError,
                message,
                ..
            } => Some(message.clone()),
            _ => None,
        })
        .expect("job failed");
    assert!(
        msg.starts_with("the launcher closed the PMI connection of rank 0"),
        "{msg}"
    );
}

#[test]
fn an_endless_spawn_block_is_cut_off_and_the_connection_closed() {
    let (mut s, _) = server(1);
    init_all(&mut s, 1);
    let mut out = Vec::new();
    s.on_bytes(0, b"mcmd=spawn\nnprocs=1\n", &mut out);
    let line = vec![b'a'; 60 * 1024];
    let mut closed = false;
    for _ in 0..40 {
        let mut chunk = b"arg1=".to_vec();
        chunk.extend_from_slice(&line);
        chunk.push(b'\n');
        s.on_bytes(0, &chunk, &mut out);
        if out.iter().any(|e| matches!(e, Event::Close { conn: 0 })) {
            closed = true;
            break;
        }
    }
    assert!(closed, "a spawn block over 1 MiB closes the connection");
    let reply = sent(&out, 0).concat();
    assert!(
        String::from_utf8_lossy(&reply).contains("longer_than_1048576_bytes"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
}
