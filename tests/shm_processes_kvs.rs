//! The job segment shared by real processes, not threads: KVS puts, fences
//! and gets across 64 processes, a full table hit by 8 writers at once, and
//! the launcher's default (memfd) segment reaching every rank.
//!
//! Children are this test binary, run by `common::shm_children`.

mod common;

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::shm_children::{
    attach, child_args, create_segment, fail, show, value, ChildArgs, Children,
};
use fastpmi_segment::SharedFutex;
use shm_layout::{KvsError, PutOutcome, SegmentParams, SegmentRef};

// ---------------------------------------------------------------------------
// 64 processes: put, fence, get; then overwrite and a contested key

const PUT_RANKS: u32 = 64;
const PUT_KEYS: u32 = 16;

fn put_key(rank: u32, i: u32) -> Vec<u8> {
    format!("k-{rank}-{i}").into_bytes()
}

/// The key each rank overwrites in round 2.
fn overwritten(rank: u32) -> u32 {
    rank % PUT_KEYS
}

/// What `k-<rank>-<i>` holds after round `round` (1 or 2).
fn expected_after(round: u32, rank: u32, i: u32) -> Vec<u8> {
    if round >= 2 && i == overwritten(rank) {
        value(2, rank, i)
    } else {
        value(1, rank, i)
    }
}

/// Index used for every rank's value of the contested key.
const CONTESTED_I: u32 = 999;

/// Checks all 1024 keys after `round`; `Err` names the first wrong one.
fn verify_all(seg: SegmentRef<'_>, round: u32) -> Result<(), String> {
    let kvs = seg.kvs();
    for q in 0..PUT_RANKS {
        for i in 0..PUT_KEYS {
            let want = expected_after(round, q, i);
            let got = kvs.get(&put_key(q, i));
            if got != Some(&want[..]) {
                return Err(format!(
                    "after round {round}, k-{q}-{i} is {}, expected {}",
                    show(got),
                    show(Some(&want))
                ));
            }
        }
    }
    Ok(())
}

/// The rank whose value `v` is for the contested key, if it is one.
fn contested_writer(v: &[u8]) -> Option<u32> {
    (0..PUT_RANKS).find(|&q| v == value(2, q, CONTESTED_I))
}

fn put_fence_child(args: &ChildArgs) -> i32 {
    let js = attach(args);
    let seg = js.seg();
    let (kvs, fence, me) = (seg.kvs(), seg.fence(), args.rank);
    // Round 1: 16 fresh keys each.
    for i in 0..PUT_KEYS {
        match kvs.put(&put_key(me, i), &value(1, me, i), &SharedFutex) {
            Ok(PutOutcome::Inserted) => {}
            other => return fail(me, 2, format_args!("put k-{me}-{i}: {other:?}")),
        }
    }
    if let Err(e) = fence.fence(&SharedFutex) {
        return fail(me, 3, format_args!("fence 1: {e}"));
    }
    if let Err(e) = verify_all(seg, 1) {
        return fail(me, 4, format_args!("{e}"));
    }
    // Nobody overwrites before everybody has checked round 1.
    if let Err(e) = fence.fence(&SharedFutex) {
        return fail(me, 3, format_args!("fence after round 1: {e}"));
    }
    // Round 2: overwrite one own key, and race every other rank on one key.
    let i = overwritten(me);
    match kvs.put(&put_key(me, i), &value(2, me, i), &SharedFutex) {
        Ok(PutOutcome::Replaced { previous }) if previous == value(1, me, i) => {}
        other => return fail(me, 5, format_args!("overwrite k-{me}-{i}: {other:?}")),
    }
    if let Err(e) = kvs.put(b"contested", &value(2, me, CONTESTED_I), &SharedFutex) {
        return fail(me, 6, format_args!("put contested: {e}"));
    }
    if let Err(e) = fence.fence(&SharedFutex) {
        return fail(me, 3, format_args!("fence 2: {e}"));
    }
    if let Err(e) = verify_all(seg, 2) {
        return fail(me, 4, format_args!("{e}"));
    }
    // Last writer wins: one complete value of one rank, the same for all.
    let winner = kvs.get(b"contested");
    if winner.and_then(contested_writer).is_none() {
        return fail(me, 7, format_args!("contested is {}", show(winner)));
    }
    let seen_key = format!("seen-{me}");
    if let Err(e) = kvs.put(
        seen_key.as_bytes(),
        winner.unwrap_or_default(),
        &SharedFutex,
    ) {
        return fail(me, 6, format_args!("put {seen_key}: {e}"));
    }
    if let Err(e) = fence.fence(&SharedFutex) {
        return fail(me, 3, format_args!("fence 3: {e}"));
    }
    for q in 0..PUT_RANKS {
        let seen = kvs.get(format!("seen-{q}").as_bytes());
        if seen != winner {
            return fail(
                me,
                8,
                format_args!(
                    "rank {q} saw contested = {}, I saw {}",
                    show(seen),
                    show(winner)
                ),
            );
        }
    }
    0
}

#[test]
fn sixty_four_processes_put_fence_and_verify_1024_values() {
    const TEST: &str = "sixty_four_processes_put_fence_and_verify_1024_values";
    if let Some(args) = child_args(TEST) {
        std::process::exit(put_fence_child(&args));
    }
    let (js, id) = create_segment(&SegmentParams::for_ranks(PUT_RANKS), "shm-put-fence");
    let mut children = Children::spawn(TEST, 0..PUT_RANKS, id);
    children.expect_all(0);

    // The parent's own mapping sees the same final table.
    let seg = js.seg();
    verify_all(seg, 2).unwrap();
    let winner = seg.kvs().get(b"contested").expect("contested key");
    assert!(contested_writer(winner).is_some(), "{}", show(Some(winner)));
    let entries = seg.kvs().entries().count() as u32;
    assert_eq!(entries, PUT_RANKS * PUT_KEYS + 1 + PUT_RANKS);
    assert_eq!(seg.fence().generation(), 4);
    for r in 0..PUT_RANKS {
        let state = seg.rank(r).unwrap();
        assert_ne!(state.pid(), 0, "rank {r} never attached");
    }
}

// ---------------------------------------------------------------------------
// A table that fills up under 8 concurrent writers

const FULL_RANKS: u32 = 8;
/// Exit statuses of a full-table child: the error it stopped at.
const EXIT_TABLE_FULL: i32 = 10;
const EXIT_ARENA_FULL: i32 = 11;

fn full_key(rank: u32, i: u32) -> Vec<u8> {
    format!("f-{rank}-{i}").into_bytes()
}

/// The two ways to fill the KVS: slots first, or value bytes first.
fn full_params(which: &str) -> SegmentParams {
    let base = SegmentParams::for_ranks(FULL_RANKS);
    match which {
        // 256 keys fit, with value room for thousands.
        "slots" => SegmentParams {
            kvs_slots: 256,
            kvs_arena_bytes: 1 << 20,
            ..base
        },
        // Room for ~146 values of 100 bytes, with slots for 4096 keys.
        "arena" => SegmentParams {
            kvs_slots: 4096,
            kvs_arena_bytes: 16 << 10,
            ..base
        },
        _ => panic!("unknown full-table case {which:?}"),
    }
}

fn full_table_child(args: &ChildArgs) -> i32 {
    let js = attach(args);
    let seg = js.seg();
    let me = args.rank;
    let state = seg.rank(me).expect("rank state");
    // A common start line, so the writers race for the last slots (a rank
    // may still find the table full before its first put: that is fine).
    if let Err(e) = seg.fence().fence(&SharedFutex) {
        return fail(me, 6, format_args!("start fence: {e}"));
    }
    // At most the whole table's worth: the error must come before.
    for i in 0..=seg.kvs().capacity() as u32 {
        let key = full_key(me, i);
        match seg.kvs().put(&key, &value(3, me, i), &SharedFutex) {
            // The count of stored keys is what the parent checks.
            Ok(PutOutcome::Inserted) => state.count_put(),
            Ok(other) => return fail(me, 2, format_args!("put f-{me}-{i}: {other:?}")),
            Err(e) => {
                // "On error nothing is stored."
                if seg.kvs().get(&key).is_some() {
                    return fail(me, 3, format_args!("failed put f-{me}-{i} left a value"));
                }
                return match e {
                    KvsError::TableFull { .. } => EXIT_TABLE_FULL,
                    KvsError::ArenaFull { .. } => EXIT_ARENA_FULL,
                    other => fail(me, 4, format_args!("put f-{me}-{i}: {other}")),
                };
            }
        }
    }
    fail(me, 5, format_args!("the table never filled"))
}

#[test]
fn full_table_returns_the_full_error_to_every_writer() {
    const TEST: &str = "full_table_returns_the_full_error_to_every_writer";
    if let Some(args) = child_args(TEST) {
        std::process::exit(full_table_child(&args));
    }
    for (which, expected) in [("slots", EXIT_TABLE_FULL), ("arena", EXIT_ARENA_FULL)] {
        let (js, id) = create_segment(&full_params(which), &format!("shm-full-{which}"));
        let mut children = Children::spawn(TEST, 0..FULL_RANKS, id);
        children.expect_all(expected);

        // Every put a child counted is readable with its value; nothing else
        // is in the table.
        let seg = js.seg();
        let kvs = seg.kvs();
        let mut stored = 0;
        let mut keys = HashSet::new();
        for r in 0..FULL_RANKS {
            let n = seg.rank(r).unwrap().stats().puts as u32;
            for i in 0..n {
                let got = kvs.get(&full_key(r, i));
                assert_eq!(
                    got,
                    Some(&value(3, r, i)[..]),
                    "{which}: f-{r}-{i} is {}",
                    show(got)
                );
                keys.insert(full_key(r, i));
            }
            assert_eq!(
                kvs.get(&full_key(r, n)),
                None,
                "{which}: rank {r}'s failed put"
            );
            stored += n as usize;
        }
        let entries: Vec<_> = kvs.entries().collect();
        assert_eq!(entries.len(), stored, "{which}: entries vs counted puts");
        for (k, _) in &entries {
            assert!(
                keys.contains(*k),
                "{which}: unexpected key {:?}",
                show(Some(k))
            );
        }
        match which {
            "slots" => assert_eq!(stored, kvs.capacity(), "a full table has every slot"),
            _ => {
                let record = shm_layout::record_size(100);
                assert!(
                    kvs.arena_capacity() - (stored as u64) * record < record,
                    "arena: {stored} records of {record} bytes in {} bytes, yet full",
                    kvs.arena_capacity()
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The launcher's default segment (memfd) reaches every rank

#[test]
fn memfd_segment_is_shared_through_the_launcher() {
    let bin = env!("CARGO_BIN_EXE_fastpmi");
    let mut child = Command::new(bin)
        .args(["-n", "8", bin, "__demo-rank"])
        .env_remove("FASTPMI_TRANSPORT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run fastpmi");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("fastpmi -n 8 __demo-rank did not finish in 60 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().expect("output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}\n{stdout}\n{stderr}", out.status);
    assert!(
        stdout.contains("8 ranks exchanged business cards (64 gets), all verified"),
        "{stdout}"
    );
    assert!(
        stdout.contains("transport: shared-memory job segment"),
        "{stdout}"
    );
}
