//! `kvs-getall` and `kvs-putall` on the wire: every pair of a job's KVS
//! in one exchange, a putall put only once all its pairs came and all are
//! good, a connected job's KVS only, bounds and misuse as errors.

use super::*;

/// The messages `out` sends `conn`, decoded.
fn bodies(out: &[Event], conn: ConnId) -> Vec<fastpmi_codec::Message> {
    sent(out, conn).iter().map(|b| pmi2_body(b)).collect()
}

/// The pairs of a getall's answer (checks its framing).
fn getall_pairs(msgs: &[fastpmi_codec::Message]) -> Vec<(String, String)> {
    assert_eq!(msgs[0].cmd, "kvs-getall-paircount-response", "{msgs:?}");
    let n: usize = msgs[0].get_str("paircount").unwrap().parse().unwrap();
    assert_eq!(msgs.len(), n + 2, "{msgs:?}");
    let last = &msgs[n + 1];
    assert_eq!(
        (last.cmd.as_str(), last.get_str("rc")),
        ("kvs-getall-response", Some("0"))
    );
    let mut pairs: Vec<(String, String)> = msgs[1..=n]
        .iter()
        .map(|m| {
            assert_eq!(m.cmd, "kvs-getall-pair-response");
            (
                m.get_str("key").unwrap().to_string(),
                m.get_str("value").unwrap().to_string(),
            )
        })
        .collect();
    pairs.sort();
    pairs
}

#[test]
fn getall_returns_every_pair_once_with_its_last_value() {
    let (mut s, _) = server(2);
    init_all(&mut s, 2);
    assert_eq!(
        getall_pairs(&bodies(&send2(&mut s, 0, "cmd=kvs-getall;"), 0)),
        vec![]
    );
    send2(&mut s, 0, "cmd=kvs-put;key=a;value=1;");
    send2(&mut s, 1, "cmd=kvs-put;key=b;value=x;;y;");
    send2(&mut s, 1, "cmd=kvs-put;key=a;value=2;");
    let pairs = getall_pairs(&bodies(&send2(&mut s, 1, "cmd=kvs-getall;jobid=;"), 1));
    assert_eq!(
        pairs,
        vec![("a".into(), "2".into()), ("b".into(), "x;y".into())]
    );
}

#[test]
fn getall_of_another_job_needs_a_connection() {
    let (mut s, _) = server(1);
    init_all(&mut s, 1);
    super::jobs::other_job(&mut s);
    send2(&mut s, 100, "cmd=kvs-put;key=card;value=x1;");
    let msgs = bodies(&send2(&mut s, 0, "cmd=kvs-getall;jobid=other;"), 0);
    assert_eq!(msgs.len(), 1, "only the end, with the error: {msgs:?}");
    assert_eq!(msgs[0].cmd, "kvs-getall-response");
    assert_ne!(msgs[0].get_str("rc"), Some("0"));
    assert!(msgs[0].get_str("errmsg").unwrap().contains("not connected"));
    send2(&mut s, 0, "cmd=job-connect;jobid=other;");
    let pairs = getall_pairs(&bodies(&send2(&mut s, 0, "cmd=kvs-getall;jobid=other;"), 0));
    assert_eq!(pairs, vec![("card".into(), "x1".into())]);
}

#[test]
fn putall_puts_its_pairs_after_the_last_one() {
    let (mut s, _) = server(2);
    init_all(&mut s, 2);
    assert!(sent(&send2(&mut s, 0, "cmd=kvs-putall;paircount=2;"), 0).is_empty());
    assert!(sent(&send2(&mut s, 0, "cmd=kvs-putall-pair;key=p;value=1;"), 0).is_empty());
    // Not visible before the putall is whole.
    let m = pmi2_body(&sent(&send2(&mut s, 1, "cmd=kvs-get;key=p;"), 1)[0]);
    assert_eq!(m.get_str("found"), Some("FALSE"));
    let msgs = bodies(
        &send2(&mut s, 0, "cmd=kvs-putall-pair;key=q;value=a;;b;"),
        0,
    );
    assert_eq!(msgs.len(), 1);
    assert_eq!(
        (msgs[0].cmd.as_str(), msgs[0].get_str("rc")),
        ("kvs-putall-response", Some("0"))
    );
    let pairs = getall_pairs(&bodies(&send2(&mut s, 1, "cmd=kvs-getall;"), 1));
    assert_eq!(
        pairs,
        vec![("p".into(), "1".into()), ("q".into(), "a;b".into())]
    );
    // An empty putall is answered at once.
    let m = pmi2_body(&sent(&send2(&mut s, 0, "cmd=kvs-putall;paircount=0;"), 0)[0]);
    assert_eq!(
        (m.cmd.as_str(), m.get_str("rc")),
        ("kvs-putall-response", Some("0"))
    );
}

#[test]
fn a_bad_pair_fails_the_putall_and_puts_none() {
    let (mut s, _) = server(1);
    init_all(&mut s, 1);
    send2(&mut s, 0, "cmd=kvs-putall;paircount=3;");
    send2(&mut s, 0, "cmd=kvs-putall-pair;key=ok1;value=1;");
    let long = "v".repeat(VALLEN + 1);
    assert!(sent(
        &send2(
            &mut s,
            0,
            &format!("cmd=kvs-putall-pair;key=big;value={long};")
        ),
        0
    )
    .is_empty());
    let m = pmi2_body(&sent(&send2(&mut s, 0, "cmd=kvs-putall-pair;key=ok2;value=2;"), 0)[0]);
    assert_eq!(m.cmd, "kvs-putall-response");
    assert_ne!(m.get_str("rc"), Some("0"));
    let why = m.get_str("errmsg").unwrap();
    assert!(why.contains("pair 2") && why.contains("big"), "{why}");
    assert_eq!(
        getall_pairs(&bodies(&send2(&mut s, 0, "cmd=kvs-getall;"), 0)),
        vec![]
    );
    // The connection is free for the next putall.
    send2(&mut s, 0, "cmd=kvs-putall;paircount=1;");
    let m = pmi2_body(&sent(&send2(&mut s, 0, "cmd=kvs-putall-pair;key=k;value=v;"), 0)[0]);
    assert_eq!(m.get_str("rc"), Some("0"));
}

#[test]
fn putall_misuse_is_an_error_and_bounded() {
    let (mut s, _) = server(1);
    init_all(&mut s, 1);
    // A pair with no putall.
    let m = pmi2_body(&sent(&send2(&mut s, 0, "cmd=kvs-putall-pair;key=k;value=v;"), 0)[0]);
    assert_ne!(m.get_str("rc"), Some("0"));
    assert!(m
        .get_str("errmsg")
        .unwrap()
        .contains("without a kvs-putall"));
    // More pairs than the bound: refused at once, nothing held.
    let m = pmi2_body(
        &sent(
            &send2(
                &mut s,
                0,
                &format!("cmd=kvs-putall;paircount={};", crate::PUTALL_PAIRS_MAX + 1),
            ),
            0,
        )[0],
    );
    assert_eq!(m.cmd, "kvs-putall-response");
    assert!(m.get_str("errmsg").unwrap().contains("at most"));
    // A second putall while one waits: the first fails (its count lied),
    // the second goes on.
    send2(&mut s, 0, "cmd=kvs-putall;paircount=2;");
    let m = pmi2_body(&sent(&send2(&mut s, 0, "cmd=kvs-putall;paircount=1;"), 0)[0]);
    assert!(m
        .get_str("errmsg")
        .unwrap()
        .contains("0 came before kvs-putall"));
    let m = pmi2_body(&sent(&send2(&mut s, 0, "cmd=kvs-putall-pair;key=k;value=v;"), 0)[0]);
    assert_eq!(m.get_str("rc"), Some("0"));
    // Malformed counts and pairs are wire errors.
    for bad in [
        "cmd=kvs-putall;",
        "cmd=kvs-putall;paircount=-2;",
        "cmd=kvs-putall-pair;value=v;",
    ] {
        let m = pmi2_body(&sent(&send2(&mut s, 0, bad), 0)[0]);
        assert_ne!(m.get_str("rc"), Some("0"), "{bad}");
    }
}

#[test]
fn a_putall_whose_count_lies_fails_before_the_next_command() {
    let (mut s, _) = server(2);
    init_all(&mut s, 2);
    // Two pairs announced, one sent, then a fence: the putall fails first
    // (nothing put), then the fence is served as usual.
    send2(&mut s, 0, "cmd=kvs-putall;paircount=2;");
    send2(&mut s, 0, "cmd=kvs-putall-pair;key=p;value=1;");
    let msgs = bodies(&send2(&mut s, 0, "cmd=kvs-fence;"), 0);
    assert_eq!(msgs.len(), 1, "the fence waits for rank 1: {msgs:?}");
    assert_eq!(msgs[0].cmd, "kvs-putall-response");
    assert_ne!(msgs[0].get_str("rc"), Some("0"));
    let why = msgs[0].get_str("errmsg").unwrap();
    assert!(
        why.contains("announced 2 pairs, 1 came before fence"),
        "{why}"
    );
    let out = send2(&mut s, 1, "cmd=kvs-fence;");
    assert_eq!(bodies(&out, 0)[0].cmd, "kvs-fence-response");
    // A pair after the fence is an error of its own; nothing was put.
    let m = pmi2_body(&sent(&send2(&mut s, 0, "cmd=kvs-putall-pair;key=q;value=2;"), 0)[0]);
    assert!(m
        .get_str("errmsg")
        .unwrap()
        .contains("without a kvs-putall"));
    assert_eq!(
        getall_pairs(&bodies(&send2(&mut s, 1, "cmd=kvs-getall;"), 1)),
        vec![]
    );
    // More pairs than announced: the extra one is an error, the putall
    // itself went through.
    send2(&mut s, 0, "cmd=kvs-putall;paircount=1;");
    let m = pmi2_body(&sent(&send2(&mut s, 0, "cmd=kvs-putall-pair;key=a;value=1;"), 0)[0]);
    assert_eq!(m.get_str("rc"), Some("0"));
    let m = pmi2_body(&sent(&send2(&mut s, 0, "cmd=kvs-putall-pair;key=b;value=2;"), 0)[0]);
    assert_ne!(m.get_str("rc"), Some("0"));
    assert_eq!(
        getall_pairs(&bodies(&send2(&mut s, 1, "cmd=kvs-getall;"), 1)),
        vec![("a".into(), "1".into())]
    );
}
