//! PMI connections: registration with the event loop, accepting port-mode
//! connections, non-blocking reads into the server and queued writes.

use std::io::{self, Read, Write};

use mio::net::{TcpStream, UnixStream};
use mio::{Interest, Token};

use super::{Launcher, READ_BUDGET};
use crate::server::JobIdx;

pub(super) enum Sock {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Sock {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Sock::Unix(s) => s,
            Sock::Tcp(s) => s,
        }
    }
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Sock::Unix(s) => s.read(b),
            Sock::Tcp(s) => s.read(b),
        }
    }
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            Sock::Unix(s) => s.write(b),
            Sock::Tcp(s) => s.write(b),
        }
    }
}

pub(super) struct ConnIo {
    sock: Sock,
    pub(super) out: Vec<u8>,
    pub(super) sent: usize,
    pub(super) close_when_flushed: bool,
    want_write: bool,
}

impl Launcher {
    pub(super) fn token(&mut self) -> Token {
        let t = Token(self.next_token);
        self.next_token += 1;
        t
    }

    pub(super) fn add_conn(
        &mut self,
        mut sock: Sock,
        bound: Option<(JobIdx, u32)>,
        port_job: Option<JobIdx>,
    ) -> io::Result<()> {
        let tok = self.token();
        self.poll.registry().register(
            sock.source(),
            tok,
            Interest::READABLE | Interest::WRITABLE,
        )?;
        self.conns.insert(
            tok,
            ConnIo {
                sock,
                out: Vec::new(),
                sent: 0,
                close_when_flushed: false,
                want_write: false,
            },
        );
        self.server.connect(tok.0, bound, port_job);
        Ok(())
    }

    pub(super) fn accept(&mut self, tok: Token) {
        loop {
            let Some((l, job)) = self.listeners.get(&tok) else {
                return;
            };
            let job = *job;
            match l.accept() {
                Ok((s, _)) => {
                    let _ = s.set_nodelay(true);
                    if let Err(e) = self.add_conn(Sock::Tcp(s), None, Some(job)) {
                        tracing::warn!("cannot register PMI connection: {e}");
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    return;
                }
            }
        }
    }

    pub(super) fn read_conn(&mut self, tok: Token, buf: &mut [u8]) {
        let mut budget = READ_BUDGET;
        loop {
            let Some(c) = self.conns.get_mut(&tok) else {
                return;
            };
            match c.sock.read(buf) {
                Ok(0) => {
                    self.close(tok);
                    return;
                }
                Ok(n) => {
                    self.server.on_bytes(tok.0, &buf[..n], &mut self.events);
                    budget = budget.saturating_sub(n);
                    // A short read drained the socket; later data raises a new
                    // edge, so the usual WouldBlock read can be skipped.
                    if n < buf.len() {
                        return;
                    }
                    if budget == 0 {
                        // Fairness: come back after the others.
                        self.ready.push_back(tok);
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::debug!("read error on connection {}: {e}", tok.0);
                    self.close(tok);
                    return;
                }
            }
        }
    }

    pub(super) fn close(&mut self, tok: Token) {
        if let Some(mut c) = self.conns.remove(&tok) {
            let _ = self.poll.registry().deregister(c.sock.source());
        }
        self.server.on_closed(tok.0, &mut self.events);
    }

    pub(super) fn flush(&mut self, tok: Token) {
        let Some(c) = self.conns.get_mut(&tok) else {
            return;
        };
        while c.sent < c.out.len() {
            match c.sock.write(&c.out[c.sent..]) {
                Ok(0) => break,
                Ok(n) => c.sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    // Peer gone; its EOF will be seen on the read side.
                    c.out.clear();
                    c.sent = 0;
                    break;
                }
            }
        }
        let pending = c.sent < c.out.len();
        if pending != c.want_write {
            c.want_write = pending;
            let interest = if pending {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            let _ = self
                .poll
                .registry()
                .reregister(c.sock.source(), tok, interest);
        }
        if !pending {
            c.out.clear();
            c.sent = 0;
            if c.close_when_flushed {
                self.close(tok);
            }
        } else if c.sent > 1 << 20 {
            c.out.drain(..c.sent);
            c.sent = 0;
        }
    }
}

pub(super) fn stream_nonblocking(s: &UnixStream) -> io::Result<()> {
    // mio's from_std expects a non-blocking socket.
    let fd = std::os::fd::AsFd::as_fd(s);
    rustix::io::ioctl_fionbio(fd, true)?;
    Ok(())
}
