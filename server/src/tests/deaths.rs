//! Fault-tolerant jobs: a death answers the socket fence waiters with an
//! error naming the dead and fails later fences at once, without failing
//! the job; `PMI_dead_processes` is served through PMI-1 get, PMI-2
//! info-getjobattr and kvs-get; a non-world abort is a death there and a
//! job failure, named as such, elsewhere.

use super::*;
use crate::deaths::DeathCause;

fn tolerant(n: u32) -> (Server, JobIdx) {
    let (mut s, job) = server(n);
    s.set_fault_tolerant(job, true);
    init_all(&mut s, n);
    (s, job)
}

fn errmsg(bytes: &[u8]) -> String {
    let m = pmi2_body(bytes);
    assert_eq!(m.get_str("rc"), Some("-1"), "{m:?}");
    m.get_str("errmsg").unwrap_or_default().to_string()
}

#[test]
fn a_death_fails_the_fence_not_the_job() {
    let (mut s, job) = tolerant(4);
    for r in 0..2 {
        assert!(send2(&mut s, r, "cmd=kvs-fence;").is_empty());
    }
    let mut out = Vec::new();
    assert!(s.rank_died(job, 3, DeathCause::Signaled(9), "was killed", &mut out));
    assert!(!out.iter().any(|e| matches!(e, Event::JobFailed { .. })));
    assert!(out.iter().any(
        |e| matches!(e, Event::RankDied { rank: 3, cause: DeathCause::Signaled(9), message, .. } if message == "rank 3 was killed")
    ));
    for r in 0..2 {
        let m = errmsg(&sent(&out, r)[0]);
        assert!(
            m.contains("fence 1 can never complete: rank(s) 3 died"),
            "{m}"
        );
    }
    // A second death of the same rank changes nothing.
    let mut again = Vec::new();
    assert!(s.rank_died(job, 3, DeathCause::Exited(1), "exited", &mut again));
    assert!(again.is_empty());
    assert_eq!(s.dead_ranks(job), vec![(3, DeathCause::Signaled(9))]);
    // Later fences fail at once; the KVS goes on.
    let out = send2(&mut s, 2, "cmd=kvs-fence;");
    assert!(errmsg(&sent(&out, 2)[0]).contains("rank(s) 3 died"));
    let out = send2(&mut s, 0, "cmd=kvs-put;key=k;value=v;");
    assert_eq!(pmi2_body(&sent(&out, 0)[0]).get_str("rc"), Some("0"));
    assert!(!s.job_failed(job));
}

#[test]
fn dead_processes_are_served_every_way_as_ranges() {
    let (mut s, job) = tolerant(6);
    let get = |s: &mut Server| {
        let a = pmi2_body(
            &sent(
                &send2(s, 0, "cmd=info-getjobattr;key=PMI_dead_processes;"),
                0,
            )[0],
        );
        let k = pmi2_body(&sent(&send2(s, 0, "cmd=kvs-get;key=PMI_dead_processes;"), 0)[0]);
        (
            a.get_str("found").map(str::to_string),
            a.get_str("value").map(str::to_string),
            k.get_str("found").map(str::to_string),
            k.get_str("value").map(str::to_string),
        )
    };
    // A miss while nobody died.
    let (found, _, kfound, _) = get(&mut s);
    assert_eq!(
        (found.as_deref(), kfound.as_deref()),
        (Some("FALSE"), Some("FALSE"))
    );
    let mut out = Vec::new();
    for r in [1, 2, 4] {
        s.rank_died(job, r, DeathCause::Exited(3), "exited", &mut out);
    }
    let (found, value, kfound, kvalue) = get(&mut s);
    assert_eq!(found.as_deref(), Some("TRUE"));
    assert_eq!(value.as_deref(), Some("1-2,4"));
    assert_eq!(kfound.as_deref(), Some("TRUE"));
    assert_eq!(kvalue.as_deref(), Some("1-2,4"));
    // PMI-1: a plain get.
    let (mut s1, job1) = server(3);
    s1.set_fault_tolerant(job1, true);
    send1(&mut s1, 0, "cmd=init pmi_version=1 pmi_subversion=1");
    s1.rank_died(job1, 2, DeathCause::ConnectionLost, "lost", &mut Vec::new());
    let out = send1(
        &mut s1,
        0,
        "cmd=get kvsname=fastpmi_test_0 key=PMI_dead_processes",
    );
    let line = String::from_utf8(sent(&out, 0)[0].clone()).unwrap();
    assert!(line.contains("rc=0") && line.contains("value=2"), "{line}");
}

#[test]
fn a_self_abort_is_a_death_only_in_a_fault_tolerant_job() {
    let (mut s, job) = tolerant(3);
    send2(&mut s, 0, "cmd=kvs-fence;");
    let out = send2(&mut s, 2, "cmd=abort;isworld=FALSE;msg=bye;");
    assert!(out.iter().any(|e| matches!(
        e,
        Event::RankDied { rank: 2, cause: DeathCause::Aborted(1), message, .. }
            if message.contains("aborted itself (abort isworld=FALSE) with code 1: bye")
    )));
    assert!(errmsg(&sent(&out, 0)[0]).contains("rank(s) 2 died"));
    assert!(!s.job_failed(job));
    // A world abort still ends it.
    let out = send2(&mut s, 1, "cmd=abort;isworld=TRUE;msg=all;");
    assert!(out
        .iter()
        .any(|e| matches!(e, Event::JobFailed { rank: 1, .. })));
    // Without the mode the self-abort fails the job, named as such.
    let (mut s, _) = server(3);
    init_all(&mut s, 3);
    let out = send2(&mut s, 2, "cmd=abort;isworld=FALSE;msg=bye;");
    assert!(out.iter().any(|e| matches!(
        e,
        Event::JobFailed { rank: 2, message, .. } if message.contains("aborted itself")
    )));
    assert!(!out.iter().any(|e| matches!(e, Event::RankDied { .. })));
}

#[test]
fn lost_connection_and_early_exit_are_deaths_when_tolerant() {
    let (mut s, job) = tolerant(3);
    send2(&mut s, 0, "cmd=kvs-fence;");
    let mut out = Vec::new();
    s.on_closed(1, &mut out);
    assert!(out.iter().any(|e| matches!(
        e,
        Event::RankDied {
            rank: 1,
            cause: DeathCause::ConnectionLost,
            ..
        }
    )));
    assert!(!out.iter().any(|e| matches!(e, Event::JobFailed { .. })));
    // Reaped later: its status replaces the lost connection.
    assert!(s.refine_death(job, 1, DeathCause::Exited(3)));
    assert!(!s.refine_death(job, 1, DeathCause::Exited(4)));
    assert_eq!(s.dead_ranks(job), vec![(1, DeathCause::Exited(3))]);
    // Exit 0 before finalize.
    let mut out = Vec::new();
    s.rank_exited(job, 2, true, &mut out);
    assert!(out.iter().any(|e| matches!(
        e,
        Event::RankDied {
            rank: 2,
            cause: DeathCause::Exited(0),
            ..
        }
    )));
    assert!(!s.job_failed(job));
    // Not tolerant: nothing recorded, the caller fails the job.
    let (mut s, job) = server(2);
    assert!(!s.rank_died(job, 1, DeathCause::Exited(1), "x", &mut Vec::new()));
    assert!(s.dead_ranks(job).is_empty());
}

#[test]
fn the_dead_leave_their_groups_and_cannot_be_grouped() {
    let (mut s, job) = tolerant(4);
    for r in 0..3 {
        send2(&mut s, r, "cmd=group-construct;id=all;members=0-3;");
    }
    // Rank 3 dies before joining: the construction fails for the others
    // and the group goes.
    let mut out = Vec::new();
    s.rank_died(job, 3, DeathCause::Signaled(9), "was killed", &mut out);
    for r in 0..3 {
        assert!(errmsg(&sent(&out, r)[0]).contains("rank 3"));
    }
    assert_eq!(s.group_count(), 0);
    // A group listing the dead fails at once; one of the survivors builds.
    let out = send2(&mut s, 0, "cmd=group-construct;id=all;members=0-3;");
    assert!(errmsg(&sent(&out, 0)[0]).contains("member rank 3 died"));
    let mut built = Vec::new();
    for r in 0..3 {
        built.extend(send2(
            &mut s,
            r,
            "cmd=group-construct;id=alive;members=0-2;",
        ));
    }
    for r in 0..3 {
        assert_eq!(pmi2_body(&sent(&built, r)[0]).get_str("rc"), Some("0"));
    }
    // Rank 2 dies in it: the group fails, and goes once the other two left.
    s.rank_died(job, 2, DeathCause::Exited(1), "exited", &mut Vec::new());
    send2(&mut s, 0, "cmd=group-leave;id=alive;");
    assert_eq!(s.group_count(), 1);
    send2(&mut s, 1, "cmd=group-leave;id=alive;");
    assert_eq!(s.group_count(), 0);
}

#[test]
fn a_death_is_a_notice_to_the_job_and_its_parent() {
    let (mut s, parent) = tolerant(2);
    let child = s.add_job(JobSpec {
        id: "fastpmi_test_1".into(),
        apps: vec![2],
        universe_size: 2,
        spawner: Some("fastpmi_test_0".into()),
        store: Box::new(MemStore::new(2, VALLEN)),
    });
    assert!(
        s.is_fault_tolerant(child),
        "a spawned job inherits the mode"
    );
    for r in 0..2 {
        s.connect(10 + r as ConnId, Some((child, r)), None);
        send1(
            &mut s,
            10 + r as ConnId,
            "cmd=init pmi_version=2 pmi_subversion=0",
        );
        send2(&mut s, 10 + r as ConnId, "cmd=fullinit;threaded=FALSE;");
    }
    // Rank 1 of the parent and rank 0 of the child open their channels.
    s.connect_oob(101, parent, 1);
    s.connect_oob(110, child, 0);
    send1(&mut s, 101, "cmd=init_oob pmi_version=2 signal=SIGUSR2");
    send1(&mut s, 110, "cmd=init_oob pmi_version=2 signal=NONE");
    let mut out = Vec::new();
    s.rank_died(child, 1, DeathCause::Signaled(9), "was killed", &mut out);
    let want = "cmd=died jobid=fastpmi_test_1 rank=1 exitcode=137 message=rank 1 of job fastpmi_test_1 was killed\n";
    for conn in [101, 110] {
        let got: Vec<String> = sent(&out, conn)
            .into_iter()
            .map(|b| String::from_utf8(b).unwrap())
            .collect();
        assert_eq!(got, vec![want.to_string()], "channel {conn}");
    }
    assert!(out.iter().any(|e| matches!(
        e,
        Event::Signal {
            conn: 101,
            signal: "SIGUSR2",
            ..
        }
    )));
    assert!(!s.job_failed(parent) && !s.job_failed(child));
}

/// Nested mode: this server holds ranks 2 and 3 of a job of 4 over two
/// node servers; the other node's dead come from its node server.
#[test]
fn deaths_elsewhere_break_the_fence_and_join_the_dead_set() {
    let (mut s, job) = server(2);
    s.set_place(
        job,
        crate::place::NodePlace {
            first: 2,
            total: 4,
            mapping: "(vector,(0,2,2))".into(),
        },
    );
    s.set_fault_tolerant(job, true);
    init_all(&mut s, 2);
    assert!(send2(&mut s, 0, "cmd=kvs-fence;").is_empty());
    let mut out = Vec::new();
    // This node's own ranks and ranks past the job are not the other's.
    for r in [2, 3, 4] {
        assert!(!s.rank_died_elsewhere(job, r, DeathCause::Exited(3), "exited", &mut out));
    }
    assert!(out.is_empty());
    assert!(s.rank_died_elsewhere(job, 1, DeathCause::ConnectionLost, "lost", &mut out));
    let m = errmsg(&sent(&out, 0)[0]);
    assert!(m.contains("rank(s) 1 died"), "{m}");
    assert!(!out.iter().any(|e| matches!(e, Event::JobFailed { .. })));
    // Heard again with how it really ended: the record says so, nothing
    // is sent twice.
    let mut again = Vec::new();
    assert!(s.rank_died_elsewhere(job, 1, DeathCause::Signaled(9), "killed", &mut again));
    assert!(again.is_empty());
    // A death here joins them, by its rank in the job.
    s.rank_died(job, 1, DeathCause::Exited(3), "exited", &mut out);
    let a = pmi2_body(
        &sent(
            &send2(&mut s, 0, "cmd=info-getjobattr;key=PMI_dead_processes;"),
            0,
        )[0],
    );
    assert_eq!(a.get_str("value"), Some("1,3"));
    let f = send2(&mut s, 0, "cmd=kvs-fence;");
    assert!(errmsg(&sent(&f, 0)[0]).contains("rank(s) 1,3 died"));
    // Not tolerant: a death elsewhere is not taken.
    let (mut s2, job2) = server(2);
    s2.set_place(
        job2,
        crate::place::NodePlace {
            first: 2,
            total: 4,
            mapping: "(vector,(0,2,2))".into(),
        },
    );
    assert!(!s2.rank_died_elsewhere(job2, 0, DeathCause::Exited(1), "exited", &mut Vec::new()));
}
