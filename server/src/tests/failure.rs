//! Failing jobs: aborts and their exit codes, lost and dropped
//! connections, ranks that exit or finalize while others wait in a fence.

use super::*;

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

/// A store whose segment words say which ranks finalized (what fastpmi's
/// client on the segment writes before it sends `finalize` and exits
/// without waiting for the answer); everything else is a `MemStore`.
use crate::store::{FenceTicket, StoreError};

struct SegmentSays {
    inner: MemStore,
    finalized: Vec<u32>,
}

impl Store for SegmentSays {
    fn max_value(&self) -> usize {
        self.inner.max_value()
    }
    fn put(&mut self, rank: u32, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.inner.put(rank, key, value)
    }
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.inner.get(key)
    }
    fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.inner.entries()
    }
    fn put_node_attr(&mut self, rank: u32, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.inner.put_node_attr(rank, key, value)
    }
    fn get_node_attr(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.inner.get_node_attr(key)
    }
    fn rank_finalized(&self, rank: u32) -> bool {
        self.finalized.contains(&rank)
    }
    fn fence_arrive(&mut self, rank: u32) -> Result<FenceTicket, StoreError> {
        self.inner.fence_arrive(rank)
    }
    fn fence_done(&self, ticket: FenceTicket) -> bool {
        self.inner.fence_done(ticket)
    }
    fn fences_completed(&self) -> u64 {
        self.inner.fences_completed()
    }
    fn fence_arrivals(&self) -> u32 {
        self.inner.fence_arrivals()
    }
    fn abort(&mut self, code: i32, rank: u32) {
        self.inner.abort(code, rank)
    }
}

/// A rank reaped (status 0) while its `finalize` is still unread on the
/// socket: the job goes on when the segment says it finalized, and fails
/// ("exited before PMI finalize") when it does not.
#[test]
fn a_clean_exit_with_finalize_unread_counts_when_the_segment_says_finalized() {
    for (finalized, job_fails) in [(vec![1], false), (vec![], true)] {
        let (mut s, job) = server_with(
            2,
            Box::new(SegmentSays {
                inner: MemStore::new(2, VALLEN),
                finalized: finalized.clone(),
            }),
        );
        init_all(&mut s, 2);
        let mut out = Vec::new();
        s.rank_exited(job, 1, true, &mut out);
        let failed = out
            .iter()
            .any(|e| matches!(e, Event::JobFailed { rank: 1, .. }));
        assert_eq!(failed, job_fails, "segment says finalized: {finalized:?}");
        // The other rank still finalizes normally afterwards.
        if !job_fails {
            let out = send2(&mut s, 0, "cmd=finalize;");
            assert_eq!(pmi2_body(&sent(&out, 0)[0]).cmd, "finalize-response");
        }
    }
}
