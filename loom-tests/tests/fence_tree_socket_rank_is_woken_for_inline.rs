//! A mixed job under tree release (fan-out 1): ranks 0 and 1 fence through
//! shared memory, rank 2 is a socket rank the launcher arrives for
//! anonymously and whose completion its watcher learns by waiting on the
//! generation word. The socket rank never sleeps on its wake word, so a
//! waker that reaches it in the tree must do its part inline (when rank 1
//! is last, the chain 1 -> 2 -> 0 only reaches rank 0 that way), and an
//! anonymous last arriver roots the tree at rank 0. Everybody is released
//! (no timeouts in `LoomFutex`), the socket rank's word is never bumped.
#![cfg(loom)]

use loom::sync::Arc;
use loom_tests::{fence_with_socket_ranks, tiny_params};
use shm_layout::futex::LoomFutex;
use shm_layout::heap::HeapJob;

#[test]
fn fence_tree_socket_rank_is_woken_for_inline() {
    loom::model(|| {
        let job = Arc::new(HeapJob::with_fence_fanout(&tiny_params(3), 1));
        let futex = Arc::new(LoomFutex::new());
        fence_with_socket_ranks(&job, &futex, 2);
        let fence = job.view().fence();
        assert_eq!(fence.generation(), 1);
        assert_eq!(fence.wakes(2), Some(0), "the socket rank is never bumped");
    });
}
