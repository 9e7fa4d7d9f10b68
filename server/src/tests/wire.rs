//! Bad and unusual input on the wire: unknown or malformed commands,
//! frames split anywhere, commands before init.

use super::*;

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
