//! A client killed before `PMIx_Finalize` is reported lost
//! ([`ClientUpcall::LostConnection`]) for its namespace and rank, soon
//! after its death (the library's event window, which would hold the
//! report a second, is off), and a client that finalized is not: a host
//! waits for the report before it deregisters a dead client. Against
//! Debian's libpmix2, or the library `FASTPMI_PMIX_LIB` names.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

mod common;

use pmix_host::{ClientUpcall, InfoList, Server, Upcall};

const NSPACE: &str = "lost-job";

#[test]
fn a_killed_client_is_reported_lost_and_a_finalized_one_is_not() {
    let exe = common::compile("lost_client", true);
    let tmp = Scratch(std::env::temp_dir().join(format!("pmix-host-lost-{}", std::process::id())));
    std::fs::create_dir_all(&tmp.0).unwrap();

    let (tx, rx) = mpsc::channel::<Upcall>();
    let tx = Mutex::new(tx);
    let sink = Box::new(move |u: Upcall| {
        let _ = tx.lock().unwrap().send(u);
    });
    let lib = std::env::var_os("FASTPMI_PMIX_LIB").map(PathBuf::from);
    let server = Server::start(lib.as_deref(), &tmp.0, sink).expect("the PMIx library loads");

    // Ranks 0 and 1 wait to be killed; rank 2 finalizes and exits.
    let size = 3u32;
    let host = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    let peers = "0,1,2";
    let mut job = InfoList::default();
    job.u32("pmix.univ.size", size);
    job.u32("pmix.job.size", size);
    job.u32("pmix.max.size", size);
    job.u32("pmix.num.nodes", 1);
    job.string("pmix.nmap", &server.regex(&host, false).unwrap())
        .unwrap();
    job.string("pmix.pmap", &server.regex(peers, true).unwrap())
        .unwrap();
    job.string("pmix.lpeers", peers).unwrap();
    job.u32("pmix.local.size", size);
    server
        .register_nspace(NSPACE, size, job)
        .expect("namespace registered");
    let uid = rustix::process::geteuid().as_raw();
    let gid = rustix::process::getegid().as_raw();
    let mut children = Children(Vec::new());
    for rank in 0..size {
        let env = server
            .register_client(NSPACE, rank, uid, gid)
            .expect("client registered");
        let mut cmd = Command::new(&exe);
        cmd.envs(env)
            .env("PMIX_MCA_psec", "native")
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if rank == 2 {
            cmd.arg("finalize");
        }
        children.0.push(cmd.spawn().expect("client starts"));
    }
    for (rank, child) in children.0.iter_mut().enumerate() {
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), format!("ready {rank}"), "rank {rank}");
    }
    let finalized = children.0[2].wait().unwrap();
    assert!(finalized.success(), "rank 2: {finalized}");

    let killed = Instant::now();
    for child in &mut children.0[..2] {
        child.kill().unwrap();
    }
    let mut lost = BTreeSet::new();
    let mut last = None;
    let mut finalize_seen = false;
    let deadline = killed + Duration::from_secs(10);
    while lost.len() < 2 {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(u) = rx.recv_timeout(left) else {
            panic!("killed ranks 0 and 1; reported lost: {lost:?}");
        };
        match u {
            Upcall::Client(ClientUpcall::LostConnection { nspace, rank }) => {
                assert_eq!(nspace, NSPACE);
                assert!(rank < 2, "rank {rank} finalized, yet reported lost");
                lost.insert(rank);
                last = Some(killed.elapsed());
            }
            Upcall::Client(ClientUpcall::Finalized { rank: 2, .. }) => finalize_seen = true,
            _ => {}
        }
    }
    assert!(finalize_seen, "rank 2's PMIx_Finalize was not reported");
    // A late report of rank 2 would come in this time too.
    while let Ok(u) = rx.recv_timeout(Duration::from_millis(300)) {
        if let Upcall::Client(ClientUpcall::LostConnection { rank, .. }) = u {
            panic!("rank {rank} reported lost again, or after its finalize");
        }
    }
    // Within the library's default window (1 s) the report would still be
    // held.
    let took = last.unwrap();
    eprintln!("killed ranks reported lost {took:?} after the kill");
    assert!(
        took < Duration::from_millis(900),
        "the losses were reported {took:?} after the kill"
    );
    for rank in 0..size {
        server.deregister_client(NSPACE, rank);
    }
    drop(server.deregister_nspace(NSPACE));
    server.finalize();
    let _ = std::fs::remove_file(&exe);
}

/// The clients, killed however the test ends.
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The server's directory, removed however the test ends.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
