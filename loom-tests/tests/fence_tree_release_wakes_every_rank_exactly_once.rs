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

use loom::sync::Arc;
use loom_tests::{fence_generations, tiny_params, Outcomes};
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
        let last = fence_generations(&job, &futex, PARTIES, GENERATIONS, 0);
        let waited = last.iter().map(|l| l.iter().filter(|&&last| !last).count());
        let fence = job.view().fence();
        let mut exact = true;
        for (rank, waited) in waited.enumerate() {
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
