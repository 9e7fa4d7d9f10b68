//! Groups across jobs (docs/groups.md) with real processes: members of a
//! parent job and of the job it spawned (connected) in one group, named
//! `jobid:rank`, the children on shared memory or on the socket; this test
//! binary re-executed as the ranks (`rank_role`).

mod common;
mod rank_role;

use std::collections::HashSet;
use std::time::Duration;

use common::heavy;
use fastpmi_client::{MemberSpec, Pmi};
use rank_role::{ensure, finish, init, role};

const XJOB_TEST: &str = "cross_job_group_of_parent_and_child_ranks_fences_and_sees_puts";
const XJOB_SOCKET_TEST: &str = "cross_job_group_with_socket_children_fences_and_sees_puts";
/// Fence rounds of the cross-job group (each with put/get checks).
const XJOB_ROUNDS: u32 = 1000;
const XJOB_RANKS: u32 = 4;

/// The member list, in group-rank order: parent and child ranks interleaved
/// (parent 1, 3, 0 and child 0, 2, 3), every one named `jobid:rank`.
fn xjob_members(parent: &str, child: &str) -> Vec<MemberSpec> {
    let m = |job: &str, rank| MemberSpec {
        job: Some(job.to_string()),
        rank,
    };
    vec![
        m(parent, 1),
        m(child, 0),
        m(parent, 3),
        m(child, 2),
        m(parent, 0),
        m(child, 3),
    ]
}

/// One member's part: construct, `XJOB_ROUNDS` rounds of put, group fence
/// and a get of every other member's key (from its own job's KVS: a parent
/// rank reads a child's over the wire, a child reads its parent's segment),
/// each the value of this round or the next; destruct.
fn xjob_member(pmi: &Pmi, members: &[MemberSpec]) -> Result<(), String> {
    let me = pmi.job_id().to_string();
    let pos = members
        .iter()
        .position(|m| m.job.as_deref() == Some(me.as_str()) && m.rank == pmi.rank())
        .expect("a member");
    let g = pmi
        .group_construct_members("xjob", members)
        .map_err(|e| format!("construct: {e}"))?;
    ensure(
        g.rank == pos as u32 && g.size == members.len() as u32 && g.slot.is_none(),
        || format!("{g:?}: want group rank {pos}, size 6, no segment slot"),
    )?;
    let mut cross = 0u32;
    for i in 0..XJOB_ROUNDS {
        pmi.put(format!("xjob-{}", pmi.rank()), i.to_string())
            .map_err(|e| format!("round {i}: put: {e}"))?;
        pmi.group_fence("xjob")
            .map_err(|e| format!("round {i}: group fence: {e}"))?;
        for (k, m) in members.iter().enumerate() {
            if k == pos {
                continue;
            }
            let job = m.job.as_deref().expect("named");
            let v = pmi
                .get_from(Some(job), format!("xjob-{}", m.rank), Some(m.rank))
                .map_err(|e| format!("round {i}: get {m}: {e}"))?
                .ok_or_else(|| format!("round {i}: {m}'s key missing"))?;
            let v: u32 = String::from_utf8_lossy(&v).parse().unwrap_or(u32::MAX);
            // The other may already have put its next round's value.
            ensure(v == i || v == i + 1, || {
                format!("round {i}: {m}'s value is {v}")
            })?;
            cross += u32::from(job != me);
        }
    }
    pmi.group_destruct("xjob")
        .map_err(|e| format!("destruct: {e}"))?;
    println!(
        "xjob member {me}:{} grank={} size={} ctxid={} rounds={XJOB_ROUNDS} cross-reads={cross} transport={:?}",
        pmi.rank(),
        g.rank,
        g.size,
        g.ctxid,
        pmi.transport()
    );
    Ok(())
}

fn role_xjob_parent(test: &str) -> Result<(), String> {
    let pmi = init()?;
    let parent = pmi.job_id().to_string();
    if pmi.rank() == 0 {
        let mut env = vec![format!("XJOB_PARENT={parent}")];
        if let Ok(t) = std::env::var("XJOB_CHILD_TRANSPORT") {
            env.push(format!("FASTPMI_TRANSPORT={t}"));
        }
        let s = pmi
            .spawn(&fastpmi_client::SpawnRequest {
                cmds: vec![rank_role::cmd(test, "xjob-child", XJOB_RANKS, &env)],
                preput: vec![],
            })
            .map_err(|e| format!("spawn: {e}"))?;
        ensure(s.errcodes.iter().all(|&c| c == 0), || format!("{s:?}"))?;
        pmi.put("xjob-child", &s.jobid).map_err(|e| e.to_string())?;
    }
    pmi.fence().map_err(|e| e.to_string())?;
    let child = pmi
        .get("xjob-child", Some(0))
        .map_err(|e| e.to_string())?
        .ok_or("no xjob-child key")?;
    let child = String::from_utf8_lossy(&child).into_owned();
    let members = xjob_members(&parent, &child);
    if members
        .iter()
        .any(|m| m.job.as_deref() == Some(parent.as_str()) && m.rank == pmi.rank())
    {
        xjob_member(&pmi, &members)?;
    }
    pmi.finalize().map_err(|e| e.to_string())
}

fn role_xjob_child() -> Result<(), String> {
    let pmi = init()?;
    let parent = rank_role::env("XJOB_PARENT")?;
    let child = pmi.job_id().to_string();
    ensure(pmi.spawned() && child != parent, || {
        format!("spawned {} job {child}", pmi.spawned())
    })?;
    let members = xjob_members(&parent, &child);
    if members
        .iter()
        .any(|m| m.job.as_deref() == Some(child.as_str()) && m.rank == pmi.rank())
    {
        xjob_member(&pmi, &members)?;
    }
    pmi.finalize().map_err(|e| e.to_string())
}

fn xjob(test: &str, child_transport: Option<&str>) {
    match role().as_deref() {
        Some("xjob-child") => finish(role_xjob_child()),
        Some(_) => finish(role_xjob_parent(test)),
        None => {}
    }
    let _g = heavy();
    let mut cmd = rank_role::launch(test, "xjob-parent", XJOB_RANKS, &["--stats"])
        .env("FASTPMI_TRANSPORT", "shm")
        .timeout(Duration::from_secs(120));
    if let Some(t) = child_transport {
        cmd = cmd.env("XJOB_CHILD_TRANSPORT", t);
    }
    let out = cmd.run();
    out.assert_success();
    let lines: Vec<&str> = out
        .stdout_lines()
        .into_iter()
        .filter(|l| l.starts_with("xjob member "))
        .collect();
    assert_eq!(lines.len(), 6, "six members report\n{}", out.report());
    // (job:rank, group rank, ctxid, transport) of each member.
    let field = |l: &str, k: &str| -> String {
        l.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("no {k}= in {l}"))
            .to_string()
    };
    let name = |l: &str| l.split_whitespace().nth(2).unwrap().to_string();
    let ctxids: HashSet<String> = lines.iter().map(|l| field(l, "ctxid")).collect();
    assert_eq!(ctxids.len(), 1, "one context id\n{}", out.report());
    // The parent job's id is the prefix of the names of grank 0, 2, 4.
    let by_grank: Vec<String> = (0..6)
        .map(|r| {
            let l = lines
                .iter()
                .find(|l| field(l, "grank") == r.to_string())
                .unwrap_or_else(|| panic!("no group rank {r}\n{}", out.report()));
            assert_eq!(field(l, "size"), "6", "{l}");
            assert_eq!(field(l, "rounds"), XJOB_ROUNDS.to_string(), "{l}");
            // Each member read 5 others per round, 3 of them in the other job.
            assert_eq!(
                field(l, "cross-reads"),
                (3 * XJOB_ROUNDS).to_string(),
                "{l}"
            );
            name(l)
        })
        .collect();
    let job = |n: &str| n.rsplit_once(':').unwrap().0.to_string();
    let rank = |n: &str| n.rsplit_once(':').unwrap().1.to_string();
    let (pj, cj) = (job(&by_grank[0]), job(&by_grank[1]));
    assert_ne!(pj, cj, "{}", out.report());
    let want: Vec<String> = [(&pj, 1), (&cj, 0), (&pj, 3), (&cj, 2), (&pj, 0), (&cj, 3)]
        .iter()
        .map(|(j, r)| format!("{j}:{r}"))
        .collect();
    assert_eq!(by_grank, want, "{}", out.report());
    assert!(by_grank.iter().all(|n| !rank(n).is_empty()));
    let child_t = format!(
        "{:?}",
        if child_transport == Some("socket") {
            fastpmi_client::TransportKind::Socket
        } else {
            fastpmi_client::TransportKind::Shm
        }
    );
    for l in &lines {
        let want_t = if job(&name(l)) == cj {
            child_t.clone()
        } else {
            format!("{:?}", fastpmi_client::TransportKind::Shm)
        };
        assert_eq!(field(l, "transport"), want_t, "{l}");
    }
    // Where the reads went: a parent member reads the child's keys through
    // the server (3 members x 3 keys per round); a child on shared memory
    // reads its parent's keys from the parent's segment, a child on the
    // socket reads all 5 others' keys through the server.
    let sock = common::stats_row(&out.stderr, "socket").expect("socket stats row");
    let child_wire = if child_transport == Some("socket") {
        3 * 5
    } else {
        0
    };
    assert_eq!(
        sock[1],
        u64::from((3 * 3 + child_wire) * XJOB_ROUNDS),
        "socket gets\n{}",
        out.report()
    );
}

/// A group of three ranks of a job and three of the job it spawned (both on
/// shared memory, two segments), named `jobid:rank`: each member gets its
/// position as group rank and the same context id, no segment slot (the
/// server's barrier), and after each of 1000 group fences sees every other
/// member's put of that round, across the jobs too (the child ranks read the
/// parent's segment, the parent ranks ask the server); destruct; both jobs
/// end 0.
#[test]
fn cross_job_group_of_parent_and_child_ranks_fences_and_sees_puts() {
    xjob(XJOB_TEST, None);
}

/// The same with the spawned job's ranks on the socket.
#[test]
fn cross_job_group_with_socket_children_fences_and_sees_puts() {
    xjob(XJOB_SOCKET_TEST, Some("socket"));
}
