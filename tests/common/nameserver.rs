//! Name-server daemons for tests of jobs that meet through one
//! (`hydra_nameserver -port P`, `fastpmi nameserver --port P`): a free
//! loopback port, start, wait until it listens, stop by pid.

use std::ffi::OsStr;
use std::fs;
use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// A TCP port that was free on 127.0.0.1 a moment ago (the kernel picked
/// it; the daemon binds it right after).
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local address").port()
}

/// Is some socket listening on TCP `port` (any address)? Read from
/// /proc/net/tcp{,6} so that probing does not connect to the daemon.
pub fn listening(port: u16) -> bool {
    let want = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        fs::read_to_string(f).is_ok_and(|t| {
            t.lines().skip(1).any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                // local_address is column 1, state column 3 (0A = LISTEN).
                cols.len() > 3 && cols[1].ends_with(&want) && cols[3] == "0A"
            })
        })
    })
}

/// A daemon started by a test: stopped (SIGKILL by pid, reaped) on drop.
pub struct Daemon {
    child: Child,
    what: String,
}

impl Daemon {
    /// Start `program args...` (stdin closed, output captured) and wait up to
    /// `limit` until TCP `port` is listening. Panics with `context` and the
    /// daemon's output if it exits or does not listen in time.
    pub fn start<I, S>(context: &str, program: &Path, args: I, port: u16, limit: Duration) -> Daemon
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let what = format!("{cmd:?}");
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start name server `{what}`: {e}"));
        let mut d = Daemon { child, what };
        let deadline = Instant::now() + limit;
        while !listening(port) {
            if let Ok(Some(status)) = d.child.try_wait() {
                let output = d.output();
                panic!(
                    "{context}: name server `{}` exited ({status}) before listening on port \
                     {port}\n{output}",
                    d.what
                );
            }
            if Instant::now() >= deadline {
                d.stop();
                let output = d.output();
                panic!(
                    "{context}: name server `{}` not listening on port {port} after \
                     {limit:?}\n{output}",
                    d.what
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
        d
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL and reap (idempotent).
    pub fn stop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// Everything the daemon wrote, once it has been stopped or exited.
    fn output(&mut self) -> String {
        let mut s = String::new();
        if let Some(mut o) = self.child.stdout.take() {
            let _ = o.read_to_string(&mut s);
        }
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut s);
        }
        s
    }

    /// Stop it and return what it printed (for failure reports).
    pub fn stop_and_report(&mut self) -> String {
        self.stop();
        let output = self.output();
        format!("name server `{}`:\n{output}", self.what)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A `fastpmi nameserver` a test started; killed by pid on drop.
pub struct FastpmiNameServer(Child);

impl Drop for FastpmiNameServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `fastpmi nameserver --port 0` and read the address it listens on
/// from its first line.
pub fn start_fastpmi() -> (FastpmiNameServer, String) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_fastpmi"))
        .args(["nameserver", "--port", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start fastpmi nameserver");
    let stdout = child.stdout.take().expect("piped stdout");
    let ns = FastpmiNameServer(child);
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the name server's first line");
    let addr = line
        .trim()
        .strip_prefix("fastpmi nameserver: listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    (ns, addr)
}
