//! PMI connections: registration with the event loop, accepting port-mode
//! connections, non-blocking reads into the server and queued writes.

use std::io::{self, Read, Write};

use mio::net::{TcpStream, UnixStream};
use mio::{Interest, Token};

use super::{peer, Launcher, READ_BUDGET};
use fastpmi_server::auth::Trust;

/// Most port-mode connections that have not identified themselves yet
/// (a flood of connections must not grow the launcher without bound); past
/// it the oldest of them is closed for each new one.
const UNIDENTIFIED_MAX: usize = 4096;

/// What the launcher vouches for a port-mode peer: loopback and the
/// launcher's own uid ([`Trust::Local`], and the peer socket's inode for the
/// check that it is the claimed rank's), or nothing.
fn classify(s: &TcpStream, peer: std::net::SocketAddr) -> (Trust, Option<u32>) {
    if !peer.ip().is_loopback() {
        return (Trust::Remote, None);
    }
    let Ok(local) = s.local_addr() else {
        return (Trust::Remote, None);
    };
    match peer::local_owner(local, peer) {
        Ok((uid, inode)) if uid == rustix::process::geteuid().as_raw() => {
            (Trust::Local, Some(inode))
        }
        Ok((uid, _)) => {
            tracing::debug!("PMI connection from {peer} is owned by uid {uid}");
            (Trust::Remote, None)
        }
        Err(e) => {
            tracing::debug!("PMI connection from {peer}: owner unknown: {e}");
            (Trust::Remote, None)
        }
    }
}
use fastpmi_server::JobIdx;

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
    /// Port mode: inode of the peer's socket when it is local and ours.
    pub(super) peer_inode: Option<u32>,
    /// Port mode: the peer's address (for messages).
    pub(super) peer: Option<std::net::SocketAddr>,
    /// Port mode: not bound to a rank yet (counted in `unidentified`).
    pub(super) unidentified: bool,
    pub(super) out: Vec<u8>,
    pub(super) sent: usize,
    pub(super) close_when_flushed: bool,
    want_write: bool,
}

impl Launcher {
    /// The token the next `add_conn` will use.
    fn next_conn_token(&self) -> Token {
        Token(self.next_token)
    }

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
                peer_inode: None,
                peer: None,
                unidentified: false,
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
                Ok((s, peer)) => {
                    if self.unidentified >= UNIDENTIFIED_MAX {
                        self.evict_oldest_unidentified();
                    }
                    let _ = s.set_nodelay(true);
                    let (trust, inode) = classify(&s, peer);
                    let ctok = self.next_conn_token();
                    if let Err(e) = self.add_conn(Sock::Tcp(s), None, Some(job)) {
                        tracing::warn!("cannot register PMI connection: {e}");
                        continue;
                    }
                    self.unidentified += 1;
                    self.unidentified_order.push_back(ctok);
                    if self.unidentified_order.len() > 2 * UNIDENTIFIED_MAX {
                        let conns = &self.conns;
                        self.unidentified_order
                            .retain(|t| conns.get(t).is_some_and(|c| c.unidentified));
                    }
                    if let Some(c) = self.conns.get_mut(&ctok) {
                        c.peer_inode = inode;
                        c.peer = Some(peer);
                        c.unidentified = true;
                    }
                    self.server.set_peer(ctok.0, trust, peer.to_string());
                    tracing::debug!("PMI connection {} from {peer} ({trust:?})", ctok.0);
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
                    self.note_identified(tok);
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

    /// Make room for a new port-mode connection: close the oldest one that
    /// has not identified itself. Refusing the newcomer instead would let a
    /// flood of idle connections keep the real ranks out for good; a rank
    /// identifies itself with its first messages, so the oldest idle
    /// connection is the least likely to be one.
    fn evict_oldest_unidentified(&mut self) {
        while let Some(tok) = self.unidentified_order.pop_front() {
            let Some(c) = self.conns.get(&tok).filter(|c| c.unidentified) else {
                continue;
            };
            let peer = c
                .peer
                .map(|p| p.to_string())
                .unwrap_or_else(|| "an unknown peer".into());
            crate::errln!(
                "fastpmi: refused PMI connection {} from {peer}: closed unidentified to make \
                 room ({UNIDENTIFIED_MAX} connections had not identified themselves)",
                tok.0
            );
            self.close(tok);
            return;
        }
    }

    /// A port-mode connection that identified itself no longer counts
    /// against [`UNIDENTIFIED_MAX`].
    pub(super) fn note_identified(&mut self, tok: Token) {
        if let Some(c) = self.conns.get_mut(&tok) {
            if c.unidentified && self.server.is_bound(tok.0) {
                c.unidentified = false;
                self.unidentified -= 1;
            }
        }
    }

    pub(super) fn close(&mut self, tok: Token) {
        if let Some(mut c) = self.conns.remove(&tok) {
            if c.unidentified {
                self.unidentified -= 1;
            }
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
