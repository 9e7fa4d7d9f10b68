//! Between jobs: spawn, cross-job gets, the shared name service, and an
//! endless spawn block.

use super::*;

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
    other_job(&mut s);
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
    other_job(&mut s);
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

/// A second one-rank job, "other", its rank initialized on connection 100.
pub(super) fn other_job(s: &mut Server) -> JobIdx {
    let other = s.add_job(JobSpec {
        id: "other".into(),
        apps: vec![1],
        universe_size: 1,
        spawner: None,
        store: Box::new(MemStore::new(1, VALLEN)),
    });
    s.connect(100, Some((other, 0)), None);
    send1(s, 100, "cmd=init pmi_version=2 pmi_subversion=0");
    send2(s, 100, "cmd=fullinit;threaded=FALSE;");
    other
}
