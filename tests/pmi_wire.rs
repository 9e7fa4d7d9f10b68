//! The launcher's PMI server against ranks and clients that write PMI by
//! hand, with real processes: what it answers and what it refuses (commands
//! before `init`, the `hasNameServ` job attribute, a PMI-2 header that is
//! not a length, an abort code too large for an exit status), and the
//! bounds that keep one bad client from costing the others: a rank that
//! stops reading its replies, endless `mcmd=spawn` blocks and a flood of
//! idle port-mode connections, measured on the launcher's own memory.
//!
//! Rust ranks are this test binary (see `rank_role`); raw ranks speak PMI
//! bytes on their inherited socket (`rank_role::raw`) or, in `sh`, on
//! descriptor 3.

mod common;
mod rank_role;

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use common::heavy;
use common::plain::BIN;
use common::port::{self, Gate, Wire, GATE};
use common::tools::text;
use fastpmi_codec::Deframer;
use rank_role::raw::{pmi_socket, Raw};
use rank_role::{ensure, env, finish, init};

const LIMIT: Duration = Duration::from_secs(60);

/// A raw rank on its inherited socket after `init` and `fullinit`.
fn raw_rank() -> Result<Raw, String> {
    let mut r = Raw {
        sock: pmi_socket()?,
        de: Deframer::new(),
    };
    r.send(b"cmd=init pmi_version=2 pmi_subversion=0\n")?;
    let m = r.recv()?;
    ensure(m.get_int("rc") == Some(0), || format!("init: {m:?}"))?;
    let rank = env("PMI_RANK")?;
    r.send_pmi2(&format!("cmd=fullinit;pmirank={rank};threaded=FALSE;"))?;
    let m = r.recv()?;
    ensure(m.get_int("rc") == Some(0), || format!("fullinit: {m:?}"))?;
    Ok(r)
}

// ---------------------------------------------------------------------------
// What the launcher answers and refuses

/// `get_maxes` before `init` on PMI_FD: rc != 0; then init, fullinit and
/// get_maxes work.
fn role_before_init() -> Result<(), String> {
    let mut r = Raw {
        sock: pmi_socket()?,
        de: Deframer::new(),
    };
    r.send(b"cmd=get_maxes\n")?;
    let m = r.recv()?;
    ensure(m.get_int("rc").is_some_and(|rc| rc != 0), || {
        format!("get_maxes before init was answered: {m:?}")
    })?;
    ensure(m.get("kvsname_max").is_none(), || {
        format!("get_maxes before init carried data: {m:?}")
    })?;
    println!(
        "before init refused: {}",
        m.get_str("msg").unwrap_or_default()
    );
    r.send(b"cmd=init pmi_version=1 pmi_subversion=1\n")?;
    let m = r.recv()?;
    ensure(
        m.cmd == "response_to_init" && m.get_int("rc") == Some(0),
        || format!("init after the refusal: {m:?}"),
    )?;
    r.send(b"cmd=get_maxes\n")?;
    let m = r.recv()?;
    ensure(
        m.get_int("rc") == Some(0) && m.get_int("kvsname_max").is_some(),
        || format!("get_maxes after init: {m:?}"),
    )?;
    r.send(b"cmd=finalize\n")?;
    r.expect_ok("finalize")?;
    println!("init after refusal ok");
    Ok(())
}

#[test]
fn commands_before_init_are_refused_and_init_still_works() {
    const T: &str = "commands_before_init_are_refused_and_init_still_works";
    if rank_role::role().is_some() {
        finish(role_before_init());
    }
    let out = rank_role::launch(T, "before-init", 1, &[]).run();
    out.assert_success();
    assert!(
        out.stdout
            .contains("before init refused: get_maxes_before_init"),
        "{}",
        out.report()
    );
    assert!(
        out.stdout.contains("init after refusal ok"),
        "{}",
        out.report()
    );
}

fn role_has_name_serv() -> Result<(), String> {
    let mut r = raw_rank()?;
    r.send_pmi2("cmd=info-getjobattr;key=hasNameServ;")?;
    let m = r.recv()?;
    ensure(
        m.get_int("rc") == Some(0)
            && m.get_str("found")
                .is_some_and(|f| f.eq_ignore_ascii_case("TRUE"))
            && m.get_str("value") == Some("TRUE"),
        || format!("hasNameServ: {m:?}"),
    )?;
    r.send_pmi2("cmd=finalize;")?;
    r.expect_ok("finalize")?;
    println!("hasNameServ=TRUE");
    Ok(())
}

#[test]
fn job_attribute_has_name_serv_is_true() {
    const T: &str = "job_attribute_has_name_serv_is_true";
    if rank_role::role().is_some() {
        finish(role_has_name_serv());
    }
    let out = rank_role::launch(T, "has-name-serv", 1, &[]).run();
    out.assert_success();
    assert!(out.stdout.contains("hasNameServ=TRUE"), "{}", out.report());
}

/// Rank 0 fences (and waits there); rank 1 sends a bad PMI-2 length header
/// (`xx` and garbage) and reads until the launcher closes its socket.
fn role_bad_header() -> Result<(), String> {
    if env("PMI_RANK")? == "0" {
        let pmi = init()?;
        return match pmi.fence() {
            Ok(()) => Err("fence completed without rank 1".into()),
            Err(e) => {
                println!("rank 0 fence failed: {e}");
                std::process::exit(3)
            }
        };
    }
    let mut r = raw_rank()?;
    r.send(b"xx\x01garbage;=\xff\n")?;
    loop {
        match r.recv() {
            Ok(m) => println!("rank 1 got {m:?}"),
            Err(e) => {
                println!("rank 1: {e}");
                std::process::exit(3)
            }
        }
    }
}

/// The launcher drops a connection whose PMI-2 header is not a length: the
/// job fails with "the launcher closed the PMI connection of rank 1", not
/// "rank 1 closed its ...".
#[test]
fn a_connection_dropped_for_a_bad_header_is_reported_as_closed_by_the_launcher() {
    const T: &str = "a_connection_dropped_for_a_bad_header_is_reported_as_closed_by_the_launcher";
    if rank_role::role().is_some() {
        finish(role_bad_header());
    }
    let _g = heavy();
    let out = rank_role::launch(T, "bad-header", 2, &[]).run();
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("fastpmi: the launcher closed the PMI connection of rank 1"),
        "{}",
        out.report()
    );
    assert!(
        !out.stderr.contains("closed its PMI connection"),
        "{}",
        out.report()
    );
}

fn role_abort_huge() -> Result<(), String> {
    let mut r = raw_rank()?;
    r.send_pmi2("cmd=abort;isworld=TRUE;exitcode=99999999999;message=huge code;")?;
    // No reply to abort: wait to be stopped.
    std::thread::sleep(Duration::from_secs(30));
    Err("still running 30 s after abort".into())
}

/// `abort` with exitcode 99999999999: the launcher exits 255 and its
/// message carries the code as sent.
#[test]
fn abort_with_exitcode_99999999999_exits_255_and_names_the_code() {
    const T: &str = "abort_with_exitcode_99999999999_exits_255_and_names_the_code";
    if rank_role::role().is_some() {
        finish(role_abort_huge());
    }
    let out = rank_role::launch(T, "abort-huge", 1, &[]).run();
    out.assert_code(255);
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains("called abort"))
        .unwrap_or_else(|| panic!("no abort message\n{}", out.report()));
    assert!(
        line.contains("99999999999") && line.contains("rank 0") && line.contains("huge code"),
        "{line:?}\n{}",
        out.report()
    );
}

// ---------------------------------------------------------------------------
// Bounded buffers

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

/// Most memory the launcher may use in these tests (peak RSS).
const RSS_MAX_KIB: u64 = 64 * 1024;

/// A field of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`).
fn status_kib(pid: u32, field: &str) -> u64 {
    let s = fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/status: {e}"));
    s.lines()
        .find_map(|l| {
            let rest = l.strip_prefix(field)?.strip_prefix(':')?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// A gated 2-rank Rust job in port mode.
fn gated_port_job(test: &str, gate: &Gate) -> common::Job {
    rank_role::launch(test, "gated", 2, &["--pmi-port"])
        .env(GATE, &gate.path)
        .spawn()
}

/// One connection: `init`, then a `mcmd=spawn` block that never ends,
/// written until the launcher closes the connection. Returns the bytes
/// written and what the launcher sent back.
fn endless_spawn_block(port: &str) -> (u64, Vec<u8>) {
    let mut w = Wire::connect(port);
    w.init(1);
    let mut writer = w.sock.try_clone().unwrap();
    let pusher = std::thread::spawn(move || {
        let line = format!("arg1={}\n", "x".repeat(4090));
        let mut sent = 0u64;
        if writer
            .write_all(b"mcmd=spawn\nnprocs=1\nexecname=/bin/true\n")
            .is_err()
        {
            return sent;
        }
        // Stop at 64 MiB even if never closed (the test then fails).
        while sent < 64 << 20 {
            match writer.write(line.as_bytes()) {
                Ok(n) => sent += n as u64,
                Err(_) => break,
            }
        }
        sent
    });
    let mut back = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match w.sock.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => back.extend_from_slice(&buf[..n]),
        }
    }
    (pusher.join().unwrap(), back)
}

/// Endless `mcmd=spawn` blocks from a local client (port mode): each is cut
/// off past 1 MiB with an error reply and a close; 200 MB pushed in all
/// leave the launcher's peak RSS under 64 MiB, and the real ranks are
/// served afterwards.
#[test]
fn an_endless_spawn_block_is_cut_off_and_memory_stays_bounded() {
    const T: &str = "an_endless_spawn_block_is_cut_off_and_memory_stays_bounded";
    if rank_role::role().is_some() {
        finish(rank_role::role_gated());
    }
    let _g = heavy();
    let dir = common::scratch_dir("spawn-block");
    let gate = Gate::new(dir.path(), "go");
    let mut job = gated_port_job(T, &gate);
    let envs = port::wait_for_ranks(&mut job, 2, LIMIT);
    let mut total = 0u64;
    let mut conns = 0;
    while total < 200_000_000 {
        let (sent, back) = endless_spawn_block(&envs[0].port);
        let text = String::from_utf8_lossy(&back);
        assert!(
            sent > 1 << 20 && sent < 64 << 20,
            "connection {conns}: {sent} bytes written before the close"
        );
        assert!(
            text.starts_with(
                "cmd=error_result rc=-1 msg=mcmd_spawn_block_longer_than_1048576_bytes"
            ),
            "connection {conns}: reply {text:?}"
        );
        total += sent;
        conns += 1;
    }
    let hwm = status_kib(job.pid(), "VmHWM");
    gate.open();
    let out = job.wait();
    out.assert_success();
    for r in 0..2 {
        assert!(
            out.stdout.contains(&format!("gated rank {r} ok")),
            "{}",
            out.report()
        );
    }
    assert!(
        hwm < RSS_MAX_KIB,
        "launcher peak RSS {hwm} KiB after {total} bytes on {conns} connections"
    );
}

/// 5000 idle port-mode connections that never identify themselves: the
/// launcher logs refusals once 4096 are pending, its peak RSS stays under
/// 64 MiB, and the real ranks (connecting while the flood is still open)
/// are served: the job exits 0.
#[test]
fn a_flood_of_idle_connections_does_not_starve_the_ranks() {
    const T: &str = "a_flood_of_idle_connections_does_not_starve_the_ranks";
    if rank_role::role().is_some() {
        finish(rank_role::role_gated());
    }
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut lim = getrlimit(Resource::Nofile);
    if lim.current.is_some_and(|c| c < 6000) {
        lim.current = lim.maximum.map(|m| m.min(8192)).or(Some(8192));
        setrlimit(Resource::Nofile, lim).expect("raise RLIMIT_NOFILE to hold 5000 sockets");
    }
    let _g = heavy();
    let dir = common::scratch_dir("flood");
    let gate = Gate::new(dir.path(), "go");
    let mut job = gated_port_job(T, &gate);
    let envs = port::wait_for_ranks(&mut job, 2, LIMIT);
    // Two connecting threads: a SYN dropped when the launcher's accept
    // queue overflows costs a 1 s retransmission, which then overlaps with
    // the other thread's work (more threads overflow the queue more often).
    let port = envs[0].port.clone();
    let flood: Vec<TcpStream> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|t| {
                let port = &port;
                s.spawn(move || {
                    (0..2500)
                        .map(|i| {
                            TcpStream::connect(port.as_str()).unwrap_or_else(|e| {
                                panic!("flood connection {i} of thread {t}: {e}")
                            })
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        hs.into_iter()
            .flat_map(|h| h.join().expect("flood thread"))
            .collect()
    });
    assert_eq!(flood.len(), 5000);
    // Let the launcher accept them (it then holds 4096 of them) before the
    // ranks come.
    let deadline = Instant::now() + Duration::from_secs(20);
    while fs::read_dir(format!("/proc/{}/fd", job.pid()))
        .map(|d| d.count())
        .unwrap_or(0)
        < 4096
    {
        assert!(
            Instant::now() < deadline,
            "the launcher did not accept the flood"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let hwm = status_kib(job.pid(), "VmHWM");
    gate.open();
    let out = job.wait();
    drop(flood);
    out.assert_success();
    for r in 0..2 {
        assert!(
            out.stdout.contains(&format!("gated rank {r} ok")),
            "{}",
            out.report()
        );
    }
    assert!(
        hwm < RSS_MAX_KIB,
        "launcher peak RSS {hwm} KiB with 5000 idle connections"
    );
    let refusals = out
        .stderr
        .lines()
        .filter(|l| l.contains("refused PMI connection") && l.contains("127.0.0.1:"))
        .count();
    assert!(
        refusals >= 5000 - 4096,
        "{refusals} refusals logged for 5000 connections over the limit of 4096\n{}",
        out.report()
    );
}
