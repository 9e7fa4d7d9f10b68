//! A host that drops every completion unanswered (a path that returns
//! early, a launcher without its policy) must not leave a client waiting:
//! OpenPMIx's real server library (Debian's, `libpmix-dev`) serves a real
//! client whose every request reaches a sink that drops it, and each call
//! returns an error, promptly.

use std::collections::BTreeSet;
use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

mod common;

use pmix_host::{ClientUpcall, InfoList, NamesUpcall, RemoteUpcall, Server, Upcall};

/// The upcall's name, for the test's record.
fn kind(u: &Upcall) -> &'static str {
    match u {
        Upcall::Client(ClientUpcall::Connected { .. }) => "connected",
        Upcall::Client(ClientUpcall::Finalized { .. }) => "finalized",
        Upcall::Client(ClientUpcall::Abort { .. }) => "abort",
        Upcall::Client(ClientUpcall::LostConnection { .. }) => "lost-connection",
        Upcall::Names(NamesUpcall::Publish { .. }) => "publish",
        Upcall::Names(NamesUpcall::Unpublish { .. }) => "unpublish",
        Upcall::Names(NamesUpcall::Lookup { .. }) => "lookup",
        Upcall::Remote(RemoteUpcall::Connect { .. }) => "connect",
        Upcall::Remote(RemoteUpcall::Dmodex { .. }) => "dmodex",
        Upcall::Remote(RemoteUpcall::LocalModex { .. }) => "local-modex",
        Upcall::Query(_) => "query",
        Upcall::Spawn(_) => "spawn",
        Upcall::Group(_) => "group",
    }
}

#[test]
fn every_completion_dropped_unanswered_gives_the_client_an_error() {
    let exe = common::compile("unanswered", true);
    let tmp =
        Scratch(std::env::temp_dir().join(format!("pmix-host-unanswered-{}", std::process::id())));
    std::fs::create_dir_all(&tmp.0).unwrap();

    // Upcalls are dropped on a thread of their own, as a host's event loop
    // would drop them: never on the library's thread inside the upcall.
    let (tx, rx) = mpsc::channel::<Upcall>();
    let tx = Mutex::new(tx);
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let record = seen.clone();
    let dropper = std::thread::spawn(move || {
        for u in rx {
            record.lock().unwrap().insert(kind(&u));
            drop(u);
        }
    });
    let sink = Box::new(move |u: Upcall| {
        let _ = tx.lock().unwrap().send(u);
    });
    let server = Server::start(None, &tmp.0, sink).expect("Debian's libpmix2 loads");

    let host = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    let mut job = InfoList::default();
    job.u32("pmix.univ.size", 1);
    job.u32("pmix.job.size", 1);
    job.u32("pmix.max.size", 1);
    job.u32("pmix.num.nodes", 1);
    job.string("pmix.nmap", &server.regex(&host, false).unwrap())
        .unwrap();
    job.string("pmix.pmap", &server.regex("0", true).unwrap())
        .unwrap();
    job.string("pmix.lpeers", "0").unwrap();
    job.u32("pmix.local.size", 1);
    server
        .register_nspace("unanswered-job", 1, job)
        .expect("namespace registered");
    // Another server's job, none of it here (as a host registers the
    // namespace of processes its clients connect to).
    server
        .register_nspace("unanswered-elsewhere", 0, InfoList::default())
        .expect("foreign namespace registered");
    let uid = rustix::process::geteuid().as_raw();
    let gid = rustix::process::getegid().as_raw();
    let env = server
        .register_client("unanswered-job", 0, uid, gid)
        .expect("client registered");

    let started = Instant::now();
    let mut child = Command::new(&exe)
        .envs(env)
        .env("PMIX_MCA_psec", "native")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("client starts");
    // Bounded: a completion that never came would hang the client here.
    let limit = Duration::from_secs(90);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let _ = std::fs::remove_file(&exe);
    assert!(
        status.is_some(),
        "the client still waited after {limit:?} (upcalls seen: {:?}):\n{out}\n{err}",
        seen.lock().unwrap()
    );

    let calls = [
        "PMIx_Publish",
        "PMIx_Lookup",
        "PMIx_Unpublish",
        "PMIx_Query_info",
        "PMIx_Spawn",
        "PMIx_Get",
        "PMIx_Connect",
        "PMIx_Group_construct",
    ];
    for call in calls {
        let rc: i32 = out
            .lines()
            .find_map(|l| {
                l.strip_prefix(call)?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .unwrap_or_else(|| panic!("{call} did not return:\n{out}\n{err}"));
        assert_ne!(rc, 0, "{call} succeeded though nothing answered it");
    }
    drop(server.deregister_nspace("unanswered-job"));
    server.finalize();
    let seen = seen.lock().unwrap().clone();
    for kind in [
        "publish",
        "lookup",
        "unpublish",
        "query",
        "spawn",
        "dmodex",
        "connect",
        "group",
    ] {
        assert!(
            seen.contains(kind),
            "no {kind} upcall reached the host: {seen:?}\n{out}"
        );
    }
    drop(dropper);
}

/// The server's directory, removed however the test ends.
struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
