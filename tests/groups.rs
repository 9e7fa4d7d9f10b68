//! Process groups and process sets (docs/groups.md) with real processes:
//! the C extension (`fpmi_groups.c` on fastpmi's libpmi2) and the Rust
//! client (this test binary re-executed as the ranks, `rank_role`), over
//! shared memory, the socket and both in one job; psets through Slurm's
//! unmodified libpmi2; invite/join; member death; bad input; Hydra.

mod common;
mod rank_role;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::{capi_lib_dir, heavy, launch, prog, Prog};
use fastpmi::client::{MemberSpec, Pmi, PmiError, NOT_SUPPORTED};
use rank_role::{ensure, finish, init, role};

/// Iterations of the 256-rank group fence loops: 1000, as the issue asks,
/// on shared memory, the socket and mixed jobs alike. Over the socket a
/// round is three launcher round trips per member (put, group fence, get),
/// about 15 ms for 256 ranks on 2 cores.
const SHM_ITERS: u32 = 1000;
const SOCKET_ITERS: u32 = 1000;
const RUST_ITERS: u32 = 1000;

fn lib_env(cmd: common::Cmd) -> common::Cmd {
    cmd.env("LD_LIBRARY_PATH", capi_lib_dir())
}

fn c_fence(sections: &[(&str, u32)], iters: u32) {
    let _g = heavy();
    let exe = prog(Prog::FpmiGroups);
    let mut args: Vec<String> = Vec::new();
    for (i, (transport, n)) in sections.iter().enumerate() {
        if i > 0 {
            args.push(":".into());
        }
        args.extend(["-n".into(), n.to_string()]);
        args.extend([
            "-env".into(),
            "FASTPMI_TRANSPORT".into(),
            transport.to_string(),
        ]);
        args.push(exe.display().to_string());
        args.extend(["fence".into(), iters.to_string()]);
    }
    let out = lib_env(launch(&args))
        .timeout(Duration::from_secs(120))
        .run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines(),
        vec![format!("fpmi groups ok size=256 iters={iters}")],
        "{}",
        out.report()
    );
}

/// Four disjoint 64-rank groups and every 4th rank, fenced with put checks
/// (C, `FPMI_Group_*`), every rank on shared memory: the groups get barrier
/// slots in the segment.
#[test]
fn c_256_ranks_five_groups_shm() {
    c_fence(&[("shm", 256)], SHM_ITERS);
}

/// The same with every rank on the socket (the server's barrier).
#[test]
fn c_256_ranks_five_groups_socket() {
    c_fence(&[("socket", 256)], SOCKET_ITERS);
}

/// The same with ranks 0-127 on the socket and 128-255 on shared memory:
/// quarters 2 and 3 fence in the segment, quarters 0 and 1 and the every-4th
/// group (members of both kinds) through the server.
#[test]
fn c_256_ranks_five_groups_mixed() {
    c_fence(&[("socket", 128), ("shm", 128)], SOCKET_ITERS);
}

// ---------------------------------------------------------------------------
// Rust roles
// ---------------------------------------------------------------------------

fn rust_fence_loop(pmi: &Pmi, id: &str, members: &[u32], iters: u32) -> Result<(), String> {
    let me = members.iter().position(|&r| r == pmi.rank()).unwrap();
    let peer = members[(me + 1) % members.len()];
    for i in 0..iters {
        pmi.put(format!("{id}-{}", pmi.rank()), i.to_string())
            .map_err(|e| e.to_string())?;
        pmi.group_fence(id)
            .map_err(|e| format!("fence {i} of {id}: {e}"))?;
        let v = pmi
            .get(format!("{id}-{peer}"), Some(peer))
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{id} round {i}: rank {peer}'s key missing"))?;
        let v: u32 = String::from_utf8_lossy(&v).parse().unwrap_or(u32::MAX);
        ensure(v == i || v == i + 1, || {
            format!("{id} round {i}: rank {peer}'s value {v}")
        })?;
    }
    Ok(())
}

fn role_fence() -> Result<(), String> {
    let pmi = init()?;
    let (rank, size) = (pmi.rank(), pmi.size());
    let q = size / 4;
    let quarter: Vec<u32> = ((rank / q) * q..(rank / q + 1) * q).collect();
    let every4: Vec<u32> = (0..size).step_by(4).collect();
    let qid = format!("rq{}", rank / q);
    let g = pmi
        .group_construct(&qid, &quarter)
        .map_err(|e| e.to_string())?;
    ensure(g.rank == rank % q && g.size == q, || format!("{g:?}"))?;
    let shm = pmi.transport() == fastpmi::client::TransportKind::Shm;
    let want_slot = std::env::var("WANT_SLOTS").is_ok_and(|v| v == "1");
    ensure(g.slot.is_some() == (shm && want_slot), || {
        format!("{g:?} on {:?}", pmi.transport())
    })?;
    let mut ids = vec![g.ctxid];
    if rank % 4 == 0 {
        let e = pmi
            .group_construct("r4", &every4)
            .map_err(|e| e.to_string())?;
        ensure(e.rank == rank / 4 && e.size == size / 4, || {
            format!("{e:?}")
        })?;
        ids.push(e.ctxid);
    }
    let iters: u32 = rank_role::env("ITERS")?.parse().unwrap();
    rust_fence_loop(&pmi, &qid, &quarter, iters)?;
    if rank % 4 == 0 {
        rust_fence_loop(&pmi, "r4", &every4, iters)?;
    }
    pmi.group_destruct(&qid).map_err(|e| e.to_string())?;
    if rank % 4 == 0 {
        pmi.group_destruct("r4").map_err(|e| e.to_string())?;
    }
    for c in ids {
        println!("ctxid {c}");
    }
    pmi.finalize().map_err(|e| e.to_string())
}

fn rust_fence(transport: &str, slots: bool) {
    if role().is_some() {
        finish(role_fence());
    }
    let _g = heavy();
    let test = format!(
        "rust_256_ranks_five_groups_{}",
        if transport == "shm" { "shm" } else { "socket" }
    );
    let out = rank_role::launch(&test, "fence", 256, &[])
        .env("FASTPMI_TRANSPORT", transport)
        .env("ITERS", RUST_ITERS.to_string())
        .env("WANT_SLOTS", if slots { "1" } else { "0" })
        .timeout(Duration::from_secs(120))
        .run();
    out.assert_success();
    // Five groups: four quarters (one id each, seen by 64 ranks) and r4.
    let ids: HashSet<&str> = out
        .stdout_lines()
        .into_iter()
        .filter_map(|l| l.strip_prefix("ctxid "))
        .collect();
    assert_eq!(ids.len(), 5, "{}", out.report());
}

/// The Rust client: the same five groups on shared memory (slots).
#[test]
fn rust_256_ranks_five_groups_shm() {
    rust_fence("shm", true);
}

/// The Rust client over the socket.
#[test]
fn rust_256_ranks_five_groups_socket() {
    rust_fence("socket", false);
}

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
        pmi.spawn(&fastpmi::client::SpawnRequest {
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

// ---------------------------------------------------------------------------
// Groups across jobs: a parent job and the job it spawned (connected)
// ---------------------------------------------------------------------------

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
            .spawn(&fastpmi::client::SpawnRequest {
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
            fastpmi::client::TransportKind::Socket
        } else {
            fastpmi::client::TransportKind::Shm
        }
    );
    for l in &lines {
        let want_t = if job(&name(l)) == cj {
            child_t.clone()
        } else {
            format!("{:?}", fastpmi::client::TransportKind::Shm)
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

fn role_invite() -> Result<(), String> {
    let pmi = init()?;
    let t = Duration::from_millis(1500);
    let e = |e: PmiError| e.to_string();
    match pmi.rank() {
        0 => {
            let inv = pmi.group_invite("team", &[1, 2, 3, 4], t).map_err(e)?;
            let ranks = |v: &[fastpmi::client::MemberSpec]| -> Vec<u32> {
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

fn role_kill() -> Result<(), String> {
    let pmi = init()?;
    let members: Vec<u32> = (0..32).collect();
    let victim = 5;
    let rank = pmi.rank();
    if rank >= 32 {
        // Non-members: ordinary PMI work, then finish normally.
        std::thread::sleep(Duration::from_millis(1500));
        pmi.put(format!("nm{rank}"), "x")
            .map_err(|e| e.to_string())?;
        println!("non-member {rank} done");
        return pmi.finalize().map_err(|e| e.to_string());
    }
    pmi.group_construct("doomed", &members)
        .map_err(|e| e.to_string())?;
    if rank == victim {
        std::thread::sleep(Duration::from_millis(500));
        let stamp = rank_role::env("KILL_STAMP")?;
        std::fs::write(&stamp, b"").map_err(|e| e.to_string())?;
        // kill -9 of this member while the others wait in the group fence.
        kill_self();
    }
    let r = pmi.group_fence("doomed");
    let stamp = rank_role::env("KILL_STAMP")?;
    let killed = std::fs::metadata(&stamp)
        .and_then(|m| m.modified())
        .map_err(|e| format!("victim's stamp: {e}"))?;
    let late = std::time::SystemTime::now()
        .duration_since(killed)
        .unwrap_or_default();
    match r {
        Ok(()) => Err("group fence succeeded without the dead member".into()),
        Err(e) => {
            let text = e.to_string();
            ensure(text.contains("rank 5"), || {
                format!("error does not name rank 5: {text}")
            })?;
            ensure(late < Duration::from_secs(1), || {
                format!("error {late:?} after the kill: {text}")
            })?;
            println!("member {rank} error within 1 s: {text}");
            pmi.finalize().map_err(|e| e.to_string())
        }
    }
}

fn kill_self() -> ! {
    let me = std::process::id();
    let st = std::process::Command::new("kill")
        .args(["-9", &me.to_string()])
        .status();
    panic!("kill -9 of myself returned: {st:?}");
}

fn kill_run(tolerate: bool) -> common::Outcome {
    let scratch = common::scratch_dir("group-kill");
    let stamp = scratch.path().join("killed");
    let flags: &[&str] = if tolerate {
        &["--tolerate-group-failures"]
    } else {
        &[]
    };
    let test = if tolerate {
        "kill_9_of_a_member_tolerated_non_members_finish"
    } else {
        "kill_9_of_a_member_during_a_group_fence_fails_the_job"
    };
    rank_role::launch(test, "kill", 64, flags)
        .env("KILL_STAMP", &stamp)
        .timeout(Duration::from_secs(30))
        .run()
}

/// kill -9 of a member during a group fence at N=64: the job fails, naming
/// it (job-failure rules apply to group members by default).
#[test]
fn kill_9_of_a_member_during_a_group_fence_fails_the_job() {
    if role().is_some() {
        finish(role_kill());
    }
    let _g = heavy();
    let out = kill_run(false);
    assert_ne!(out.code(), Some(0), "{}", out.report());
    out.assert_stderr_names_rank(5);
}

/// With --tolerate-group-failures: every other member's group fence returns
/// an error naming rank 5 within 1 s of the kill, the members finalize, the
/// 32 non-members finish normally, the launcher exits 0 and says what it
/// tolerated.
#[test]
fn kill_9_of_a_member_tolerated_non_members_finish() {
    if role().is_some() {
        finish(role_kill());
    }
    let _g = heavy();
    let out = kill_run(true);
    out.assert_success();
    let lines = out.stdout_lines();
    let members = lines
        .iter()
        .filter(|l| l.starts_with("member ") && l.contains("error within 1 s"))
        .count();
    let non = lines
        .iter()
        .filter(|l| l.starts_with("non-member "))
        .count();
    assert_eq!((members, non), (31, 32), "{}", out.report());
    assert!(out.stderr.contains("tolerated"), "{}", out.report());
}

fn role_psets() -> Result<(), String> {
    let pmi = init()?;
    println!(
        "rank {} names={} mine={} ocean={:?} nosuch={:?}",
        pmi.rank(),
        pmi.pset_names().map_err(|e| e.to_string())?.join(","),
        pmi.my_psets().map_err(|e| e.to_string())?.join(","),
        pmi.pset_members("ocean").map_err(|e| e.to_string())?,
        pmi.pset_members("nosuch").map_err(|e| e.to_string())?
    );
    pmi.finalize().map_err(|e| e.to_string())
}

fn pset_args(a: &[String], b: &[String]) -> Vec<String> {
    let mut v: Vec<String> = ["-n", "4", "--pset", "ocean,both"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    v.extend(a.iter().cloned());
    v.extend([":", "-n", "3", "--pset", "ice", "--pset", "both"].map(String::from));
    v.extend(b.iter().cloned());
    v
}

/// --pset through Slurm's unmodified libpmi2 (PMI2_Info_GetJobAttr), the
/// C extension and the Rust client; ranks 0-3 in ocean and both, 4-6 in ice
/// and both.
#[test]
fn pset_attributes_through_slurm_libpmi2_fpmi_and_rust() {
    if role().is_some() {
        finish(role_psets());
    }
    let _g = heavy();
    let slurm = prog(Prog::PsetSlurm).display().to_string();
    let s = std::slice::from_ref(&slurm);
    let out = launch(pset_args(s, s)).run();
    out.assert_success();
    let mut lines = out.stdout_lines();
    lines.sort();
    assert_eq!(lines.len(), 7, "{}", out.report());
    for r in 0..7 {
        let mine = if r < 4 { "ocean,both" } else { "both,ice" };
        let want = format!("rank {r} names=ocean,both,ice mine={mine} ocean=0-3 ice=4-6");
        assert!(lines.contains(&want.as_str()), "{want}\n{}", out.report());
    }

    let fpmi = prog(Prog::FpmiGroups).display().to_string();
    let a = [fpmi.clone(), "pset".into()];
    let out = lib_env(launch(pset_args(&a, &a))).run();
    out.assert_success();
    let lines = out.stdout_lines();
    assert!(
        lines.contains(&"rank 5 mine=both,ice names=ocean,both,ice ocean=0,1,2,3 found=1 nosuch=0"),
        "{}",
        out.report()
    );

    let me: Vec<String> = std::iter::once(rank_role::me())
        .chain(rank_role::args(
            "pset_attributes_through_slurm_libpmi2_fpmi_and_rust",
        ))
        .collect();
    let out = launch(pset_args(&me, &me))
        .env(rank_role::ROLE, "psets")
        .run();
    out.assert_success();
    let lines = out.stdout_lines();
    assert!(
        lines.contains(
            &"rank 2 names=ocean,both,ice mine=ocean,both ocean=Some([0, 1, 2, 3]) nosuch=None"
        ),
        "{}",
        out.report()
    );
    assert!(
        lines.contains(
            &"rank 6 names=ocean,both,ice mine=both,ice ocean=Some([0, 1, 2, 3]) nosuch=None"
        ),
        "{}",
        out.report()
    );
}

fn role_bad() -> Result<(), String> {
    let pmi = init()?;
    let invalid = |what: &str, r: Result<fastpmi::client::Group, PmiError>| match r {
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

fn role_unsupported() -> Result<(), String> {
    let pmi = init()?;
    let unsupported = |what: &str, e: Option<PmiError>| match e {
        Some(PmiError::Unsupported(m)) if m.contains(NOT_SUPPORTED) => Ok(()),
        other => Err(format!("{what}: {other:?}")),
    };
    let t = Duration::from_millis(10);
    unsupported("construct", pmi.group_construct("g", &[pmi.rank()]).err())?;
    unsupported("fence", pmi.group_fence("g").err())?;
    unsupported("destruct", pmi.group_destruct("g").err())?;
    unsupported("invite", pmi.group_invite("g", &[], t).err())?;
    unsupported("join", pmi.group_join("g", 0, true, t).err())?;
    unsupported("leave", pmi.group_leave("g").err())?;
    // psets are plain job attributes: none under Hydra.
    ensure(
        pmi.pset_names().map_err(|e| e.to_string())?.is_empty(),
        || "psets under Hydra".into(),
    )?;
    pmi.fence().map_err(|e| e.to_string())?;
    println!("rank {} unsupported ok", pmi.rank());
    pmi.finalize().map_err(|e| e.to_string())
}

/// Under Hydra (Debian's mpiexec.hydra), which ends a job on an unknown PMI
/// command: every group call of the Rust client and of the C extension
/// returns the documented "not supported" error, and the job finishes.
#[test]
fn under_hydra_every_group_call_is_not_supported() {
    if role().is_some() {
        finish(role_unsupported());
    }
    let _g = heavy();
    let mut args: Vec<String> = vec!["-n".into(), "2".into(), rank_role::me()];
    args.extend(rank_role::args(
        "under_hydra_every_group_call_is_not_supported",
    ));
    let out = launch(&args)
        .program("mpiexec.hydra")
        .env(rank_role::ROLE, "unsupported")
        .timeout(Duration::from_secs(30))
        .run();
    out.assert_success();
    let mut lines: Vec<&str> = out
        .stdout_lines()
        .into_iter()
        .filter(|l| l.starts_with("rank "))
        .collect();
    lines.sort();
    assert_eq!(
        lines,
        vec!["rank 0 unsupported ok", "rank 1 unsupported ok"],
        "{}",
        out.report()
    );
    let exe = prog(Prog::FpmiGroups).display().to_string();
    let out = lib_env(launch(["-n", "2", &exe, "unsupported"]))
        .program("mpiexec.hydra")
        .timeout(Duration::from_secs(30))
        .run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines(),
        vec!["fpmi unsupported ok"],
        "{}",
        out.report()
    );
}

// ---------------------------------------------------------------------------
// Measurement (not a timed test: it asserts nothing about time)
// ---------------------------------------------------------------------------

fn role_bench() -> Result<(), String> {
    let pmi = init()?;
    let e = |e: PmiError| e.to_string();
    let n: u32 = rank_role::env("BENCH_ITERS")?.parse().unwrap();
    let mean = |t: Instant, n: u32| t.elapsed().as_secs_f64() * 1e6 / n as f64;
    if pmi.size() == 64 {
        // The floor: a 64-process job fence.
        for _ in 0..100 {
            pmi.fence().map_err(e)?;
        }
        let t = Instant::now();
        for _ in 0..n {
            pmi.fence().map_err(e)?;
        }
        if pmi.rank() == 0 {
            println!("floor64 {:.1} us", mean(t, n));
        }
        return pmi.finalize().map_err(e);
    }
    // Every rank is up before anything is timed: without this fence the
    // group loop of ranks 0-63 ran while the launcher was still starting
    // ranks 64-255 (exec, loading, PMI init on the same two cores), which
    // is what made the group fence look 1.6x the floor.
    if std::env::var("BENCH_NO_START_FENCE").is_err() {
        pmi.fence().map_err(e)?;
    }
    if pmi.rank() < 64 {
        let members: Vec<u32> = (0..64).collect();
        let g = pmi.group_construct("g64", &members).map_err(e)?;
        ensure(g.slot.is_some(), || "no slot".into())?;
        for _ in 0..100 {
            pmi.group_fence("g64").map_err(e)?;
        }
        let t = Instant::now();
        for _ in 0..n {
            pmi.group_fence("g64").map_err(e)?;
        }
        if pmi.rank() == 0 {
            println!("group64 {:.1} us", mean(t, n));
        }
        pmi.group_destruct("g64").map_err(e)?;
    }
    // The other 192 ranks sleep in this job fence meanwhile.
    pmi.fence().map_err(e)?;
    let full = n / 4;
    let t = Instant::now();
    for _ in 0..full {
        pmi.fence().map_err(e)?;
    }
    if pmi.rank() == 0 {
        println!("full256 {:.1} us", mean(t, full));
    }
    pmi.finalize().map_err(e)
}

/// `cargo test --release --test groups -- --ignored --nocapture
/// group_fence_measurement`: mean time of a 64-member group fence in a
/// 256-rank job (the other 192 ranks asleep in a job fence), of a full
/// 256-rank fence, and of a 64-process job fence (the futex floor); the
/// figures are in docs/groups.md.
#[test]
#[ignore = "measurement, run by hand"]
fn group_fence_measurement() {
    if role().is_some() {
        finish(role_bench());
    }
    let _g = heavy();
    let mut report = Vec::new();
    for n in [256, 64] {
        let mut args = vec!["-n".to_string(), n.to_string(), rank_role::me()];
        args.extend(rank_role::args("group_fence_measurement"));
        // An ignored test runs in the ranks only with --ignored.
        args.push("--ignored".into());
        let out = launch(&args)
            .env(rank_role::ROLE, "bench")
            .env("BENCH_ITERS", "2000")
            .timeout(Duration::from_secs(300))
            .run();
        out.assert_success();
        report.extend(
            out.stdout_lines()
                .into_iter()
                .filter(|l| l.contains(" us"))
                .map(str::to_string),
        );
    }
    println!("{}", report.join("\n"));
}
