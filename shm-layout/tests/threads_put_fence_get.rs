//! 8 threads (ranks) over one heap buffer standing in for the mapping: each
//! puts many keys, fences, and then must see every rank's keys. Three
//! rounds; later rounds overwrite, so a get after a fence must see the
//! newest value (last writer wins, and the fence publishes it).
#![cfg(not(loom))]

mod common;

use shm_layout::futex::{CondvarFutex, SpinFutex};
use shm_layout::{Futex, RankPhase, SegmentParams};

const RANKS: u32 = 8;
const KEYS: u32 = 500;
const ROUNDS: u32 = 3;

fn value(rank: u32, key: u32, round: u32) -> Vec<u8> {
    let mut v = format!("rank{rank}-key{key}-round{round}:").into_bytes();
    v.resize(v.len() + (key % 97) as usize, b'0' + (round % 10) as u8);
    v
}

fn run(futex: &(impl Futex + Sync)) {
    let params = SegmentParams {
        kvs_slots: 8192,
        kvs_arena_bytes: 16 << 20,
        ..SegmentParams::for_ranks(RANKS)
    };
    let mut buf = common::buffer(&params);
    let seg = common::init(&mut buf, &params);
    std::thread::scope(|s| {
        for rank in 0..RANKS {
            s.spawn(move || {
                let me = seg.rank(rank).unwrap();
                me.set_pid(1000 + rank);
                me.set_phase(RankPhase::Running);
                let kvs = seg.kvs();
                for round in 0..ROUNDS {
                    for key in 0..KEYS {
                        let k = format!("r{rank}-k{key}");
                        kvs.put(k.as_bytes(), &value(rank, key, round), futex)
                            .unwrap();
                        me.count_put();
                    }
                    me.set_phase(RankPhase::InFence);
                    let arrival = seg.fence().fence(futex).unwrap();
                    assert_eq!(arrival.generation, 2 * round);
                    me.count_fence();
                    me.set_phase(RankPhase::Running);
                    for other in 0..RANKS {
                        for key in (0..KEYS).step_by(7) {
                            let k = format!("r{other}-k{key}");
                            assert_eq!(
                                kvs.get(k.as_bytes()),
                                Some(value(other, key, round).as_slice()),
                                "rank {rank} reading {k} after fence {round}"
                            );
                            me.count_get();
                        }
                    }
                    // Nobody overwrites before everybody has read.
                    seg.fence().fence(futex).unwrap();
                }
                me.set_phase(RankPhase::Finalized);
            });
        }
    });
    assert_eq!(seg.fence().generation(), 2 * ROUNDS);
    assert_eq!(seg.kvs().entries().count(), (RANKS * KEYS) as usize);
    for rank in 0..RANKS {
        let st = seg.rank(rank).unwrap();
        assert_eq!(st.phase(), Ok(RankPhase::Finalized));
        assert_eq!(st.pid(), 1000 + rank);
        let stats = st.stats();
        assert_eq!(
            (stats.puts, stats.fences),
            ((KEYS * ROUNDS) as u64, ROUNDS as u64)
        );
        assert!(stats.gets > 0);
    }
}

#[test]
fn eight_threads_put_fence_get_with_sleeping_futex() {
    run(&CondvarFutex::new());
}

#[test]
fn eight_threads_put_fence_get_with_spinning_futex() {
    run(&SpinFutex);
}
