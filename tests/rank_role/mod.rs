//! Test binaries that are their own ranks: the test starts `fastpmi` with
//! this very binary as the program (`--exact <test>`) and an environment
//! variable naming the role the rank plays; spawned children are this
//! binary again, with their role in the spawn's `env` info key. Each test
//! function first checks for a role and, in a rank, runs it and exits.
#![allow(dead_code)]

pub mod raw;

use std::ffi::OsString;
use std::time::{Duration, Instant};

use fastpmi_client::{Pmi, SpawnCmd};

use crate::common;

/// Names the role a rank of a test plays (absent in the test itself).
pub const ROLE: &str = "FASTPMI_SPAWNTEST_ROLE";

/// The role of this process, if it was started as a rank.
pub fn role() -> Option<String> {
    std::env::var(ROLE).ok().filter(|r| !r.is_empty())
}

/// Arguments that make this test binary run exactly `test`, quietly (no
/// `test name ...` prefix glued to the rank's first output line).
pub fn args(test: &str) -> Vec<String> {
    ["--exact", test, "-q", "--nocapture", "--test-threads=1"]
        .into_iter()
        .map(String::from)
        .collect()
}

pub fn me() -> String {
    std::env::current_exe()
        .expect("path of the test binary")
        .to_string_lossy()
        .into_owned()
}

/// `fastpmi <flags> -n N <this binary> --exact <test>` with every rank in
/// `role`.
pub fn launch(test: &str, role: &str, n: u32, flags: &[&str]) -> common::Cmd {
    let mut a: Vec<OsString> = flags.iter().map(OsString::from).collect();
    a.push("-n".into());
    a.push(n.to_string().into());
    a.push(me().into());
    a.extend(args(test).into_iter().map(OsString::from));
    common::launch(a)
        .env(ROLE, role)
        .timeout(Duration::from_secs(60))
}

/// A spawn command running this binary's `test` as `role`, with extra
/// environment entries (`NAME=value`, no blanks).
pub fn cmd(test: &str, role: &str, maxprocs: u32, env: &[String]) -> SpawnCmd {
    let mut e = format!("{ROLE}={role}");
    for kv in env {
        assert!(!kv.contains(char::is_whitespace), "env entry {kv:?}");
        e.push(' ');
        e.push_str(kv);
    }
    SpawnCmd {
        exe: me(),
        maxprocs,
        args: args(test),
        info: vec![("env".into(), e)],
    }
}

/// End a rank: status 0 on success, else the error on stderr and status 1.
pub fn finish(r: Result<(), String>) -> ! {
    match r {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("rank role {} failed: {e}", role().unwrap_or_default());
            std::process::exit(1)
        }
    }
}

pub fn init() -> Result<Pmi, String> {
    Pmi::init().map_err(|e| format!("Pmi::init: {e}"))
}

/// Check a condition inside a role.
pub fn ensure(cond: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(what())
    }
}

/// The rank's transport is the one the test asked for
/// (`FASTPMI_TEST_TRANSPORT`: `shm` or `socket`).
pub fn ensure_transport(pmi: &Pmi) -> Result<(), String> {
    let want = env("FASTPMI_TEST_TRANSPORT")?;
    let got = format!("{:?}", pmi.transport()).to_lowercase();
    ensure(got.contains(&want), || {
        format!("transport {got}, want {want}")
    })
}

pub fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} not set"))
}

/// Call `f` every 20 ms until it yields `Some`, for at most `limit`.
pub fn poll<T>(
    limit: Duration,
    what: &str,
    mut f: impl FnMut() -> Result<Option<T>, String>,
) -> Result<T, String> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f()? {
            return Ok(v);
        }
        if Instant::now() >= deadline {
            return Err(format!("{what}: not within {limit:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A Rust-client rank: waits for its gate, then [`exchange_all`].
pub fn role_gated() -> Result<(), String> {
    crate::common::port::wait_gate(Duration::from_secs(60))?;
    exchange_all("gated")
}

/// Init, put, fence, get and check every rank's value, finalize; prints
/// `LABEL rank R ok size=N transport=T`.
pub fn exchange_all(label: &str) -> Result<(), String> {
    let pmi = Pmi::init().map_err(|e| format!("Pmi::init: {e}"))?;
    let (me, n) = (pmi.rank(), pmi.size());
    pmi.put(format!("k{me}"), format!("v{me}"))
        .map_err(|e| format!("put: {e}"))?;
    pmi.fence().map_err(|e| format!("fence: {e}"))?;
    for r in 0..n {
        let v = pmi
            .get(format!("k{r}"), Some(r))
            .map_err(|e| format!("get k{r}: {e}"))?;
        ensure(v.as_deref() == Some(format!("v{r}").as_bytes()), || {
            format!("rank {me}: k{r} is {v:?}")
        })?;
    }
    pmi.finalize().map_err(|e| format!("finalize: {e}"))?;
    println!(
        "{label} rank {me} ok size={n} transport={:?}",
        pmi.transport()
    );
    Ok(())
}
