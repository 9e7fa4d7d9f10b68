//! The socket to the PMI server: the blocking connection used during init
//! ([`WireConn`]), its handshake, a launcher's socket not opened yet
//! ([`Deferred`]), and the connection shared by all threads afterwards
//! ([`Mux`], requests matched to replies by `thrid`).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::Mutex;

use super::env::{Endpoint, PmiEnv};
use super::PmiError;
use fastpmi_codec::command::replies::AUTH_CHALLENGE;
use fastpmi_codec::command::{encode_request, encode_request_thrid, PMI2_REPLY_SUFFIX};
use fastpmi_codec::{Deframer, Message, Protocol, Request};

/// A rank of fastpmi's launcher whose socket is not opened yet: init
/// attached to the segment from the environment ([`Direct`]).
pub(super) struct Deferred {
    pub(super) conn: WireConn,
    /// The PMI variables as init read them (the program may change them).
    pub(super) env: PmiEnv,
    pub(super) rank: u32,
    pub(super) size: u32,
}

impl Deferred {
    /// `init` and `fullinit` now, when the rank first needs the launcher.
    pub(super) fn open(mut self) -> Result<Mux, PmiError> {
        let m = handshake(&mut self.conn, &self.env)?;
        let (r, n) = (m.get_int("rank"), m.get_int("size"));
        if r != Some(self.rank.into()) || n != Some(self.size.into()) {
            return Err(PmiError::Protocol(format!(
                "the launcher calls this process rank {r:?} of {n:?}, its environment rank {} of {}",
                self.rank, self.size
            )));
        }
        Mux::new(self.conn)
    }
}

/// `init` (PMI 2.0) and `fullinit` on a fresh connection.
pub(super) fn handshake(conn: &mut WireConn, env: &PmiEnv) -> Result<Message, PmiError> {
    let init = Request::Init {
        version: 2,
        subversion: 0,
    };
    conn.send(Protocol::Pmi1, &init)?;
    let m = conn.recv()?;
    if m.cmd != init.response() || m.get_int("rc") != Some(0) || m.get_int("pmi_version") != Some(2)
    {
        return Err(PmiError::Protocol(format!(
            "the server refused PMI 2.0: it replied to init with `{}`",
            String::from_utf8_lossy(&fastpmi_codec::pmi1::encode(&m)).trim_end()
        )));
    }
    // Port mode with the job's secret: authenticate (the launcher then
    // serves this rank from any address).
    let secret = match env.endpoint {
        Some(Endpoint::Port(_)) => std::env::var(fastpmi_codec::names::env::AUTH_SECRET).ok(),
        _ => None,
    };
    // slurmstepd requires all three keys (rc=3, no message, without).
    conn.fullinit(
        &Request::FullInit {
            rank: env.rank,
            jobid: env.jobid.clone(),
            threaded: true,
            auth: secret
                .as_ref()
                .map(|_| fastpmi_codec::auth::AUTHTYPE.to_string()),
            // Only fastpmi's launcher knows the key.
            continued: env.fastpmi,
        },
        secret.as_deref(),
    )
}

/// The socket to the launcher.
pub(super) enum Stream {
    Unix(std::os::unix::net::UnixStream),
    Tcp(std::net::TcpStream),
}

impl std::os::fd::AsFd for Stream {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            Stream::Unix(s) => s.as_fd(),
            Stream::Tcp(s) => s.as_fd(),
        }
    }
}

impl Stream {
    fn try_clone(&self) -> std::io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }
}

impl Stream {
    /// Sleeps until the socket has bytes to read (or an error or hang-up).
    ///
    /// Why not just block in `read`: a thread asleep in `recv` on a Unix
    /// stream socket sits on the socket's one wait queue with a wake
    /// function that ignores the event, so when the server *reads* our
    /// request (freeing its buffer) the kernel's write-space wake-up wakes
    /// us too, for nothing: one extra context switch per round trip, and
    /// with hundreds of ranks on two cores that doubled the cost of every
    /// socket fence and get. `poll` sleeps with an event filter (POLLIN
    /// only), so only the reply wakes it. TCP does not wake writers unless
    /// they ran out of buffer space, so it reads directly.
    fn wait_readable(&self) {
        if let Stream::Unix(s) = self {
            let mut fds = [rustix::event::PollFd::new(s, rustix::event::PollFlags::IN)];
            // EINTR and errors: the read that follows reports them.
            let _ = rustix::event::poll(&mut fds, None);
        }
    }
}

impl Read for Stream {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(b),
            Stream::Tcp(s) => s.read(b),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(b),
            Stream::Tcp(s) => s.write(b),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A blocking PMI-2 connection, used by one thread during init.
pub(super) struct WireConn {
    pub(super) stream: Stream,
    pub(super) deframer: Deframer,
}

fn decode_reply(frame: &fastpmi_codec::Frame) -> Result<Message, PmiError> {
    Ok(match frame {
        fastpmi_codec::Frame::Pmi1(l) => fastpmi_codec::pmi1::decode(l)?,
        fastpmi_codec::Frame::Pmi2(b) => fastpmi_codec::pmi2::decode(b)?,
        fastpmi_codec::Frame::Pmi1Spawn(_) => {
            return Err(PmiError::Protocol("unexpected spawn block".into()))
        }
    })
}

/// The reply to `expect`'s request, or an error: another command, or
/// `rc != 0` (the server's `errmsg=` / `msg=` goes into the error, so the
/// caller sees why: Slurm's `kvs-fence` failure, Hydra's refusals, ...).
pub(super) fn check_reply(m: Message, expect: &str) -> Result<Message, PmiError> {
    let request = expect.strip_suffix(PMI2_REPLY_SUFFIX).unwrap_or(expect);
    if m.cmd != expect {
        return Err(PmiError::Protocol(format!(
            "expected {expect} to {request}, got {}",
            m.cmd
        )));
    }
    let rc = m.get_int("rc").unwrap_or(0) as i32;
    if rc != 0 {
        let msg = match m.get_str("errmsg").or(m.get_str("msg")) {
            Some(t) if !t.is_empty() => t.to_string(),
            _ => "the server gave no reason".to_string(),
        };
        return Err(PmiError::Server {
            cmd: request.to_string(),
            rc,
            msg,
        });
    }
    Ok(m)
}

/// The connection after init, shared by all threads: requests carry a
/// `thrid`, and whichever waiting thread holds the reader role reads and
/// hands each reply to its requester. So a thread blocked in a fence or a
/// node-attribute wait does not block the others (PMI-2's thread rule).
pub(super) struct Mux {
    writer: Mutex<Stream>,
    reader: Mutex<Stream>,
    state: Mutex<MuxState>,
    cv: std::sync::Condvar,
}

#[derive(Default)]
struct MuxState {
    next: u64,
    /// Outstanding requests: thrid -> what they expect.
    pending: std::collections::BTreeMap<u64, Expect>,
    /// Replies received, in order, per request.
    ready: HashMap<u64, std::collections::VecDeque<Message>>,
    deframer: Deframer,
    /// Replies too long for one frame, arriving in parts (boxed: rare, and
    /// the connection is held by value in the transport).
    cont: Box<fastpmi_codec::continued::Reassembly>,
    reading: bool,
    dead: Option<String>,
}

/// The replies a request waits for: the one that ends it, and those that
/// may come before (a `kvs-getall`'s count and pairs).
struct Expect {
    last: String,
    before: &'static [&'static str],
}

impl Expect {
    fn accepts(&self, cmd: &str) -> bool {
        self.last == cmd || self.before.contains(&cmd)
    }
}

impl MuxState {
    /// A part of a reply too long for one frame: the whole is routed once
    /// its last part came.
    fn part(&mut self, body: &[u8]) -> Result<(), PmiError> {
        let m = fastpmi_codec::pmi2::decode(body)?;
        let whole = self
            .cont
            .feed(&m, std::time::Instant::now())
            .map_err(|e| PmiError::Protocol(e.to_string()))?;
        if let Some(whole) = whole {
            let m = decode_reply(&fastpmi_codec::Frame::Pmi2(whole))?;
            tracing::debug!("pmi <- {} (continued)", m.cmd);
            self.route(m);
        }
        Ok(())
    }

    /// Hand a reply to its request: by echoed `thrid`, or (a server that
    /// does not echo it) to the oldest request expecting that command. A
    /// request is done with the reply that ends it, or with an error.
    fn route(&mut self, m: Message) {
        let by_thrid = m
            .thrid
            .as_deref()
            .and_then(|t| std::str::from_utf8(t).ok()?.parse::<u64>().ok())
            .filter(|id| self.pending.contains_key(id));
        let id = by_thrid.or_else(|| {
            self.pending
                .iter()
                .find(|(_, e)| e.accepts(&m.cmd))
                .map(|(id, _)| *id)
        });
        match id {
            Some(id) => {
                let ends = self
                    .pending
                    .get(&id)
                    .is_some_and(|e| e.last == m.cmd || !e.before.contains(&m.cmd.as_str()))
                    || m.get_int("rc").is_some_and(|rc| rc != 0);
                if ends {
                    self.pending.remove(&id);
                }
                self.ready.entry(id).or_default().push_back(m);
            }
            None => tracing::debug!("pmi: dropping unsolicited reply {}", m.cmd),
        }
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Mux {
    pub(super) fn new(conn: WireConn) -> Result<Mux, PmiError> {
        let reader = conn.stream.try_clone()?;
        Ok(Mux {
            writer: Mutex::new(conn.stream),
            reader: Mutex::new(reader),
            state: Mutex::new(MuxState {
                deframer: conn.deframer,
                ..Default::default()
            }),
            cv: std::sync::Condvar::new(),
        })
    }

    /// Send without waiting for a reply (abort).
    pub(super) fn send(&self, req: &Request) -> Result<(), PmiError> {
        let bytes = encode_request(Protocol::Pmi2, req);
        lock(&self.writer).write_all(&bytes)?;
        Ok(())
    }

    pub(super) fn call(
        &self,
        _proto: Protocol,
        req: &Request,
        expect: &str,
    ) -> Result<Message, PmiError> {
        let mut replies = self.exchange(std::slice::from_ref(req), expect, &[])?;
        let m = replies
            .pop()
            .ok_or_else(|| PmiError::Protocol(format!("no {expect} from the PMI server")))?;
        check_reply(m, expect)
    }

    /// Send `reqs` in one write (no other thread's request comes between
    /// them), all under one `thrid`, and gather the replies up to the one
    /// that ends the exchange: `last`, or any reply with `rc != 0` (so the
    /// caller checks only the final message), with those of `before` that
    /// come first.
    pub(super) fn exchange(
        &self,
        reqs: &[Request],
        last: &str,
        before: &'static [&'static str],
    ) -> Result<Vec<Message>, PmiError> {
        let id = {
            let mut st = lock(&self.state);
            if let Some(d) = &st.dead {
                return Err(PmiError::Protocol(d.clone()));
            }
            st.next += 1;
            let id = st.next;
            st.pending.insert(
                id,
                Expect {
                    last: last.to_string(),
                    before,
                },
            );
            id
        };
        let thrid = id.to_string();
        let mut bytes = Vec::new();
        for req in reqs {
            bytes.extend(encode_request_thrid(req, thrid.as_bytes()));
        }
        if tracing::enabled!(tracing::Level::DEBUG) {
            tracing::debug!("pmi -> {}", fastpmi_codec::show(&bytes));
        }
        if let Err(e) = lock(&self.writer).write_all(&bytes) {
            lock(&self.state).pending.remove(&id);
            return Err(e.into());
        }
        let mut buf = [0u8; 8192];
        loop {
            let mut st = lock(&self.state);
            loop {
                if !st.pending.contains_key(&id) {
                    return Ok(st.ready.remove(&id).map(Vec::from).unwrap_or_default());
                }
                if let Some(d) = &st.dead {
                    return Err(PmiError::Protocol(d.clone()));
                }
                if !st.reading {
                    break;
                }
                st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            st.reading = true;
            drop(st);
            let r = {
                let mut reader = lock(&self.reader);
                reader.wait_readable();
                reader.read(&mut buf)
            };
            let mut st = lock(&self.state);
            st.reading = false;
            match r {
                Ok(0) => st.dead = Some("the PMI server closed the connection".into()),
                Ok(n) => {
                    st.deframer.feed(&buf[..n]);
                    loop {
                        match st.deframer.next_frame() {
                            Ok(Some(fastpmi_codec::Frame::Pmi2(b)))
                                if b.starts_with(fastpmi_codec::continued::PART_PREFIX) =>
                            {
                                if let Err(e) = st.part(&b) {
                                    st.dead = Some(format!("bad continued reply: {e}"));
                                    break;
                                }
                            }
                            Ok(Some(f)) => match decode_reply(&f) {
                                Ok(m) => {
                                    tracing::debug!("pmi <- {}", m.cmd);
                                    st.route(m)
                                }
                                Err(e) => tracing::debug!("pmi: bad reply: {e}"),
                            },
                            Ok(None) => break,
                            Err(e) => {
                                st.dead = Some(format!("bad reply stream: {e}"));
                                break;
                            }
                        }
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => st.dead = Some(format!("PMI connection: {e}")),
            }
            drop(st);
            self.cv.notify_all();
        }
    }
}

impl WireConn {
    pub(super) fn send(&mut self, proto: Protocol, req: &Request) -> Result<(), PmiError> {
        let bytes = encode_request(proto, req);
        if tracing::enabled!(tracing::Level::DEBUG) {
            tracing::debug!("pmi -> {}", fastpmi_codec::show(&bytes));
        }
        self.stream.write_all(&bytes)?;
        Ok(())
    }

    pub(super) fn recv(&mut self) -> Result<Message, PmiError> {
        let mut buf = [0u8; 8192];
        loop {
            if let Some(frame) = self.deframer.next_frame()? {
                return decode_reply(&frame);
            }
            self.stream.wait_readable();
            let n = self.stream.read(&mut buf)?;
            if n == 0 {
                return Err(PmiError::Protocol(
                    "the PMI server closed the connection".into(),
                ));
            }
            self.deframer.feed(&buf[..n]);
        }
    }

    /// Send a request and wait for its reply.
    pub(super) fn call(
        &mut self,
        proto: Protocol,
        req: &Request,
        expect: &str,
    ) -> Result<Message, PmiError> {
        self.send(proto, req)?;
        let m = self.recv()?;
        check_reply(m, expect)
    }

    /// `fullinit`, answering the server's challenge with `secret` when the
    /// request asks to authenticate.
    pub(super) fn fullinit(
        &mut self,
        req: &Request,
        secret: Option<&str>,
    ) -> Result<Message, PmiError> {
        self.send(Protocol::Pmi2, req)?;
        let m = self.recv()?;
        let Some(secret) = secret.filter(|_| m.cmd == AUTH_CHALLENGE) else {
            return check_reply(m, req.response());
        };
        let m = check_reply(m, AUTH_CHALLENGE)?;
        let nonce = m
            .get_str("authinfo")
            .ok_or_else(|| PmiError::Protocol("auth-response without authinfo".into()))?;
        let answer = fastpmi_codec::auth::answer(secret, nonce);
        self.send(
            Protocol::Pmi2,
            &Request::AuthComplete {
                authinfo: answer.into_bytes(),
            },
        )?;
        let m = self.recv()?;
        check_reply(m, req.response())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(m: Message) -> (String, i32, String) {
        match check_reply(m, "kvs-fence-response") {
            Err(PmiError::Server { cmd, rc, msg }) => (cmd, rc, msg),
            other => panic!("expected a server refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_refusal_carries_the_servers_reason() {
        // Slurm's kvs-fence failure (errmsg=), a PMI-1 style msg=, and
        // Slurm's fullinit refusal (rc only).
        let m = Message::new("kvs-fence-response")
            .with("rc", "-1")
            .with("errmsg", "mpi/pmi2: failed to send temp kvs");
        assert_eq!(
            refusal(m),
            (
                "kvs-fence".into(),
                -1,
                "mpi/pmi2: failed to send temp kvs".into()
            )
        );
        let m = Message::new("kvs-fence-response")
            .with("rc", "1")
            .with("msg", "key_k_not_found");
        assert_eq!(refusal(m).2, "key_k_not_found");
        let m = Message::new("kvs-fence-response").with("rc", "3");
        let (_, rc, msg) = refusal(m);
        assert_eq!((rc, msg.as_str()), (3, "the server gave no reason"));
        let e = check_reply(
            Message::new("kvs-fence-response").with("rc", "3"),
            "kvs-fence-response",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "PMI server refused kvs-fence (rc=3): the server gave no reason"
        );
        // rc=0 and another command.
        assert!(check_reply(
            Message::new("kvs-fence-response").with("rc", "0"),
            "kvs-fence-response"
        )
        .is_ok());
        assert!(matches!(
            check_reply(
                Message::new("kvs-put-response").with("rc", "0"),
                "kvs-fence-response"
            ),
            Err(PmiError::Protocol(_))
        ));
    }
}
