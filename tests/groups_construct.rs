//! Making and unmaking process groups (docs/groups.md) with real processes
//! (this test binary re-executed as the ranks, `rank_role`): context ids
//! stay distinct over 10 000 constructs and across two jobs of one
//! launcher; invite/join/decline/leave; bad input is a clear error.

mod common;
mod rank_role;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::heavy;
use fastpmi_client::PmiError;
use rank_role::{ensure, finish, init, role};

fn role_ctxids() -> Result<(), String> {
    let pmi = init()?;
    let all: Vec<u32> = (0..pmi.size()).collect();
    let n: u32 = rank_role::env("CONSTRUCTS")?.parse().unwrap();
    let mut seen = HashSet::new();
    let mut last = 0;
    for i in 0..n {
        let id = format!("c{i}");
        let g = pmi
            .group_construct(&id, &all)
            .map_err(|e| format!("{id}: {e}"))?;
        ensure(seen.insert(g.ctxid) && g.ctxid > last, || {
            format!("{id}: context id {} reused or not increasing", g.ctxid)
        })?;
        last = g.ctxid;
        pmi.group_destruct(&id).map_err(|e| format!("{id}: {e}"))?;
    }
    if pmi.rank() == 0 {
        println!("distinct {}", seen.len());
        println!("last {last}");
    }
    pmi.finalize().map_err(|e| e.to_string())
}

/// 10 000 constructs and destructs with distinct ids in one job: every
/// context id distinct (and increasing), in every rank.
#[test]
fn ten_thousand_constructs_have_distinct_context_ids() {
    if role().is_some() {
        finish(role_ctxids());
    }
    let _g = heavy();
    let out = rank_role::launch(
        "ten_thousand_constructs_have_distinct_context_ids",
        "ctxids",
        4,
        &[],
    )
    .env("CONSTRUCTS", "10000")
    .timeout(Duration::from_secs(120))
    .run();
    out.assert_success();
    assert!(
        out.stdout_lines().contains(&"distinct 10000"),
        "{}",
        out.report()
    );
}

fn role_spawn_ctxids() -> Result<(), String> {
    let pmi = init()?;
    let all: Vec<u32> = (0..pmi.size()).collect();
    // The parent spawns first, so both jobs construct at the same time.
    if !pmi.spawned() && pmi.rank() == 0 {
        let cmd = rank_role::cmd(
            "two_jobs_of_one_launcher_never_share_a_context_id",
            "spawnctx",
            2,
            &[],
        );
        pmi.spawn(&fastpmi_client::SpawnRequest {
            cmds: vec![cmd],
            preput: vec![],
        })
        .map_err(|e| e.to_string())?;
    }
    for i in 0..CTX_PER_JOB {
        let id = format!("{}-g{i}", pmi.job_id());
        let g = pmi.group_construct(&id, &all).map_err(|e| e.to_string())?;
        if pmi.rank() == 0 {
            println!("ctxid {} {}", pmi.job_id(), g.ctxid);
        }
        pmi.group_destruct(&id).map_err(|e| e.to_string())?;
    }
    pmi.finalize().map_err(|e| e.to_string())
}

/// Constructs per job in `two_jobs_of_one_launcher_never_share_a_context_id`.
const CTX_PER_JOB: usize = 200;

/// A job and the job it spawns each construct and destruct 200 groups (the
/// parent spawns first, so the two jobs' constructs can interleave): every
/// context id seen is distinct, 400 in all, from both jobs.
#[test]
fn two_jobs_of_one_launcher_never_share_a_context_id() {
    if role().is_some() {
        finish(role_spawn_ctxids());
    }
    let _g = heavy();
    let out = rank_role::launch(
        "two_jobs_of_one_launcher_never_share_a_context_id",
        "spawnctx",
        2,
        &[],
    )
    .run();
    out.assert_success();
    let mut ids = HashSet::new();
    let mut jobs = HashSet::new();
    for l in out.stdout_lines() {
        if let Some(rest) = l.strip_prefix("ctxid ") {
            let (job, id) = rest.split_once(' ').unwrap();
            jobs.insert(job.to_string());
            assert!(
                ids.insert(id.to_string()),
                "ctxid {id} twice\n{}",
                out.report()
            );
        }
    }
    assert_eq!(
        (jobs.len(), ids.len()),
        (2, 2 * CTX_PER_JOB),
        "{}",
        out.report()
    );
}

fn role_invite() -> Result<(), String> {
    let pmi = init()?;
    let t = Duration::from_millis(1500);
    let e = |e: PmiError| e.to_string();
    match pmi.rank() {
        0 => {
            let inv = pmi.group_invite("team", &[1, 2, 3, 4], t).map_err(e)?;
            let ranks = |v: &[fastpmi_client::MemberSpec]| -> Vec<u32> {
                v.iter().map(|m| m.rank).collect()
            };
            println!(
                "leader members={:?} declined={:?} timedout={:?} size={} rank={}",
                ranks(&inv.members),
                ranks(&inv.declined),
                ranks(&inv.timed_out),
                inv.group.size,
                inv.group.rank
            );
            pmi.group_fence("team").map_err(e)?;
            // Rank 2 leaves; 0 and 1 still fence together.
            pmi.group_fence("team").map_err(e)?;
            pmi.group_destruct("team").map_err(e)?;
        }
        r @ (1 | 2) => {
            let g = pmi.group_join("team", 0, true, t).map_err(e)?;
            let g = g.ok_or("accepted but got no group")?;
            println!("rank {r} joined grank={} size={}", g.rank, g.size);
            pmi.group_fence("team").map_err(e)?;
            if r == 2 {
                pmi.group_leave("team").map_err(e)?;
                match pmi.group_fence("team") {
                    Err(err) => println!("rank 2 after leave: {err}"),
                    Ok(()) => return Err("fence after leave succeeded".into()),
                }
            } else {
                pmi.group_fence("team").map_err(e)?;
                pmi.group_destruct("team").map_err(e)?;
            }
        }
        3 => {
            let g = pmi.group_join("team", 0, false, t).map_err(e)?;
            println!("rank 3 declined: {}", g.is_none());
        }
        _ => {
            // Never answers in time; a late join is an error, not a hang.
            std::thread::sleep(Duration::from_millis(2500));
            match pmi.group_join("team", 0, true, Duration::from_millis(200)) {
                Err(err) => println!("rank 4 late: {err}"),
                Ok(g) => return Err(format!("late join succeeded: {g:?}")),
            }
            // No invitation at all: the join times out with an error.
            let t0 = Instant::now();
            match pmi.group_join("nobody", 0, true, Duration::from_millis(300)) {
                Err(err) => {
                    ensure(t0.elapsed() >= Duration::from_millis(300), || {
                        format!("gave up after {:?}", t0.elapsed())
                    })?;
                    println!("rank 4 no invitation: {err}")
                }
                Ok(g) => return Err(format!("join without invitation: {g:?}")),
            }
        }
    }
    pmi.finalize().map_err(|e| e.to_string())
}

/// Invite/join: two invitees accept, one declines, one never answers (the
/// leader's timeout): the leader sees exactly who joined; a member leaves
/// and the others fence on without it; late and uninvited joins are errors.
#[test]
fn invite_join_decline_timeout_and_leave() {
    if role().is_some() {
        finish(role_invite());
    }
    let _g = heavy();
    for transport in ["shm", "socket"] {
        let out = rank_role::launch("invite_join_decline_timeout_and_leave", "invite", 5, &[])
            .env("FASTPMI_TRANSPORT", transport)
            .timeout(Duration::from_secs(30))
            .run();
        out.assert_success();
        let lines = out.stdout_lines();
        let has = |p: &str| lines.iter().any(|l| l.starts_with(p));
        for want in [
            "leader members=[0, 1, 2] declined=[3] timedout=[4] size=3 rank=0",
            "rank 1 joined grank=1 size=3",
            "rank 2 joined grank=2 size=3",
            "rank 3 declined: true",
            "rank 2 after leave:",
            "rank 4 late:",
            "rank 4 no invitation: PMI server refused group-join (rc=-1): group-join: no invitation to group nobody from rank 0 within 300 ms",
        ] {
            assert!(has(want), "{transport}: no line {want:?}\n{}", out.report());
        }
        // Either it left, or the others already destructed the group.
        assert!(
            lines.iter().any(|l| l.starts_with("rank 2 after leave")
                && (l.contains("left group team") || l.contains("no group team"))),
            "{}",
            out.report()
        );
    }
}

fn role_bad() -> Result<(), String> {
    let pmi = init()?;
    let invalid = |what: &str, r: Result<fastpmi_client::Group, PmiError>| match r {
        Err(PmiError::InvalidArg(m)) => {
            println!("{what}: {m}");
            Ok(())
        }
        other => Err(format!("{what}: {other:?}")),
    };
    let size = pmi.size();
    if pmi.rank() == 0 {
        invalid("empty", pmi.group_construct("e", &[]))?;
        invalid("duplicate", pmi.group_construct("d", &[0, 1, 1]))?;
        invalid("rank >= size", pmi.group_construct("s", &[0, size]))?;
        let huge: Vec<u32> = (0..262_144).collect(); // 1 MB of ranks
        invalid("1 MB list", pmi.group_construct("h", &huge))?;
        let long = "i".repeat(10_000);
        invalid("10000-byte id", pmi.group_construct(&long, &[0]))?;
        invalid("caller not in list", pmi.group_construct("n", &[1, 2]))?;
        match pmi.group_construct(pmi.job_id(), &[0]) {
            Err(PmiError::Server { msg, .. }) => println!("job id clash: {msg}"),
            other => return Err(format!("job id clash: {other:?}")),
        }
    }
    // A group of 0 and 1; rank 2 destructs it without being a member.
    if pmi.rank() < 2 {
        pmi.group_construct("pair", &[0, 1])
            .map_err(|e| e.to_string())?;
        match pmi.group_construct("pair", &[0, 1]) {
            Err(PmiError::Server { msg, .. }) => println!("rank {} twice: {msg}", pmi.rank()),
            other => return Err(format!("second construct: {other:?}")),
        }
    }
    pmi.fence().map_err(|e| e.to_string())?;
    if pmi.rank() == 2 {
        match pmi.group_destruct("pair") {
            Err(PmiError::Server { msg, .. }) => println!("non-member destruct: {msg}"),
            other => return Err(format!("non-member destruct: {other:?}")),
        }
        match pmi.group_fence("nosuch") {
            Err(PmiError::Server { msg, .. }) => println!("unknown group: {msg}"),
            other => return Err(format!("fence of unknown group: {other:?}")),
        }
    }
    pmi.fence().map_err(|e| e.to_string())?;
    if pmi.rank() < 2 {
        // The job is unaffected: the group still works.
        pmi.group_fence("pair").map_err(|e| e.to_string())?;
        pmi.group_destruct("pair").map_err(|e| e.to_string())?;
    }
    pmi.fence().map_err(|e| e.to_string())?;
    println!("rank {} unaffected", pmi.rank());
    pmi.finalize().map_err(|e| e.to_string())
}

/// Bad input: each a clear error to the caller, the job unaffected.
#[test]
fn bad_group_input_is_a_clear_error() {
    if role().is_some() {
        finish(role_bad());
    }
    let _g = heavy();
    let out = rank_role::launch("bad_group_input_is_a_clear_error", "bad", 3, &[])
        .timeout(Duration::from_secs(30))
        .run();
    out.assert_success();
    let lines = out.stdout_lines();
    let find = |p: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(p))
            .unwrap_or_else(|| panic!("no line {p:?}\n{}", out.report()))
            .to_string()
    };
    assert!(find("empty:").contains("empty member list"));
    assert!(find("duplicate:").contains("rank 1 is listed twice"));
    assert!(find("rank >= size:").contains("rank 3 is not below the job size 3"));
    assert!(find("1 MB list:").contains("not below the job size"));
    assert!(find("10000-byte id:").contains("10000 bytes exceeds the limit of 256"));
    assert!(find("caller not in list:").contains("not in the member list"));
    assert!(find("job id clash:").contains("is the id of a job"));
    assert!(find("rank 0 twice:").contains("already exists"));
    assert!(find("non-member destruct:").contains("rank 2 is not a member of group pair"));
    assert!(find("unknown group:").contains("no group nosuch"));
    for r in 0..3 {
        find(&format!("rank {r} unaffected"));
    }
}
