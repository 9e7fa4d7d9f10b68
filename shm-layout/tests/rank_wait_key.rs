//! The node-attribute key a rank records before it waits: none before the
//! first wait, read back whole, cut at KEY_MAX, in its own line of a
//! two-line record; and a reader racing a rank that rewrites it in a loop
//! never sees a mix of two keys.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, Ordering};

use shm_layout::{RankState, KEY_MAX};

#[test]
fn wait_key_round_trip_and_cut() {
    assert_eq!(std::mem::size_of::<RankState>(), 128);
    let st = RankState::default();
    assert_eq!(st.wait_key(), None, "no key before the first wait");
    st.set_wait_key(b"memPoolType");
    assert_eq!(st.wait_key().unwrap().as_bytes(), b"memPoolType");
    st.set_wait_key(b"k");
    assert_eq!(st.wait_key().unwrap().as_bytes(), b"k", "shorter key pads");
    let long = vec![b'x'; KEY_MAX + 10];
    st.set_wait_key(&long);
    assert_eq!(st.wait_key().unwrap().as_bytes(), &long[..KEY_MAX]);
}

#[test]
fn wait_key_reader_racing_rewrites_never_sees_a_mix() {
    let keys: [&[u8]; 2] = [&[b'a'; 60], b"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"];
    let st = RankState::default();
    st.set_wait_key(keys[0]);
    let stop = AtomicBool::new(false);
    let (mut whole, mut gave_up) = (0u64, 0u64);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                st.set_wait_key(keys[i % 2]);
                i += 1;
            }
        });
        for _ in 0..200_000 {
            match st.wait_key() {
                Some(k) => {
                    assert!(keys.contains(&k.as_bytes()), "torn key {:?}", k.as_bytes());
                    whole += 1;
                }
                None => gave_up += 1,
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(whole > 0, "no read completed ({gave_up} gave up)");
}
