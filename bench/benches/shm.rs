//! Criterion benches of the shared-memory job segment:
//!
//! ```sh
//! cargo bench -p fastpmi-bench --bench shm                 # all (about 1–2 minutes on 2 cores)
//! cargo bench -p fastpmi-bench --bench shm -- kvs_get      # one group
//! ```
//!
//! * `kvs_get/...`: one get of a random existing key in a table of 64k keys
//!   (100-byte values), at two load factors (the default sizing stays under
//!   20%).
//! * `kvs_put/...`: one put of a fresh key (100-byte value) into a table
//!   filling from empty to 25%; a new segment is made (outside the timing)
//!   whenever 64k keys are in.
//! * `fence/N`: one fence of N **processes**: this process is party 0, N-1
//!   helper processes (this binary re-executed with `FASTPMI_BENCH_FENCE_HELPER`
//!   set to the SysV segment id) fence in a loop until the segment is aborted.
//!
//! Medians are in `target/criterion/<group>/<bench>/new/estimates.json`.

use std::hint::black_box;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{criterion_group, BenchmarkId, Criterion};
use fastpmi_segment::{JobSegment, MemPool, SharedFutex};
use shm_layout::{Aborted, SegmentParams};

const HELPER_ENV: &str = "FASTPMI_BENCH_FENCE_HELPER";
const HELPER_PARENT_ENV: &str = "FASTPMI_BENCH_FENCE_PARENT";

/// Keys in the KVS benches.
const KEYS: usize = 1 << 16;
const VALUE_LEN: usize = 100;

fn main() {
    if let Ok(id) = std::env::var(HELPER_ENV) {
        std::process::exit(fence_helper(&id));
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
    println!("reproduce with: cargo bench -p fastpmi-bench --bench shm");
}

criterion_group!(benches, kvs_get, kvs_put, fence);

// ---------------------------------------------------------------------------
// KVS

/// A segment whose KVS has `slots` slots and room for 64k values.
fn kvs_segment(slots: u32, job: &str) -> JobSegment {
    let params = SegmentParams {
        kvs_slots: slots,
        kvs_arena_bytes: 16 << 20,
        ..SegmentParams::for_ranks(2)
    };
    JobSegment::create(MemPool::AnonMmap, &params, job).expect("create segment")
}

fn key(i: usize) -> Vec<u8> {
    format!("key-{i}").into_bytes()
}

fn value(i: usize) -> Vec<u8> {
    let mut v = format!("value-of-{i}-").into_bytes();
    v.resize(VALUE_LEN, b'x');
    v
}

/// `0..n` in a fixed pseudo-random order.
fn shuffled(n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
    v
}

fn kvs_get(c: &mut Criterion) {
    let mut group = c.benchmark_group("kvs_get");
    // 64k keys in 256k slots (load 25%) and in 128k slots (load 50%).
    for (name, slots) in [
        ("64k_keys_load_25pct", 1 << 18),
        ("64k_keys_load_50pct", 1 << 17),
    ] {
        let js = kvs_segment(slots, "bench-get");
        let kvs = js.seg().kvs();
        for i in 0..KEYS {
            kvs.put(&key(i), &value(i), &SharedFutex).expect("fill");
        }
        // Random existing keys, pre-generated, cycled through.
        let keys: Vec<Vec<u8>> = shuffled(KEYS).into_iter().map(key).collect();
        for (k, i) in keys.iter().zip(shuffled(KEYS)) {
            assert_eq!(kvs.get(k), Some(&value(i)[..]), "fill lost a key");
        }
        group.bench_function(name, |b| {
            let mut next = 0;
            b.iter(|| {
                let k = &keys[next];
                next = (next + 1) % KEYS;
                black_box(kvs.get(black_box(k)))
            })
        });
    }
    group.finish();
}

fn kvs_put(c: &mut Criterion) {
    let mut group = c.benchmark_group("kvs_put");
    let keys: Vec<Vec<u8>> = shuffled(KEYS).into_iter().map(key).collect();
    let val = value(0);
    let slots = 1 << 18;
    let mut js = kvs_segment(slots, "bench-put");
    let mut next = 0;
    group.bench_function("fresh_key_load_0_to_25pct", |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                if next == KEYS {
                    // Full (64k keys): a fresh table, outside the timing.
                    js = kvs_segment(slots, "bench-put");
                    next = 0;
                }
                let n = left.min((KEYS - next) as u64) as usize;
                let kvs = js.seg().kvs();
                let t = Instant::now();
                for k in &keys[next..next + n] {
                    if let Err(e) = kvs.put(black_box(k), black_box(&val), &SharedFutex) {
                        panic!("put: {e}");
                    }
                }
                timed += t.elapsed();
                next += n;
                left -= n as u64;
            }
            timed
        })
    });
    group.finish();
}

// ---------------------------------------------------------------------------
// Fence across processes

/// A SysV segment for `n` ranks with `n - 1` helper processes fencing in it.
struct FenceJob {
    js: JobSegment,
    helpers: Vec<Child>,
}

impl FenceJob {
    fn start(n: u32) -> FenceJob {
        let js = JobSegment::create(
            MemPool::Sysv,
            &SegmentParams::for_ranks(n),
            &format!("bench-fence-{n}"),
        )
        .expect("create SysV segment");
        let id = js.mapping().sysv_id().expect("SysV id");
        let exe = std::env::current_exe().expect("current_exe");
        let mut job = FenceJob {
            js,
            helpers: Vec::new(),
        };
        for _ in 1..n {
            let child = Command::new(&exe)
                .env(HELPER_ENV, id.to_string())
                .env(HELPER_PARENT_ENV, std::process::id().to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("spawn fence helper");
            job.helpers.push(child);
        }
        // Everybody attached and fencing before the clock starts.
        job.js
            .seg()
            .fence()
            .fence(&SharedFutex)
            .expect("first fence");
        job
    }
}

impl Drop for FenceJob {
    /// Aborts the segment so the helpers leave their fence loop, and reaps them.
    fn drop(&mut self) {
        self.js.seg().abort(0, Aborted::LAUNCHER, &SharedFutex);
        let deadline = Instant::now() + Duration::from_secs(10);
        for child in &mut self.helpers {
            loop {
                match child.try_wait() {
                    Ok(Some(status)) if status.success() => break,
                    Ok(Some(status)) => {
                        eprintln!("fence helper {} ended with {status}", child.id());
                        break;
                    }
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(2))
                    }
                    _ => {
                        eprintln!(
                            "fence helper {} did not leave its fence; killed",
                            child.id()
                        );
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                }
            }
        }
    }
}

/// A helper process: fence until the job is aborted, then exit 0.
fn fence_helper(id: &str) -> i32 {
    // Die with the bench process, even if it is killed before it aborts.
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    let parent = std::env::var(HELPER_PARENT_ENV).ok();
    let ppid = rustix::process::getppid().map(|p| p.as_raw_nonzero().get().to_string());
    if parent != ppid {
        return 3;
    }
    let Ok(id) = id.parse::<i32>() else {
        eprintln!("fence helper: bad segment id {id:?}");
        return 2;
    };
    let js = match JobSegment::attach_sysv(id) {
        Ok(js) => js,
        Err(e) => {
            eprintln!("fence helper: cannot attach segment {id}: {e}");
            return 2;
        }
    };
    let fence = js.seg().fence();
    loop {
        if fence.fence(&SharedFutex).is_err() {
            return 0; // aborted: the bench is over
        }
    }
}

fn fence(c: &mut Criterion) {
    let mut group = c.benchmark_group("fence");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    for n in [2u32, 8, 64] {
        let job = FenceJob::start(n);
        let fence = job.js.seg().fence();
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter_custom(|iters| {
                let t = Instant::now();
                for _ in 0..iters {
                    fence.fence(&SharedFutex).expect("fence");
                }
                t.elapsed()
            })
        });
        drop(job);
    }
    group.finish();
}
