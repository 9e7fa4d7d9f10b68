//! The fence over three parties for three generations: each generation has
//! exactly one last arriver, nobody leaves a generation before all three
//! arrived in it, and everybody is released every time (a lost wake-up
//! would be a loom deadlock: `LoomFutex` ignores timeouts).
#![cfg(loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use loom_tests::tiny_params;
use shm_layout::futex::LoomFutex;
use shm_layout::heap::HeapJob;

const PARTIES: usize = 3;
const GENERATIONS: usize = 3;

struct Counters {
    /// Parties that reached each generation's arrive.
    arrived: [AtomicUsize; GENERATIONS],
    /// Last arrivers per generation.
    last: [AtomicUsize; GENERATIONS],
}

fn party(job: &HeapJob, futex: &LoomFutex, counters: &Counters) {
    let fence = job.view().fence();
    for g in 0..GENERATIONS {
        // Relaxed on purpose: only the barrier orders these.
        counters.arrived[g].fetch_add(1, Ordering::Relaxed);
        let arrival = fence.arrive(futex);
        assert_eq!(arrival.generation as usize, g);
        if arrival.last {
            counters.last[g].fetch_add(1, Ordering::Relaxed);
        }
        fence.wait(arrival, futex).unwrap();
        assert_eq!(
            counters.arrived[g].load(Ordering::Relaxed),
            PARTIES,
            "released from generation {g} before everybody arrived"
        );
    }
}

#[test]
fn barrier_three_parties_three_generations_release_all() {
    loom::model(|| {
        let job = Arc::new(HeapJob::new(&tiny_params(PARTIES as u32)));
        let futex = Arc::new(LoomFutex::new());
        let counters = Arc::new(Counters {
            arrived: Default::default(),
            last: Default::default(),
        });
        let parties: Vec<_> = (0..PARTIES)
            .map(|_| {
                let (job, futex, counters) = (job.clone(), futex.clone(), counters.clone());
                thread::spawn(move || party(&job, &futex, &counters))
            })
            .collect();
        for t in parties {
            t.join().unwrap();
        }
        for g in 0..GENERATIONS {
            assert_eq!(
                counters.last[g].load(Ordering::Relaxed),
                1,
                "generation {g}"
            );
        }
        assert_eq!(job.view().fence().generation() as usize, GENERATIONS);
        assert_eq!(job.view().fence().arrived(), 0);
    });
}
