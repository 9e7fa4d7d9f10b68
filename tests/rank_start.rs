//! What a rank starts with, and how the launcher starts its ranks, with
//! plain (non-PMI) programs: the PMI environment and the descriptors each
//! rank inherits (per `--mem-pool`), descriptors the launcher inherited kept
//! from the ranks, default signal dispositions, sessions and process groups
//! (`FASTPMI_RANK_SESSIONS`); and the launcher's rank-starting machinery:
//! its descriptor table sized for the job before the first rank starts, the
//! forkers' slots at the lowest descriptor numbers, forker threads started
//! as ranks need them.
//!
//! Run it in the foreground: `ranks_start_with_default_signal_dispositions`
//! expects the ranks to ignore what the test runner ignores, and a runner
//! started with `nohup` or in the background ignores signals the launcher
//! handles (SIGHUP, SIGINT), which its ranks then do not ignore.

mod common;

use std::process::Command;

use common::plain::BIN;
use common::tools::text;

/// Each rank's descriptors as `fd:target` pairs (stdio, PMI socket, segment,
/// out-of-band socket).
const FD_SCRIPT: &str = r#"out=""; for f in /proc/$$/fd/*; do [ -e "$f" ] && out="$out ${f##*/}:$(readlink $f)"; done; echo "FDS$out""#;

fn rank_fds(stdout: &str, rank: u32) -> Vec<(u32, String)> {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!("[{rank}] FDS")))
        .unwrap_or_else(|| panic!("{stdout}"));
    let mut v: Vec<(u32, String)> = line
        .split_whitespace()
        .skip(2)
        // "(deleted)" after a memfd name is not a descriptor of its own.
        .filter_map(|p| {
            let (fd, target) = p.split_once(':')?;
            Some((fd.parse().ok()?, target.to_string()))
        })
        .collect();
    v.sort();
    v
}

#[test]
fn rank_environment_and_descriptors() {
    let script = format!(
        r#"echo "R=$PMI_RANK S=$PMI_SIZE J=$PMI_JOBID F=$PMI_FD O=$PMI_OOB_FD L=$MPI_LOCALRANKID/$MPI_LOCALNRANKS G=$FOO SP=${{PMI_SPAWNED-unset}} PX=${{PMIX_RANK-unset}}"; {FD_SCRIPT}"#
    );
    for (pool, segment_fd) in [("anonmmap", true), ("sysv", false), ("none", false)] {
        let s = stdout_of(
            Command::new(BIN)
                .args([
                    "--mem-pool",
                    pool,
                    "-n",
                    "3",
                    "-genv",
                    "FOO",
                    "bar",
                    "-l",
                    "sh",
                    "-c",
                    &script,
                ])
                .env("PMIX_RANK", "7"),
        );
        for r in 0..3 {
            let line = s
                .lines()
                .find(|l| l.starts_with(&format!("[{r}] R=")))
                .unwrap_or_else(|| panic!("{s}"));
            assert!(line.contains(&format!("R={r} S=3 J=fastpmi_")), "{line}");
            assert!(
                line.contains(&format!("F=3 O=6 L={r}/3 G=bar SP=unset PX=unset")),
                "{line}"
            );
            let fds = rank_fds(&s, r);
            let numbers: Vec<u32> = fds.iter().map(|(fd, _)| *fd).collect();
            let want: Vec<u32> = if segment_fd {
                vec![0, 1, 2, 3, 4, 6]
            } else {
                vec![0, 1, 2, 3, 6]
            };
            assert_eq!(
                numbers, want,
                "--mem-pool {pool}: rank {r} inherited unexpected descriptors: {fds:?}"
            );
            assert!(fds[3].1.starts_with("socket:"), "{fds:?}");
            assert!(fds.last().unwrap().1.starts_with("socket:"), "{fds:?}");
            if segment_fd {
                assert!(fds[4].1.starts_with("/memfd:fastpmi-job"), "{fds:?}");
            }
        }
    }
}

/// Descriptors the launcher inherited open across exec (a shell's
/// redirections, a batch system's sockets) never reach a rank.
#[test]
fn descriptors_the_launcher_inherits_stay_with_it() {
    // The shell opens 8 and 9 without close-on-exec, then becomes the
    // launcher.
    let s = stdout_of(Command::new("sh").args([
        "-c",
        r#"exec 8</dev/null 9</dev/null; exec "$0" -n 2 -l sh -c "$1""#,
        BIN,
        FD_SCRIPT,
    ]));
    for r in 0..2 {
        let numbers: Vec<u32> = rank_fds(&s, r).iter().map(|(fd, _)| *fd).collect();
        assert!(!numbers.is_empty(), "{s}");
        assert!(
            !numbers.contains(&8) && !numbers.contains(&9),
            "rank {r} got the launcher's inherited descriptors: {numbers:?}"
        );
    }
}

/// A rank starts with no signal blocked, and ignores what the launcher
/// was started ignoring (here SIGUSR2, as `env --ignore-signal` leaves it)
/// but not SIGPIPE, which the launcher's runtime ignores; the launcher's
/// handlers (SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1) are not inherited.
/// Whether the event loop or a forker thread created the rank.
#[test]
fn ranks_start_with_default_signal_dispositions() {
    // Signals 1-31: glibc keeps 32 and 33 to itself (its sigaction refuses
    // them), and what they show depends on who started the test.
    let status_mask = |s: &str, field: &str| -> Vec<u64> {
        s.lines()
            .filter_map(|l| l.strip_prefix(field))
            .map(|v| u64::from_str_radix(v.trim(), 16).unwrap() & 0x7fff_ffff)
            .collect()
    };
    let sigusr2 = 1u64 << (libc::SIGUSR2 - 1);
    let sigpipe = 1u64 << (libc::SIGPIPE - 1);
    // What this process ignores reaches `env` (Command resets SIGPIPE).
    let mine = status_mask(
        &std::fs::read_to_string("/proc/self/status").unwrap(),
        "SigIgn:",
    )[0];
    let want = (mine | sigusr2) & !sigpipe;
    for n in [1usize, 3] {
        let s = stdout_of(Command::new("env").args([
            "--ignore-signal=USR2",
            BIN,
            "-n",
            &n.to_string(),
            "cat",
            "/proc/self/status",
        ]));
        assert_eq!(status_mask(&s, "SigBlk:"), vec![0; n], "-n {n}\n{s}");
        assert_eq!(
            status_mask(&s, "SigIgn:"),
            vec![want; n],
            "-n {n}: want {want:x}\n{s}"
        );
        assert_eq!(status_mask(&s, "SigCgt:"), vec![0; n], "-n {n}\n{s}");
    }
}

/// With `FASTPMI_RANK_SESSIONS=1` every rank but the one on the terminal's
/// stdin leads a session of its own (as Hydra's ranks do), so that with the
/// kernel's autogroups the job does not share one scheduling group's CPU;
/// rank 0 of the first job stays in the launcher's session and process
/// group. By default (and with `=0`) every rank is in the launcher's.
#[test]
fn ranks_lead_their_own_sessions_on_request_except_the_stdin_rank() {
    // /proc/PID/stat: pid (comm) state ppid pgrp session ...
    let script = r#"set -- $(cat /proc/$$/stat); echo "SID rank=$PMI_RANK pid=$1 pgrp=$5 sid=$6""#;
    let ours = rustix::process::getsid(None)
        .unwrap()
        .as_raw_nonzero()
        .get();
    let ours_pgrp = rustix::process::getpgrp().as_raw_nonzero().get();
    for flag in [Some("1"), Some("0"), None] {
        let own_sessions = flag == Some("1");
        let mut cmd = Command::new(BIN);
        cmd.args(["-n", "3", "sh", "-c", script]);
        match flag {
            Some(f) => cmd.env("FASTPMI_RANK_SESSIONS", f),
            None => cmd.env_remove("FASTPMI_RANK_SESSIONS"),
        };
        let s = stdout_of(&mut cmd);
        let lines: Vec<&str> = s.lines().filter(|l| l.starts_with("SID ")).collect();
        assert_eq!(lines.len(), 3, "{s}");
        for line in lines {
            let r = field_of(line, "rank");
            let (pid, pgrp, sid) = (
                field_of(line, "pid"),
                field_of(line, "pgrp"),
                field_of(line, "sid"),
            );
            if r == 0 || !own_sessions {
                assert_eq!(sid, ours, "launcher's session: {line}");
                assert_eq!(pgrp, ours_pgrp, "launcher's process group: {line}");
            } else {
                assert_eq!(sid, pid, "rank {r} leads its own session: {line}");
                assert_eq!(pgrp, pid, "{line}");
            }
        }
    }
}

/// The launcher sizes its descriptor table for the whole job before the
/// first rank starts, instead of growing it while ranks start (each growth
/// in a threaded process waits for an RCU grace period with no rank
/// starting; see `reserve_descriptors`). Rank 0, the first started, reads
/// the launcher's table size: it must already hold the four descriptors
/// per rank (PMI and out-of-band sockets, stdout, stderr) that 256 ranks
/// need.
#[test]
fn descriptor_table_is_sized_for_the_job_before_ranks_start() {
    const N: u32 = 256;
    let script = r#"if [ "$PMI_RANK" = 0 ]; then while read -r k v; do [ "$k" = FDSize: ] && echo "FDSIZE=$v"; done < /proc/$PPID/status; fi; exit 0"#;
    let s = stdout_of(Command::new(BIN).args(["-n", &N.to_string(), "sh", "-c", script]));
    let line = s
        .lines()
        .find(|l| l.starts_with("FDSIZE="))
        .unwrap_or_else(|| panic!("no FDSize from rank 0: {s}"));
    let size = field_of(line, "FDSIZE");
    assert!(
        size >= 4 * N as i32,
        "launcher descriptor table when rank 0 started: {size} slots, fewer than the {} a {N}-rank job holds",
        4 * N
    );
}

/// Every descriptor numbered below a forker's last slot is copied into each
/// rank it creates and closed again at exec (`Spawner`), so the forkers'
/// slots, opened on `/dev/null`, sit at the lowest numbers above the
/// targets 0-6, 7 per forker. Rank 0 lists the launcher's `/dev/null`
/// descriptors (the only rank: no forker is busy, so every slot is on
/// `/dev/null`): with 4 forkers, 28 slots and the shared `/dev/null`, all
/// below 7 + 28 + 8 (the launcher's own few opened before them).
#[test]
fn forker_slots_take_the_lowest_descriptor_numbers() {
    const FORKERS: u32 = 4;
    let script = r#"if [ "$PMI_RANK" = 0 ]; then for f in /proc/$PPID/fd/*; do [ "$(readlink "$f")" = /dev/null ] && echo "NULLFD=${f##*/}"; done; fi; exit 0"#;
    let s = stdout_of(
        Command::new(BIN)
            .env("FASTPMI_FORKERS", FORKERS.to_string())
            .args(["-n", "1", "sh", "-c", script]),
    );
    let mut fds: Vec<i32> = s
        .lines()
        .filter(|l| l.starts_with("NULLFD="))
        .map(|l| field_of(l, "NULLFD"))
        .collect();
    fds.sort();
    // Stdio of the launcher may be /dev/null too.
    fds.retain(|&fd| fd > 2);
    assert!(
        fds.len() > 7 * FORKERS as usize,
        "the launcher's /dev/null descriptors: {fds:?}"
    );
    let bound = 7 + 7 * FORKERS as i32 + 8;
    assert!(
        fds.iter().all(|&fd| fd < bound),
        "forker slots at {fds:?}, not all below {bound}"
    );
}

/// Rank-starting threads start as ranks need them: a 1-rank job's
/// launcher starts its rank on the event loop's thread and runs none
/// (`fastpmi-fork-*`), a 2-rank job's at least one, never the 16 it may
/// use for either, and a 16-rank job's no more than twice the CPUs (or 4).
#[test]
fn forker_threads_start_as_ranks_need_them() {
    let script = r#"[ "$PMI_RANK" = 0 ] || exit 0; sleep 0.2; for t in /proc/$PPID/task/*; do echo "THREAD=$(cat "$t/comm")"; done; exit 0"#;
    let forkers = |n: &str| {
        let s = stdout_of(
            Command::new(BIN)
                .env("FASTPMI_FORKERS", "16")
                .args(["-n", n, "sh", "-c", script]),
        );
        let threads: Vec<String> = s
            .lines()
            .filter_map(|l| l.strip_prefix("THREAD="))
            .map(str::to_string)
            .collect();
        assert!(threads.iter().any(|t| t == "fastpmi"), "{s}");
        threads
            .into_iter()
            .filter(|t| t.starts_with("fastpmi-fork"))
            .count()
    };
    assert_eq!(forkers("1"), 0, "a 1-rank job");
    let two = forkers("2");
    assert!((1..=2).contains(&two), "a 2-rank job: {two} forker threads");
    // Sixteen ranks wait at once. Twice the usable CPUs start for them;
    // beyond that a thread starts only while more than 4 ranks wait per
    // running thread, which 15 waiting ranks stop at 4 threads.
    let cpus = rustix::thread::sched_getaffinity(None).unwrap().count() as usize;
    let sixteen = forkers("16");
    let most = (2 * cpus).clamp(4, 16);
    assert!(
        (1..=most).contains(&sixteen),
        "a 16-rank job on {cpus} CPUs: {sixteen} forker threads"
    );
}

/// Stdout of a launcher run that must succeed.
fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout).to_string()
}

/// The number after `key=` in a whitespace-separated line.
fn field_of(line: &str, key: &str) -> i32 {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{key} in {line}"))
}
