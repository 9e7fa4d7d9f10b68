//! The job segment shared by real processes, not threads: KVS puts, fences
//! and gets across 64 processes, a full table hit by 8 writers at once, and
//! an abort waking every process asleep in a fence or node-attribute wait.
//!
//! Each test re-executes this test binary as its child processes
//! (`--exact <test> --nocapture`) with `FASTPMI_SHM_CHILD_TEST` set; the test
//! function then runs the child role and leaves with `process::exit`, its
//! status saying what it saw. The parent creates a SysV segment (removed
//! with `IPC_RMID` at once, still attachable by id while it stays attached),
//! the children attach by id. Every child's status is checked, and a child
//! still running after [`CHILD_TIMEOUT`] is killed and fails the test.

use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fastpmi::shm::{JobSegment, MemPool, SharedFutex};
use shm_layout::{Aborted, KvsError, PutOutcome, SegmentParams, SegmentRef, WaitError};

const ENV_TEST: &str = "FASTPMI_SHM_CHILD_TEST";
const ENV_RANK: &str = "FASTPMI_SHM_CHILD";
const ENV_SEG: &str = "FASTPMI_SHM_SEG";
const ENV_PARENT: &str = "FASTPMI_SHM_PARENT";

/// Longest a child may run before it is killed and the test fails.
const CHILD_TIMEOUT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// Child processes

/// What a child process was started with.
struct ChildArgs {
    rank: u32,
    seg_id: i32,
}

/// `Some` in a child started for `test`: this process must run the child
/// role and exit. Panics (exit 101) if started for another test.
fn child_args(test: &str) -> Option<ChildArgs> {
    let started_for = std::env::var(ENV_TEST).ok()?;
    assert_eq!(started_for, test, "child started for another test");
    // Die with the test process: a child blocked in a fence would otherwise
    // wait forever if the parent were killed.
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
        .expect("PR_SET_PDEATHSIG");
    let parent: i32 = env_parse(ENV_PARENT);
    if rustix::process::getppid().map(|p| p.as_raw_nonzero().get()) != Some(parent) {
        std::process::exit(97); // the parent is already gone
    }
    Some(ChildArgs {
        rank: env_parse(ENV_RANK),
        seg_id: env_parse(ENV_SEG),
    })
}

fn env_parse<T: std::str::FromStr>(name: &str) -> T {
    let s = std::env::var(name).unwrap_or_else(|_| panic!("{name} not set"));
    s.parse()
        .unwrap_or_else(|_| panic!("{name}={s:?} does not parse"))
}

/// Attaches the parent's segment; exits 98 if that fails.
fn attach(args: &ChildArgs) -> JobSegment {
    match JobSegment::attach_sysv(args.seg_id) {
        Ok(js) => {
            if let Some(state) = js.seg().rank(args.rank) {
                state.set_pid(std::process::id());
                state.set_phase(shm_layout::RankPhase::Running);
            }
            js
        }
        Err(e) => {
            eprintln!(
                "child {}: cannot attach segment {}: {e}",
                args.rank, args.seg_id
            );
            std::process::exit(98);
        }
    }
}

/// Prints why a child fails and returns its exit status.
fn fail(rank: u32, code: i32, why: std::fmt::Arguments<'_>) -> i32 {
    eprintln!("child {rank}: {why}");
    code
}

/// The running children of one test; killed and reaped if the test panics.
struct Children {
    procs: Vec<(u32, Child)>,
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Exit(i32),
    Signal(i32),
    /// Still running at the deadline (then killed).
    Hung,
}

impl Children {
    /// Starts this test binary as children `ranks`, each running `test`'s
    /// child role on segment `seg_id`.
    fn spawn(test: &str, ranks: std::ops::Range<u32>, seg_id: i32) -> Children {
        let exe = std::env::current_exe().expect("current_exe");
        let mut children = Children { procs: Vec::new() };
        for rank in ranks {
            let child = Command::new(&exe)
                .args(["--exact", test, "--nocapture", "--test-threads=1"])
                .env(ENV_TEST, test)
                .env(ENV_RANK, rank.to_string())
                .env(ENV_SEG, seg_id.to_string())
                .env(ENV_PARENT, std::process::id().to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::null()) // libtest's "running 1 test" lines
                .stderr(Stdio::inherit()) // a failing child says why
                .spawn()
                .unwrap_or_else(|e| panic!("spawn child {rank}: {e}"));
            children.procs.push((rank, child));
        }
        children
    }

    /// Whether every child is still running.
    fn all_running(&mut self) -> bool {
        self.procs
            .iter_mut()
            .all(|(_, c)| matches!(c.try_wait(), Ok(None)))
    }

    /// Waits for every child (killing those still running at `deadline`);
    /// returns `(rank, how it ended, when it was seen ended)` in rank order.
    fn reap(&mut self, deadline: Instant) -> Vec<(u32, Ended, Instant)> {
        use std::os::unix::process::ExitStatusExt;
        let mut done: Vec<Option<(Ended, Instant)>> = vec![None; self.procs.len()];
        loop {
            let now = Instant::now();
            for (i, (_, child)) in self.procs.iter_mut().enumerate() {
                if done[i].is_some() {
                    continue;
                }
                if let Some(status) = child.try_wait().expect("try_wait") {
                    let ended = match (status.code(), status.signal()) {
                        (Some(code), _) => Ended::Exit(code),
                        (None, Some(sig)) => Ended::Signal(sig),
                        (None, None) => Ended::Signal(0),
                    };
                    done[i] = Some((ended, now));
                } else if now >= deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    done[i] = Some((Ended::Hung, now));
                }
            }
            if done.iter().all(Option::is_some) {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let out = self
            .procs
            .iter()
            .zip(done)
            .map(|((rank, _), d)| {
                let (ended, at) = d.expect("reaped");
                (*rank, ended, at)
            })
            .collect();
        self.procs.clear();
        out
    }

    /// Reaps every child and asserts that each exited with `expected`.
    fn expect_all(&mut self, expected: i32) -> Vec<(u32, Ended, Instant)> {
        let ended = self.reap(Instant::now() + CHILD_TIMEOUT);
        let bad: Vec<_> = ended
            .iter()
            .filter(|(_, e, _)| *e != Ended::Exit(expected))
            .map(|(r, e, _)| (*r, *e))
            .collect();
        assert!(
            bad.is_empty(),
            "children that did not exit with {expected}: {bad:?}"
        );
        ended
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for (_, child) in &mut self.procs {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The SysV segment of a test, created by the parent.
fn create_segment(params: &SegmentParams, job: &str) -> (JobSegment, i32) {
    let js = JobSegment::create(MemPool::Sysv, params, job).expect("create SysV segment");
    let id = js.mapping().sysv_id().expect("SysV id");
    (js, id)
}

/// Waits until `cond` holds, at most `within`.
fn wait_for(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while !cond() {
        if t.elapsed() > within {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

/// A deterministic ~100-byte value that names its round, rank and index, so
/// a reader can check it byte for byte (and a torn or misplaced value shows).
fn value(round: u32, rank: u32, i: u32) -> Vec<u8> {
    let mut v = format!("v{round}-r{rank:04}-i{i:03}-").into_bytes();
    let mut x = (u64::from(round) << 48 | u64::from(rank) << 16 | u64::from(i))
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        | 1;
    while v.len() < 100 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(b"0123456789abcdefghijklmnopqrstuv"[(x & 31) as usize]);
    }
    v
}

fn show(v: Option<&[u8]>) -> String {
    match v {
        Some(v) => format!("{:?}", String::from_utf8_lossy(v)),
        None => "missing".into(),
    }
}

// ---------------------------------------------------------------------------
// 1. 64 processes: put, fence, get; then overwrite and a contested key

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
// 2. A table that fills up under 8 concurrent writers

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
// 3. An abort wakes every process asleep in a fence or node-attribute wait

const FENCE_SLEEPERS: u32 = 16;
const ATTR_SLEEPERS: u32 = 4;
const ABORT_CODE: i32 = 42;
const ABORT_RANK: u32 = 7;

/// Exit statuses of an abort child other than `ABORT_CODE` (the right abort).
const EXIT_WRONG_ABORT: i32 = 50;
const EXIT_FENCE_OK: i32 = 51;
const EXIT_ATTR_OK: i32 = 52;
const EXIT_ATTR_OTHER: i32 = 53;

fn abort_child(args: &ChildArgs) -> i32 {
    let js = attach(args);
    let seg = js.seg();
    let me = args.rank;
    let check = |a: Aborted| {
        if a == Aborted::new(ABORT_CODE, ABORT_RANK) && seg.abort_status() == Some(a) {
            ABORT_CODE
        } else {
            fail(me, EXIT_WRONG_ABORT, format_args!("wrong abort {a:?}"))
        }
    };
    if me < FENCE_SLEEPERS {
        if let Some(state) = seg.rank(me) {
            state.set_phase(shm_layout::RankPhase::InFence);
        }
        match seg.fence().fence(&SharedFutex) {
            Ok(a) => fail(me, EXIT_FENCE_OK, format_args!("fence completed: {a:?}")),
            Err(a) => check(a),
        }
    } else {
        // Tell the parent we are about to wait.
        let ready = format!("ready-{me}");
        if let Err(e) = seg.kvs().put(ready.as_bytes(), b"1", &SharedFutex) {
            return fail(me, 2, format_args!("put {ready}: {e}"));
        }
        match seg.node_attrs().get_wait(b"never", &SharedFutex, None) {
            Ok(v) => fail(
                me,
                EXIT_ATTR_OK,
                format_args!("got never = {}", show(Some(v))),
            ),
            Err(WaitError::Aborted(a)) => check(a),
            Err(e) => fail(me, EXIT_ATTR_OTHER, format_args!("get_wait: {e}")),
        }
    }
}

#[test]
fn abort_wakes_every_sleeper() {
    const TEST: &str = "abort_wakes_every_sleeper";
    if let Some(args) = child_args(TEST) {
        std::process::exit(abort_child(&args));
    }
    // One more party than will ever arrive.
    let (js, id) = create_segment(&SegmentParams::for_ranks(FENCE_SLEEPERS + 1), "shm-abort");
    let seg = js.seg();
    let mut children = Children::spawn(TEST, 0..FENCE_SLEEPERS + ATTR_SLEEPERS, id);
    let all_waiting = wait_for(CHILD_TIMEOUT, || {
        seg.fence().arrived() == FENCE_SLEEPERS
            && (FENCE_SLEEPERS..FENCE_SLEEPERS + ATTR_SLEEPERS)
                .all(|r| seg.kvs().get(format!("ready-{r}").as_bytes()).is_some())
    });
    assert!(
        all_waiting,
        "children never all waited: {} in the fence",
        seg.fence().arrived()
    );
    // Past their short spin: asleep in the futex, and still blocked.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        children.all_running(),
        "a child left its wait before the abort"
    );
    assert_eq!(seg.fence().arrived(), FENCE_SLEEPERS);

    let t_abort = Instant::now();
    let effective = seg.abort(ABORT_CODE, ABORT_RANK, &SharedFutex);
    assert_eq!(effective, Aborted::new(ABORT_CODE, ABORT_RANK));
    let ended = children.expect_all(ABORT_CODE);
    let slowest = ended
        .iter()
        .map(|(r, _, at)| (at.duration_since(t_abort), *r))
        .max()
        .unwrap();
    println!(
        "abort woke {} sleepers; the last exited {:?} after it",
        ended.len(),
        slowest.0
    );
    assert!(
        slowest.0 < Duration::from_secs(2),
        "rank {} exited {:?} after the abort",
        slowest.1,
        slowest.0
    );
    // A later abort does not replace the first.
    assert_eq!(
        seg.abort(1, 3, &SharedFutex),
        Aborted::new(ABORT_CODE, ABORT_RANK)
    );
}

// ---------------------------------------------------------------------------
// 4. The launcher's default segment (memfd) reaches every rank

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
