//! The fastpmi Rust client.
//!
//! [`Pmi::init`] picks the transport: the job segment when the launcher
//! advertises one (node attributes `memPoolType`, `memAnonMMAPfd` /
//! `memSYSVid`) whose layout stamp this client knows; otherwise PMI-2 over
//! the socket the launcher handed over (`PMI_FD`, or `PMI_PORT` +
//! `PMI_ID`); with no PMI environment at all, a singleton (rank 0 of 1 with
//! a local store). `FASTPMI_TRANSPORT=socket` forces the socket.
//!
//! ```no_run
//! let pmi = fastpmi::client::Pmi::init()?;
//! pmi.put("bc", format!("card-of-{}", pmi.rank()))?;
//! pmi.fence()?;
//! for r in 0..pmi.size() {
//!     let card = pmi.get("bc-unused", Some(r))?; // None: key not found
//!     let _ = card;
//! }
//! pmi.finalize()?;
//! # Ok::<(), fastpmi::client::PmiError>(())
//! ```

mod os;
mod spawn;

pub use crate::wire::spawn::{SpawnCmd, SpawnRequest};
pub use spawn::Spawned;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use shm_layout::{KvsError, RankPhase, WaitError};

use crate::shm::{JobSegment, SharedFutex};

use crate::wire::command::{encode_request, encode_request_thrid};
use crate::wire::{Deframer, Message, Protocol, Request, WireError};

/// Errors of the client. Each has one PMI error code (see [`PmiError::code`]).
#[derive(Debug, thiserror::Error)]
pub enum PmiError {
    #[error("PMI environment: {0}")]
    Env(String),
    #[error("PMI connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("PMI protocol: {0}")]
    Protocol(String),
    #[error("malformed reply from the PMI server: {0}")]
    Wire(#[from] WireError),
    #[error("PMI server refused {cmd}: {msg}")]
    Server { cmd: String, rc: i32, msg: String },
    #[error("invalid argument: {0}")]
    InvalidArg(String),
    #[error("PMI is finalized")]
    Finalized,
    #[error("the job was aborted (rank {rank}, code {code})")]
    Aborted { code: i32, rank: u32 },
}

impl PmiError {
    /// The PMI-2 error code for the C ABI.
    pub fn code(&self) -> i32 {
        match self {
            PmiError::InvalidArg(_) => 3,
            PmiError::Finalized => 1,
            _ => 14,
        }
    }
}

/// The socket to the launcher.
enum Stream {
    Unix(std::os::unix::net::UnixStream),
    Tcp(std::net::TcpStream),
}

impl Stream {
    fn try_clone(&self) -> std::io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
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
struct WireConn {
    stream: Stream,
    deframer: Deframer,
}

fn decode_reply(frame: &crate::wire::Frame) -> Result<Message, PmiError> {
    Ok(match frame {
        crate::wire::Frame::Pmi1(l) => crate::wire::pmi1::decode(l)?,
        crate::wire::Frame::Pmi2(b) => crate::wire::pmi2::decode(b)?,
        crate::wire::Frame::Pmi1Spawn(_) => {
            return Err(PmiError::Protocol("unexpected spawn block".into()))
        }
    })
}

/// `rc != 0` in a reply becomes an error carrying the server's message.
fn check_reply(m: Message, expect: &str) -> Result<Message, PmiError> {
    if m.cmd != expect {
        return Err(PmiError::Protocol(format!(
            "expected {expect}, got {}",
            m.cmd
        )));
    }
    let rc = m.get_int("rc").unwrap_or(0) as i32;
    if rc != 0 {
        let msg = m
            .get_str("errmsg")
            .or(m.get_str("msg"))
            .unwrap_or("no message")
            .to_string();
        return Err(PmiError::Server {
            cmd: expect.to_string(),
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
struct Mux {
    writer: Mutex<Stream>,
    reader: Mutex<Stream>,
    state: Mutex<MuxState>,
    cv: std::sync::Condvar,
}

#[derive(Default)]
struct MuxState {
    next: u64,
    /// Outstanding requests: thrid -> expected reply command.
    pending: std::collections::BTreeMap<u64, String>,
    ready: HashMap<u64, Message>,
    deframer: Deframer,
    reading: bool,
    dead: Option<String>,
}

impl MuxState {
    /// Hand a reply to its request: by echoed `thrid`, or (a server that
    /// does not echo it) to the oldest request expecting that command.
    fn route(&mut self, m: Message) {
        let by_thrid = m
            .thrid
            .as_deref()
            .and_then(|t| std::str::from_utf8(t).ok()?.parse::<u64>().ok())
            .filter(|id| self.pending.contains_key(id));
        let id = by_thrid.or_else(|| {
            self.pending
                .iter()
                .find(|(_, c)| **c == m.cmd)
                .map(|(id, _)| *id)
        });
        match id {
            Some(id) => {
                self.pending.remove(&id);
                self.ready.insert(id, m);
            }
            None => tracing::debug!("pmi: dropping unsolicited reply {}", m.cmd),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Mux {
    fn new(conn: WireConn) -> Result<Mux, PmiError> {
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
    fn send(&self, req: &Request) -> Result<(), PmiError> {
        let bytes = encode_request(Protocol::Pmi2, req);
        lock(&self.writer).write_all(&bytes)?;
        Ok(())
    }

    fn call(&self, _proto: Protocol, req: &Request, expect: &str) -> Result<Message, PmiError> {
        let id = {
            let mut st = lock(&self.state);
            if let Some(d) = &st.dead {
                return Err(PmiError::Protocol(d.clone()));
            }
            st.next += 1;
            let id = st.next;
            st.pending.insert(id, expect.to_string());
            id
        };
        let bytes = encode_request_thrid(req, id.to_string().as_bytes());
        if tracing::enabled!(tracing::Level::DEBUG) {
            tracing::debug!("pmi -> {}", crate::wire::show(&bytes));
        }
        if let Err(e) = lock(&self.writer).write_all(&bytes) {
            lock(&self.state).pending.remove(&id);
            return Err(e.into());
        }
        let mut buf = [0u8; 8192];
        loop {
            let mut st = lock(&self.state);
            loop {
                if let Some(m) = st.ready.remove(&id) {
                    return check_reply(m, expect);
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
            let r = lock(&self.reader).read(&mut buf);
            let mut st = lock(&self.state);
            st.reading = false;
            match r {
                Ok(0) => st.dead = Some("the PMI server closed the connection".into()),
                Ok(n) => {
                    st.deframer.feed(&buf[..n]);
                    loop {
                        match st.deframer.next_frame() {
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
    fn send(&mut self, proto: Protocol, req: &Request) -> Result<(), PmiError> {
        let bytes = encode_request(proto, req);
        if tracing::enabled!(tracing::Level::DEBUG) {
            tracing::debug!("pmi -> {}", crate::wire::show(&bytes));
        }
        self.stream.write_all(&bytes)?;
        Ok(())
    }

    fn recv(&mut self) -> Result<Message, PmiError> {
        let mut buf = [0u8; 8192];
        loop {
            if let Some(frame) = self.deframer.next_frame()? {
                return decode_reply(&frame);
            }
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
    fn call(&mut self, proto: Protocol, req: &Request, expect: &str) -> Result<Message, PmiError> {
        self.send(proto, req)?;
        let m = self.recv()?;
        check_reply(m, expect)
    }
}

/// The non-shared-memory side of the client.
enum Conn {
    Wire(Arc<Mux>),
    Singleton {
        kvs: HashMap<Vec<u8>, Vec<u8>>,
        node: HashMap<Vec<u8>, Vec<u8>>,
    },
    Done,
}

/// How this process does put/get/fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    /// Straight in the job segment (the socket stays for init, finalize,
    /// abort, job attributes and overflow).
    Shm,
    /// PMI-2 over the launcher's socket.
    Socket,
    /// No launcher: rank 0 of 1 with a local store.
    Singleton,
}

/// Node attribute the launcher sets once it had to keep a pair outside the
/// segment: only then does a miss in the segment need a socket round trip.
pub const OVERFLOW_ATTR: &[u8] = b"fastpmi-overflow";

/// A PMI-2 client. All methods take `&self` and may be called from any
/// thread; shared-memory operations never take a lock.
pub struct Pmi {
    rank: u32,
    size: u32,
    appnum: i32,
    spawned: bool,
    jobid: String,
    shm: Option<JobSegment>,
    /// Why the segment is not used (None when it is, or for a singleton).
    fallback: Option<String>,
    /// Spins before sleeping in a fence: none when the job has more ranks
    /// than this node has CPUs (the ranks still to arrive need the CPU).
    fence_spins: u32,
    singleton: bool,
    conn: Mutex<Conn>,
    finalized: AtomicBool,
}

fn env_int(name: &str) -> Result<Option<i64>, PmiError> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| PmiError::Env(format!("{name}={v} is not a number"))),
        Err(_) => Ok(None),
    }
}

fn aborted(a: shm_layout::Aborted) -> PmiError {
    PmiError::Aborted {
        code: a.code,
        rank: a.rank,
    }
}

impl Pmi {
    /// Connect to the launcher (or become a singleton), identify, and map
    /// the job segment when the launcher advertises one this client knows.
    pub fn init() -> Result<Pmi, PmiError> {
        let spawned = env_int("PMI_SPAWNED")?.unwrap_or(0) != 0;
        let (stream, rank): (Stream, Option<i64>) = if let Some(fd) = env_int("PMI_FD")? {
            (
                Stream::Unix(os::adopt_pmi_fd(fd as i32)?),
                env_int("PMI_RANK")?,
            )
        } else if let Ok(port) = std::env::var("PMI_PORT") {
            let s = std::net::TcpStream::connect(&port)
                .map_err(|e| PmiError::Env(format!("PMI_PORT={port}: {e}")))?;
            s.set_nodelay(true)?;
            let id = env_int("PMI_ID")?
                .ok_or_else(|| PmiError::Env("PMI_PORT without PMI_ID".into()))?;
            (Stream::Tcp(s), Some(id))
        } else {
            return Ok(Pmi::singleton());
        };
        let mut conn = WireConn {
            stream,
            deframer: Deframer::new(),
        };
        conn.send(
            Protocol::Pmi1,
            &Request::Init {
                version: 2,
                subversion: 0,
            },
        )?;
        let m = conn.recv()?;
        if m.cmd != "response_to_init"
            || m.get_int("rc") != Some(0)
            || m.get_int("pmi_version") != Some(2)
        {
            return Err(PmiError::Protocol(format!(
                "server does not speak PMI-2 (replied {})",
                m.cmd
            )));
        }
        let m = conn.call(
            Protocol::Pmi2,
            &Request::FullInit {
                rank,
                jobid: None,
                threaded: true,
            },
            "fullinit-response",
        )?;
        let num = |k: &str| {
            m.get_int(k)
                .ok_or_else(|| PmiError::Protocol(format!("fullinit-response lacks {k}")))
        };
        let (r, size, appnum) = (num("rank")?, num("size")?, num("appnum").unwrap_or(0));
        let jm = conn.call(Protocol::Pmi2, &Request::GetJobId, "job-getid-response")?;
        let jobid = jm.get_str("jobid").unwrap_or_default().to_string();
        let mut fallback = None;
        let shm = match attach_segment(&mut conn, &jobid, size as u32) {
            Ok(seg) => {
                if let Some(st) = seg.seg().rank(r as u32) {
                    st.set_phase(RankPhase::Running);
                }
                Some(seg)
            }
            Err(why) => {
                tracing::debug!("rank {r}: not using shared memory: {why}");
                fallback = Some(why);
                None
            }
        };
        Ok(Pmi {
            rank: r as u32,
            size: size as u32,
            appnum: appnum as i32,
            spawned,
            jobid,
            shm,
            fallback,
            fence_spins: fence_spins(size as u32),
            singleton: false,
            conn: Mutex::new(Conn::Wire(Arc::new(Mux::new(conn)?))),
            finalized: AtomicBool::new(false),
        })
    }

    fn singleton() -> Pmi {
        Pmi {
            rank: 0,
            size: 1,
            appnum: 0,
            spawned: false,
            jobid: format!("singleton_{}", std::process::id()),
            shm: None,
            fallback: None,
            fence_spins: 0,
            singleton: true,
            conn: Mutex::new(Conn::Singleton {
                kvs: HashMap::new(),
                node: HashMap::new(),
            }),
            finalized: AtomicBool::new(false),
        }
    }

    pub fn rank(&self) -> u32 {
        self.rank
    }
    pub fn size(&self) -> u32 {
        self.size
    }
    pub fn appnum(&self) -> i32 {
        self.appnum
    }
    pub fn spawned(&self) -> bool {
        self.spawned
    }
    pub fn job_id(&self) -> &str {
        &self.jobid
    }
    pub fn transport(&self) -> TransportKind {
        match (&self.shm, self.singleton) {
            (Some(_), _) => TransportKind::Shm,
            (None, true) => TransportKind::Singleton,
            (None, false) => TransportKind::Socket,
        }
    }

    /// Largest value `put` accepts: the segment's limit on shared memory,
    /// `PMI2_MAX_VALLEN` on the wire.
    pub fn max_value_len(&self) -> usize {
        self.shm
            .as_ref()
            .map_or(crate::wire::VALLEN_MAX, |s| s.seg().kvs().max_value_len())
    }

    fn live(&self) -> Result<(), PmiError> {
        if self.finalized.load(Ordering::Acquire) {
            Err(PmiError::Finalized)
        } else {
            Ok(())
        }
    }

    /// Run `f` on the connection. The wire connection is shared, not
    /// locked, during the call: its replies are matched by `thrid`.
    fn with<R>(&self, f: impl FnOnce(&mut Conn) -> Result<R, PmiError>) -> Result<R, PmiError> {
        let mut t = lock(&self.conn);
        if let Conn::Wire(m) = &*t {
            let mut shared = Conn::Wire(m.clone());
            drop(t);
            return f(&mut shared);
        }
        f(&mut t)
    }

    fn state(&self) -> Option<&shm_layout::RankState> {
        self.shm.as_ref().and_then(|s| s.seg().rank(self.rank))
    }

    fn check_kv(&self, key: &[u8], value: Option<&[u8]>) -> Result<(), PmiError> {
        if key.is_empty() || key.len() > crate::wire::KEYLEN_MAX {
            return Err(PmiError::InvalidArg(format!(
                "key length {} (1..={})",
                key.len(),
                crate::wire::KEYLEN_MAX
            )));
        }
        if key
            .iter()
            .any(|&b| b == b';' || b == b'=' || b.is_ascii_whitespace() || b == 0)
        {
            return Err(PmiError::InvalidArg(
                "key contains ';', '=', blanks or NUL".into(),
            ));
        }
        if let Some(v) = value {
            if v.len() > self.max_value_len() {
                return Err(PmiError::InvalidArg(format!(
                    "value of {} bytes (max {})",
                    v.len(),
                    self.max_value_len()
                )));
            }
            if v.iter().any(|&b| b == 0 || b == b'\n') {
                return Err(PmiError::InvalidArg("value contains NUL or newline".into()));
            }
        }
        Ok(())
    }

    /// Did the launcher keep pairs outside the segment (segment full)?
    fn overflowed(&self, seg: &JobSegment) -> bool {
        seg.seg().node_attrs().get(OVERFLOW_ATTR).is_some()
    }

    /// Put a key into the job's KVS (visible to all after the next fence).
    /// A key put twice keeps the last value.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<(), PmiError> {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.live()?;
        self.check_kv(key, Some(value))?;
        if let Some(seg) = &self.shm {
            match seg.seg().kvs().put(key, value, &SharedFutex) {
                Ok(_) => {
                    if let Some(st) = self.state() {
                        st.count_put();
                    }
                    return Ok(());
                }
                Err(KvsError::Aborted(a)) => return Err(aborted(a)),
                // Full: the launcher keeps it in its overflow table.
                Err(KvsError::TableFull { .. } | KvsError::ArenaFull { .. })
                    if value.len() <= crate::wire::VALLEN_MAX => {}
                Err(e) => return Err(PmiError::InvalidArg(e.to_string())),
            }
        }
        self.with(|t| match t {
            Conn::Wire(c) => {
                c.call(
                    Protocol::Pmi2,
                    &Request::Put {
                        key: key.to_vec(),
                        value: value.to_vec(),
                    },
                    "kvs-put-response",
                )?;
                Ok(())
            }
            Conn::Singleton { kvs, .. } => {
                kvs.insert(key.to_vec(), value.to_vec());
                Ok(())
            }
            Conn::Done => Err(PmiError::Finalized),
        })
    }

    /// Get a key of this job; `src` is the rank that put it, if known.
    pub fn get(
        &self,
        key: impl AsRef<[u8]>,
        src: Option<u32>,
    ) -> Result<Option<Vec<u8>>, PmiError> {
        self.get_from(None, key, src)
    }

    /// Get a key of job `jobid` (None = this job).
    pub fn get_from(
        &self,
        jobid: Option<&str>,
        key: impl AsRef<[u8]>,
        src: Option<u32>,
    ) -> Result<Option<Vec<u8>>, PmiError> {
        self.get_with(jobid, key, src, |v| v.map(<[u8]>::to_vec))
    }

    /// Like [`Pmi::get_from`], but hands the value to `f` by reference: on
    /// shared memory it is read straight from the segment, with no copy or
    /// allocation (what the C library uses to fill the caller's buffer).
    pub fn get_with<R>(
        &self,
        jobid: Option<&str>,
        key: impl AsRef<[u8]>,
        src: Option<u32>,
        f: impl FnOnce(Option<&[u8]>) -> R,
    ) -> Result<R, PmiError> {
        let key = key.as_ref();
        self.live()?;
        self.check_kv(key, None)?;
        let own = jobid.is_none_or(|j| j == self.jobid);
        if let (Some(seg), true) = (&self.shm, own) {
            if let Some(st) = self.state() {
                st.count_get();
            }
            if let Some(v) = seg.seg().kvs().get(key) {
                return Ok(f(Some(v)));
            }
            if !self.overflowed(seg) {
                return Ok(f(None));
            }
        }
        let got = self.with(|t| match t {
            Conn::Wire(c) => {
                let req = Request::Get {
                    jobid: jobid.map(str::to_string),
                    src: src.map(i64::from),
                    key: key.to_vec(),
                };
                let m = c.call(Protocol::Pmi2, &req, "kvs-get-response")?;
                Ok(found_value(&m))
            }
            Conn::Singleton { .. } if !own => Err(PmiError::Protocol(format!(
                "no job {} here: a singleton has only its own KVS",
                jobid.unwrap_or_default()
            ))),
            Conn::Singleton { kvs, .. } => Ok(kvs.get(key).cloned()),
            Conn::Done => Err(PmiError::Finalized),
        })?;
        Ok(f(got.as_deref()))
    }

    /// Barrier over the job; afterwards every put made before it is visible.
    pub fn fence(&self) -> Result<(), PmiError> {
        self.live()?;
        if let Some(seg) = &self.shm {
            let st = self.state();
            if let Some(st) = st {
                st.count_fence();
                st.set_phase(RankPhase::InFence);
            }
            let r = seg
                .seg()
                .fence()
                .with_spin_limit(self.fence_spins)
                .fence(&SharedFutex);
            if let Some(st) = st {
                st.set_phase(RankPhase::Running);
            }
            return r.map(|_| ()).map_err(aborted);
        }
        self.with(|t| match t {
            Conn::Wire(c) => c
                .call(Protocol::Pmi2, &Request::Barrier, "kvs-fence-response")
                .map(|_| ()),
            Conn::Singleton { .. } => Ok(()),
            Conn::Done => Err(PmiError::Finalized),
        })
    }

    pub fn put_node_attr(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<(), PmiError> {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.live()?;
        self.check_kv(key, Some(value))?;
        if let Some(seg) = &self.shm {
            if let Some(st) = self.state() {
                st.count_node_attr_op();
            }
            match seg.seg().node_attrs().put(key, value, &SharedFutex) {
                Ok(_) => return Ok(()),
                Err(KvsError::Aborted(a)) => return Err(aborted(a)),
                Err(KvsError::TableFull { .. } | KvsError::ArenaFull { .. })
                    if value.len() <= crate::wire::VALLEN_MAX => {}
                Err(e) => return Err(PmiError::InvalidArg(e.to_string())),
            }
        }
        self.with(|t| match t {
            Conn::Wire(c) => c
                .call(
                    Protocol::Pmi2,
                    &Request::PutNodeAttr {
                        key: key.to_vec(),
                        value: value.to_vec(),
                    },
                    "info-putnodeattr-response",
                )
                .map(|_| ()),
            Conn::Singleton { node, .. } => {
                node.insert(key.to_vec(), value.to_vec());
                Ok(())
            }
            Conn::Done => Err(PmiError::Finalized),
        })
    }

    /// Size in bytes of the mapped job segment (None on the socket).
    pub fn segment_len(&self) -> Option<usize> {
        self.shm.as_ref().map(|s| s.mapping().len())
    }

    /// Why this process talks to the launcher over the socket instead of the
    /// job segment (no segment advertised, unknown layout stamp,
    /// `FASTPMI_TRANSPORT=socket`, ...); `None` on shared memory and for a
    /// singleton.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// Read a node attribute; with `wait`, block until some rank puts it
    /// (or the job aborts). A singleton has no other rank to wait for: a
    /// missing attribute is reported missing at once instead of hanging.
    pub fn get_node_attr(
        &self,
        key: impl AsRef<[u8]>,
        wait: bool,
    ) -> Result<Option<Vec<u8>>, PmiError> {
        let key = key.as_ref();
        self.live()?;
        self.check_kv(key, None)?;
        if let Some(seg) = &self.shm {
            if let Some(st) = self.state() {
                st.count_node_attr_op();
            }
            let attrs = seg.seg().node_attrs();
            if let Some(v) = attrs.get(key) {
                return Ok(Some(v.to_vec()));
            }
            if !self.overflowed(seg) {
                if !wait {
                    return Ok(None);
                }
                return match attrs.get_wait(key, &SharedFutex, None) {
                    Ok(v) => Ok(Some(v.to_vec())),
                    Err(WaitError::Aborted(a)) => Err(aborted(a)),
                    Err(e) => Err(PmiError::InvalidArg(e.to_string())),
                };
            }
        }
        self.with(|t| match t {
            Conn::Wire(c) => {
                let m = c.call(
                    Protocol::Pmi2,
                    &Request::GetNodeAttr {
                        key: key.to_vec(),
                        wait,
                    },
                    "info-getnodeattr-response",
                )?;
                Ok(found_value(&m))
            }
            Conn::Singleton { node, .. } => Ok(node.get(key).cloned()),
            Conn::Done => Err(PmiError::Finalized),
        })
    }

    /// An integer-array node attribute such as `localRanks` or
    /// `localRanksCount` (comma-separated on the wire).
    pub fn node_attr_int_array(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<i64>>, PmiError> {
        let key = key.as_ref();
        let v = match (self.transport(), key) {
            (TransportKind::Singleton, b"localRanksCount") => Some(b"1".to_vec()),
            (TransportKind::Singleton, b"localRanks") => Some(b"0".to_vec()),
            _ => self.get_node_attr(key, false)?,
        };
        let Some(v) = v else { return Ok(None) };
        let text = String::from_utf8_lossy(&v);
        text.split(',')
            .map(|x| {
                x.trim().parse::<i64>().map_err(|_| {
                    PmiError::Protocol(format!("node attribute is not an integer list: {text}"))
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// Read a job attribute such as `PMI_process_mapping` or `universeSize`.
    pub fn job_attr(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>, PmiError> {
        let key = key.as_ref();
        self.live()?;
        self.check_kv(key, None)?;
        let size = self.size;
        self.with(|t| match t {
            Conn::Wire(c) => {
                let m = c.call(
                    Protocol::Pmi2,
                    &Request::GetJobAttr { key: key.to_vec() },
                    "info-getjobattr-response",
                )?;
                Ok(found_value(&m))
            }
            Conn::Singleton { .. } => Ok(match key {
                b"PMI_process_mapping" => Some(format!("(vector,(0,1,{size}))").into_bytes()),
                b"universeSize" => Some(b"1".to_vec()),
                _ => None,
            }),
            Conn::Done => Err(PmiError::Finalized),
        })
    }

    /// Publish `port` under `service` in the launcher's name service.
    pub fn publish(&self, service: &str, port: &str) -> Result<(), PmiError> {
        let req = Request::Publish {
            service: service.into(),
            port: port.into(),
        };
        self.wire(&req, "name-publish-response").map(|_| ())
    }

    /// Remove a published service.
    pub fn unpublish(&self, service: &str) -> Result<(), PmiError> {
        self.wire(
            &Request::Unpublish {
                service: service.into(),
            },
            "name-unpublish-response",
        )
        .map(|_| ())
    }

    /// Look a service up; `None` if nobody published it.
    pub fn lookup(&self, service: &str) -> Result<Option<String>, PmiError> {
        match self.wire(
            &Request::Lookup {
                service: service.into(),
            },
            "name-lookup-response",
        ) {
            Ok(m) => Ok(m.get_str("port").or(m.get_str("value")).map(str::to_string)),
            Err(PmiError::Server { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Connect to another job of the same launcher (its KVS is then read
    /// with [`Pmi::get_from`]).
    pub fn job_connect(&self, jobid: &str) -> Result<(), PmiError> {
        self.wire(
            &Request::JobConnect {
                jobid: jobid.into(),
            },
            "job-connect-response",
        )
        .map(|_| ())
    }

    pub fn job_disconnect(&self, jobid: &str) -> Result<(), PmiError> {
        self.wire(
            &Request::JobDisconnect {
                jobid: jobid.into(),
            },
            "job-disconnect-response",
        )
        .map(|_| ())
    }

    /// A request that only the launcher can answer. A singleton has no
    /// launcher: name service and jobs are unavailable.
    fn wire(&self, req: &Request, expect: &str) -> Result<Message, PmiError> {
        self.live()?;
        self.with(|t| match t {
            Conn::Wire(c) => c.call(Protocol::Pmi2, req, expect),
            Conn::Singleton { .. } => Err(PmiError::Protocol(format!(
                "{} needs a launcher (this process is a singleton)",
                crate::wire::command::request_name(req)
            ))),
            Conn::Done => Err(PmiError::Finalized),
        })
    }

    /// Ask the launcher to end the whole job with `code`, then exit.
    pub fn abort(&self, code: i32, message: &str) -> ! {
        let _ = self.with(|t| {
            if let Conn::Wire(c) = t {
                c.send(&Request::Abort {
                    exitcode: Some(code.into()),
                    message: message.to_string(),
                    isworld: true,
                })?;
            }
            Ok(())
        });
        std::process::exit(code & 0xff)
    }

    /// Leave PMI cleanly. Also done on drop.
    pub fn finalize(&self) -> Result<(), PmiError> {
        if self.finalized.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if let Some(st) = self.state() {
            st.set_phase(RankPhase::Finalized);
        }
        self.with(|t| {
            let r = match t {
                Conn::Wire(c) => c
                    .call(Protocol::Pmi2, &Request::Finalize, "finalize-response")
                    .map(|_| ()),
                Conn::Singleton { .. } | Conn::Done => Ok(()),
            };
            *t = Conn::Done;
            r
        })
    }
}

impl Drop for Pmi {
    fn drop(&mut self) {
        let _ = self.finalize();
    }
}

fn fence_spins(ranks: u32) -> u32 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if ranks as usize > cpus {
        0
    } else {
        100
    }
}

/// Map the segment the launcher advertises, unless told not to or the
/// stamp is unknown: the reason goes to the caller's debug log.
fn attach_segment(conn: &mut WireConn, jobid: &str, size: u32) -> Result<JobSegment, String> {
    if std::env::var("FASTPMI_TRANSPORT").is_ok_and(|v| v == "socket") {
        return Err("FASTPMI_TRANSPORT=socket".into());
    }
    let mut attr = |k: &str| -> Result<Option<String>, String> {
        let m = conn
            .call(
                Protocol::Pmi2,
                &Request::GetNodeAttr {
                    key: k.as_bytes().to_vec(),
                    wait: false,
                },
                "info-getnodeattr-response",
            )
            .map_err(|e| e.to_string())?;
        Ok(found_value(&m).map(|v| String::from_utf8_lossy(&v).into_owned()))
    };
    let seg = match attr("memPoolType")?.as_deref() {
        None => return Err("the launcher advertises no segment (memPoolType)".into()),
        Some("anonmmap") => {
            let fd = attr("memAnonMMAPfd")?.ok_or("memAnonMMAPfd missing")?;
            let fd: i32 = fd
                .trim()
                .parse()
                .map_err(|_| format!("memAnonMMAPfd={fd}"))?;
            JobSegment::attach_fd(fd).map_err(|e| e.to_string())?
        }
        Some("sysv") => {
            let id = attr("memSYSVid")?.ok_or("memSYSVid missing")?;
            let id: i32 = id.trim().parse().map_err(|_| format!("memSYSVid={id}"))?;
            JobSegment::attach_sysv(id).map_err(|e| e.to_string())?
        }
        Some(other) => return Err(format!("unknown memPoolType {other}")),
    };
    if seg.seg().job_id() != jobid || seg.seg().nranks() != size {
        return Err(format!(
            "segment belongs to job {} of {} ranks, not {jobid} of {size}",
            seg.seg().job_id(),
            seg.seg().nranks()
        ));
    }
    Ok(seg)
}

fn found_value(m: &Message) -> Option<Vec<u8>> {
    if m.get_bool("found") == Some(true) {
        m.get("value").map(<[u8]>::to_vec)
    } else {
        None
    }
}
