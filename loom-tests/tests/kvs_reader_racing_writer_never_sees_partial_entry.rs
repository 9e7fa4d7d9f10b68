//! A get racing a put sees either nothing (or the old value) or the whole
//! new value, never a partial key or value. Key and value bytes are loom
//! cells, so even reading them before the writer's Release fails the model;
//! each model also checks that it explored every possible outcome.
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use loom_tests::{tiny_params, Outcomes};
use shm_layout::futex::LoomFutex;
use shm_layout::heap::HeapJob;

const KEY: &[u8] = b"P1-businesscard";
const V1: &[u8] = b"tcp://10.1.2.3:40001;shm=yes";

fn name(v: Option<&[u8]>) -> String {
    v.map_or("none".into(), |v| String::from_utf8_lossy(v).into_owned())
}

#[test]
fn get_racing_insert_sees_nothing_or_the_whole_value() {
    static SEEN: Outcomes = Outcomes::new();
    loom::model(|| {
        let job = Arc::new(HeapJob::new(&tiny_params(2)));
        let futex = Arc::new(LoomFutex::new());
        let writer = {
            let (job, futex) = (job.clone(), futex.clone());
            thread::spawn(move || {
                job.view().kvs().put(KEY, V1, &*futex).unwrap();
            })
        };
        let reader = {
            let job = job.clone();
            thread::spawn(move || name(job.view().kvs().get(KEY)))
        };
        SEEN.record(reader.join().unwrap());
        writer.join().unwrap();
        assert_eq!(job.view().kvs().get(KEY), Some(V1));
    });
    SEEN.assert_all_seen(&["none", "tcp://10.1.2.3:40001;shm=yes"]);
}

#[test]
fn get_racing_update_sees_the_old_or_the_new_value() {
    static SEEN: Outcomes = Outcomes::new();
    loom::model(|| {
        let job = Arc::new(HeapJob::new(&tiny_params(2)));
        let futex = Arc::new(LoomFutex::new());
        job.view().kvs().put(KEY, b"old", &*futex).unwrap();
        let writer = {
            let (job, futex) = (job.clone(), futex.clone());
            thread::spawn(move || {
                job.view().kvs().put(KEY, V1, &*futex).unwrap();
            })
        };
        let reader = {
            let job = job.clone();
            thread::spawn(move || name(job.view().kvs().get(KEY)))
        };
        SEEN.record(reader.join().unwrap());
        writer.join().unwrap();
        assert_eq!(job.view().kvs().get(KEY), Some(V1));
    });
    SEEN.assert_all_seen(&["old", "tcp://10.1.2.3:40001;shm=yes"]);
}

#[test]
fn get_racing_two_inserts_of_one_key_sees_nothing_or_one_whole_value() {
    static SEEN: Outcomes = Outcomes::new();
    loom::model(|| {
        let job = Arc::new(HeapJob::new(&tiny_params(3)));
        let futex = Arc::new(LoomFutex::new());
        let writers: Vec<_> = [&b"aaaaaaaaaaaaaaaaaaaa"[..], &b"bbbbbbbbb"[..]]
            .into_iter()
            .map(|v| {
                let (job, futex) = (job.clone(), futex.clone());
                thread::spawn(move || {
                    job.view().kvs().put(KEY, v, &*futex).unwrap();
                })
            })
            .collect();
        let reader = {
            let job = job.clone();
            thread::spawn(move || name(job.view().kvs().get(KEY)))
        };
        SEEN.record(reader.join().unwrap());
        for w in writers {
            w.join().unwrap();
        }
        assert!(job.view().kvs().get(KEY).is_some());
    });
    SEEN.assert_all_seen(&["aaaaaaaaaaaaaaaaaaaa", "bbbbbbbbb", "none"]);
}
