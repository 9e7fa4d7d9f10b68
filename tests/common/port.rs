//! Port-mode helpers: ranks that wait behind a gate file so that the test
//! can act before they connect, the PMI environment of a running rank (from
//! `/proc/<pid>/environ`), and a raw TCP PMI client for the test's own
//! connections (attackers and authenticated outsiders).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use fastpmi_codec::{pmi1, pmi2, Deframer, Frame, Message};

use super::Job;

/// Environment variable naming a rank's gate file.
pub const GATE: &str = "FASTPMI_TEST_GATE";

/// `sh -c` script that waits for the file named by `$FASTPMI_TEST_GATE`
/// and then execs its arguments (the rank process keeps its pid, so the
/// launcher's "is this the process I started" check still applies).
pub const GATED_SH: &str =
    "while [ ! -e \"$FASTPMI_TEST_GATE\" ]; do sleep 0.02; done; exec \"$0\" \"$@\"";

/// A file whose creation lets the gated ranks go on.
pub struct Gate {
    pub path: PathBuf,
}

impl Gate {
    pub fn new(dir: &Path, name: &str) -> Gate {
        Gate {
            path: dir.join(name),
        }
    }

    pub fn open(&self) {
        fs::write(&self.path, b"go")
            .unwrap_or_else(|e| panic!("cannot create gate {}: {e}", self.path.display()));
    }
}

/// Wait (in a rank) until the gate named by [`GATE`] exists.
pub fn wait_gate(limit: Duration) -> Result<(), String> {
    let p = std::env::var(GATE).map_err(|_| format!("{GATE} not set"))?;
    let deadline = Instant::now() + limit;
    while !Path::new(&p).exists() {
        if Instant::now() >= deadline {
            return Err(format!("gate {p} not opened within {limit:?}"));
        }
        thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// What the launcher gave a port-mode rank.
#[derive(Debug, Clone)]
pub struct RankEnv {
    pub pid: u32,
    pub id: u32,
    pub port: String,
    pub secret: Option<String>,
    pub jobid: String,
}

/// The environment of process `pid`.
pub fn environ(pid: u32) -> Option<BTreeMap<String, String>> {
    let raw = fs::read(format!("/proc/{pid}/environ")).ok()?;
    Some(
        raw.split(|&b| b == 0)
            .filter_map(|kv| {
                let s = String::from_utf8_lossy(kv);
                let (k, v) = s.split_once('=')?;
                Some((k.to_string(), v.to_string()))
            })
            .collect(),
    )
}

/// Direct children of `pid` (of every thread of it).
pub fn children(pid: u32) -> Vec<u32> {
    let mut v = Vec::new();
    if let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(list) = fs::read_to_string(t.path().join("children")) {
                v.extend(
                    list.split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
    }
    v
}

/// Wait until the launcher `job` has started `n` port-mode ranks (direct
/// children with `PMI_PORT` and `PMI_ID`); their environments by rank.
pub fn wait_for_ranks(job: &mut Job, n: usize, limit: Duration) -> Vec<RankEnv> {
    wait_for_ranks_of(job, job.pid(), n, limit)
}

/// Like [`wait_for_ranks`], for ranks that are children of `parent` (the
/// launcher, when it was started through a wrapper that execs it, is the
/// job's own pid; otherwise pass its pid).
pub fn wait_for_ranks_of(job: &mut Job, parent: u32, n: usize, limit: Duration) -> Vec<RankEnv> {
    let deadline = Instant::now() + limit;
    loop {
        let mut found: BTreeMap<u32, RankEnv> = BTreeMap::new();
        for pid in children(parent) {
            let Some(env) = environ(pid) else { continue };
            let (Some(port), Some(id)) = (env.get("PMI_PORT"), env.get("PMI_ID")) else {
                continue;
            };
            let Ok(id) = id.parse::<u32>() else { continue };
            found.insert(
                id,
                RankEnv {
                    pid,
                    id,
                    port: port.clone(),
                    secret: env.get(fastpmi_codec::names::env::AUTH_SECRET).cloned(),
                    jobid: env.get("PMI_JOBID").cloned().unwrap_or_default(),
                },
            );
        }
        if found.len() == n {
            return found.into_values().collect();
        }
        if let Some(st) = job.try_wait() {
            panic!(
                "launcher exited ({}) before {n} ranks started",
                super::describe_status(st)
            );
        }
        assert!(
            Instant::now() < deadline,
            "only {} of {n} port-mode ranks started within {limit:?}",
            found.len()
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// A PMI client on a TCP connection, speaking raw wire bytes.
pub struct Wire {
    pub sock: TcpStream,
    pub de: Deframer,
}

/// What came back for a request.
#[derive(Debug)]
pub enum Reply {
    Msg(Message),
    /// The launcher closed the connection (EOF or reset) without a reply.
    Closed,
}

impl Wire {
    pub fn connect(port: &str) -> Wire {
        let sock =
            TcpStream::connect(port).unwrap_or_else(|e| panic!("connect to PMI_PORT {port}: {e}"));
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Wire {
            sock,
            de: Deframer::new(),
        }
    }

    /// This end's address, as the launcher sees it.
    pub fn local(&self) -> SocketAddr {
        self.sock.local_addr().unwrap()
    }

    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.sock.write_all(bytes)
    }

    pub fn send_pmi2(&mut self, body: &str) -> io::Result<()> {
        self.send(format!("{:>6}{body}", body.len()).as_bytes())
    }

    /// The next message, or [`Reply::Closed`]. Panics on a timeout (a
    /// launcher that neither answers nor closes is a failure).
    pub fn recv(&mut self) -> Reply {
        let mut buf = [0u8; 4096];
        loop {
            match self.de.next_frame() {
                Ok(Some(Frame::Pmi2(b))) => {
                    return Reply::Msg(pmi2::decode(&b).expect("a PMI-2 reply that decodes"))
                }
                Ok(Some(Frame::Pmi1(l))) => {
                    return Reply::Msg(pmi1::decode(&l).expect("a PMI-1 reply that decodes"))
                }
                Ok(Some(other)) => panic!("unexpected frame from the launcher: {other:?}"),
                Ok(None) => {}
                Err(e) => panic!("reply framing: {e}"),
            }
            match self.sock.read(&mut buf) {
                Ok(0) => return Reply::Closed,
                Ok(n) => self.de.feed(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
                    ) =>
                {
                    return Reply::Closed
                }
                Err(e) => panic!("no reply and no close from the launcher: {e}"),
            }
        }
    }

    /// A reply message, panicking on a close.
    pub fn recv_msg(&mut self, what: &str) -> Message {
        match self.recv() {
            Reply::Msg(m) => m,
            Reply::Closed => panic!("{what}: the launcher closed the connection"),
        }
    }

    /// `cmd=init` for PMI-`version` and its `response_to_init rc=0`.
    pub fn init(&mut self, version: u32) {
        self.send(format!("cmd=init pmi_version={version} pmi_subversion=0\n").as_bytes())
            .expect("send init");
        let m = self.recv_msg("init");
        assert!(
            m.cmd == "response_to_init" && m.get_int("rc") == Some(0),
            "init: {m:?}"
        );
    }

    /// After a refused request: an error reply (rc != 0, no data, message
    /// containing `needle`) and then the close. Returns the message.
    pub fn expect_refused(&mut self, what: &str, needle: &str) -> String {
        let m = match self.recv() {
            Reply::Msg(m) => m,
            Reply::Closed => panic!("{what}: closed without an error reply"),
        };
        let rc = m.get_int("rc");
        assert!(
            rc.is_some_and(|rc| rc != 0),
            "{what}: expected an error reply, got {m:?}"
        );
        assert!(
            m.get("value").is_none() && m.get("port").is_none(),
            "{what}: a refused request must not carry data: {m:?}"
        );
        let text = m
            .get_str("errmsg")
            .or(m.get_str("msg"))
            .unwrap_or_default()
            .to_string();
        assert!(
            text.contains(needle),
            "{what}: error {text:?} should contain {needle:?} ({m:?})"
        );
        self.expect_closed(what);
        text
    }

    /// The launcher closes the connection (no further message).
    pub fn expect_closed(&mut self, what: &str) {
        match self.recv() {
            Reply::Closed => {}
            Reply::Msg(m) => panic!("{what}: the connection stayed open, got {m:?}"),
        }
    }
}

/// Lines of `stderr` that log a refused connection from `peer`.
pub fn refusals_of<'a>(stderr: &'a str, peer: &SocketAddr) -> Vec<&'a str> {
    let from = format!(" from {peer}");
    stderr
        .lines()
        .filter(|l| l.contains("refused PMI connection") && l.contains(&from))
        .filter(|l| {
            // `from 127.0.0.1:4000` must not match `from 127.0.0.1:40001`.
            let i = l.find(&from).unwrap() + from.len();
            !l[i..].starts_with(|c: char| c.is_ascii_digit())
        })
        .collect()
}
