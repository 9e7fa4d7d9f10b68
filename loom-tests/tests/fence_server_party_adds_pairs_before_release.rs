//! A node server's fence (nested mode): two ranks put a pair each and fence
//! under tree release (fan-out 1), and a server party sleeps until both
//! have arrived, reads both pairs, puts the "other node's" pair and arrives
//! last. No rank is released before the server's put is visible to it,
//! the server sees both ranks' puts when woken, and nobody sleeps forever
//! (`LoomFutex` ignores timeouts, so a lost wake-up of the server is a
//! loom deadlock).
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use loom_tests::tiny_params;
use shm_layout::futex::LoomFutex;
use shm_layout::heap::HeapJob;

const KEYS: [&[u8]; 2] = [b"a", b"b"];

#[test]
fn fence_server_party_adds_pairs_before_release() {
    loom::model(|| {
        let job = Arc::new(HeapJob::with_fence_fanout(&tiny_params(2), 1));
        job.view().fence().set_server_party(true);
        let futex = Arc::new(LoomFutex::new());
        let ranks: Vec<_> = (0..2u32)
            .map(|r| {
                let (job, futex) = (job.clone(), futex.clone());
                thread::spawn(move || {
                    let v = job.view();
                    v.kvs().put(KEYS[r as usize], b"1", &*futex).unwrap();
                    let arrival = v.fence().for_rank(r).fence(&*futex).unwrap();
                    assert!(!arrival.last, "a rank completed a held fence");
                    assert_eq!(v.kvs().get(b"r"), Some(&b"2"[..]), "released early");
                    assert!(KEYS.iter().all(|k| v.kvs().get(k).is_some()));
                })
            })
            .collect();
        let server = {
            let (job, futex) = (job.clone(), futex.clone());
            thread::spawn(move || {
                let v = job.view();
                let fence = v.fence();
                while !fence
                    .wait_ranks(&*futex, std::time::Duration::from_secs(1))
                    .unwrap()
                {}
                assert!(fence.ranks_arrived());
                for k in KEYS {
                    assert_eq!(v.kvs().get(k), Some(&b"1"[..]), "woken before a put");
                }
                v.kvs().put(b"r", b"2", &*futex).unwrap();
                assert!(fence.arrive(&*futex).last, "the server is the last party");
            })
        };
        for t in ranks {
            t.join().unwrap();
        }
        server.join().unwrap();
        assert_eq!(job.view().fence().generation(), 1);
        assert_eq!(job.view().fence().arrived(), 0);
    });
}
