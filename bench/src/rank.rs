//! `fastpmi-bench __rank`: the business-card exchange of one rank, with the
//! Rust client ([`fastpmi_client::Pmi`]).
//!
//! It mirrors `bench/c/pmi2_exchange.c` step for step (same keys, same
//! 100-byte values, same get order, same untimed third round for the
//! slowest-rank figures) so that its line and the C program's line are the
//! same measurement and the harness parses both with one parser. Rank 0
//! prints the C program's fields plus:
//!
//! * `transport=` what [`Pmi::transport`] says (`shm`, `socket`,
//!   `singleton`, ...): the harness checks it, because a "shared-memory"
//!   figure measured over the socket would be a lie;
//! * `rss_delta_kb=` / `max_rss_delta_kb=`: VmRSS after `Pmi::init` minus
//!   VmRSS before it (rank 0 / largest over ranks): what the client adds to
//!   every rank just by connecting (a mapped segment shows up here once it is
//!   touched);
//! * `rss_exchange_kb=` / `max_rss_exchange_kb=`: the same from before init
//!   to after the second fence, i.e. including the pages the exchange itself
//!   faulted in (shared-memory gets touch the segment), and
//!   `rss_shmem_exchange_kb=`, the part of rank 0's that is shared-memory
//!   pages (counted in every rank's RSS, present once);
//! * with `FASTPMI_BENCH_FENCE_LOOP=K` in the environment, `fence_loop_us=`:
//!   rank 0's mean time per fence over K back-to-back fences run after
//!   everything above (one untimed fence first and one after, as the futex
//!   floor does: without the one after, ranks released from the last timed
//!   fence before rank 0 finalize and exit while rank 0 waits for the CPU,
//!   and that teardown, about 0.1 s at 1024 ranks on 2 CPUs, landed in
//!   the mean).
//!   The exchange's own fences cannot be compared with the floor: the first
//!   absorbs launch skew and rank 0's second waits for the slowest rank's
//!   get-all; a loop of fences with every rank ready is what the floor
//!   measures.
//!
//! With `FASTPMI_BENCH_LATE_RANK=R` and `FASTPMI_BENCH_LATE_MS=T`, rank R
//! sleeps T ms before `Pmi::init`, so that every other rank sits in the
//! exchange's first fence meanwhile (what `fastpmi ps` is measured
//! against; see `ps.rs`). Its `init_us` and everyone's `fence_us` then
//! include the sleep.

use std::io::Write;
use std::time::Instant;

use fastpmi_client::{Pmi, PmiError};

/// Environment variable that turns on the steady-state fence loop.
pub const FENCE_LOOP_ENV: &str = "FASTPMI_BENCH_FENCE_LOOP";
/// The rank that starts late (see the module doc).
pub const LATE_RANK_ENV: &str = "FASTPMI_BENCH_LATE_RANK";
/// How long it sleeps before PMI init, ms.
pub const LATE_MS_ENV: &str = "FASTPMI_BENCH_LATE_MS";

/// Length of every business card, as in `pmi2_exchange.c`.
pub const VALUE_LEN: usize = 100;

/// The card of rank `r`: byte for byte what `value_for()` in
/// `pmi2_exchange.c` builds, so C and Rust ranks could verify each other.
pub fn value_for(r: u32) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut s = format!("rank-{r}-");
    s.truncate(VALUE_LEN);
    for i in s.len()..VALUE_LEN {
        s.push(char::from(ALPHABET[(r as usize * 7 + i) % 36]));
    }
    s
}

/// Entry point; returns the process exit status.
pub fn main() -> i32 {
    match exchange() {
        Ok(()) => 0,
        Err(e) => {
            let rank =
                std::env::var(fastpmi_codec::names::env::PMI_RANK).unwrap_or_else(|_| "?".into());
            eprintln!("fastpmi-bench __rank: rank {rank}: {e}");
            1
        }
    }
}

/// A `kB` field of this process's status (e.g. `VmRSS:`), 0 if unreadable.
fn own_status_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| status_field_kb(&s, field))
        .unwrap_or(0)
}

/// This process's resident set size in KiB (VmRSS).
pub fn own_rss_kb() -> u64 {
    own_status_kb("VmRSS:")
}

/// A `kB` field of a `/proc/<pid>/status` text, e.g. `VmHWM:`.
pub fn status_field_kb(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

fn pmi_err(what: &str) -> impl Fn(PmiError) -> String + '_ {
    move |e| format!("{what}: {e}")
}

fn ns(t: Instant) -> u64 {
    t.elapsed().as_nanos() as u64
}

/// What each rank shares in the untimed third round.
#[derive(Default, Clone, Copy)]
struct RankTimes {
    init_ns: u64,
    fence_ns: u64,
    getall_ns: u64,
    fence2_ns: u64,
    rss_init_kb: i64,
    rss_exchange_kb: i64,
}

impl RankTimes {
    fn encode(&self) -> String {
        format!(
            "{},{},{},{},{},{}",
            self.init_ns,
            self.fence_ns,
            self.getall_ns,
            self.fence2_ns,
            self.rss_init_kb,
            self.rss_exchange_kb
        )
    }

    fn decode(s: &str) -> Option<RankTimes> {
        let f: Vec<&str> = s.split(',').collect();
        if f.len() != 6 {
            return None;
        }
        Some(RankTimes {
            init_ns: f[0].parse().ok()?,
            fence_ns: f[1].parse().ok()?,
            getall_ns: f[2].parse().ok()?,
            fence2_ns: f[3].parse().ok()?,
            rss_init_kb: f[4].parse().ok()?,
            rss_exchange_kb: f[5].parse().ok()?,
        })
    }
}

/// This process's rank as the launcher told it (before PMI init):
/// `PMI_RANK` on a PMI_FD launch, `PMI_ID` on a PMI_PORT one.
fn launch_rank() -> Option<u32> {
    [
        fastpmi_codec::names::env::PMI_RANK,
        fastpmi_codec::names::env::PMI_ID,
    ]
    .iter()
    .find_map(|k| std::env::var(k).ok()?.parse().ok())
}

/// Sleep before init if this is the late rank (see the module doc).
fn sleep_if_late() {
    let env = |k| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    if let (Some(late), Some(ms)) = (env(LATE_RANK_ENV), env(LATE_MS_ENV)) {
        if launch_rank().map(u64::from) == Some(late) {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
    }
}

fn exchange() -> Result<(), String> {
    sleep_if_late();
    let rss_before = own_rss_kb() as i64;
    // Pages of shared mappings (the job segment) are in VmRSS of every rank
    // that touched them but exist once; report them apart.
    let shmem_before = own_status_kb("RssShmem:") as i64;
    let t_start = Instant::now();
    let pmi = Pmi::init().map_err(pmi_err("Pmi::init"))?;
    let init_ns = ns(t_start);
    let rss_init_kb = own_rss_kb() as i64 - rss_before;
    let (rank, size) = (pmi.rank(), pmi.size());

    let key = format!("bx-{rank}");
    let value = value_for(rank);
    let t = Instant::now();
    pmi.put(&key, &value).map_err(pmi_err("put"))?;
    let put_ns = ns(t);

    let t = Instant::now();
    pmi.fence().map_err(pmi_err("fence (1)"))?;
    let fence_ns = ns(t);

    let t = Instant::now();
    for i in 1..=size {
        let r = (rank + i) % size;
        let key = format!("bx-{r}");
        let got = pmi
            .get(&key, Some(r))
            .map_err(|e| format!("get {key} from rank {r}: {e}"))?;
        // Verify every byte: a fast get that returns the wrong card is a bug.
        let want = value_for(r);
        if got.as_deref() != Some(want.as_bytes()) {
            return Err(format!(
                "{key} = {:?}, expected {want:?}",
                got.map(|v| String::from_utf8_lossy(&v).into_owned())
            ));
        }
    }
    let getall_ns = ns(t);

    let t = Instant::now();
    pmi.fence().map_err(pmi_err("fence (2)"))?;
    let fence2_ns = ns(t);
    let rss_exchange_kb = own_rss_kb() as i64 - rss_before;
    let shmem_exchange_kb = own_status_kb("RssShmem:") as i64 - shmem_before;

    // Untimed gather of every rank's figures (after every timed phase).
    let t = Instant::now();
    let mine = RankTimes {
        init_ns,
        fence_ns,
        getall_ns,
        fence2_ns,
        rss_init_kb,
        rss_exchange_kb,
    };
    pmi.put(format!("bt-{rank}"), mine.encode())
        .map_err(pmi_err("put (times)"))?;
    pmi.fence().map_err(pmi_err("fence (3)"))?;
    let mut all = Vec::new();
    if rank == 0 {
        for r in 0..size {
            let v = pmi
                .get(format!("bt-{r}"), Some(r))
                .map_err(pmi_err("get (times)"))?
                .unwrap_or_default();
            let s = String::from_utf8_lossy(&v);
            all.push(
                RankTimes::decode(&s).ok_or_else(|| format!("bad times from rank {r}: {s:?}"))?,
            );
        }
    }
    let gather_ns = ns(t);

    // Steady-state fences (see the module doc), after every other phase.
    let loops: u32 = std::env::var(FENCE_LOOP_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut fence_loop = String::new();
    if loops > 0 {
        pmi.fence().map_err(pmi_err("fence (loop warm-up)"))?;
        let t = Instant::now();
        for _ in 0..loops {
            pmi.fence().map_err(pmi_err("fence (loop)"))?;
        }
        let mean_us = ns(t) as f64 / 1e3 / f64::from(loops);
        // Untimed: keeps every rank in the job until rank 0 has read its
        // clock (see the module doc).
        pmi.fence().map_err(pmi_err("fence (loop end)"))?;
        fence_loop = format!(" fence_loop_us={mean_us:.1} fence_loop_n={loops}");
    }

    let t = Instant::now();
    let transport = format!("{:?}", pmi.transport()).to_lowercase();
    let segment = pmi
        .segment_len()
        .map(|b| format!(" segment_kb={}", b / 1024))
        .unwrap_or_default();
    pmi.finalize().map_err(pmi_err("finalize"))?;
    let finalize_ns = ns(t);
    let total_ns = ns(t_start);

    if rank == 0 {
        let us = |x: u64| x as f64 / 1e3;
        let max = |f: fn(&RankTimes) -> u64| all.iter().map(f).max().unwrap_or(0);
        let max_i = |f: fn(&RankTimes) -> i64| all.iter().map(f).max().unwrap_or(0);
        let min_fence = all.iter().map(|t| t.fence_ns).min().unwrap_or(0);
        let (max_getall_rank, max_getall) = all
            .iter()
            .enumerate()
            .map(|(r, t)| (r, t.getall_ns))
            .max_by_key(|&(_, g)| g)
            .unwrap_or((0, 0));
        let sum_getall: u64 = all.iter().map(|t| t.getall_ns).sum();
        let line = format!(
            "n={size} init_us={:.1} put_us={:.1} fence_us={:.1} getall_us={:.1} fence2_us={:.1} \
             finalize_us={:.1} per_get_us={:.3} max_init_us={:.1} max_fence_us={:.1} \
             min_fence_us={:.1} max_getall_us={:.1} max_getall_rank={max_getall_rank} \
             mean_getall_us={:.1} max_fence2_us={:.1} gather_us={:.1} total_us={:.1} \
             transport={transport} rss_delta_kb={rss_init_kb} max_rss_delta_kb={} \
             rss_exchange_kb={rss_exchange_kb} max_rss_exchange_kb={} \
             rss_shmem_exchange_kb={shmem_exchange_kb}{fence_loop}{segment}",
            us(init_ns),
            us(put_ns),
            us(fence_ns),
            us(getall_ns),
            us(fence2_ns),
            us(finalize_ns),
            us(getall_ns) / f64::from(size.max(1)),
            us(max(|t| t.init_ns)),
            us(max(|t| t.fence_ns)),
            us(min_fence),
            us(max_getall),
            us(sum_getall) / f64::from(size.max(1)),
            us(max(|t| t.fence2_ns)),
            us(gather_ns),
            us(total_ns),
            max_i(|t| t.rss_init_kb),
            max_i(|t| t.rss_exchange_kb),
        );
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}")
            .and_then(|()| out.flush())
            .map_err(|e| format!("stdout: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_matches_the_c_program() {
        // pmi2_exchange.c: "rank-0-" then alphabet[(r*7+i)%36] from i=7.
        let v = value_for(0);
        assert_eq!(v.len(), VALUE_LEN);
        assert!(v.starts_with("rank-0-hijklmnop"));
        let v = value_for(1000);
        assert_eq!(v.len(), VALUE_LEN);
        // (1000*7 + 10) % 36 = 26 -> '0'
        assert_eq!(&v[..11], "rank-1000-0");
    }

    #[test]
    fn times_round_trip() {
        let t = RankTimes {
            init_ns: 1,
            fence_ns: 2,
            getall_ns: 3,
            fence2_ns: 4,
            rss_init_kb: -5,
            rss_exchange_kb: 6,
        };
        let u = RankTimes::decode(&t.encode()).unwrap();
        assert_eq!(u.encode(), t.encode());
        assert!(RankTimes::decode("1,2,3").is_none());
    }
}
