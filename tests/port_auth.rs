//! Port mode under attack, with real processes: a job in `--pmi-port` mode
//! whose ranks wait behind a gate file before PMI init, so that an outside
//! process (the test itself, or a helper under another uid) connects first
//! and claims a rank without proving it belongs to the job. Each attempt is
//! refused (error reply and close) and logged with the peer's address; the
//! real ranks then connect and the job completes. A client holding the
//! job's secret authenticates by hand and is served. The off-node rank (a
//! network namespace) is in `tests/port_auth_off_node.rs`.
//!
//! Ranks are Slurm's libpmi2 (`pmi2_slurm`, an unmodified client that
//! relies on the launcher's local checks) behind `sh` gates, or this test
//! binary re-executed as a Rust-client rank (`rank_role`), which
//! authenticates with `FASTPMI_AUTH_SECRET`.

mod common;
mod rank_role;

use std::ffi::OsString;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::port::{self, Gate, RankEnv, Wire, GATE, GATED_SH};
use common::{heavy, prog, Outcome, Prog};
use rank_role::finish;

const LIMIT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// Ranks

/// Which real ranks a job has.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ranks {
    /// `pmi2_slurm` behind `sh` gates (no authentication: local checks).
    Slurm,
    /// This binary as [`role_gated`] ranks (authenticate with the secret).
    Rust,
}

/// Start a gated 2-rank port-mode job of `test`.
fn start(test: &str, ranks: Ranks, gate: &Gate) -> common::Job {
    match ranks {
        Ranks::Slurm => {
            let p = prog(Prog::Pmi2Slurm);
            let args: Vec<OsString> = vec![
                "--pmi-port".into(),
                "-n".into(),
                "2".into(),
                "sh".into(),
                "-c".into(),
                GATED_SH.into(),
                p.into(),
                "2".into(),
            ];
            common::launch(args)
                .env(GATE, &gate.path)
                .timeout(LIMIT)
                .spawn()
        }
        Ranks::Rust => rank_role::launch(test, "gated", 2, &["--pmi-port"])
            .env(GATE, &gate.path)
            .timeout(LIMIT)
            .spawn(),
    }
}

/// The job ran to completion on its real ranks.
fn assert_job_ok(out: &Outcome, ranks: Ranks) {
    out.assert_success();
    match ranks {
        Ranks::Slurm => assert!(
            out.stdout.contains("pmi2 ok size=2"),
            "the real ranks did not complete\n{}",
            out.report()
        ),
        Ranks::Rust => {
            for r in 0..2 {
                assert!(
                    out.stdout.contains(&format!("gated rank {r} ok size=2")),
                    "rank {r} did not complete\n{}",
                    out.report()
                );
            }
        }
    }
}

/// The launcher logged a refusal of `peer`.
fn assert_refusal_logged(out: &Outcome, peer: &SocketAddr) {
    let lines = port::refusals_of(&out.stderr, peer);
    assert!(
        !lines.is_empty(),
        "no `refused PMI connection ... from {peer}` line on the launcher's stderr\n{}",
        out.report()
    );
}

/// Run a gated job, let `attack` act before any rank connects (it returns
/// the addresses it attacked from), then let the ranks go: the job
/// completes, and every attacker's refusal is in the log.
fn under_attack(test: &str, ranks: Ranks, attack: impl FnOnce(&[RankEnv]) -> Vec<SocketAddr>) {
    let _g = heavy();
    let dir = common::scratch_dir("port-auth");
    let gate = Gate::new(dir.path(), "go");
    let mut job = start(test, ranks, &gate);
    let envs = port::wait_for_ranks(&mut job, 2, LIMIT);
    for e in &envs {
        assert!(
            e.secret.as_deref().is_some_and(|s| s.len() >= 32),
            "rank {} has no job secret in its environment: {e:?}",
            e.id
        );
    }
    let peers = attack(&envs);
    gate.open();
    let out = job.wait();
    assert_job_ok(&out, ranks);
    for p in &peers {
        assert_refusal_logged(&out, p);
    }
}

// ---------------------------------------------------------------------------
// Attackers

/// PMI-2 `init` + `fullinit;pmirank=R;` from a process that is not rank R,
/// with no handshake: loopback and the launcher's uid, but not the rank's
/// socket, so refused. Both ranks are tried.
#[test]
fn fullinit_claiming_a_rank_without_handshake_is_refused() {
    const T: &str = "fullinit_claiming_a_rank_without_handshake_is_refused";
    if rank_role::role().is_some() {
        finish(rank_role::role_gated());
    }
    under_attack(T, Ranks::Slurm, |envs| {
        envs.iter()
            .map(|e| {
                let mut w = Wire::connect(&e.port);
                w.init(2);
                w.send_pmi2(&format!(
                    "cmd=fullinit;pmijobid={};pmirank={};threaded=FALSE;",
                    e.jobid, e.id
                ))
                .unwrap();
                w.expect_refused(
                    "fullinit without a handshake",
                    "socket is not that rank's process",
                );
                w.local()
            })
            .collect()
    });
}

/// `fullinit` with `authtype=challenge-sha256`, answered with a wrong
/// secret: refused, and the rank is still free for the real process.
#[test]
fn challenge_answered_with_a_wrong_secret_is_refused() {
    const T: &str = "challenge_answered_with_a_wrong_secret_is_refused";
    if rank_role::role().is_some() {
        finish(rank_role::role_gated());
    }
    under_attack(T, Ranks::Rust, |envs| {
        let e = &envs[0];
        let mut w = Wire::connect(&e.port);
        w.init(2);
        w.send_pmi2("cmd=fullinit;pmirank=0;threaded=FALSE;authtype=challenge-sha256;")
            .unwrap();
        let m = w.recv_msg("fullinit with authtype");
        assert_eq!(m.cmd, "auth-response", "{m:?}");
        let nonce = m.get_str("authinfo").expect("a challenge").to_string();
        assert!(nonce.len() >= 16, "short challenge {nonce:?}");
        let wrong = fastpmi_codec::auth::answer("not-the-secret", &nonce);
        w.send_pmi2(&format!("cmd=auth-response-complete;authinfo={wrong};"))
            .unwrap();
        w.expect_refused("wrong secret", "wrong answer to the challenge");
        vec![w.local()]
    });
}

/// Helper for [`a_claim_from_another_uid_is_refused`], run by `setpriv` as
/// uid 65534: claims rank 0 with PMI-2 `fullinit` and then rank 1 with
/// PMI-1 `initack`, and prints what happened.
fn role_foreign() -> Result<(), String> {
    let target = rank_role::env("FASTPMI_TEST_TARGET")?;
    println!("foreign uid={}", rustix::process::getuid().as_raw());
    let mut w = Wire::connect(&target);
    w.init(2);
    w.send_pmi2("cmd=fullinit;pmirank=0;threaded=FALSE;")
        .map_err(|e| e.to_string())?;
    let msg = w.expect_refused("foreign fullinit", "without authenticating");
    println!("foreign fullinit from={} refused: {msg}", w.local());
    let mut w = Wire::connect(&target);
    w.send(b"cmd=initack pmiid=1\n")
        .map_err(|e| e.to_string())?;
    let msg = w.expect_refused("foreign initack", "without_authenticating");
    println!("foreign initack from={} refused: {msg}", w.local());
    Ok(())
}

/// A process of another uid (65534, through `setpriv`) on loopback claims
/// ranks with PMI-2 `fullinit` and PMI-1 `initack`: refused.
#[test]
fn a_claim_from_another_uid_is_refused() {
    const T: &str = "a_claim_from_another_uid_is_refused";
    if rank_role::role().as_deref() == Some("foreign") {
        finish(role_foreign());
    }
    if rank_role::role().is_some() {
        finish(rank_role::role_gated());
    }
    match Command::new("setpriv").arg("--version").output() {
        Ok(o) if o.status.success() => {}
        other => panic!(
            "setpriv (Debian package util-linux) is needed to run a client as another uid: \
             {other:?}"
        ),
    }
    under_attack(T, Ranks::Slurm, |envs| {
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(rank_role::me())
            .args(rank_role::args(T))
            .env(rank_role::ROLE, "foreign")
            .env("FASTPMI_TEST_TARGET", &envs[0].port)
            .stdin(Stdio::null())
            .output()
            .expect("run the helper through setpriv");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.contains("foreign uid=65534"),
            "the helper under uid 65534 failed ({}):\n{stdout}\n{stderr}",
            out.status
        );
        ["fullinit", "initack"]
            .iter()
            .map(|what| {
                let tag = format!("foreign {what} from=");
                let line = stdout
                    .lines()
                    .find(|l| l.starts_with(&tag))
                    .unwrap_or_else(|| panic!("no `{tag}` line:\n{stdout}\n{stderr}"));
                line[tag.len()..]
                    .split_whitespace()
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap()
            })
            .collect()
    });
}

/// PMI-1 `initack pmiid=R` (as MPICH's PMI-1 client sends in port mode)
/// from a process that is not rank R: refused.
#[test]
fn pmi1_initack_claiming_a_rank_is_refused() {
    const T: &str = "pmi1_initack_claiming_a_rank_is_refused";
    if rank_role::role().is_some() {
        finish(rank_role::role_gated());
    }
    under_attack(T, Ranks::Slurm, |envs| {
        envs.iter()
            .map(|e| {
                let mut w = Wire::connect(&e.port);
                w.send(format!("cmd=initack pmiid={}\n", e.id).as_bytes())
                    .unwrap();
                w.expect_refused("initack", "not_that_rank's_process");
                w.local()
            })
            .collect()
    });
}

/// Job requests from a connection that never identified itself (after a
/// valid `init`): PMI-2 `kvs-get`, `name-publish`, `name-lookup` and PMI-1
/// `lookup_name`, one connection each. Each gets an error reply without
/// data, is closed and logged.
#[test]
fn requests_from_an_unidentified_connection_are_refused() {
    const T: &str = "requests_from_an_unidentified_connection_are_refused";
    if rank_role::role().is_some() {
        finish(rank_role::role_gated());
    }
    under_attack(T, Ranks::Rust, |envs| {
        let e = &envs[0];
        let reqs: [(u32, &str); 4] = [
            (2, "cmd=kvs-get;jobid=;srcid=0;key=k0;"),
            (2, "cmd=name-publish;name=svc;port=p;"),
            (2, "cmd=name-lookup;name=svc;"),
            (1, "cmd=lookup_name service=svc\n"),
        ];
        reqs.iter()
            .map(|&(v, req)| {
                let mut w = Wire::connect(&e.port);
                w.init(v);
                if v == 2 {
                    w.send_pmi2(req).unwrap();
                } else {
                    w.send(req.as_bytes()).unwrap();
                }
                w.expect_refused(req, "identified");
                w.local()
            })
            .collect()
    });
}

/// A client holding the job's secret (read from the rank's environment)
/// authenticates by hand (challenge-response with SHA-256) as rank 0, puts,
/// fences with the real rank 1, reads its value and finalizes: served like
/// any rank. Rank 0's own process only waits (its second gate) until then.
#[test]
fn a_client_with_the_job_secret_authenticates_and_is_served() {
    const T: &str = "a_client_with_the_job_secret_authenticates_and_is_served";
    if rank_role::role().is_some() {
        finish(rank_role::role_gated());
    }
    let _g = heavy();
    let dir = common::scratch_dir("port-auth");
    let gate = Gate::new(dir.path(), "go");
    let gate0 = Gate::new(dir.path(), "go-rank0");
    // Rank 0: a shell that waits for its gate and exits 0 (no PMI of its
    // own); rank 1: a Rust-client rank.
    let mut args: Vec<OsString> = ["--pmi-port", "-n", "1", "-env", GATE]
        .into_iter()
        .map(OsString::from)
        .collect();
    args.push(gate0.path.clone().into());
    args.extend(["sh", "-c", GATED_SH, "true", ":", "-n", "1"].map(OsString::from));
    args.push(rank_role::me().into());
    args.extend(rank_role::args(T).into_iter().map(OsString::from));
    let mut job = common::launch(args)
        .env(rank_role::ROLE, "gated")
        .env(GATE, &gate.path)
        .timeout(LIMIT)
        .spawn();
    let envs = port::wait_for_ranks(&mut job, 2, LIMIT);
    let e = &envs[0];
    let secret = e
        .secret
        .clone()
        .expect("FASTPMI_AUTH_SECRET in rank 0's environment");

    let mut w = Wire::connect(&e.port);
    w.init(2);
    w.send_pmi2("cmd=fullinit;pmirank=0;threaded=FALSE;authtype=challenge-sha256;")
        .unwrap();
    let m = w.recv_msg("fullinit with authtype");
    assert_eq!(m.cmd, "auth-response", "{m:?}");
    let nonce = m.get_str("authinfo").expect("a challenge").to_string();
    // The answer, computed here with sha2 directly (not through fastpmi).
    let answer: String = {
        use sha2::{Digest, Sha256};
        Sha256::digest(format!("{secret}{nonce}").as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    assert_eq!(answer, fastpmi_codec::auth::answer(&secret, &nonce));
    w.send_pmi2(&format!("cmd=auth-response-complete;authinfo={answer};"))
        .unwrap();
    let m = w.recv_msg("auth-response-complete");
    assert!(
        m.cmd == "fullinit-response"
            && m.get_int("rc") == Some(0)
            && m.get_int("rank") == Some(0)
            && m.get_int("size") == Some(2),
        "{m:?}"
    );
    let call = |w: &mut Wire, body: &str, cmd: &str| {
        w.send_pmi2(body).unwrap();
        let m = w.recv_msg(body);
        assert!(m.cmd == cmd && m.get_int("rc") == Some(0), "{body}: {m:?}");
        m
    };
    call(&mut w, "cmd=kvs-put;key=k0;value=v0;", "kvs-put-response");
    gate.open();
    call(&mut w, "cmd=kvs-fence;", "kvs-fence-response");
    let m = call(
        &mut w,
        "cmd=kvs-get;jobid=;srcid=1;key=k1;",
        "kvs-get-response",
    );
    assert_eq!(m.get_str("value"), Some("v1"), "{m:?}");
    call(&mut w, "cmd=finalize;", "finalize-response");
    gate0.open();
    let out = job.wait();
    out.assert_success();
    assert!(
        out.stdout.contains("gated rank 1 ok size=2"),
        "{}",
        out.report()
    );
    assert!(
        !out.stderr.contains("refused"),
        "the authenticated client was refused\n{}",
        out.report()
    );
}
