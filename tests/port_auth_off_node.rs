//! Port mode with an off-node rank, with real processes: a rank in a network
//! namespace joined to the launcher's by a veth pair authenticates with the
//! job's secret and is served, and without it is refused and fails its job
//! cleanly.
//!
//! Ranks are this test binary re-executed as Rust-client ranks
//! (`rank_role`), which authenticate with `FASTPMI_AUTH_SECRET`.

mod common;
mod rank_role;

use std::ffi::OsString;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{heavy, Outcome};
use rank_role::finish;

const LIMIT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// An off-node rank (network namespaces joined by a veth pair)

/// Two network namespaces of the test's own making joined by a veth pair:
/// the launcher's side (10.77.0.1/24) and the "other node" (10.77.0.2/24).
/// Both ends live in namespaces, so nothing of the host's network changes.
/// Deleted on drop, also when the test fails.
struct Netns {
    launcher_ns: String,
    remote_ns: String,
}

const LAUNCHER_ADDR: &str = "10.77.0.1";
const REMOTE_ADDR: &str = "10.77.0.2";

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run `ip` (Debian package iproute2): {e}"));
    assert!(
        out.status.success(),
        "ip {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Netns {
    fn new(tag: &str) -> Netns {
        assert!(
            rustix::process::geteuid().is_root(),
            "this test creates network namespaces and must run as root"
        );
        let id = format!("{}{tag}", std::process::id());
        let n = Netns {
            launcher_ns: format!("fpmi-l{id}"),
            remote_ns: format!("fpmi-r{id}"),
        };
        // Interface names hold at most 15 bytes.
        let (va, vb) = (format!("fpl{id}"), format!("fpr{id}"));
        ip(&["netns", "add", &n.launcher_ns]);
        ip(&["netns", "add", &n.remote_ns]);
        ip(&[
            "link",
            "add",
            &va,
            "netns",
            &n.launcher_ns,
            "type",
            "veth",
            "peer",
            "name",
            &vb,
            "netns",
            &n.remote_ns,
        ]);
        for (ns, dev, addr) in [
            (&n.launcher_ns, &va, LAUNCHER_ADDR),
            (&n.remote_ns, &vb, REMOTE_ADDR),
        ] {
            ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
            // Local addresses are reached through lo.
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        n
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth end in it, and with it the
        // pair.
        for ns in [&self.launcher_ns, &self.remote_ns] {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stdin(Stdio::null())
                .status();
        }
    }
}

/// Rank of the off-node job: init, put, fence, get both values, finalize.
fn role_offnode() -> Result<(), String> {
    rank_role::exchange_all("offnode")
}

/// `ip netns exec <launcher ns> fastpmi --pmi-port-bind 10.77.0.1 -n 1
/// RANK : -n 1 sh -c 'exec ip netns exec <remote ns> env [-u SECRET]
/// PMI_PORT=10.77.0.1:<port> RANK'`.
fn offnode_job(test: &str, ns: &Netns, with_secret: bool) -> Outcome {
    let wrap = format!(
        "exec ip netns exec {} env {} FASTPMI_TRANSPORT=socket \
         PMI_PORT={LAUNCHER_ADDR}:\"${{PMI_PORT##*:}}\" \"$0\" \"$@\"",
        ns.remote_ns,
        if with_secret {
            String::new()
        } else {
            format!("-u {}", fastpmi_codec::names::env::AUTH_SECRET)
        }
    );
    let mut args: Vec<OsString> = ["netns", "exec", &ns.launcher_ns]
        .map(OsString::from)
        .into();
    args.push(common::launcher().into());
    args.extend(["--pmi-port-bind", LAUNCHER_ADDR, "-n", "1"].map(OsString::from));
    args.push(rank_role::me().into());
    args.extend(rank_role::args(test).into_iter().map(OsString::from));
    args.extend([":", "-n", "1", "sh", "-c", &wrap].map(OsString::from));
    args.push(rank_role::me().into());
    args.extend(rank_role::args(test).into_iter().map(OsString::from));
    common::launch(args)
        .program("ip")
        .env(rank_role::ROLE, "offnode")
        .env("FASTPMI_LOG", "debug")
        .timeout(LIMIT)
        .run()
}

/// Rank 1 runs in another network namespace and reaches the launcher over
/// the veth pair from 10.77.0.2; it authenticates with the job's secret and
/// the job completes.
#[test]
fn an_off_node_rank_with_the_secret_is_served() {
    const T: &str = "an_off_node_rank_with_the_secret_is_served";
    if rank_role::role().is_some() {
        finish(role_offnode());
    }
    let _g = heavy();
    let ns = Netns::new("a");
    let out = offnode_job(T, &ns, true);
    out.assert_success();
    for r in 0..2 {
        assert!(
            out.stdout.contains(&format!("offnode rank {r} ok size=2")),
            "rank {r} did not complete\n{}",
            out.report()
        );
    }
    assert!(
        out.stderr.contains(&format!("from {REMOTE_ADDR}:")),
        "the launcher never saw a connection from {REMOTE_ADDR}\n{}",
        out.report()
    );
    assert!(!out.stderr.contains("refused"), "{}", out.report());
}

/// The same rank without `FASTPMI_AUTH_SECRET`: its unauthenticated claim
/// from 10.77.0.2 is refused and logged with that address, and the job
/// fails (no hang) with a message naming rank 1.
#[test]
fn an_off_node_rank_without_the_secret_is_refused_and_the_job_fails() {
    const T: &str = "an_off_node_rank_without_the_secret_is_refused_and_the_job_fails";
    if rank_role::role().is_some() {
        finish(role_offnode());
    }
    let _g = heavy();
    let ns = Netns::new("b");
    let out = offnode_job(T, &ns, false);
    assert!(
        out.code().is_some_and(|c| c != 0),
        "the job should fail\n{}",
        out.report()
    );
    let refused: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| {
            l.contains("refused PMI connection")
                && l.contains(&format!("from {REMOTE_ADDR}:"))
                && l.contains("claims rank 1 without authenticating")
        })
        .collect();
    assert_eq!(refused.len(), 1, "{}", out.report());
    out.assert_stderr_names_rank(1);
    assert!(
        !out.stdout.contains("offnode rank 1 ok"),
        "{}",
        out.report()
    );
}
