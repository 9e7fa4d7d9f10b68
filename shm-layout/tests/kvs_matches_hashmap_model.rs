//! Single-threaded KVS against a `HashMap` model: random puts (duplicates,
//! empty and oversize keys, oversize values) and gets until the table or
//! the arena is full. Every result, and the arena accounting, must match.
#![cfg(not(loom))]

mod common;

use std::collections::HashMap;

use proptest::prelude::*;
use shm_layout::futex::SpinFutex;
use shm_layout::{record_size, KvsError, PutOutcome, SegmentParams, KEY_MAX};

const SLOTS: u32 = 16;
const ARENA: u64 = 6 * 1024;
const MAX_VALUE: usize = 1024;

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Get(Vec<u8>),
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        // A small pool, so puts repeat keys and the 16 slots fill up.
        8 => (0u8..24).prop_map(|i| format!("key-{i}").into_bytes()),
        1 => Just(Vec::new()),
        1 => (KEY_MAX - 1..KEY_MAX + 8).prop_map(|n| vec![b'k'; n]),
    ]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => prop::collection::vec(any::<u8>(), 0..48),
        2 => prop::collection::vec(any::<u8>(), 600..=MAX_VALUE),
        1 => prop::collection::vec(any::<u8>(), MAX_VALUE + 1..MAX_VALUE + 64),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (key(), value()).prop_map(|(k, v)| Op::Put(k, v)),
        2 => key().prop_map(Op::Get),
    ]
}

/// What the model predicts for a put, updating itself.
fn model_put(
    map: &mut HashMap<Vec<u8>, Vec<u8>>,
    used: &mut u64,
    k: &[u8],
    v: &[u8],
) -> Result<Option<Vec<u8>>, KvsError> {
    if k.is_empty() {
        return Err(KvsError::EmptyKey);
    }
    if k.len() > KEY_MAX {
        return Err(KvsError::KeyTooLong {
            len: k.len(),
            max: KEY_MAX,
        });
    }
    if v.len() > MAX_VALUE {
        return Err(KvsError::ValueTooLong {
            len: v.len(),
            max: MAX_VALUE,
        });
    }
    // The record is reserved before the slot is looked for.
    let need = record_size(v.len());
    if *used + need > ARENA {
        return Err(KvsError::ArenaFull {
            need,
            capacity: ARENA,
        });
    }
    if !map.contains_key(k) && map.len() == SLOTS as usize {
        // The reservation is handed back.
        return Err(KvsError::TableFull {
            slots: SLOTS as usize,
        });
    }
    *used += need;
    Ok(map.insert(k.to_vec(), v.to_vec()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn kvs_matches_hashmap_model(ops in prop::collection::vec(op(), 1..160)) {
        let params = SegmentParams {
            kvs_slots: SLOTS,
            kvs_arena_bytes: ARENA,
            max_value_len: MAX_VALUE as u32,
            ..SegmentParams::for_ranks(1)
        };
        let mut buf = common::buffer(&params);
        let seg = common::init(&mut buf, &params);
        let kvs = seg.kvs();
        let mut map = HashMap::new();
        let mut used = 0;
        for op in &ops {
            match op {
                Op::Put(k, v) => {
                    let want = model_put(&mut map, &mut used, k, v);
                    let got = kvs.put(k, v, &SpinFutex).map(|o| match o {
                        PutOutcome::Inserted => None,
                        PutOutcome::Replaced { previous } => Some(previous.to_vec()),
                    });
                    prop_assert_eq!(got, want, "put {:?}", String::from_utf8_lossy(k));
                }
                Op::Get(k) => {
                    prop_assert_eq!(kvs.get(k), map.get(k).map(Vec::as_slice));
                }
            }
            prop_assert_eq!(kvs.arena_used(), used);
        }
        let mut entries: Vec<(Vec<u8>, Vec<u8>)> =
            kvs.entries().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        entries.sort();
        let mut want: Vec<(Vec<u8>, Vec<u8>)> = map.into_iter().collect();
        want.sort();
        prop_assert_eq!(entries, want);
    }
}

#[test]
fn filling_the_table_then_the_arena_gives_errors_not_panics() {
    let params = SegmentParams {
        kvs_slots: SLOTS,
        kvs_arena_bytes: ARENA,
        max_value_len: MAX_VALUE as u32,
        ..SegmentParams::for_ranks(1)
    };
    let mut buf = common::buffer(&params);
    let seg = common::init(&mut buf, &params);
    let kvs = seg.kvs();
    for i in 0..SLOTS {
        kvs.put(format!("k{i}").as_bytes(), b"v", &SpinFutex)
            .unwrap();
    }
    assert_eq!(
        kvs.put(b"one-too-many", b"v", &SpinFutex),
        Err(KvsError::TableFull {
            slots: SLOTS as usize
        })
    );
    assert_eq!(kvs.get(b"one-too-many"), None);
    // Existing keys still take new values until the arena is exhausted.
    let mut n = 0;
    let err = loop {
        match kvs.put(b"k0", &[7; 1000], &SpinFutex) {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
    };
    assert!(n > 0);
    assert!(matches!(err, KvsError::ArenaFull { .. }), "{err}");
    assert_eq!(kvs.get(b"k0"), Some(&[7; 1000][..]));
    // A smaller record still fits in the tail the failed put handed back.
    assert!(kvs.arena_capacity() - kvs.arena_used() >= 8);
    kvs.put(b"k1", b"", &SpinFutex).unwrap();
    assert_eq!(kvs.get(b"k1"), Some(&b""[..]));
}
