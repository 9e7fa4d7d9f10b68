//! Chaos in a fault-tolerant job: 1024 ranks of the Rust client fence in a
//! loop over the survivors (a process group of the ranks alive, rebuilt
//! after each death, named by the death count; 2 ms of sleep stand for the
//! work between two fences) while the test SIGKILLs 100
//! of them, one at a time, at random moments over 30 s. Every survivor
//! finishes and exits 0 and the launcher exits 0 with one line per dead
//! rank; the launcher answers `ps` throughout, asked as `fastpmi ps` asks
//! and by the command itself started as from a shell (the figures of both
//! are printed; the 100 ms goal is the benchmark harness's); the
//! launcher's descriptors
//! and memory do not grow with the deaths; nothing of the job is left in
//! /dev/shm or /tmp.

mod common;
mod rank_role;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use common::heavy;
use common::tools::{ps_json, runtime_dir, wait_for};
use fastpmi::tools::proto::{Op, Request, VERSION};
use fastpmi::tools::rendezvous::{query, socket_path};
use rank_role::{ensure, finish, init, role};

const N: u32 = 1024;
const KILLS: usize = 100;
const OVER: Duration = Duration::from_secs(30);
const TEST: &str = "survivors_fence_on_through_100_random_deaths";

/// A rank: fence once over the job, then group fences over the survivors
/// until the stop file exists; prints `chaos ok rank R rounds K`.
fn role_chaos() -> Result<(), String> {
    let pmi = init()?;
    let stop = std::path::PathBuf::from(rank_role::env("FT_STOP")?);
    let (me, n) = (pmi.rank(), pmi.size());
    pmi.fence().map_err(|e| format!("first fence: {e}"))?;
    let mut rounds = 0u64;
    'outer: while !stop.exists() {
        let (seen, dead) = view_of_the_dead(&pmi)?;
        ensure(!dead.contains(&me), || format!("rank {me} is listed dead"))?;
        // Ranks that saw another count build another group: one of its
        // members died, so it fails, and they meet at the next count.
        let alive: Vec<u32> = (0..n).filter(|r| !dead.contains(r)).collect();
        let id = format!("alive-{seen}");
        if pmi.group_construct(&id, &alive).is_ok() {
            loop {
                if stop.exists() {
                    break 'outer;
                }
                if pmi.group_fence(&id).is_err() {
                    break;
                }
                rounds += 1;
                // The work between two fences (a job that only fenced would
                // keep 900 processes runnable on two CPUs).
                std::thread::sleep(Duration::from_millis(2));
            }
            let _ = pmi.group_leave(&id);
        }
        // A group fails when a member dies: its death is recorded by then,
        // or comes within the wait.
        pmi.wait_for_death(seen, Some(Duration::from_millis(200)))
            .map_err(|e| format!("wait for death: {e}"))?;
    }
    println!("chaos ok rank {me} rounds {rounds}");
    pmi.finalize().map_err(|e| format!("finalize: {e}"))
}

/// The count of deaths and the dead set, read as one view: ranks that saw
/// the same count must list the same survivors, or two of them could
/// construct one group id over two member lists (the later caller waiting
/// for members who already moved on). The dead set can hold a death whose
/// count is not written yet (the record comes first): read again then.
fn view_of_the_dead(pmi: &fastpmi_client::Pmi) -> Result<(u32, BTreeSet<u32>), String> {
    for _ in 0..1000 {
        let seen = pmi.deaths().map_err(|e| format!("deaths: {e}"))?;
        let dead: BTreeSet<u32> = pmi
            .dead_ranks()
            .map_err(|e| format!("dead ranks: {e}"))?
            .into_iter()
            .collect();
        if dead.len() == seen as usize {
            return Ok((seen, dead));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Err("the death count and the dead set disagreed for 1 s".into())
}

/// xorshift64*: the kill schedule's randomness (not security).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Median, slowest and how many over 100 ms of `times` (sorted here).
fn spread(times: &mut [Duration]) -> (Duration, Duration, usize) {
    times.sort();
    let over = times
        .iter()
        .filter(|t| **t > Duration::from_millis(100))
        .count();
    (
        times[times.len() / 2],
        times.last().copied().unwrap_or_default(),
        over,
    )
}

fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// Files in `dir` whose names mention the launcher `pid`.
fn leftovers(dir: &Path, pid: u32) -> Vec<String> {
    let tag = pid.to_string();
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(&tag) && (n.contains("fastpmi") || n.contains("pmix")))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn survivors_fence_on_through_100_random_deaths() {
    if role().is_some() {
        finish(role_chaos());
    }
    let _g = heavy();
    let xdg = runtime_dir("ft-chaos");
    let stop = xdg.path().join("stop");
    let job = rank_role::launch(TEST, "chaos", N, &["--fault-tolerant"])
        .env("XDG_RUNTIME_DIR", xdg.path())
        .env("FT_STOP", &stop)
        .timeout(Duration::from_secs(600))
        .spawn();
    let launcher = job.pid();
    // Every rank started and fenced once (no rank in fence 1 any more).
    let pids: Vec<(u32, u32)> =
        wait_for(Duration::from_secs(300), "1024 ranks past fence 1", || {
            let t = ps_json(xdg.path(), launcher).ok()?.into_iter().next()?;
            let ready = t.ranks.len() == N as usize
                && t.ranks.iter().all(|r| r.pid.is_some() && r.fences >= 1);
            ready.then(|| t.ranks.iter().map(|r| (r.rank, r.pid.unwrap())).collect())
        });
    let (fds0, rss0) = (fds(launcher), rss_kib(launcher));
    let mut rng = Rng(std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1);
    // 100 distinct victims, never rank 0 (it prints the last word).
    let mut victims = BTreeSet::new();
    while victims.len() < KILLS {
        victims.insert(1 + (rng.next() % u64::from(N - 1)) as u32);
    }
    let mut order: Vec<u32> = victims.iter().copied().collect();
    for i in (1..order.len()).rev() {
        order.swap(i, (rng.next() % (i as u64 + 1)) as usize);
    }
    // This thread asks as `fastpmi ps` does (ahead of the ranks where the
    // system allows it); the `fastpmi ps` it starts begins as a shell's
    // would, in the fair class at nice 0 (not inherited).
    fastpmi::tools::ahead_of_ranks();
    let socket = socket_path(&xdg.path().join("fastpmi"), launcher);
    let ps_request = Request {
        version: VERSION,
        op: Op::Ps,
        job: None,
    };
    let start = Instant::now();
    let mut ps_times: Vec<Duration> = Vec::new();
    let mut answer_times: Vec<Duration> = Vec::new();
    for (i, &v) in order.iter().enumerate() {
        // Kill i at a random moment of its 300 ms share of the 30 s.
        let share = OVER / KILLS as u32;
        let at = share * i as u32 + share.mul_f64((rng.next() % 1000) as f64 / 1000.0);
        while start.elapsed() < at {
            let t = Instant::now();
            let answer = query(&socket, &ps_request, Duration::from_secs(10));
            answer_times.push(t.elapsed());
            assert!(
                answer.as_ref().is_ok_and(|r| r.ok),
                "the launcher's ps answer failed during the deaths: {answer:?}"
            );
            let t = Instant::now();
            let ps = ps_json(xdg.path(), launcher);
            ps_times.push(t.elapsed());
            assert!(ps.is_ok(), "fastpmi ps failed during the deaths: {ps:?}");
            std::thread::sleep(
                at.saturating_sub(start.elapsed())
                    .min(Duration::from_millis(250)),
            );
        }
        let pid = pids.iter().find(|(r, _)| *r == v).unwrap().1;
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid as i32).unwrap(),
            rustix::process::Signal::KILL,
        )
        .unwrap_or_else(|e| panic!("SIGKILL rank {v} (pid {pid}): {e}"));
    }
    // Every death is recorded, then the survivors stop.
    let t = wait_for(Duration::from_secs(60), "100 dead ranks in ps", || {
        let t = ps_json(xdg.path(), launcher).ok()?.into_iter().next()?;
        (t.ranks.iter().filter(|r| r.kind == "dead").count() == KILLS).then_some(t)
    });
    let dead: BTreeSet<u32> = t
        .ranks
        .iter()
        .filter(|r| r.kind == "dead")
        .map(|r| r.rank)
        .collect();
    assert_eq!(dead, victims);
    let (fds1, rss1) = (fds(launcher), rss_kib(launcher));
    let (median_answer, slowest_answer, answers_over) = spread(&mut answer_times);
    let (median_ps, slowest_ps, ps_over) = spread(&mut ps_times);
    std::fs::write(&stop, "stop").unwrap();
    let out = job.wait();
    println!(
        "chaos: the launcher's ps answer median {median_answer:?}, slowest {slowest_answer:?}, \
         {answers_over} of {n} over 100 ms; the whole `fastpmi ps` command median {median_ps:?}, \
         slowest {slowest_ps:?}, {ps_over} of {n} over 100 ms; launcher fds {fds0} -> {fds1}, \
         RSS {rss0} -> {rss1} KiB",
        n = ps_times.len()
    );
    out.assert_success();
    let ok: BTreeSet<u32> = out
        .stdout_lines()
        .iter()
        .filter_map(|l| l.strip_prefix("chaos ok rank "))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    let survivors: BTreeSet<u32> = (0..N).filter(|r| !victims.contains(r)).collect();
    assert_eq!(ok, survivors, "{}", out.report());
    let lines = out
        .stderr_lines()
        .iter()
        .filter(|l| l.contains("the job goes on"))
        .count();
    assert_eq!(lines, KILLS, "{}", out.report());
    assert!(
        slowest_ps < Duration::from_secs(2) && slowest_answer < Duration::from_secs(2),
        "fastpmi ps took {slowest_ps:?}, the launcher's answer {slowest_answer:?}"
    );
    assert!(fds1 <= fds0, "launcher descriptors grew: {fds0} -> {fds1}");
    assert!(
        rss1 <= rss0 + 16 * 1024,
        "launcher memory grew: {rss0} -> {rss1} KiB"
    );
    for dir in ["/dev/shm", "/tmp"] {
        let left = leftovers(Path::new(dir), launcher);
        assert!(left.is_empty(), "left in {dir}: {left:?}");
    }
}
