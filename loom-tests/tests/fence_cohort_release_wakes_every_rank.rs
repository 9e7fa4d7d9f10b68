//! Release by cohorts over three ranks for two generations: rank 0 alone in
//! cohort 0, ranks 1 and 2 in cohort 1, so whoever is last must hand
//! cohort 1 (or 0) to a leader that wakes the rest of it, with one
//! `FUTEX_WAKE` of a single sleeper across cohorts. `LoomFutex` counts
//! wakes (a wake of one releases one sleeper) and has no timeouts, so a
//! lead duty that nobody does, or a leader that wakes only itself, is a
//! loom deadlock. Nobody leaves a generation before all arrived in it, and
//! no cohort's lead duty is left unclaimed. The model checks that the last
//! arriver came from either cohort in each generation.
#![cfg(loom)]

use loom::sync::Arc;
use loom_tests::{fence_generations, tiny_params, Outcomes};
use shm_layout::futex::LoomFutex;
use shm_layout::heap::HeapJob;

const PARTIES: u32 = 3;
const GENERATIONS: usize = 2;

#[test]
fn fence_cohort_release_wakes_every_rank() {
    static SEEN: Outcomes = Outcomes::new();
    loom::model(|| {
        let job = Arc::new(HeapJob::with_fence_fanout(&tiny_params(PARTIES), 0));
        job.view().fence().set_cohorts(&[0, 1, 1]);
        let fence = job.view().fence();
        for rank in 0..PARTIES {
            assert_eq!(fence.cohort_of(rank), Some(rank.min(1)));
        }
        let futex = Arc::new(LoomFutex::new());
        let last = fence_generations(&job, &futex, PARTIES, GENERATIONS, 0);
        assert_eq!(fence.generation() as usize, GENERATIONS);
        for c in 0..2 {
            assert!(!fence.cohort_lead_pending(c), "cohort {c}'s lead unclaimed");
        }
        let who: Vec<String> = (0..GENERATIONS)
            .map(|g| {
                let rank = last.iter().position(|l| l[g]).expect("one last arriver");
                format!("g{g}:cohort{}", rank.min(1))
            })
            .collect();
        SEEN.record(who.join(" "));
    });
    SEEN.assert_all_seen(&[
        "g0:cohort0 g1:cohort0",
        "g0:cohort0 g1:cohort1",
        "g0:cohort1 g1:cohort0",
        "g0:cohort1 g1:cohort1",
    ]);
}
