//! Fences, puts and gets, node-attribute waits and the job attributes
//! (`PMI_process_mapping`, fullinit keys).

use super::*;

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
fn node_attr_waits_per_rank_are_bounded() {
    let (mut s, _) = server(2);
    init_all(&mut s, 2);
    let limit = super::handlers::ATTR_WAITS_PER_RANK_MAX;
    for i in 0..limit {
        let out = send2(
            &mut s,
            1,
            &format!("cmd=info-getnodeattr;key=k{i};wait=TRUE;"),
        );
        assert!(sent(&out, 1).is_empty(), "wait {i} is held");
    }
    let m = pmi2_body(
        &sent(
            &send2(&mut s, 1, "cmd=info-getnodeattr;key=one-more;wait=TRUE;"),
            1,
        )[0],
    );
    assert_eq!(m.get_str("rc"), Some("-1"));
    assert!(m
        .get_str("errmsg")
        .unwrap()
        .contains("node-attribute waits"));
    // Another rank is not affected, and the held waits are still answered.
    assert!(sent(
        &send2(&mut s, 0, "cmd=info-getnodeattr;key=k0;wait=TRUE;"),
        0
    )
    .is_empty());
    let out = send2(&mut s, 0, "cmd=info-putnodeattr;key=k0;value=v;");
    assert_eq!(sent(&out, 1).len(), 1);
    assert_eq!(pmi2_body(&sent(&out, 0)[0]).get_str("rc"), Some("0"));
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
