//! A rank speaking raw PMI on its inherited socket, for tests of what the
//! server does with malformed requests.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use fastpmi_codec::{pmi1, pmi2, Deframer, Frame, Message};

use super::{ensure, env};

/// The rank's own end of the PMI socket (fd 3), duplicated through a pidfd
/// of this process so no unsafe code is needed to adopt it.
pub fn pmi_socket() -> Result<UnixStream, String> {
    use rustix::process::{getpid, pidfd_getfd, pidfd_open, PidfdFlags, PidfdGetfdFlags};
    let fd: i32 = env("PMI_FD")?.parse().map_err(|e| format!("PMI_FD: {e}"))?;
    let me = pidfd_open(getpid(), PidfdFlags::empty()).map_err(|e| format!("pidfd_open: {e}"))?;
    let dup = pidfd_getfd(&me, fd, PidfdGetfdFlags::empty())
        .map_err(|e| format!("pidfd_getfd {fd}: {e}"))?;
    let s = UnixStream::from(dup);
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    Ok(s)
}

/// A rank speaking raw PMI on its socket.
pub struct Raw {
    pub sock: UnixStream,
    pub de: Deframer,
}

impl Raw {
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.sock.write_all(bytes).map_err(|e| format!("send: {e}"))
    }

    pub fn send_pmi2(&mut self, body: &str) -> Result<(), String> {
        self.send(format!("{:>6}{body}", body.len()).as_bytes())
    }

    pub fn recv(&mut self) -> Result<Message, String> {
        let mut buf = [0u8; 4096];
        loop {
            match self.de.next_frame() {
                Ok(Some(Frame::Pmi2(b))) => return pmi2::decode(&b).map_err(|e| e.to_string()),
                Ok(Some(Frame::Pmi1(l))) => return pmi1::decode(&l).map_err(|e| e.to_string()),
                Ok(Some(other)) => return Err(format!("unexpected frame {other:?}")),
                Ok(None) => {}
                Err(e) => return Err(format!("reply framing: {e}")),
            }
            let n = self.sock.read(&mut buf).map_err(|e| format!("recv: {e}"))?;
            if n == 0 {
                return Err("the launcher closed the PMI socket".into());
            }
            self.de.feed(&buf[..n]);
        }
    }

    /// Receives the reply to `what` and expects rc 0.
    pub fn expect_ok(&mut self, what: &str) -> Result<Message, String> {
        let m = self.recv()?;
        ensure(m.get_int("rc") == Some(0), || format!("{what}: {m:?}"))?;
        Ok(m)
    }

    /// Send a request and expect an error reply naming `needle`.
    pub fn refused(
        &mut self,
        what: &str,
        send: impl FnOnce(&mut Raw) -> Result<(), String>,
        cmd: &str,
        needle: &str,
    ) -> Result<(), String> {
        send(self)?;
        let m = self.recv()?;
        let rc = m.get_int("rc");
        let msg = m
            .get_str("errmsg")
            .or(m.get_str("msg"))
            .unwrap_or_default()
            .to_string();
        ensure(m.cmd == cmd, || {
            format!("{what}: reply {m:?}, expected {cmd}")
        })?;
        ensure(rc.is_some_and(|rc| rc != 0), || {
            format!("{what}: rc {rc:?} ({m:?})")
        })?;
        ensure(msg.contains(needle), || {
            format!("{what}: message {msg:?} does not name the problem ({needle:?})")
        })?;
        println!("refused {what}: {msg}");
        Ok(())
    }
}

pub fn spawn_body(cmd_tail: &str) -> String {
    format!("cmd=spawn;ncmds=1;preputcount=0;{cmd_tail}")
}

pub fn role_raw() -> Result<(), String> {
    let mut r = Raw {
        sock: pmi_socket()?,
        de: Deframer::new(),
    };
    r.send(b"cmd=init pmi_version=2 pmi_subversion=0\n")?;
    let m = r.recv()?;
    ensure(
        m.cmd == "response_to_init" && m.get_int("rc") == Some(0),
        || format!("init: {m:?}"),
    )?;
    r.send_pmi2("cmd=fullinit;pmirank=0;threaded=FALSE;")?;
    let m = r.recv()?;
    ensure(m.get_int("rc") == Some(0), || format!("fullinit: {m:?}"))?;

    let ok = "subcmd=/bin/true;maxprocs=1;argc=0;infokeycount=0;";
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "maxprocs=0",
            spawn_body("subcmd=/bin/true;maxprocs=0;argc=0;infokeycount=0;"),
            "maxprocs=0",
        ),
        (
            "maxprocs=-1",
            spawn_body("subcmd=/bin/true;maxprocs=-1;argc=0;infokeycount=0;"),
            "maxprocs=-1 out of range",
        ),
        (
            "maxprocs=99999999999",
            spawn_body("subcmd=/bin/true;maxprocs=99999999999;argc=0;infokeycount=0;"),
            "maxprocs=99999999999 out of range",
        ),
        (
            "missing subcmd",
            spawn_body("maxprocs=1;argc=0;infokeycount=0;"),
            "no subcmd",
        ),
        (
            "argc larger than argv",
            spawn_body("subcmd=/bin/true;maxprocs=1;argc=3;argv0=x;infokeycount=0;"),
            "argc=3 but 1",
        ),
        (
            "70000 args with argc",
            spawn_body(&format!(
                "subcmd=/bin/true;maxprocs=1;argc=70000;{}infokeycount=0;",
                (0..70000)
                    .map(|i| format!("argv{i}=a;"))
                    .collect::<String>()
            )),
            "argc=70000 out of range",
        ),
        (
            "70000 args without argc",
            spawn_body(&format!(
                "subcmd=/bin/true;maxprocs=1;{}infokeycount=0;",
                (0..70000)
                    .map(|i| format!("argv{i}=a;"))
                    .collect::<String>()
            )),
            "too many argv",
        ),
        (
            "2 KiB preput value",
            format!(
                "cmd=spawn;ncmds=1;preputcount=1;ppkey0=k;ppval0={};{ok}",
                "v".repeat(2048)
            ),
            "2048 bytes",
        ),
        (
            "ncmds=2 with one command",
            format!("cmd=spawn;ncmds=2;preputcount=0;{ok}"),
            "ncmds=2 but 1",
        ),
    ];
    for (what, body, needle) in cases {
        r.refused(what, |r| r.send_pmi2(&body), "spawn-response", needle)?;
    }
    r.refused(
        "PMI-1 mcmd=spawn nprocs=0",
        |r| {
            r.send(
                b"mcmd=spawn\nnprocs=0\nexecname=/bin/true\ntotspawns=1\nspawnssofar=1\n\
                  argcnt=0\npreput_num=0\ninfo_num=0\nendcmd\n",
            )
        },
        "spawn_result",
        "maxprocs_0",
    )?;

    // The connection still works: job-getid and a valid spawn.
    r.send_pmi2("cmd=job-getid;")?;
    let m = r.recv()?;
    let own = env("PMI_JOBID")?;
    ensure(
        m.get_int("rc") == Some(0) && m.get_str("jobid") == Some(own.as_str()),
        || format!("job-getid after the bad requests: {m:?}"),
    )?;
    r.send_pmi2(&spawn_body(ok))?;
    let m = r.recv()?;
    let jobid = m.get_str("jobid").unwrap_or_default();
    ensure(
        m.cmd == "spawn-response"
            && m.get_int("rc") == Some(0)
            && !jobid.is_empty()
            && jobid != own,
        || format!("valid spawn after the bad requests: {m:?}"),
    )?;
    println!("raw valid spawn jobid={jobid}");
    r.send_pmi2("cmd=finalize;")?;
    r.expect_ok("finalize").map(drop)
}
