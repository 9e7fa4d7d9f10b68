//! A job over node servers (nested mode) on the wire: the job's ranks and
//! mapping in fullinit and job attributes, and a get that misses here
//! after a fence handed to the outer job, answered when it answers.

use super::*;
use crate::place::NodePlace;

/// The place of node server 1 of two of 2 ranks each: ranks 2 and 3 of 4.
fn second_of_two() -> NodePlace {
    NodePlace {
        first: 2,
        total: 4,
        mapping: "(vector,(0,2,2))".into(),
    }
}

/// A server of that node's two ranks, initialized.
fn second_node() -> (Server, JobIdx) {
    let (mut s, job) = server(2);
    s.set_place(job, second_of_two());
    init_all(&mut s, 2);
    (s, job)
}

fn outer_gets(out: &[Event]) -> Vec<(u64, Vec<u8>)> {
    out.iter()
        .filter_map(|e| match e {
            Event::OuterGet { id, key } => Some((*id, key.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn fullinit_and_attributes_name_the_whole_job() {
    let (mut s, _) = server(2);
    s.set_place(0, second_of_two());
    // Connection 1 is this node's rank 1.
    send1(&mut s, 1, "cmd=init pmi_version=2 pmi_subversion=0");
    let out = send2(&mut s, 1, "cmd=fullinit;threaded=FALSE;");
    let m = pmi2_body(&sent(&out, 1)[0]);
    assert_eq!(
        (m.get_str("rank"), m.get_str("size")),
        (Some("3"), Some("4"))
    );
    let out = send2(&mut s, 1, "cmd=info-getjobattr;key=PMI_process_mapping;");
    let m = pmi2_body(&sent(&out, 1)[0]);
    assert_eq!(m.get_str("value"), Some("(vector,(0,2,2))"));
}

#[test]
fn a_place_that_does_not_hold_the_ranks_is_ignored() {
    let (mut s, _) = server(2);
    s.set_place(
        0,
        NodePlace {
            first: 3,
            total: 4,
            mapping: "(vector,(0,1,4))".into(),
        },
    );
    assert!(s.place(0).is_none());
}

#[test]
fn a_miss_after_a_fence_asks_the_outer_job() {
    let (mut s, _) = second_node();
    // Before any fence a miss is a miss.
    let out = send2(&mut s, 0, "cmd=kvs-get;key=far;");
    assert!(outer_gets(&out).is_empty());
    assert_eq!(pmi2_body(&sent(&out, 0)[0]).get_str("found"), Some("FALSE"));
    send2(&mut s, 0, "cmd=kvs-fence;");
    send2(&mut s, 1, "cmd=kvs-fence;");
    let out = send2(&mut s, 0, "cmd=kvs-get;key=far;");
    let asked = outer_gets(&out);
    assert_eq!(asked.len(), 1, "{out:?}");
    assert_eq!(asked[0].1, b"far");
    assert!(
        sent(&out, 0).is_empty(),
        "answered before the outer job did"
    );
    let mut out = Vec::new();
    s.outer_get_reply(asked[0].0, Ok(Some(b"v-far".to_vec())), &mut out);
    let m = pmi2_body(&sent(&out, 0)[0]);
    assert_eq!(
        (m.get_str("found"), m.get_str("value")),
        (Some("TRUE"), Some("v-far"))
    );
    // An answer for a get nobody waits for any more is dropped.
    let mut out = Vec::new();
    s.outer_get_reply(asked[0].0, Ok(None), &mut out);
    assert!(out.is_empty());
}

#[test]
fn the_node_servers_keys_and_failed_asks_are_answered_here() {
    let (mut s, _) = second_node();
    send2(&mut s, 0, "cmd=kvs-fence;");
    send2(&mut s, 1, "cmd=kvs-fence;");
    let out = send2(&mut s, 1, "cmd=kvs-get;key=fpmi-nest-size-0;");
    assert!(outer_gets(&out).is_empty());
    assert_eq!(pmi2_body(&sent(&out, 1)[0]).get_str("found"), Some("FALSE"));
    let out = send2(&mut s, 1, "cmd=kvs-get;key=gone;");
    let id = outer_gets(&out)[0].0;
    let mut out = Vec::new();
    s.outer_get_reply(
        id,
        Err(crate::place::OuterGetFailed("connection lost".into())),
        &mut out,
    );
    let m = pmi2_body(&sent(&out, 1)[0]);
    assert_ne!(m.get_str("rc"), Some("0"));
    assert!(
        m.get_str("errmsg")
            .unwrap_or_default()
            .contains("outer PMI server"),
        "{m:?}"
    );
}

#[test]
fn a_closed_connection_forgets_its_outer_gets() {
    let (mut s, _) = second_node();
    send2(&mut s, 0, "cmd=kvs-fence;");
    send2(&mut s, 1, "cmd=kvs-fence;");
    let out = send2(&mut s, 0, "cmd=kvs-get;key=far;");
    let id = outer_gets(&out)[0].0;
    let mut out = Vec::new();
    s.on_closed(0, &mut out);
    let mut out = Vec::new();
    s.outer_get_reply(id, Ok(Some(b"v".to_vec())), &mut out);
    assert!(sent(&out, 0).is_empty());
}

#[test]
fn groups_are_refused_over_node_servers() {
    let (mut s, _) = second_node();
    let out = send2(&mut s, 0, "cmd=group-construct;id=g;members=2,3;");
    let m = pmi2_body(&sent(&out, 0)[0]);
    assert_ne!(m.get_str("rc"), Some("0"), "{m:?}");
    assert!(
        m.get_str("errmsg")
            .unwrap_or_default()
            .contains("node servers"),
        "{m:?}"
    );
}

/// Port mode on the second node server: a claim names the job's rank; the
/// launcher checks the process of this node's index of it, and a rank of
/// another node is refused.
#[test]
fn port_mode_claims_name_the_jobs_rank() {
    let mut s = Server::new();
    let job = s.add_job(JobSpec {
        id: "j".into(),
        apps: vec![2],
        universe_size: 4,
        spawner: None,
        store: Box::new(MemStore::new(2, VALLEN)),
    });
    s.set_place(job, second_of_two());
    for c in [10, 11] {
        s.connect(c, None, Some(job));
        s.set_peer(c, auth::Trust::Local, format!("127.0.0.1:{c}"));
    }
    let out = send1(&mut s, 10, "cmd=initack pmiid=3");
    assert!(
        matches!(
            out[..],
            [Event::CheckPeer {
                conn: 10,
                rank: 1,
                ..
            }]
        ),
        "{out:?}"
    );
    let mut out = Vec::new();
    s.peer_checked(10, true, &mut out);
    assert_eq!(
        sent(&out, 10)[0],
        b"cmd=initack rc=0\ncmd=set size=4\ncmd=set rank=3\ncmd=set debug=0\n"
    );
    let out = send1(&mut s, 11, "cmd=initack pmiid=1");
    let refused = out.iter().any(|e| {
        matches!(e, Event::Refuse { conn: 11, reason } if reason.contains("does not run on this node"))
    });
    assert!(refused, "{out:?}");
}
