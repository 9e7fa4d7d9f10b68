//! Many threads against a full table or arena: every writer gets the full
//! error (never a panic), and nothing already stored is disturbed.
#![cfg(not(loom))]

mod common;

use shm_layout::futex::SpinFutex;
use shm_layout::{KvsError, SegmentParams};

const THREADS: usize = 8;

#[test]
fn full_table_returns_table_full_to_every_writer() {
    let params = SegmentParams {
        kvs_slots: 64,
        ..SegmentParams::for_ranks(THREADS as u32)
    };
    let mut buf = common::buffer(&params);
    let seg = common::init(&mut buf, &params);
    let kvs = seg.kvs();
    for i in 0..64 {
        kvs.put(
            format!("existing-{i}").as_bytes(),
            format!("v{i}").as_bytes(),
            &SpinFutex,
        )
        .unwrap();
    }
    std::thread::scope(|s| {
        for t in 0..THREADS {
            s.spawn(move || {
                for i in 0..200 {
                    let key = format!("new-{t}-{i}");
                    assert_eq!(
                        kvs.put(key.as_bytes(), b"x", &SpinFutex),
                        Err(KvsError::TableFull { slots: 64 })
                    );
                    assert_eq!(kvs.get(key.as_bytes()), None);
                    // Updates of existing keys still work on a full table.
                    let k = format!("existing-{}", (t * 8 + i) % 64);
                    kvs.put(k.as_bytes(), format!("t{t}").as_bytes(), &SpinFutex)
                        .unwrap();
                }
            });
        }
    });
    assert_eq!(kvs.entries().count(), 64);
    for i in 0..64 {
        let v = kvs.get(format!("existing-{i}").as_bytes()).unwrap();
        assert!(
            v == format!("v{i}").as_bytes() || v.starts_with(b"t"),
            "{v:?}"
        );
    }
}

#[test]
fn full_arena_returns_arena_full_and_never_hands_out_a_byte_twice() {
    let params = SegmentParams {
        kvs_slots: 8192,
        kvs_arena_bytes: 64 * 1024,
        ..SegmentParams::for_ranks(THREADS as u32)
    };
    let mut buf = common::buffer(&params);
    let seg = common::init(&mut buf, &params);
    let kvs = seg.kvs();
    let stored: Vec<Vec<(String, Vec<u8>)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || {
                    let mut mine = Vec::new();
                    let mut fails = 0;
                    for i in 0..2000 {
                        // Sizes vary so big puts fail while small ones may fit.
                        let len = [700, 13, 2000, 1, 300][i % 5];
                        let value = vec![(t * 31 + i) as u8; len];
                        let key = format!("r{t}-{i}");
                        match kvs.put(key.as_bytes(), &value, &SpinFutex) {
                            Ok(_) => mine.push((key, value)),
                            Err(KvsError::ArenaFull { .. }) => fails += 1,
                            Err(e) => panic!("unexpected {e}"),
                        }
                    }
                    assert!(fails > 0);
                    mine
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(kvs.arena_used() <= kvs.arena_capacity());
    // Every successful put reads back intact: no two records overlapped.
    let mut total = 0;
    for (key, value) in stored.iter().flatten() {
        assert_eq!(kvs.get(key.as_bytes()), Some(value.as_slice()), "{key}");
        total += 1;
    }
    assert_eq!(kvs.entries().count(), total);
}
