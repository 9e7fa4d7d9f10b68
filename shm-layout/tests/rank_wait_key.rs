//! The node-attribute key a rank records before it waits: none before the
//! first wait, read back whole, cut at KEY_MAX, in its own line of a
//! three-line record; and a reader racing a rank that rewrites it in a loop
//! never sees a mix of two keys.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, Ordering};

use shm_layout::{RankState, KEY_MAX};

#[test]
fn wait_key_round_trip_and_cut() {
    assert_eq!(std::mem::size_of::<RankState>(), 192);
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
    let (started, stop) = (AtomicBool::new(false), AtomicBool::new(false));
    let (mut whole, mut gave_up, mut seen) = (0u64, 0u64, [0u64; 2]);
    let mut torn = None;
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut i = 0usize;
            started.store(true, Ordering::Relaxed);
            while !stop.load(Ordering::Relaxed) {
                st.set_wait_key(keys[i % 2]);
                i += 1;
                // Bursts of back-to-back rewrites (reads overlap writes)
                // and short pauses: a rank rewrites once a wait, and a
                // reader on another CPU must complete some reads, which a
                // writer that never pauses can starve for good.
                if i % 256 == 0 {
                    for _ in 0..4096 {
                        std::hint::spin_loop();
                    }
                }
            }
        });
        // Race the writer, not its thread's start-up.
        while !started.load(Ordering::Relaxed) {
            std::hint::spin_loop();
        }
        // 200 000 reads, and on until both keys were read: on a loaded
        // machine the writer may be off its CPU for a while (at most 10 s).
        let t = std::time::Instant::now();
        let mut reads = 0u64;
        while reads < 200_000
            || (seen.contains(&0) && t.elapsed() < std::time::Duration::from_secs(10))
        {
            reads += 1;
            match st.wait_key() {
                Some(k) => match keys.iter().position(|key| *key == k.as_bytes()) {
                    Some(n) => {
                        seen[n] += 1;
                        whole += 1;
                    }
                    None => {
                        torn = Some(k.as_bytes().to_vec());
                        break;
                    }
                },
                None => gave_up += 1,
            }
        }
        // Stop the writer before any assertion: a failed one must not
        // leave the scope waiting for it forever.
        stop.store(true, Ordering::Relaxed);
    });
    assert!(torn.is_none(), "torn key {torn:?}");
    assert!(whole > 0, "no read completed ({gave_up} gave up)");
    assert!(
        seen[0] > 0 && seen[1] > 0,
        "the reads did not race the rewrites: {seen:?}"
    );
}
