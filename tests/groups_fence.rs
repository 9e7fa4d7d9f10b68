//! Group fences (docs/groups.md) with real processes, 256 ranks in five
//! concurrent groups: the C extension (`fpmi_groups.c` on fastpmi's
//! libpmi2) and the Rust client (this test binary re-executed as the ranks,
//! `rank_role`), over shared memory, the socket and both in one job; and
//! the hand-run fence measurement.

mod common;
mod rank_role;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::{heavy, launch, lib_env, prog, Prog};
use fastpmi_client::{Pmi, PmiError};
use rank_role::{ensure, finish, init, role};

/// Iterations of the 256-rank group fence loops: 1000, as the issue asks,
/// on shared memory, the socket and mixed jobs alike. Over the socket a
/// round is three launcher round trips per member (put, group fence, get),
/// about 15 ms for 256 ranks on 2 cores.
const SHM_ITERS: u32 = 1000;
const SOCKET_ITERS: u32 = 1000;
const RUST_ITERS: u32 = 1000;

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
    let shm = pmi.transport() == fastpmi_client::TransportKind::Shm;
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

/// `cargo test --release --test groups_fence -- --ignored --nocapture
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
