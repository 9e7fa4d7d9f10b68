//! The PMIx host with a plain libpmix client (`tests/c/pmix_client.c`,
//! built against Debian's libpmix-dev): put, commit, fence with data
//! collection and a get of every rank's value at 1, 4 and 64 ranks; and a
//! rank that connects and exits without `PMIx_Finalize` fails the job, as
//! a PMI rank that exits before finalize does.

use std::time::Duration;

mod common;

fn client() -> std::path::PathBuf {
    common::pmix::compile("pmix_client", true)
}

#[test]
fn a_pmix_exchange_sees_every_ranks_value() {
    let _g = common::heavy();
    let exe = client();
    for n in [1u32, 4, 64] {
        let out = common::launch(["-n", &n.to_string(), exe.to_str().unwrap(), "exchange"])
            .timeout(Duration::from_secs(120))
            .run();
        out.assert_success();
        let mut lines = out.stdout_lines();
        lines.sort();
        let mut want: Vec<String> = (0..n)
            .map(|r| format!("pmix exchange ok rank {r} size {n}"))
            .collect();
        want.sort();
        assert_eq!(lines, want, "{}", out.report());
    }
}

#[test]
fn a_pmix_rank_that_exits_before_finalize_fails_the_job() {
    let exe = client();
    let out = common::launch(["-n", "2", exe.to_str().unwrap(), "exit-early"])
        .timeout(Duration::from_secs(60))
        .run();
    assert_eq!(out.code(), Some(1), "{}", out.report());
    assert!(
        out.stderr.contains("before PMI finalize") || out.stderr.contains("before finalize"),
        "{}",
        out.report()
    );
}
