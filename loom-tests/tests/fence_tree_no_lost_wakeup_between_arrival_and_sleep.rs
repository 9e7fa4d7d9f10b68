//! Two ranks, tree release (fan-out 1), three generations: loom interleaves
//! the waker's bump of a rank's wake word with every step of that rank
//! between its arrival and its futex sleep (loading the word, checking the
//! generation and abort words, setting the sleeping flag). `LoomFutex`
//! ignores timeouts and wakes per word, so a wake-up lost in that window is
//! a deadlock of the model.
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use loom_tests::tiny_params;
use shm_layout::futex::LoomFutex;
use shm_layout::heap::HeapJob;

#[test]
fn fence_tree_no_lost_wakeup_between_arrival_and_sleep() {
    loom::model(|| {
        let job = Arc::new(HeapJob::with_fence_fanout(&tiny_params(2), 1));
        let futex = Arc::new(LoomFutex::new());
        let ranks: Vec<_> = (0..2)
            .map(|r| {
                let (job, futex) = (job.clone(), futex.clone());
                thread::spawn(move || {
                    let fence = job.view().fence().for_rank(r);
                    for g in 0..3 {
                        let a = fence.fence(&*futex).unwrap();
                        assert_eq!(a.generation, g);
                    }
                })
            })
            .collect();
        for t in ranks {
            t.join().unwrap();
        }
        assert_eq!(job.view().fence().generation(), 3);
    });
}
