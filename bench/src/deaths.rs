//! Death detection in a fault-tolerant job (docs/fault-tolerance.md): the
//! time from a SIGKILL of one rank to the survivors' error, at N ranks
//! (default 64, 256, 1024).
//!
//! The rank program (`fastpmi-bench __death`, Rust client, shared memory),
//! under `fastpmi --fault-tolerant -n N`: every rank inits and fences once;
//! then the victim, rank N-1, sleeps [`VICTIM_SLEEP_MS`] (so that every
//! other rank is asleep in fence 2 by then), reads `CLOCK_MONOTONIC`,
//! prints it and SIGKILLs itself; every other rank reads the clock as it
//! enters fence 2 and as the fence returns, which must be
//! `PmiError::RanksDied` naming exactly rank N-1 (anything else is a failed
//! run), sleeps [`SURVIVOR_LINGER_MS`] (so that its exit does not compete
//! with the others' wake-ups), prints both, finalizes and exits 0. The
//! lines are
//!
//! * `death_victim rank=V n=N kill_ns=K`
//! * `death_survivor rank=R n=N transport=T enter_ns=E err_ns=X`
//!
//! `CLOCK_MONOTONIC` is one clock for every process of the machine, so the
//! harness subtracts across processes: detection is `X - K` of the first
//! survivor (`death_first_ms`) and of the last (`death_last_ms`: every
//! survivor woken), nothing subtracted from it. The victim reads its clock
//! before it writes its line, so the write (a few µs) counts as detection.
//! A run counts only if the launcher exits 0, there is one victim line and
//! one survivor line per other rank, every survivor was on shared memory,
//! every survivor entered fence 2 before the kill (`death_margin_ms`, the
//! victim's kill after the last survivor's entry, must be positive), the
//! last survivor woke within [`SURVIVOR_LINGER_MS`] of the first, and the
//! launcher reported the death.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use fastpmi_client::{Pmi, PmiError};

use crate::cells::{cell, num, runs_cell, why_absent, Context};
use crate::configs::{is_shm_transport, Config, RunParams};
use crate::proc::{MemProbe, Outcome, Spec};
use crate::record::{summarize, Record};
use crate::tools::Tools;

/// The job size the target is defined at.
pub const TARGET_N: u32 = 1024;
/// The target: a survivor's first error within this long of the kill.
pub const TARGET_MS: f64 = 10.0;
/// How long the victim sleeps after fence 1 before it kills itself: the
/// others must all be asleep in fence 2 by then (a run where one was not
/// fails, see [`judge`]).
pub const VICTIM_SLEEP_MS: u64 = 250;
/// Environment variable that overrides [`VICTIM_SLEEP_MS`] (tests).
const SLEEP_ENV: &str = "FASTPMI_BENCH_DEATH_SLEEP_MS";
/// How long each survivor sleeps after its fence 2 failed, before it
/// prints, finalizes and exits: the first survivors' output, finalize and
/// exit would otherwise compete for the CPUs with the wake-ups of the
/// others, and the last survivor's figure would measure that (180 ms
/// instead of 60-90 ms at 1024 ranks on 2 CPUs). A run whose survivors
/// woke over longer than this fails, see [`judge`].
pub const SURVIVOR_LINGER_MS: u64 = 1000;

/// The figures [`judge`] records, in raw.csv column order.
pub const METRICS: &[&str] = &["death_first_ms", "death_last_ms", "death_margin_ms"];

const VICTIM_TAG: &str = "death_victim";
const SURVIVOR_TAG: &str = "death_survivor";

/// What the configuration needs.
pub fn needs(t: &Tools, _c: Config) -> Vec<&Result<PathBuf, String>> {
    vec![&t.fastpmi]
}

/// `fastpmi --fault-tolerant -n N fastpmi-bench __death`.
pub fn spec(t: &Tools, n: u32, p: &RunParams) -> Spec {
    Spec {
        program: t.fastpmi.clone().unwrap_or_default(),
        args: vec![
            "--fault-tolerant".into(),
            "-n".into(),
            OsString::from(n.to_string()),
            t.rank_exe.clone().into_os_string(),
            "__death".into(),
        ],
        env_set: vec![],
        env_remove: vec![
            fastpmi_codec::names::env::TRANSPORT.into(),
            fastpmi_codec::names::env::FENCE_YIELDS.into(),
            SLEEP_ENV.into(),
        ],
        cwd: None,
        timeout: p.timeout,
        mem: MemProbe::None,
        poll: None,
    }
}

/// `key=value` of a whitespace-separated line.
fn field<'a>(line: &'a str, k: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(k)?.strip_prefix('='))
}

fn field_u64(line: &str, k: &str) -> Result<u64, String> {
    field(line, k)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("no {k}= in {line:?}"))
}

/// Parse the ranks' lines into the record, or say why the run does not
/// count (see the module doc).
pub fn judge(n: u32, o: &Outcome, r: &mut Record) -> Result<(), String> {
    if n < 2 {
        return Err("death detection needs at least 2 ranks".into());
    }
    let victim = n - 1;
    let n_field = n.to_string();
    let tagged = |tag: &'static str| {
        o.stdout
            .lines()
            .filter(move |l| l.split_whitespace().next() == Some(tag))
    };
    let victims: Vec<&str> = tagged(VICTIM_TAG).collect();
    let [v] = victims[..] else {
        return Err(format!(
            "{} \"{VICTIM_TAG}\" lines on stdout, expected 1",
            victims.len()
        ));
    };
    if field(v, "rank") != Some(victim.to_string().as_str()) || field(v, "n") != Some(&n_field) {
        return Err(format!("victim line for another rank or job size: {v}"));
    }
    let kill = field_u64(v, "kill_ns")?;

    let mut seen = vec![false; victim as usize];
    let (mut first, mut last, mut last_enter) = (u64::MAX, 0u64, 0u64);
    let mut late = None;
    for l in tagged(SURVIVOR_TAG) {
        let rank: u32 = field(l, "rank")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("no rank= in {l:?}"))?;
        if field(l, "n") != Some(&n_field) {
            return Err(format!("survivor line for another job size: {l}"));
        }
        match seen.get_mut(rank as usize) {
            Some(s) if !*s => *s = true,
            Some(_) => return Err(format!("two survivor lines of rank {rank}")),
            None => return Err(format!("survivor line of rank {rank} (victim {victim})")),
        }
        let transport = field(l, "transport").unwrap_or("unreported");
        if !is_shm_transport(transport) {
            r.transport = Some(transport.to_string());
            return Err(format!(
                "rank {rank} reported transport={transport}, this configuration needs shm"
            ));
        }
        let (enter, err) = (field_u64(l, "enter_ns")?, field_u64(l, "err_ns")?);
        if err < kill {
            return Err(format!(
                "rank {rank}'s fence 2 failed {} ms before the kill",
                num((kill - err) as f64 / 1e6)
            ));
        }
        if enter >= kill && late.is_none_or(|(_, e)| enter > e) {
            late = Some((rank, enter));
        }
        first = first.min(err);
        last = last.max(err);
        last_enter = last_enter.max(enter);
    }
    r.transport = Some("shm".into());
    let missing = seen.iter().filter(|s| !**s).count();
    if missing > 0 {
        let example = seen.iter().position(|s| !*s).unwrap_or(0);
        return Err(format!(
            "{missing} survivor line(s) missing of {victim} (first: rank {example})"
        ));
    }
    if last - first >= SURVIVOR_LINGER_MS * 1_000_000 {
        return Err(format!(
            "the survivors woke over {} ms, more than their {SURVIVOR_LINGER_MS} ms sleep before exiting: the first ones' exits overlap the last ones' wake-ups",
            num((last - first) as f64 / 1e6)
        ));
    }
    if let Some((rank, enter)) = late {
        return Err(format!(
            "rank {rank} entered fence 2 {} ms after the victim's kill: not every survivor was waiting (victim's sleep {VICTIM_SLEEP_MS} ms too short)",
            num((enter - kill) as f64 / 1e6)
        ));
    }
    let want = format!("rank {victim} was killed by signal 9");
    if !o.stderr.contains(&want) {
        return Err(format!(
            "the launcher did not report the death (no \"{want}\" on stderr)"
        ));
    }
    let ms = |ns: u64| ns as f64 / 1e6;
    r.metrics.insert("death_first_ms".into(), ms(first - kill));
    r.metrics.insert("death_last_ms".into(), ms(last - kill));
    r.metrics
        .insert("death_margin_ms".into(), ms(kill - last_enter));
    Ok(())
}

/// The death-detection target, when the family ran.
pub fn target_lines(ctx: &Context) -> Vec<String> {
    let Some((n, caveat)) = crate::cells::judged_at(&ctx.opts.death_sizes, TARGET_N) else {
        return Vec::new();
    };
    let c = Config::DeathDetect;
    let m = |k: &'static str| summarize(ctx.records, c, n, move |r| r.get(k)).map(|s| s.median);
    let what = format!(
        "N={n} death detection (SIGKILL to a survivor's first error, target < {TARGET_MS:.0} ms)"
    );
    vec![match (m("death_first_ms"), m("death_last_ms")) {
        (Some(first), Some(last)) => format!(
            "{what}: {} ms, all {} survivors woken in {} ms: {}{caveat}",
            num(first),
            n - 1,
            num(last),
            if first < TARGET_MS { "met" } else { "missed" }
        ),
        _ => format!(
            "{what}: missed (not measured: {}){caveat}",
            why_absent(ctx, c, n)
        ),
    }]
}

/// The report's death-detection section.
pub fn section(ctx: &Context, w: &mut String) {
    let _ = writeln!(w, "\n## Death detection\n");
    let _ = writeln!(
        w,
        "Rust client, shared memory, `fastpmi --fault-tolerant -n N`: every rank fences once; rank N-1 sleeps {VICTIM_SLEEP_MS} ms (the others wait in fence 2 meanwhile), reads CLOCK_MONOTONIC and SIGKILLs itself; each other rank reads the clock when its fence 2 returns `RanksDied`, then sleeps {SURVIVOR_LINGER_MS} ms before it prints, finalizes and exits (so that no survivor's exit competes with the others' wake-ups). Detection is a survivor's clock minus the victim's (one clock for every process), nothing subtracted: the first survivor's error, and the last's (every survivor woken). The margin is how long before the kill the last survivor entered fence 2 (a run where one entered after the kill fails). ms: median (min–max) over runs.\n"
    );
    if ctx.opts.death_sizes.is_empty() {
        let _ = writeln!(w, "Not run (`--death-sizes none`).");
        return;
    }
    let _ = writeln!(
        w,
        "| N | runs | first survivor's error ms | last survivor's error ms | margin ms |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|");
    let c = Config::DeathDetect;
    for &n in &ctx.opts.death_sizes {
        let s = |k: &'static str| cell(summarize(ctx.records, c, n, move |r| r.get(k)), 1.0);
        let _ = writeln!(
            w,
            "| {n} | {} | {} | {} | {} |",
            runs_cell(ctx, c, n),
            s("death_first_ms"),
            s("death_last_ms"),
            s("death_margin_ms"),
        );
    }
}

// ---------------------------------------------------------------------------
// The rank program
// ---------------------------------------------------------------------------

/// CLOCK_MONOTONIC in ns: comparable across the processes of the machine
/// (`Instant` is not).
fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// `fastpmi-bench __death`; returns the exit status.
pub fn rank_main() -> i32 {
    match death_rank() {
        Ok(()) => 0,
        Err(e) => {
            let rank =
                std::env::var(fastpmi_codec::names::env::PMI_RANK).unwrap_or_else(|_| "?".into());
            eprintln!("fastpmi-bench __death: rank {rank}: {e}");
            1
        }
    }
}

fn death_rank() -> Result<(), String> {
    use std::io::Write;
    let e = |what: &'static str| move |err: PmiError| format!("{what}: {err}");
    let sleep_ms = std::env::var(SLEEP_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(VICTIM_SLEEP_MS);
    let pmi = Pmi::init().map_err(e("Pmi::init"))?;
    let (rank, size) = (pmi.rank(), pmi.size());
    if size < 2 {
        return Err("needs at least 2 ranks".into());
    }
    let victim = size - 1;
    pmi.fence().map_err(e("fence 1"))?;
    if rank == victim {
        std::thread::sleep(Duration::from_millis(sleep_ms));
        let kill = monotonic_ns();
        let mut out = std::io::stdout().lock();
        writeln!(out, "{VICTIM_TAG} rank={rank} n={size} kill_ns={kill}")
            .and_then(|()| out.flush())
            .map_err(|e| format!("stdout: {e}"))?;
        let me = rustix::process::getpid();
        rustix::process::kill_process(me, rustix::process::Signal::KILL)
            .map_err(|e| format!("kill itself: {e}"))?;
        // SIGKILL is not blockable: not reached.
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    let enter = monotonic_ns();
    let res = pmi.fence();
    let err = monotonic_ns();
    match res {
        Err(PmiError::RanksDied { ranks, .. }) if ranks == [victim] => {}
        Err(PmiError::RanksDied { ranks, message }) => {
            return Err(format!(
                "fence 2: RanksDied names {ranks:?}, expected [{victim}]: {message}"
            ))
        }
        Err(other) => return Err(format!("fence 2: {other}, expected RanksDied")),
        Ok(()) => return Err(format!("fence 2 completed, rank {victim} was killed")),
    }
    // Nothing (a write to the launcher, finalize, exit) competes with the
    // wake-ups of the other survivors for the CPUs.
    std::thread::sleep(Duration::from_millis(SURVIVOR_LINGER_MS));
    let transport = format!("{:?}", pmi.transport()).to_lowercase();
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{SURVIVOR_TAG} rank={rank} n={size} transport={transport} enter_ns={enter} err_ns={err}"
    )
    .and_then(|()| out.flush())
    .map_err(|e| format!("stdout: {e}"))?;
    pmi.finalize().map_err(e("finalize"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::End;
    use crate::record::Status;

    fn outcome(stdout: &str, stderr: &str) -> Outcome {
        Outcome {
            end: End::Exited(0),
            wall: Duration::from_millis(5),
            stdout: stdout.into(),
            stderr: stderr.into(),
            mem: None,
            polls: Vec::new(),
        }
    }

    const DIED: &str = "fastpmi: rank 3 was killed by signal 9 (SIGKILL) during fence 2; the job goes on (fault tolerant)\n";

    fn lines(kill: u64, survivors: &[(u32, u64, u64)]) -> String {
        let mut s = format!("death_victim rank=3 n=4 kill_ns={kill}\n");
        for (r, enter, err) in survivors {
            let _ = writeln!(
                s,
                "death_survivor rank={r} n=4 transport=shm enter_ns={enter} err_ns={err}"
            );
        }
        s
    }

    fn judged(stdout: &str, stderr: &str) -> (Result<(), String>, Record) {
        let mut r = Record::skipped(Config::DeathDetect, 4, 0, "");
        r.status = Status::Ok;
        let res = judge(4, &outcome(stdout, stderr), &mut r);
        (res, r)
    }

    #[test]
    fn first_and_last_survivor() {
        let ok = lines(
            10_000_000,
            &[
                (0, 1_000_000, 10_500_000),
                (2, 2_000_000, 12_000_000),
                (1, 0, 11_000_000),
            ],
        );
        let (res, r) = judged(&ok, DIED);
        res.unwrap();
        assert_eq!(r.get("death_first_ms"), Some(0.5));
        assert_eq!(r.get("death_last_ms"), Some(2.0));
        assert_eq!(r.get("death_margin_ms"), Some(8.0));
    }

    #[test]
    fn runs_that_do_not_count() {
        let good = [(0, 1, 20), (1, 1, 20), (2, 1, 20)];
        // A survivor missing, twice, or the victim's rank.
        let (res, _) = judged(&lines(10, &good[..2]), DIED);
        assert!(res.unwrap_err().contains("1 survivor line(s) missing"));
        let (res, _) = judged(&lines(10, &[(0, 1, 20), (0, 1, 20), (2, 1, 20)]), DIED);
        assert!(res.unwrap_err().contains("two survivor lines"));
        let (res, _) = judged(&lines(10, &[(0, 1, 20), (1, 1, 20), (3, 1, 20)]), DIED);
        assert!(res.is_err());
        // A survivor that entered fence 2 after the kill.
        let (res, _) = judged(&lines(10, &[(0, 1, 20), (1, 11, 20), (2, 1, 20)]), DIED);
        assert!(res.unwrap_err().contains("rank 1 entered fence 2"));
        // An error before the kill.
        let (res, _) = judged(&lines(10, &[(0, 1, 5), (1, 1, 20), (2, 1, 20)]), DIED);
        assert!(res.unwrap_err().contains("before the kill"));
        // No victim line, the launcher silent, the socket.
        let no_victim: String = lines(10, &good)
            .lines()
            .skip(1)
            .map(|l| l.to_string() + "\n")
            .collect();
        assert!(judged(&no_victim, DIED).0.is_err());
        assert!(judged(&lines(10, &good), "").0.is_err());
        let sock = lines(10, &good).replace("transport=shm", "transport=socket");
        assert!(judged(&sock, DIED)
            .0
            .unwrap_err()
            .contains("transport=socket"));
    }

    #[test]
    fn target_size() {
        assert_eq!(
            crate::cells::judged_at(&[64, 256, 1024], TARGET_N),
            Some((1024, String::new()))
        );
        assert_eq!(crate::cells::judged_at(&[4, 2048], TARGET_N).unwrap().0, 4);
        assert_eq!(crate::cells::judged_at(&[2048], TARGET_N).unwrap().0, 2048);
        assert_eq!(crate::cells::judged_at(&[], TARGET_N), None);
    }
}
