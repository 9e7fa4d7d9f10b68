//! `fastpmi ps` reads the node-attribute key a rank waits for while the rank
//! may be rewriting it (its next wait): the read sees the old or the new key
//! whole, or gives up ("none": the rank was mid-write at every attempt),
//! never a mix of the two; the model checks that it explored every one of
//! those outcomes. (One rewrite: each key word is an atomic, and two
//! rewrites make the model too large to finish in the suite.)
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use loom_tests::Outcomes;
use shm_layout::RankState;

const A: &[u8] = b"PMI_mpi_memory_alloc_kinds";
const B: &[u8] = b"memPoolType";

#[test]
fn wait_key_read_racing_a_rewrite_is_one_whole_key_or_none() {
    static SEEN: Outcomes = Outcomes::new();
    loom::model(|| {
        let st = Arc::new(RankState::default());
        st.set_wait_key(A);
        let rank = {
            let st = st.clone();
            thread::spawn(move || st.set_wait_key(B))
        };
        let ps = {
            let st = st.clone();
            thread::spawn(move || {
                st.wait_key().map_or("none".into(), |k| {
                    String::from_utf8_lossy(k.as_bytes()).into_owned()
                })
            })
        };
        let seen = ps.join().unwrap();
        rank.join().unwrap();
        assert!(
            ["none", "PMI_mpi_memory_alloc_kinds", "memPoolType"].contains(&seen.as_str()),
            "torn key {seen:?}"
        );
        SEEN.record(seen);
        assert_eq!(st.wait_key().unwrap().as_bytes(), B);
    });
    SEEN.assert_all_seen(&["PMI_mpi_memory_alloc_kinds", "memPoolType", "none"]);
}
