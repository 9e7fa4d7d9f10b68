//! The Rust client from many threads at once: 8 threads per rank, 16 ranks,
//! concurrent put/get/node-attribute calls, over shared memory and over the
//! socket. The test binary runs itself as the ranks (child role when the
//! launcher's PMI environment is present).

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fastpmi_client::{Pmi, TransportKind};

const RANKS: u32 = 16;
const THREADS: u32 = 8;
const KEYS: u32 = 20;

fn value(rank: u32, t: u32, i: u32) -> String {
    format!(
        "v-{rank}-{t}-{i}-{}",
        "x".repeat((rank * 7 + t * 3 + i) as usize % 60)
    )
}

fn child() -> ! {
    let code = match child_work() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("rank failed: {e}");
            1
        }
    };
    std::process::exit(code)
}

fn child_work() -> Result<(), String> {
    let pmi = Arc::new(Pmi::init().map_err(|e| e.to_string())?);
    let want = if std::env::var("FASTPMI_TRANSPORT").is_ok_and(|v| v == "socket") {
        TransportKind::Socket
    } else {
        TransportKind::Shm
    };
    if pmi.transport() != want {
        return Err(format!(
            "transport {:?}, expected {want:?}",
            pmi.transport()
        ));
    }
    let me = pmi.rank();
    // A thread blocks waiting for a node attribute that another thread of
    // this rank puts only after the others finished their work: if a blocking
    // call held the connection, the others could never finish.
    let waiter = {
        let pmi = pmi.clone();
        std::thread::spawn(move || pmi.get_node_attr(format!("late-{me}"), true))
    };
    let put_threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let pmi = pmi.clone();
            std::thread::spawn(move || -> Result<(), String> {
                for i in 0..KEYS {
                    pmi.put(format!("k-{me}-{t}-{i}"), value(me, t, i))
                        .map_err(|e| e.to_string())?;
                }
                pmi.put_node_attr(format!("na-{me}-{t}"), format!("attr-{me}-{t}"))
                    .map_err(|e| e.to_string())
            })
        })
        .collect();
    for h in put_threads {
        h.join().map_err(|_| "put thread panicked")??;
    }
    pmi.fence().map_err(|e| e.to_string())?;
    let get_threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let pmi = pmi.clone();
            std::thread::spawn(move || -> Result<(), String> {
                // Each thread reads every rank's keys of "its" thread index
                // and one node attribute of every rank.
                for r in 0..pmi.size() {
                    for i in 0..KEYS {
                        let got = pmi
                            .get(format!("k-{r}-{t}-{i}"), Some(r))
                            .map_err(|e| e.to_string())?;
                        if got.as_deref() != Some(value(r, t, i).as_bytes()) {
                            return Err(format!("k-{r}-{t}-{i}: got {got:?}"));
                        }
                    }
                    let a = pmi
                        .get_node_attr(format!("na-{r}-{t}"), true)
                        .map_err(|e| e.to_string())?;
                    if a.as_deref() != Some(format!("attr-{r}-{t}").as_bytes()) {
                        return Err(format!("na-{r}-{t}: got {a:?}"));
                    }
                }
                Ok(())
            })
        })
        .collect();
    for h in get_threads {
        h.join().map_err(|_| "get thread panicked")??;
    }
    pmi.put_node_attr(format!("late-{me}"), "now")
        .map_err(|e| e.to_string())?;
    let late = waiter
        .join()
        .map_err(|_| "waiter panicked")?
        .map_err(|e| e.to_string())?;
    if late.as_deref() != Some(&b"now"[..]) {
        return Err(format!("late attribute: {late:?}"));
    }
    pmi.fence().map_err(|e| e.to_string())?;
    pmi.finalize().map_err(|e| e.to_string())
}

#[test]
fn eight_threads_per_rank_share_one_client() {
    if std::env::var_os("PMI_FD").is_some() {
        child();
    }
    let me = std::env::current_exe().unwrap();
    // "overflow": a segment too small for the 2560 keys, so the launcher
    // keeps the rest in its overflow table and misses go to the socket.
    for transport in ["shm", "socket", "overflow"] {
        let t = Instant::now();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fastpmi"));
        if transport == "overflow" {
            cmd.args(["--kvs-mb", "1"]);
        }
        cmd.args(["--stats", "-n", &RANKS.to_string()])
            .arg(&me)
            .args([
                "--exact",
                "eight_threads_per_rank_share_one_client",
                "--nocapture",
                "--test-threads=1",
            ]);
        if transport == "socket" {
            cmd.env("FASTPMI_TRANSPORT", "socket");
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{transport}: {err}");
        assert!(t.elapsed() < Duration::from_secs(120));
        // Which path served the puts and gets.
        let row = |name: &str| -> Vec<u64> {
            let line = err
                .lines()
                .find(|l| l.trim_start().starts_with(name))
                .unwrap_or_else(|| panic!("{err}"));
            line.split_whitespace()
                .skip(1)
                .map(|x| x.parse().unwrap())
                .collect()
        };
        let puts = (RANKS * THREADS * KEYS) as u64;
        if transport == "shm" {
            assert!(row("shared-memory")[0] >= puts, "{err}");
            assert_eq!(row("socket")[0..3], [0, 0, 0], "{err}");
        } else if transport == "overflow" {
            let (shm, sock) = (row("shared-memory"), row("socket"));
            assert!(
                shm[0] > 0 && sock[0] > 0 && shm[0] + sock[0] >= puts,
                "{err}"
            );
        } else {
            assert!(row("socket")[0] >= puts, "{err}");
            assert_eq!(row("shared-memory")[0..3], [0, 0, 0], "{err}");
        }
    }
}
