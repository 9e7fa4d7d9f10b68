//! Loom models of the shm-layout algorithms (KVS, fence barrier, node
//! attributes, abort), one file per property under `tests/`. Run with:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p loom-tests --release
//! ```
//!
//! Without `--cfg loom` this crate and its tests compile to nothing.
//!
//! The models run the real code on heap-allocated jobs
//! (`shm_layout::heap::HeapJob`) with `shm_layout::futex::LoomFutex`, whose
//! waits ignore timeouts: a model that finishes proves that no wake-up is
//! lost (a lost one shows up as a loom deadlock), rather than relying on the
//! 100 ms re-checks the real waits also do. Value and key bytes are loom
//! cells, so a read that could see a half-written entry fails the model.
//!
//! Two conventions, both because of loom's partial-order reduction:
//! * every racing party is a spawned thread and the model's main thread only
//!   sets up, joins and checks: loom does not explore preempting the main
//!   thread for a spawned thread whose first operation is an atomic load
//!   (tokio-rs/loom#392), which would silently hide interleavings;
//! * models that race a reader against a writer count the outcomes they saw
//!   ([`Outcomes`]) and assert afterwards that every possible one was
//!   explored, so such a gap cannot make a model pass vacuously.

#[cfg(loom)]
pub use self::support::*;

#[cfg(loom)]
mod support {
    use std::collections::BTreeSet;
    use std::sync::Mutex;

    use shm_layout::{key_hash, SegmentParams};

    /// Slots in the models' tables: small, so probes wrap and collide.
    pub const SLOTS: u32 = 4;

    /// A tiny job for `nranks` parties (tables of [`SLOTS`] slots, a few
    /// hundred bytes of values).
    pub fn tiny_params(nranks: u32) -> SegmentParams {
        SegmentParams {
            nranks,
            kvs_slots: SLOTS,
            kvs_arena_bytes: 256,
            nodeattr_slots: SLOTS,
            nodeattr_arena_bytes: 256,
            max_value_len: 1024,
        }
    }

    /// A key other than `key` whose probe starts at the same slot, so puts
    /// of the two race for the same slots.
    pub fn colliding_key(key: &[u8]) -> Vec<u8> {
        let home = |k: &[u8]| key_hash(k) & (SLOTS as u64 - 1);
        (0u32..)
            .map(|i| format!("other-{i}").into_bytes())
            .find(|k| k.as_slice() != key && home(k) == home(key))
            .expect("some key collides")
    }

    /// Runs `parties` ranks of `job` through `generations` fences, each rank
    /// on its own thread, checking that nobody leaves a generation before
    /// all arrived in it. Each waiter yields the CPU up to `yields` times
    /// before it sleeps. Returns, per rank, whether it was the last arriver
    /// of each generation.
    pub fn fence_generations(
        job: &loom::sync::Arc<shm_layout::heap::HeapJob>,
        futex: &loom::sync::Arc<shm_layout::futex::LoomFutex>,
        parties: u32,
        generations: usize,
        yields: u32,
    ) -> Vec<Vec<bool>> {
        use loom::sync::atomic::{AtomicUsize, Ordering};
        use loom::sync::Arc;
        let arrived: Arc<Vec<AtomicUsize>> =
            Arc::new((0..generations).map(|_| AtomicUsize::new(0)).collect());
        let ranks: Vec<_> = (0..parties)
            .map(|rank| {
                let (job, futex, arrived) = (job.clone(), futex.clone(), arrived.clone());
                loom::thread::spawn(move || {
                    let fence = job.view().fence().for_rank(rank).with_yield_limit(yields);
                    let mut last = Vec::new();
                    for (g, arrived) in arrived.iter().enumerate() {
                        // Relaxed on purpose: only the barrier orders these.
                        arrived.fetch_add(1, Ordering::Relaxed);
                        let arrival = fence.arrive(&*futex);
                        assert_eq!(arrival.generation as usize, g);
                        last.push(arrival.last);
                        fence.wait(arrival, &*futex).unwrap();
                        assert_eq!(
                            arrived.load(Ordering::Relaxed),
                            parties as usize,
                            "rank {rank} left generation {g} early"
                        );
                    }
                    last
                })
            })
            .collect();
        ranks.into_iter().map(|t| t.join().unwrap()).collect()
    }

    /// A mixed job's one fence: ranks `0..shm` fence through shared memory,
    /// the rest are socket ranks the launcher arrives for anonymously (one
    /// thread, as the store does) and whose completion it learns by waiting
    /// on the generation word, as its watcher does.
    pub fn fence_with_socket_ranks(
        job: &loom::sync::Arc<shm_layout::heap::HeapJob>,
        futex: &loom::sync::Arc<shm_layout::futex::LoomFutex>,
        shm: u32,
    ) {
        let ranks: Vec<_> = (0..shm)
            .map(|r| {
                let (job, futex) = (job.clone(), futex.clone());
                loom::thread::spawn(move || {
                    job.view().fence().for_rank(r).fence(&*futex).unwrap();
                })
            })
            .collect();
        let launcher = {
            let (job, futex) = (job.clone(), futex.clone());
            loom::thread::spawn(move || {
                let fence = job.view().fence();
                let socket = fence.parties() - shm;
                let arrivals: Vec<_> = (0..socket).map(|_| fence.arrive(&*futex)).collect();
                for a in arrivals {
                    fence.wait(a, &*futex).unwrap();
                    assert!(fence.is_complete(a));
                }
            })
        };
        for t in ranks {
            t.join().unwrap();
        }
        launcher.join().unwrap();
    }

    /// Outcomes seen across all executions of a model (a plain std mutex:
    /// it lives outside the model).
    #[derive(Debug, Default)]
    pub struct Outcomes(Mutex<BTreeSet<String>>);

    impl Outcomes {
        /// An empty set (usable in a `static`).
        pub const fn new() -> Self {
            Self(Mutex::new(BTreeSet::new()))
        }

        /// Records one execution's outcome.
        pub fn record(&self, outcome: impl Into<String>) {
            self.0.lock().unwrap().insert(outcome.into());
        }

        /// Panics unless exactly `expected` were seen.
        pub fn assert_all_seen(&self, expected: &[&str]) {
            let seen = self.0.lock().unwrap();
            let want: BTreeSet<String> = expected.iter().map(|s| s.to_string()).collect();
            assert_eq!(*seen, want, "outcomes explored by the model");
        }
    }
}
