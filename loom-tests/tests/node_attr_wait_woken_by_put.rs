//! A rank waiting for a node attribute is woken by the put that stores it
//! (and goes back to sleep after a put of another attribute). `LoomFutex`
//! never times out, so a missed wake-up would be a loom deadlock.
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use loom_tests::tiny_params;
use shm_layout::futex::LoomFutex;
use shm_layout::heap::HeapJob;

#[test]
fn node_attr_wait_woken_by_put() {
    loom::model(|| {
        let job = Arc::new(HeapJob::new(&tiny_params(2)));
        let futex = Arc::new(LoomFutex::new());
        let waiter = {
            let (job, futex) = (job.clone(), futex.clone());
            thread::spawn(move || {
                let v = job
                    .view()
                    .node_attrs()
                    .get_wait(b"shm-name", &*futex, None)
                    .unwrap();
                assert_eq!(v, b"/fastpmi-42");
            })
        };
        let leader = {
            let (job, futex) = (job.clone(), futex.clone());
            thread::spawn(move || {
                job.view()
                    .node_attrs()
                    .put(b"shm-name", b"/fastpmi-42", &*futex)
                    .unwrap();
            })
        };
        leader.join().unwrap();
        waiter.join().unwrap();
    });
}

#[test]
fn node_attr_wait_sleeps_again_after_another_put() {
    loom::model(|| {
        let job = Arc::new(HeapJob::new(&tiny_params(2)));
        let futex = Arc::new(LoomFutex::new());
        let waiter = {
            let (job, futex) = (job.clone(), futex.clone());
            thread::spawn(move || {
                let v = job
                    .view()
                    .node_attrs()
                    .get_wait(b"wanted", &*futex, None)
                    .unwrap();
                assert_eq!(v, b"yes");
            })
        };
        let leader = {
            let (job, futex) = (job.clone(), futex.clone());
            thread::spawn(move || {
                let attrs = job.view().node_attrs();
                attrs.put(b"unrelated", b"no", &*futex).unwrap();
                attrs.put(b"wanted", b"yes", &*futex).unwrap();
            })
        };
        leader.join().unwrap();
        waiter.join().unwrap();
    });
}
