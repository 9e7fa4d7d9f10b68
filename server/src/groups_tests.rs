//! Group commands straight on the wire (what a raw or hostile peer can
//! send past the client's own checks): each bad request one clear error,
//! nothing held, and the group table still works afterwards.

use super::tests::support::*;

fn rc_and_msg(out: &[super::Event], conn: super::ConnId) -> (String, String) {
    let r = sent(out, conn);
    assert_eq!(r.len(), 1, "one reply to conn {conn}");
    let m = pmi2_body(&r[0]);
    (
        m.get_str("rc").unwrap_or_default().to_string(),
        m.get_str("errmsg").unwrap_or_default().to_string(),
    )
}

#[test]
fn bad_group_requests_on_the_wire_are_clear_errors() {
    let (mut s, _) = server(4);
    init_all(&mut s, 4);
    let big: String = (0..150_000u32)
        .map(|r| (r % 4).to_string())
        .collect::<Vec<_>>()
        .join(",");
    let long_id = "i".repeat(10_000);
    for (body, want) in [
        ("cmd=group-construct;id=g;members=;", "empty member list"),
        ("cmd=group-construct;id=g;members=0,1,1;", "listed twice"),
        (
            "cmd=group-construct;id=g;members=0,4;",
            "not below the job size 4",
        ),
        (
            "cmd=group-construct;id=g;members=1,2;",
            "not in the member list",
        ),
        (
            "cmd=group-construct;id=g;members=0-4294967295;",
            "more than",
        ),
        ("cmd=group-construct;id=g;members=x;", "not a rank"),
        ("cmd=group-construct;id=g;members=nojob:1;", "no job nojob"),
        (
            "cmd=group-construct;id=fastpmi_test_0;members=0;",
            "id of a job",
        ),
        ("cmd=group-construct;members=0;", "missing required key"),
        ("cmd=group-destruct;id=nosuch;", "no group nosuch"),
        ("cmd=group-fence;id=nosuch;", "no group nosuch"),
        ("cmd=group-invite;id=i;members=1;timeout=-5;", "timeout"),
        (
            "cmd=group-invite;id=i;members=0;timeout=5;",
            "invites itself",
        ),
        (
            "cmd=group-join;id=i;leader=1,2;accept=TRUE;timeout=5;",
            "exactly one",
        ),
        ("cmd=group-join;id=i;leader=1;timeout=5;", "accept"),
        (
            "cmd=group-join;id=i;leader=1;accept=TRUE;timeout=0;",
            "no invitation",
        ),
        ("cmd=group-frobnicate;id=g;", "unknown command"),
    ] {
        let out = send2(&mut s, 0, body);
        let (rc, msg) = rc_and_msg(&out, 0);
        assert_eq!(rc, "-1", "{body}");
        assert!(msg.contains(want), "{body}: {msg}");
    }
    // A member list near the frame limit (duplicates) and a 10 000-byte id.
    let out = send2(
        &mut s,
        0,
        &format!("cmd=group-construct;id=g;members={big};"),
    );
    assert!(rc_and_msg(&out, 0).1.contains("listed twice"));
    let out = send2(&mut s, 0, &format!("cmd=group-fence;id={long_id};"));
    assert!(rc_and_msg(&out, 0).1.contains("exceeds the limit of 256"));

    // The table still works: a group of 0 and 1, destructed by a
    // non-member (error), then by its members.
    assert!(sent(
        &send2(&mut s, 0, "cmd=group-construct;id=p;members=0,1;"),
        0
    )
    .is_empty());
    let out = send2(&mut s, 1, "cmd=group-construct;thrid=9;id=p;members=0,1;");
    let m0 = pmi2_body(&sent(&out, 0)[0]);
    let m1 = pmi2_body(&sent(&out, 1)[0]);
    assert_eq!(m1.thrid.as_deref(), Some(&b"9"[..]));
    assert_eq!((m0.get_int("rank"), m1.get_int("rank")), (Some(0), Some(1)));
    assert_eq!(m0.get_int("ctxid"), m1.get_int("ctxid"));
    assert_eq!(m0.get_int("slot"), Some(-1)); // MemStore: no segment
    let (rc, msg) = rc_and_msg(&send2(&mut s, 2, "cmd=group-destruct;id=p;"), 2);
    assert_eq!(rc, "-1");
    assert!(msg.contains("rank 2 is not a member of group p"), "{msg}");
    let out = send2(&mut s, 0, "cmd=group-construct;id=p;members=0,1;");
    assert!(rc_and_msg(&out, 0).1.contains("already exists"));
    assert!(sent(&send2(&mut s, 0, "cmd=group-fence;id=p;"), 0).is_empty());
    let out = send2(&mut s, 1, "cmd=group-fence;id=p;");
    assert_eq!(sent(&out, 0).len() + sent(&out, 1).len(), 2);
    assert!(sent(&send2(&mut s, 0, "cmd=group-destruct;id=p;"), 0).is_empty());
    let out = send2(&mut s, 1, "cmd=group-destruct;id=p;");
    assert_eq!(rc_and_msg(&out, 0).0, "0");
    assert_eq!(rc_and_msg(&out, 1).0, "0");
    // Destructed: the id is free again, with a new context id.
    assert!(sent(
        &send2(&mut s, 0, "cmd=group-construct;id=p;members=0,1;"),
        0
    )
    .is_empty());
    let out = send2(&mut s, 1, "cmd=group-construct;id=p;members=0,1;");
    let again = pmi2_body(&sent(&out, 1)[0]).get_int("ctxid");
    assert!(again > m0.get_int("ctxid"));
}

#[test]
fn a_member_lost_mid_fence_fails_the_job_or_only_its_group() {
    for tolerate in [false, true] {
        let (mut s, job) = server(3);
        s.set_tolerate_group_failures(tolerate);
        init_all(&mut s, 3);
        send2(&mut s, 0, "cmd=group-construct;id=g;members=0,1;");
        send2(&mut s, 1, "cmd=group-construct;id=g;members=0,1;");
        assert!(sent(&send2(&mut s, 0, "cmd=group-fence;id=g;"), 0).is_empty());
        let mut out = Vec::new();
        s.on_closed(1, &mut out);
        let (rc, msg) = rc_and_msg(&out, 0);
        assert_eq!(rc, "-1");
        assert!(msg.contains("rank 1"), "{msg}");
        let failed = out
            .iter()
            .any(|e| matches!(e, super::Event::JobFailed { job: j, rank: 1, .. } if *j == job));
        assert_eq!(failed, !tolerate, "tolerate={tolerate}");
        if tolerate {
            // The non-member is unaffected; the failed group errors at once.
            let out = send2(&mut s, 2, "cmd=kvs-put;key=a;value=b;");
            assert_eq!(rc_and_msg(&out, 2).0, "0");
            let (rc, msg) = rc_and_msg(&send2(&mut s, 0, "cmd=group-fence;id=g;"), 0);
            assert_eq!(rc, "-1");
            assert!(msg.contains("failed"), "{msg}");
            assert_eq!(
                rc_and_msg(&send2(&mut s, 0, "cmd=group-destruct;id=g;"), 0).0,
                "0"
            );
        }
    }
}
