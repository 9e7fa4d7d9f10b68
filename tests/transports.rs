//! The exchange of business cards over each transport, with the launcher's
//! demo ranks (`fastpmi demo`, `fastpmi __demo-rank`) and a trivial PMI-2
//! program: the demo, port mode, socket and shared-memory ranks sharing one
//! store and one barrier, a segment with an unknown layout stamp refused in
//! favour of the socket, and `--mem-pool none` (no segment) at 300 and 1024
//! ranks.

mod common;

use std::ffi::OsString;
use std::process::Command;
use std::time::Duration;

use common::plain::{run, BIN};
use common::tools::text;
use common::{heavy, prog, Prog};

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

fn many_ranks_without_segment(n: u32) {
    let _g = heavy();
    let p = prog(Prog::Pmi2Trivial);
    let n = n.to_string();
    let out = common::launch([
        OsString::from("--mem-pool"),
        "none".into(),
        "-n".into(),
        n.as_str().into(),
        p.into(),
        n.as_str().into(),
    ])
    .timeout(Duration::from_secs(120))
    .run();
    out.assert_success();
    assert!(
        out.stdout.contains(&format!("pmi2 trivial ok size={n}")),
        "{}",
        out.report()
    );
}

/// `--mem-pool none -n 300`: node attributes the launcher sets (local
/// ranks) exceed 1024 bytes; the job still starts and completes.
#[test]
fn mem_pool_none_with_300_ranks_starts_and_exits_0() {
    many_ranks_without_segment(300);
}

/// The same with 1024 ranks.
#[test]
fn mem_pool_none_with_1024_ranks_starts_and_exits_0() {
    many_ranks_without_segment(1024);
}
