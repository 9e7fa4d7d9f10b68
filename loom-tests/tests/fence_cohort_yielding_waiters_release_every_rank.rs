//! The cohort release of `fence_cohort_release_wakes_every_rank`, with
//! waiters that yield the CPU once before they sleep (as ranks do when they
//! outnumber CPUs): a rank that sees its generation complete during the
//! yield does not sleep, yet still claims and does its cohort's lead duty
//! if a visitor left it, so nobody who did sleep is left asleep (a loom
//! deadlock: `LoomFutex` has no timeouts), nobody leaves a generation
//! early, and no lead duty is left unclaimed.
#![cfg(loom)]

use loom::sync::Arc;
use loom_tests::{fence_generations, tiny_params};
use shm_layout::futex::LoomFutex;
use shm_layout::heap::HeapJob;

const PARTIES: u32 = 3;
// One generation: the yield adds a scheduling point per waiter, and two
// generations take loom minutes; the parity of the sleeping words, which
// needs two, is what the model without yields covers.
const GENERATIONS: usize = 1;

#[test]
fn fence_cohort_yielding_waiters_release_every_rank() {
    loom::model(|| {
        let job = Arc::new(HeapJob::with_fence_fanout(&tiny_params(PARTIES), 0));
        job.view().fence().set_cohorts(&[0, 1, 1]);
        let futex = Arc::new(LoomFutex::new());
        let last = fence_generations(&job, &futex, PARTIES, GENERATIONS, 1);
        let fence = job.view().fence();
        assert_eq!(fence.generation() as usize, GENERATIONS);
        for g in 0..GENERATIONS {
            assert_eq!(last.iter().filter(|l| l[g]).count(), 1, "one last arriver");
        }
        for c in 0..2 {
            assert!(!fence.cohort_lead_pending(c), "cohort {c}'s lead unclaimed");
        }
    });
}
