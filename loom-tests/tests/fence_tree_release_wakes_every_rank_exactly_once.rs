//! Tree release (fan-out 1, so the last arriver wakes one rank, which wakes
//! the next: a woken waiter really does wake another) over three ranks for
//! two generations: nobody leaves a generation before all arrived in it,
//! everybody is released every time (`LoomFutex` ignores timeouts and wakes
//! per word, so a lost or misdirected wake-up is a loom deadlock), and a
//! rank's wake word is bumped at most once per generation it waited in (it
//! was not the last arriver): once by its tree parent, or not at all when
//! it saw the completion itself before its parent got to it (the parent
//! then skips it, as it already re-armed for the next generation). The
//! model checks that both cases are explored.
#![cfg(loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use loom_tests::{tiny_params, Outcomes};
use shm_layout::futex::LoomFutex;
use shm_layout::heap::HeapJob;

const PARTIES: u32 = 3;
const GENERATIONS: usize = 2;

#[test]
fn fence_tree_release_wakes_every_rank_exactly_once() {
    static SEEN: Outcomes = Outcomes::new();
    loom::model(|| {
        let job = Arc::new(HeapJob::with_fence_fanout(&tiny_params(PARTIES), 1));
        let futex = Arc::new(LoomFutex::new());
        let arrived: Arc<[AtomicUsize; GENERATIONS]> = Arc::new(Default::default());
        let ranks: Vec<_> = (0..PARTIES)
            .map(|rank| {
                let (job, futex, arrived) = (job.clone(), futex.clone(), arrived.clone());
                thread::spawn(move || {
                    let fence = job.view().fence().for_rank(rank);
                    let mut waited = 0;
                    for (g, arrived) in arrived.iter().enumerate() {
                        // Relaxed on purpose: only the barrier orders these.
                        arrived.fetch_add(1, Ordering::Relaxed);
                        let arrival = fence.arrive(&*futex);
                        assert_eq!(arrival.generation as usize, g);
                        waited += usize::from(!arrival.last);
                        fence.wait(arrival, &*futex).unwrap();
                        assert_eq!(
                            arrived.load(Ordering::Relaxed),
                            PARTIES as usize,
                            "rank {rank} left generation {g} early"
                        );
                    }
                    waited
                })
            })
            .collect();
        let waited: Vec<usize> = ranks.into_iter().map(|t| t.join().unwrap()).collect();
        let fence = job.view().fence();
        let mut exact = true;
        for (rank, waited) in waited.into_iter().enumerate() {
            let wakes = fence.wakes(rank as u32).unwrap() as usize;
            assert!(
                wakes <= waited,
                "rank {rank}: {wakes} wakes in {waited} generations waited"
            );
            exact &= wakes == waited;
        }
        assert_eq!(fence.generation() as usize, GENERATIONS);
        SEEN.record(if exact {
            "every waiter bumped once per generation"
        } else {
            "a waiter saw a completion before its parent reached it"
        });
    });
    SEEN.assert_all_seen(&[
        "every waiter bumped once per generation",
        "a waiter saw a completion before its parent reached it",
    ]);
}
