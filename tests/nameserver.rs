//! Name service with real processes: publish in a spawned child and lookup
//! in its parent (one launcher), and publish/lookup across two launchers
//! sharing a `fastpmi nameserver`. Ranks are this test binary (see
//! `rank_role`).

mod common;
mod rank_role;

use std::path::{Path, PathBuf};
use std::time::Duration;

use fastpmi_client::{Pmi, PmiError, SpawnRequest};
use rank_role::{ensure, env, finish, init, poll};

fn lines_with<'a>(out: &'a str, needle: &str) -> Vec<&'a str> {
    out.lines().filter(|l| l.contains(needle)).collect()
}

/// `Err` of the server naming `needle`, else a description of what came.
fn refused(what: &str, r: Result<(), PmiError>, needle: &str) -> Result<(), String> {
    match r {
        Err(PmiError::Server { rc, msg, .. }) if rc != 0 && msg.contains(needle) => {
            println!("refused {what}: {msg}");
            Ok(())
        }
        other => Err(format!(
            "{what}: {other:?}, expected an error naming {needle:?}"
        )),
    }
}

fn found(pmi: &Pmi, service: &str) -> Result<Option<String>, String> {
    pmi.lookup(service)
        .map_err(|e| format!("lookup {service}: {e}"))
}

// ---------------------------------------------------------------------------
// One launcher

const LOCAL_TEST: &str = "child_publishes_parent_looks_up_and_ownership_is_enforced";
const SVC: &str = "fastpmi-test-svc";
const DONE: &str = "fastpmi-test-parent-done";

fn role_parent() -> Result<(), String> {
    let pmi = init()?;
    let has = pmi.job_attr("hasNameServ").map_err(|e| e.to_string())?;
    ensure(has.as_deref() == Some(&b"TRUE"[..]), || {
        format!("hasNameServ = {has:?}")
    })?;
    println!("hasNameServ=TRUE");
    pmi.spawn(&SpawnRequest {
        cmds: vec![rank_role::cmd(LOCAL_TEST, "child", 1, &[])],
        preput: Vec::new(),
    })
    .map_err(|e| e.to_string())?;
    let port = poll(Duration::from_secs(10), "the child's name", || {
        found(&pmi, SVC)
    })?;
    ensure(port == "port-of-child", || {
        format!("lookup {SVC} = {port:?}")
    })?;
    println!("parent found {SVC}={port}");
    refused(
        "duplicate publish",
        pmi.publish(SVC, "port-of-parent"),
        "already published",
    )?;
    refused(
        "unpublish by another job",
        pmi.unpublish(SVC),
        "published by another job",
    )?;
    let miss = found(&pmi, "fastpmi-no-such-service")?;
    ensure(miss.is_none(), || format!("unknown name found: {miss:?}"))?;
    println!("unknown name is a miss");
    pmi.publish(DONE, "x").map_err(|e| e.to_string())?;
    pmi.finalize().map_err(|e| e.to_string())
}

fn role_child() -> Result<(), String> {
    let pmi = init()?;
    pmi.publish(SVC, "port-of-child")
        .map_err(|e| format!("publish: {e}"))?;
    poll(Duration::from_secs(10), "the parent's checks", || {
        found(&pmi, DONE)
    })?;
    // The owner may unpublish; afterwards the name is a miss.
    pmi.unpublish(SVC)
        .map_err(|e| format!("unpublish by the owner: {e}"))?;
    let after = found(&pmi, SVC)?;
    ensure(after.is_none(), || {
        format!("{SVC} after unpublish: {after:?}")
    })?;
    println!("child unpublished {SVC}");
    pmi.finalize().map_err(|e| e.to_string())
}

#[test]
fn child_publishes_parent_looks_up_and_ownership_is_enforced() {
    match rank_role::role().as_deref() {
        Some("child") => finish(role_child()),
        Some(_) => finish(role_parent()),
        None => {}
    }
    let out = rank_role::launch(LOCAL_TEST, "parent", 1, &[]).run();
    out.assert_success();
    for want in [
        "hasNameServ=TRUE",
        "parent found fastpmi-test-svc=port-of-child",
        "refused duplicate publish: ",
        "refused unpublish by another job: ",
        "unknown name is a miss",
        "child unpublished fastpmi-test-svc",
    ] {
        assert_eq!(
            lines_with(&out.stdout, want).len(),
            1,
            "missing `{want}`\n{}",
            out.report()
        );
    }
}

// ---------------------------------------------------------------------------
// Two launchers, one name server

const X_TEST: &str = "launchers_share_a_name_server_and_names_die_with_their_launcher";
const XSVC: &str = "fastpmi-cross-launcher-svc";

fn wait_file(dir: &Path, name: &str) -> Result<(), String> {
    let f = dir.join(name);
    poll(Duration::from_secs(30), &format!("file {name}"), || {
        Ok(f.exists().then_some(()))
    })
}

fn touch(dir: &Path, name: &str) -> Result<(), String> {
    std::fs::write(dir.join(name), b"").map_err(|e| format!("{name}: {e}"))
}

fn role_a() -> Result<(), String> {
    let pmi = init()?;
    let dir = PathBuf::from(env("NS_DIR")?);
    pmi.publish(XSVC, "port-from-a")
        .map_err(|e| format!("publish: {e}"))?;
    println!("a published");
    wait_file(&dir, "b-checked")?;
    pmi.finalize().map_err(|e| e.to_string())
}

fn role_b() -> Result<(), String> {
    let pmi = init()?;
    let dir = PathBuf::from(env("NS_DIR")?);
    let port = poll(Duration::from_secs(10), "launcher A's name", || {
        found(&pmi, XSVC)
    })?;
    ensure(port == "port-from-a", || {
        format!("lookup {XSVC} = {port:?}")
    })?;
    println!("b found {XSVC}={port}");
    refused(
        "duplicate publish from B",
        pmi.publish(XSVC, "port-from-b"),
        "already published",
    )?;
    refused(
        "unpublish of A's name by B",
        pmi.unpublish(XSVC),
        "published by another job",
    )?;
    touch(&dir, "b-checked")?;
    wait_file(&dir, "a-exited")?;
    // The name server drops a launcher's names when its connection closes.
    poll(Duration::from_secs(5), "A's name gone", || {
        Ok(found(&pmi, XSVC)?.is_none().then_some(()))
    })?;
    println!("b saw {XSVC} gone");
    pmi.finalize().map_err(|e| e.to_string())
}

#[test]
fn launchers_share_a_name_server_and_names_die_with_their_launcher() {
    match rank_role::role().as_deref() {
        Some("a") => finish(role_a()),
        Some("b") => finish(role_b()),
        Some(other) => panic!("unknown role {other}"),
        None => {}
    }
    let (ns, addr) = common::nameserver::start_fastpmi();
    let dir = common::scratch_dir("ns");
    let flags = ["--nameserver", addr.as_str()];
    let a = rank_role::launch(X_TEST, "a", 1, &flags)
        .env("NS_DIR", dir.path())
        .spawn();
    let b = rank_role::launch(X_TEST, "b", 1, &flags)
        .env("NS_DIR", dir.path())
        .spawn();
    let out_a = a.wait_or_kill(Duration::from_secs(40));
    out_a.assert_success();
    std::fs::write(dir.path().join("a-exited"), b"").unwrap();
    let out_b = b.wait_or_kill(Duration::from_secs(40));
    out_b.assert_success();
    assert_eq!(lines_with(&out_a.stdout, "a published").len(), 1);
    for want in [
        "b found fastpmi-cross-launcher-svc=port-from-a",
        "refused duplicate publish from B: ",
        "refused unpublish of A's name by B: ",
        "b saw fastpmi-cross-launcher-svc gone",
    ] {
        assert_eq!(
            lines_with(&out_b.stdout, want).len(),
            1,
            "missing `{want}`\n{}",
            out_b.report()
        );
    }
    drop(ns);
}

// ---------------------------------------------------------------------------
// A name server that is not there

const DEAD_TEST: &str = "unreachable_name_server_gives_errors_not_misses";

fn role_dead() -> Result<(), String> {
    let pmi = init()?;
    refused(
        "publish with no name server",
        pmi.publish("fastpmi-dead-svc", "p"),
        "cannot reach the name server",
    )?;
    match pmi.lookup("fastpmi-dead-svc") {
        Err(e) if e.to_string().contains("cannot reach the name server") => {
            println!("lookup with no name server: {e}");
        }
        other => {
            return Err(format!(
                "lookup with no name server reachable: {other:?}, expected an error \
                 (a miss would claim the name is not published)"
            ))
        }
    }
    pmi.finalize().map_err(|e| e.to_string())
}

/// `--nameserver` naming a port where nothing listens: publish and lookup
/// both fail with an error naming the unreachable server; a lookup must not
/// pass the dead peer off as "not published".
#[test]
fn unreachable_name_server_gives_errors_not_misses() {
    if rank_role::role().is_some() {
        finish(role_dead());
    }
    // A port that was just free: nothing listens on it once closed.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .to_string();
    let out = rank_role::launch(DEAD_TEST, "dead", 1, &["--nameserver", &addr]).run();
    out.assert_success();
    assert_eq!(
        lines_with(&out.stdout, "refused publish with no name server: ").len(),
        1,
        "{}",
        out.report()
    );
    assert_eq!(
        lines_with(&out.stdout, "lookup with no name server: ").len(),
        1,
        "{}",
        out.report()
    );
}
