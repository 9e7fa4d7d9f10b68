//! Launcher behaviour that needs no MPI: demo, environment and descriptors
//! of ranks, signal forwarding, death of the launcher, port mode.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_fastpmi");

fn run(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).output().expect("run fastpmi")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Processes whose command line contains `marker`.
fn procs_with(marker: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        if let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            if text(&cmd).contains(marker) {
                // Zombies are gone for every practical purpose.
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                if !stat.contains(") Z ") {
                    v.push(pid);
                }
            }
        }
    }
    v
}

fn wait_gone(marker: &str, within: Duration) -> Vec<u32> {
    let t = Instant::now();
    loop {
        let left = procs_with(marker);
        if left.is_empty() || t.elapsed() > within {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn demo_exchanges_and_verifies_cards() {
    let out = run(&["demo", "-n", "16"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(
        s.contains("16 ranks exchanged business cards (256 gets), all verified"),
        "{s}"
    );
    assert!(s.contains("fence") && s.contains("get-all"), "{s}");
}

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

#[test]
fn sigterm_is_forwarded_to_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("fastpmi-sigterm-{}", std::process::id());
    let script = format!("trap 'echo got-term > {}/$PMI_RANK; exit 0' TERM; echo ready; while :; do sleep 0.05; done # {marker}", dir.path().display());
    let child = Command::new(BIN)
        .args(["-n", "3", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until all three shells run.
    let t = Instant::now();
    while procs_with(&marker).len() < 4 && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(143),
        "launcher exit: {}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stderr).contains("SIGTERM"),
        "{}",
        text(&out.stderr)
    );
    for r in 0..3 {
        let got = std::fs::read_to_string(dir.path().join(r.to_string())).unwrap_or_default();
        assert_eq!(got.trim(), "got-term", "rank {r} did not see SIGTERM");
    }
    assert!(wait_gone(&marker, Duration::from_secs(3)).is_empty());
}

#[test]
fn ranks_die_with_a_killed_launcher() {
    let marker = format!("fastpmi-orphan-{}", std::process::id());
    let script = format!("while :; do sleep 0.05; done # {marker}");
    let mut child = Command::new(BIN)
        .args(["-n", "4", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while procs_with(&marker).len() < 5 && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();
    let left = wait_gone(&marker, Duration::from_secs(3));
    assert!(left.is_empty(), "ranks outlived the launcher: {left:?}");
}

/// The launcher SIGKILLed while it is still starting 1024 ranks: every rank
/// already started dies with it (PDEATHSIG, set in the vfork child before
/// exec, with the getppid check for a launcher that died first) and none is
/// left behind.
#[test]
fn ranks_die_with_a_launcher_killed_during_the_launch_of_1024() {
    const N: usize = 1024;
    const KILL_AFTER: usize = 50;
    let dir = tempfile::tempdir().unwrap();
    // The program's path is the marker: ranks get it as argv[0].
    let marker = format!("fastpmi-launch-kill-{}", std::process::id());
    let exe = dir.path().join(&marker);
    std::fs::copy("/bin/sleep", &exe).unwrap();
    let mut child = Command::new(BIN)
        .args(["-n", &N.to_string(), exe.to_str().unwrap(), "3600"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let mut seen = 0;
    while t.elapsed() < Duration::from_secs(60) {
        seen = procs_with(&marker).len();
        if seen >= KILL_AFTER {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap(); // SIGKILL, mid-launch
    child.wait().unwrap();
    let left = wait_gone(&marker, Duration::from_secs(5));
    assert!(
        (KILL_AFTER..N).contains(&seen),
        "the launcher was not killed during the launch: {seen} of {N} ranks running"
    );
    assert!(left.is_empty(), "ranks outlived the launcher: {left:?}");
    // Nothing started late either.
    std::thread::sleep(Duration::from_millis(200));
    assert!(procs_with(&marker).is_empty());
}

#[test]
fn port_mode_runs_the_rust_client() {
    let out = run(&["--pmi-port", "-n", "5", BIN, "__demo-rank"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("5 ranks exchanged business cards"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn failing_rank_is_named_and_its_code_returned() {
    let out = run(&[
        "-n",
        "4",
        "sh",
        "-c",
        "[ $PMI_RANK = 2 ] && exit 5; sleep 0.2",
    ]);
    assert_eq!(out.status.code(), Some(5));
    let err = text(&out.stderr);
    assert!(err.contains("rank 2 exited with status 5"), "{err}");
    assert_eq!(
        err.lines().filter(|l| l.starts_with("fastpmi:")).count(),
        1,
        "{err}"
    );
}

#[test]
fn bad_arguments_get_one_line_errors() {
    for args in [
        &["-n", "x", "true"][..],
        &["--bogus", "true"],
        &["-n", "2"],
        &["-n", "2", "/nonexistent/prog"],
    ] {
        let out = run(args);
        assert!(!out.status.success(), "{args:?}");
        let err = text(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("fastpmi: "), "{err}");
    }
    assert_eq!(
        run(&["-n", "1", "/nonexistent/prog"]).status.code(),
        Some(127)
    );
    let help = run(&["--help"]);
    assert!(help.status.success() && text(&help.stdout).contains("usage: fastpmi"));
}

#[test]
fn a_client_that_stops_reading_blocks_nobody() {
    // Rank 4 puts its card, fences, then floods the server with requests and
    // never reads a reply; the other ranks must still finish their exchange.
    let card = fastpmi::demo::card(4);
    let script = format!(
        "printf 'cmd=init pmi_version=1 pmi_subversion=1\\n' >&3; read -r l <&3
printf 'cmd=put kvsname=x key=bc-4 value={card}\\n' >&3; read -r l <&3
printf 'cmd=barrier_in\\n' >&3; read -r l <&3
yes cmd=get_maxes | head -n 200000 >&3
printf 'cmd=barrier_in\\ncmd=finalize\\n' >&3
sleep 0.3"
    );
    let out = Command::new(BIN)
        .args([
            "-n",
            "4",
            BIN,
            "__demo-rank",
            ":",
            "-n",
            "1",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("5 ranks exchanged business cards"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn shared_memory_fence_blocked_by_a_rank_without_pmi_fails_fast() {
    // Ranks 0-2 wait in the segment's fence; rank 3 exits without PMI, so
    // the fence can never complete: the job must end instead of hanging.
    let t = Instant::now();
    let out = run(&["-n", "3", BIN, "__demo-rank", ":", "-n", "1", "true"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains(
            "fastpmi: fence 1 can never complete: rank 3 exited without taking part in PMI"
        ),
        "{err}"
    );
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn kill_9_during_a_shared_memory_fence_wakes_everyone() {
    let marker = format!("fastpmi-shmkill-{}", std::process::id());
    let script = format!("sleep 30 # {marker}");
    let child = Command::new(BIN)
        .args([
            "-n",
            "8",
            BIN,
            "__demo-rank",
            ":",
            "-n",
            "1",
            "sh",
            "-c",
            &script,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Let the demo ranks reach the fence (they sleep on the futex there).
    let t = Instant::now();
    let victim = loop {
        let v = procs_with(&marker);
        if let Some(&pid) = v.iter().find(|&&p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "sh")
        }) {
            break pid;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "victim never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(500));
    let killed = Instant::now();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(victim as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        killed.elapsed() < Duration::from_secs(2),
        "took {:?}",
        killed.elapsed()
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(137), "{err}");
    assert!(
        err.contains("fastpmi: rank 8 was killed by signal 9 (SIGKILL)"),
        "{err}"
    );
    assert!(wait_gone(&marker, Duration::from_secs(2)).is_empty());
}

#[test]
fn mixed_socket_and_shared_memory_ranks_share_one_store_and_barrier() {
    // Socket ranks wait in fences that shared-memory ranks may complete, and
    // the other way round; repeated because who arrives last varies.
    for _ in 0..5 {
        let out = Command::new(BIN)
            .args([
                "--stats",
                "-n",
                "6",
                "-env",
                "FASTPMI_TRANSPORT",
                "socket",
                BIN,
                "__demo-rank",
                ":",
                "-n",
                "6",
                BIN,
                "__demo-rank",
            ])
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(text(&out.stdout)
            .contains("12 ranks exchanged business cards (144 gets), all verified"));
        for transport in ["socket", "shared-memory"] {
            let line = err
                .lines()
                .find(|l| l.trim_start().starts_with(transport))
                .unwrap_or_else(|| panic!("{err}"));
            let puts: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
            assert!(puts >= 6, "{transport} served {puts} puts: {err}");
        }
    }
}

#[test]
fn a_segment_with_an_unknown_stamp_is_refused_and_the_socket_used() {
    let out = Command::new(BIN)
        .args(["demo", "-n", "4", "--stats"])
        .env("FASTPMI_ADVERTISE_FOREIGN_SEGMENT", "1")
        .env("FASTPMI_LOG", "debug")
        .output()
        .unwrap();
    let (o, e) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{e}");
    assert!(
        o.contains("transport: PMI-2 over the launcher's socket"),
        "{o}"
    );
    assert_eq!(
        e.matches("not using shared memory: segment not usable: segment layout hash")
            .count(),
        4,
        "{e}"
    );
    let sock = e
        .lines()
        .find(|l| l.trim_start().starts_with("socket"))
        .unwrap();
    assert!(
        sock.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 4,
        "{sock}"
    );
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
