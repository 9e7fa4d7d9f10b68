//! The out-of-band channel (docs/oob.md): a second connection to fastpmi's
//! launcher on which it tells this rank, unasked, that the job is being
//! aborted or that a checkpoint is requested, each notice followed by the
//! signal the rank chose (or none).
//!
//! Under fastpmi's launcher in FD mode the channel is the inherited socket
//! `PMI_OOB_FD`; in port mode a new connection to `PMI_PORT`, which
//! authenticates with the job's secret as `fullinit` does. Other servers
//! (Hydra, Slurm) have no channel: opening one is [`PmiError::Unsupported`].

use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::conn::Stream;
use super::{os, Endpoint, Pmi, PmiEnv, PmiError, ServerKind};
use fastpmi_codec::command::replies::AUTH_CHALLENGE;
use fastpmi_codec::oob::parse_signal;
pub use fastpmi_codec::oob::{Notice, SIGNALS};
use fastpmi_codec::{Deframer, Frame, Message, Protocol, Request};

/// `PMI_OOB_FD` names one descriptor: it is adopted once per process.
static FD_TAKEN: AtomicBool = AtomicBool::new(false);

/// This rank's open out-of-band channel. Dropping it closes it (the job
/// goes on; under FD mode it cannot be opened again).
pub struct OobChannel {
    stream: Stream,
    deframer: Deframer,
    signal: Option<&'static str>,
}

impl Pmi {
    /// Open this rank's out-of-band channel. `signal`: the signal to follow
    /// each notice, by name (`"SIGUSR2"`, `"USR2"`; one of [`SIGNALS`]), or
    /// `None` for no signal: poll the channel ([`OobChannel::try_recv`],
    /// [`OobChannel::recv_timeout`], or its descriptor in an event loop).
    /// With a signal, install its handler before opening, and read the
    /// channel outside the handler.
    pub fn open_oob(&self, signal: Option<&str>) -> Result<OobChannel, PmiError> {
        self.live()?;
        let signal = match signal {
            None => None,
            Some(name) => parse_signal(name).map_err(|e| PmiError::InvalidArg(e.to_string()))?,
        };
        if self.server == ServerKind::SlurmStepd || self.is_singleton() {
            return Err(PmiError::Unsupported(
                "out-of-band channel: this process has no fastpmi launcher".into(),
            ));
        }
        let env = PmiEnv::from_process()?;
        let oob_fd = std::env::var(fastpmi_codec::names::env::PMI_OOB_FD).ok();
        let (stream, port) =
            match (&env.endpoint, oob_fd) {
                (Some(Endpoint::Fd(_)), Some(v)) => {
                    let fd: RawFd = v.trim().parse().map_err(|_| {
                        PmiError::Env(format!("PMI_OOB_FD={v} is not a descriptor"))
                    })?;
                    if FD_TAKEN.swap(true, Ordering::AcqRel) {
                        return Err(PmiError::InvalidArg(
                        "the out-of-band channel (PMI_OOB_FD) was already opened by this process"
                            .into(),
                    ));
                    }
                    (Stream::Unix(os::adopt_socket("PMI_OOB_FD", fd)?), false)
                }
                (Some(Endpoint::Port(port)), _) => {
                    let s = std::net::TcpStream::connect(port)
                        .map_err(|e| PmiError::Env(format!("PMI_PORT={port}: {e}")))?;
                    s.set_nodelay(true)?;
                    (Stream::Tcp(s), true)
                }
                _ => return Err(PmiError::Unsupported(
                    "out-of-band channel: the PMI server offers none (no PMI_OOB_FD or PMI_PORT)"
                        .into(),
                )),
            };
        let mut ch = OobChannel {
            stream,
            deframer: Deframer::new(),
            signal,
        };
        let secret = port
            .then(|| std::env::var(fastpmi_codec::names::env::AUTH_SECRET).ok())
            .flatten();
        let init = Request::InitOob {
            version: 2,
            signal,
            pmiid: port.then_some(self.rank.into()),
            auth: secret
                .as_ref()
                .map(|_| fastpmi_codec::auth::AUTHTYPE.to_string()),
        };
        ch.send(&init)?;
        let mut m = ch.recv_message(None)?.ok_or_else(closed)?;
        if let (Some(secret), AUTH_CHALLENGE) = (&secret, m.cmd.as_str()) {
            let nonce = m
                .get_str("authinfo")
                .ok_or_else(|| PmiError::Protocol("auth-response without authinfo".into()))?;
            let answer = fastpmi_codec::auth::answer(secret, nonce);
            ch.send(&Request::AuthComplete {
                authinfo: answer.into_bytes(),
            })?;
            m = ch.recv_message(None)?.ok_or_else(closed)?;
        }
        if m.cmd != init.response() {
            return Err(PmiError::Protocol(format!(
                "init_oob answered with `{}`",
                m.cmd
            )));
        }
        match m.get_int("rc") {
            Some(0) => Ok(ch),
            rc => Err(PmiError::Server {
                cmd: "init_oob".into(),
                rc: rc.unwrap_or(-1) as i32,
                msg: m.get_str("msg").unwrap_or_default().replace('_', " "),
            }),
        }
    }

    /// A singleton has no launcher.
    fn is_singleton(&self) -> bool {
        matches!(self.transport, super::transport::Transport::Singleton(_))
    }
}

fn closed() -> PmiError {
    PmiError::Protocol("the launcher closed the out-of-band channel".into())
}

impl OobChannel {
    /// The signal that follows each notice (its full name), if any.
    pub fn signal(&self) -> Option<&'static str> {
        self.signal
    }

    /// The next notice if one has arrived, without waiting.
    pub fn try_recv(&mut self) -> Result<Option<Notice>, PmiError> {
        self.recv_timeout(Some(Duration::ZERO))
    }

    /// The next notice, waiting at most `timeout` (`None`: until one comes).
    /// `Ok(None)`: none came in time. The launcher closing the channel (the
    /// job ended) is an error.
    pub fn recv_timeout(&mut self, timeout: Option<Duration>) -> Result<Option<Notice>, PmiError> {
        match self.recv_message(timeout)? {
            Some(m) => Notice::decode(&m).map(Some).map_err(PmiError::from),
            None => Ok(None),
        }
    }

    fn send(&mut self, req: &Request) -> Result<(), PmiError> {
        let bytes = fastpmi_codec::command::encode_request(Protocol::Pmi1, req);
        if tracing::enabled!(tracing::Level::DEBUG) {
            tracing::debug!("pmi (out of band) -> {}", fastpmi_codec::show(&bytes));
        }
        self.stream.write_all(&bytes)?;
        Ok(())
    }

    /// The next line from the launcher, waiting at most `timeout`.
    fn recv_message(&mut self, timeout: Option<Duration>) -> Result<Option<Message>, PmiError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut buf = [0u8; 4096];
        loop {
            match self.deframer.next_frame()? {
                Some(Frame::Pmi1(line)) => {
                    if tracing::enabled!(tracing::Level::DEBUG) {
                        tracing::debug!("pmi (out of band) <- {}", fastpmi_codec::show(&line));
                    }
                    return Ok(Some(fastpmi_codec::pmi1::decode(&line)?));
                }
                Some(_) => {
                    return Err(PmiError::Protocol(
                        "the out-of-band channel carries PMI-1 lines only".into(),
                    ))
                }
                None => {}
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let ts = left.map(|d| rustix::event::Timespec {
                tv_sec: d.as_secs() as _,
                tv_nsec: d.subsec_nanos() as _,
            });
            let mut fds = [rustix::event::PollFd::new(
                &self.stream,
                rustix::event::PollFlags::IN,
            )];
            match rustix::event::poll(&mut fds, ts.as_ref()) {
                Ok(0) => return Ok(None),
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(PmiError::Io(e.into())),
            }
            let n = match self.stream.read(&mut buf) {
                Ok(0) => return Err(closed()),
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            self.deframer.feed(&buf[..n]);
        }
    }
}

impl AsRawFd for OobChannel {
    /// Readable when a notice (or the end) has arrived: for an event loop.
    fn as_raw_fd(&self) -> RawFd {
        self.stream.as_fd().as_raw_fd()
    }
}
