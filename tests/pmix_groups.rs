//! PMIx groups through the launcher's server (docs/pmix.md, Groups):
//! construct with launcher-unique context ids, the group queries,
//! invitations, and a group spanning a parent and its spawned job; plain
//! libpmix clients (`tests/c/pmix_*.c`), with Debian's library and, where
//! a test says so, the Open MPI wheel's 5.0.

use std::time::Duration;

mod common;

fn client() -> std::path::PathBuf {
    common::pmix::compile("pmix_client", true)
}

/// PMIx groups with context ids: in a job of 6, ranks {0,2,5} construct
/// one group and {1,3} another, each asking for a context id; each member
/// fences over its group and destructs it. The members of a group agree
/// on its id, the two groups' ids differ, and no id is 0.
#[test]
fn pmix_groups_get_distinct_context_ids() {
    let exe = client();
    let out = common::launch(["-n", "6", exe.to_str().unwrap(), "groups"])
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_success();
    let mut ids: std::collections::BTreeMap<String, Vec<(u32, u64)>> = Default::default();
    let mut none = Vec::new();
    for l in out.stdout_lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        match f[..] {
            ["pmix", "group", g, "rank", r, "ctxid", c] => ids
                .entry(g.to_string())
                .or_default()
                .push((r.parse().unwrap(), c.parse().unwrap())),
            ["pmix", "group", "none", "rank", r] => none.push(r.to_string()),
            _ => panic!("unexpected line {l:?}\n{}", out.report()),
        }
    }
    let members = |g: &str| {
        let mut v: Vec<u32> = ids
            .get(g)
            .map_or(vec![], |m| m.iter().map(|x| x.0).collect());
        v.sort_unstable();
        v
    };
    assert_eq!(members("g1"), [0, 2, 5], "{}", out.report());
    assert_eq!(members("g2"), [1, 3], "{}", out.report());
    assert_eq!(none, ["4"], "{}", out.report());
    let id = |g: &str| {
        let set: std::collections::BTreeSet<u64> = ids[g].iter().map(|x| x.1).collect();
        assert_eq!(set.len(), 1, "members of {g} disagree: {set:?}");
        *set.iter().next().unwrap()
    };
    let (a, b) = (id("g1"), id("g2"));
    assert!(a != 0 && b != 0 && a != b, "context ids {a} and {b}");
}

/// The group queries: while ranks 0-2 of 4 hold group "gq", rank 3 (no
/// member) is told of one group, its name and its three members; after
/// the destruct, of none. With Debian's library, and with the wheel's
/// (client and server 5.0).
#[test]
fn pmix_group_queries_follow_construct_and_destruct() {
    let exe = common::pmix::compile("pmix_group_query", true);
    for out in common::pmix::run_with_both_libraries(&exe, 4) {
        out.assert_success();
        let lines = out.stdout_lines();
        let job = lines
            .first()
            .and_then(|l| l.split_whitespace().nth(7))
            .and_then(|m| m.split(':').next())
            .unwrap_or("?")
            .to_string();
        let want_during = format!("pmix groups num 1 names gq members {job}:0,{job}:1,{job}:2");
        assert_eq!(
            lines,
            [want_during.as_str(), "pmix groups num 0 names  members -"],
            "{}",
            out.report()
        );
        assert!(job.starts_with("fastpmi_"), "{}", out.report());
    }
}

/// A group formed by invitation: rank 0 invites ranks 0-2 of 4 into "inv",
/// ranks 1 and 2 hear the invitation from rank 0 and join; every call
/// succeeds. With Debian's library and with the wheel's (client and server
/// 5.0). Neither library asks the host for a context id on this path.
#[test]
fn pmix_group_invitations_are_heard_and_joined() {
    let exe = common::pmix::compile("pmix_group_invite", true);
    for out in common::pmix::run_with_both_libraries(&exe, 4) {
        out.assert_success();
        let mut lines: Vec<String> = out
            .stdout_lines()
            .iter()
            .map(|l| l.replace("PMIX_SUCCESS", "SUCCESS"))
            .collect();
        lines.sort();
        let job = lines
            .iter()
            .find_map(|l| l.split(" leader ").nth(1))
            .and_then(|l| l.split(':').next())
            .unwrap_or("?")
            .to_string();
        assert!(job.starts_with("fastpmi_"), "{}", out.report());
        assert_eq!(
            lines,
            [
                "pmix invite rank 0 status SUCCESS".to_string(),
                format!("pmix join rank 1 group inv leader {job}:0 status SUCCESS"),
                format!("pmix join rank 2 group inv leader {job}:0 status SUCCESS"),
            ],
            "{}",
            out.report()
        );
    }
}

/// A group spanning two jobs: a parent and the 2 ranks it spawned
/// construct one group with a context id, fence over it and destruct it;
/// all three get the same id. Then each job constructs a group of its own
/// (the children "kids", the parent "solo"): the members of each agree,
/// and the three groups' ids differ (two jobs, distinct ids). With
/// Debian's library and the wheel's.
#[test]
fn pmix_a_group_spans_a_parent_and_its_spawned_job() {
    let exe = common::pmix::compile("pmix_group_jobs", true);
    for out in common::pmix::run_with_both_libraries(&exe, 1) {
        out.assert_success();
        let mut groups: std::collections::BTreeMap<String, Vec<(String, u64)>> = Default::default();
        for l in out.stdout_lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            match f[..] {
                ["pmix", g, who, "ctxid", id] => groups
                    .entry(g.to_string())
                    .or_default()
                    .push((who.to_string(), id.parse().unwrap())),
                _ => panic!("unexpected line {l:?}\n{}", out.report()),
            }
        }
        let members = |g: &str| {
            let mut m: Vec<String> = groups
                .get(g)
                .map_or(vec![], |v| v.iter().map(|x| x.0.clone()).collect());
            m.sort();
            m
        };
        let span = members("span");
        let parent = span
            .iter()
            .find(|m| m.ends_with("_0:0"))
            .unwrap_or_else(|| panic!("no parent\n{}", out.report()))
            .trim_end_matches("_0:0")
            .to_string();
        let (p0, c0, c1) = (
            format!("{parent}_0:0"),
            format!("{parent}_1:0"),
            format!("{parent}_1:1"),
        );
        assert_eq!(
            span,
            [p0.clone(), c0.clone(), c1.clone()],
            "{}",
            out.report()
        );
        assert_eq!(members("kids"), [c0, c1], "{}", out.report());
        assert_eq!(members("solo"), [p0], "{}", out.report());
        let id = |g: &str| {
            let set: std::collections::BTreeSet<u64> = groups[g].iter().map(|x| x.1).collect();
            assert_eq!(set.len(), 1, "members of {g} disagree: {set:?}");
            *set.iter().next().unwrap()
        };
        let ids: std::collections::BTreeSet<u64> = ["span", "kids", "solo"].map(id).into();
        assert!(
            ids.len() == 3 && !ids.contains(&0),
            "context ids {ids:?}\n{}",
            out.report()
        );
    }
}
