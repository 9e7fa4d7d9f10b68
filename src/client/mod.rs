//! The fastpmi Rust client.
//!
//! [`Pmi::init`] picks the transport: PMI-2 over the socket the launcher
//! handed over (`PMI_FD`, or `PMI_PORT` + `PMI_ID`), or, with no PMI
//! environment at all, a singleton (rank 0 of 1 with a local store).
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

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::Mutex;

use crate::wire::command::encode_request;
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

/// A blocking PMI-2 connection over a stream socket.
struct WireConn {
    stream: Box<dyn ReadWrite>,
    deframer: Deframer,
}

trait ReadWrite: Read + Write + Send {}
impl<T: Read + Write + Send> ReadWrite for T {}

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
                let msg = match &frame {
                    crate::wire::Frame::Pmi1(l) => crate::wire::pmi1::decode(l)?,
                    crate::wire::Frame::Pmi2(b) => crate::wire::pmi2::decode(b)?,
                    crate::wire::Frame::Pmi1Spawn(_) => {
                        return Err(PmiError::Protocol("unexpected spawn block".into()))
                    }
                };
                tracing::debug!("pmi <- {} {:?}", msg.cmd, msg.pairs.len());
                return Ok(msg);
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

    /// Send a request and wait for its reply; `rc != 0` becomes an error.
    fn call(&mut self, proto: Protocol, req: &Request, expect: &str) -> Result<Message, PmiError> {
        self.send(proto, req)?;
        let m = self.recv()?;
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
}

enum Transport {
    Wire(WireConn),
    Singleton {
        kvs: HashMap<Vec<u8>, Vec<u8>>,
        node: HashMap<Vec<u8>, Vec<u8>>,
    },
    Done,
}

/// How this process talks to its launcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    Socket,
    Singleton,
}

/// A PMI-2 client. All methods take `&self` and may be called from any thread.
pub struct Pmi {
    rank: u32,
    size: u32,
    appnum: i32,
    spawned: bool,
    jobid: String,
    kind: TransportKind,
    t: Mutex<Transport>,
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

impl Pmi {
    /// Connect to the launcher (or become a singleton) and identify.
    pub fn init() -> Result<Pmi, PmiError> {
        let spawned = env_int("PMI_SPAWNED")?.unwrap_or(0) != 0;
        let (stream, rank): (Box<dyn ReadWrite>, Option<i64>) = if let Some(fd) = env_int("PMI_FD")?
        {
            (Box::new(os::adopt_pmi_fd(fd as i32)?), env_int("PMI_RANK")?)
        } else if let Ok(port) = std::env::var("PMI_PORT") {
            let s = std::net::TcpStream::connect(&port)
                .map_err(|e| PmiError::Env(format!("PMI_PORT={port}: {e}")))?;
            s.set_nodelay(true)?;
            let id = env_int("PMI_ID")?
                .ok_or_else(|| PmiError::Env("PMI_PORT without PMI_ID".into()))?;
            (Box::new(s), Some(id))
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
        Ok(Pmi {
            rank: r as u32,
            size: size as u32,
            appnum: appnum as i32,
            spawned,
            jobid,
            kind: TransportKind::Socket,
            t: Mutex::new(Transport::Wire(conn)),
        })
    }

    fn singleton() -> Pmi {
        Pmi {
            rank: 0,
            size: 1,
            appnum: 0,
            spawned: false,
            jobid: format!("singleton_{}", std::process::id()),
            kind: TransportKind::Singleton,
            t: Mutex::new(Transport::Singleton {
                kvs: HashMap::new(),
                node: HashMap::new(),
            }),
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
        self.kind
    }

    fn with<R>(
        &self,
        f: impl FnOnce(&mut Transport) -> Result<R, PmiError>,
    ) -> Result<R, PmiError> {
        let mut t = self.t.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut t)
    }

    fn check_kv(key: &[u8], value: Option<&[u8]>) -> Result<(), PmiError> {
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
            if v.len() > crate::wire::VALLEN_MAX {
                return Err(PmiError::InvalidArg(format!(
                    "value of {} bytes (max {})",
                    v.len(),
                    crate::wire::VALLEN_MAX
                )));
            }
            if v.iter().any(|&b| b == 0 || b == b'\n') {
                return Err(PmiError::InvalidArg("value contains NUL or newline".into()));
            }
        }
        Ok(())
    }

    /// Put a key into the job's KVS (visible to all after the next fence).
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<(), PmiError> {
        let (key, value) = (key.as_ref(), value.as_ref());
        Self::check_kv(key, Some(value))?;
        self.with(|t| match t {
            Transport::Wire(c) => {
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
            Transport::Singleton { kvs, .. } => {
                kvs.insert(key.to_vec(), value.to_vec());
                Ok(())
            }
            Transport::Done => Err(PmiError::Finalized),
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
        let key = key.as_ref();
        Self::check_kv(key, None)?;
        self.with(|t| match t {
            Transport::Wire(c) => {
                let req = Request::Get {
                    jobid: jobid.map(str::to_string),
                    src: src.map(i64::from),
                    key: key.to_vec(),
                };
                let m = c.call(Protocol::Pmi2, &req, "kvs-get-response")?;
                Ok(found_value(&m))
            }
            Transport::Singleton { kvs, .. } => Ok(kvs.get(key).cloned()),
            Transport::Done => Err(PmiError::Finalized),
        })
    }

    /// Barrier over the job; afterwards every put made before it is visible.
    pub fn fence(&self) -> Result<(), PmiError> {
        self.with(|t| match t {
            Transport::Wire(c) => c
                .call(Protocol::Pmi2, &Request::Barrier, "kvs-fence-response")
                .map(|_| ()),
            Transport::Singleton { .. } => Ok(()),
            Transport::Done => Err(PmiError::Finalized),
        })
    }

    pub fn put_node_attr(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<(), PmiError> {
        let (key, value) = (key.as_ref(), value.as_ref());
        Self::check_kv(key, Some(value))?;
        self.with(|t| match t {
            Transport::Wire(c) => c
                .call(
                    Protocol::Pmi2,
                    &Request::PutNodeAttr {
                        key: key.to_vec(),
                        value: value.to_vec(),
                    },
                    "info-putnodeattr-response",
                )
                .map(|_| ()),
            Transport::Singleton { node, .. } => {
                node.insert(key.to_vec(), value.to_vec());
                Ok(())
            }
            Transport::Done => Err(PmiError::Finalized),
        })
    }

    /// Read a node attribute; with `wait`, block until some rank puts it.
    pub fn get_node_attr(
        &self,
        key: impl AsRef<[u8]>,
        wait: bool,
    ) -> Result<Option<Vec<u8>>, PmiError> {
        let key = key.as_ref();
        Self::check_kv(key, None)?;
        self.with(|t| match t {
            Transport::Wire(c) => {
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
            Transport::Singleton { node, .. } => Ok(node.get(key).cloned()),
            Transport::Done => Err(PmiError::Finalized),
        })
    }

    /// Read a job attribute such as `PMI_process_mapping` or `universeSize`.
    pub fn job_attr(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>, PmiError> {
        let key = key.as_ref();
        Self::check_kv(key, None)?;
        let size = self.size;
        self.with(|t| match t {
            Transport::Wire(c) => {
                let m = c.call(
                    Protocol::Pmi2,
                    &Request::GetJobAttr { key: key.to_vec() },
                    "info-getjobattr-response",
                )?;
                Ok(found_value(&m))
            }
            Transport::Singleton { .. } => Ok(match key {
                b"PMI_process_mapping" => Some(format!("(vector,(0,1,{size}))").into_bytes()),
                b"universeSize" => Some(b"1".to_vec()),
                _ => None,
            }),
            Transport::Done => Err(PmiError::Finalized),
        })
    }

    /// Ask the launcher to end the whole job with `code`, then exit.
    pub fn abort(&self, code: i32, message: &str) -> ! {
        let _ = self.with(|t| {
            if let Transport::Wire(c) = t {
                c.send(
                    Protocol::Pmi2,
                    &Request::Abort {
                        exitcode: Some(code),
                        message: message.to_string(),
                        isworld: true,
                    },
                )?;
            }
            Ok(())
        });
        std::process::exit(code & 0xff)
    }

    /// Leave PMI cleanly. Also done on drop.
    pub fn finalize(&self) -> Result<(), PmiError> {
        self.with(|t| {
            let r = match t {
                Transport::Wire(c) => c
                    .call(Protocol::Pmi2, &Request::Finalize, "finalize-response")
                    .map(|_| ()),
                Transport::Singleton { .. } => Ok(()),
                Transport::Done => return Ok(()),
            };
            *t = Transport::Done;
            r
        })
    }
}

impl Drop for Pmi {
    fn drop(&mut self) {
        let _ = self.finalize();
    }
}

fn found_value(m: &Message) -> Option<Vec<u8>> {
    if m.get_bool("found") == Some(true) {
        m.get("value").map(<[u8]>::to_vec)
    } else {
        None
    }
}
