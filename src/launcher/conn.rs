//! PMI connections: registration with the event loop, accepting port-mode
//! connections, non-blocking reads into the server and queued writes.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Write as _};
use std::net::{IpAddr, SocketAddr};

use mio::net::{TcpListener, TcpStream, UnixStream};
use mio::{Interest, Registry, Token};

use super::peer;
use super::supervise::RankProc;
use fastpmi_server::auth::Trust;
use fastpmi_server::{ConnId, Event, JobIdx, Server};

/// The first token of a PMI connection (those below are the loop's own).
pub(super) const FIRST_CONN: usize = 16;

/// Bytes read from one connection before others get their turn.
const READ_BUDGET: usize = 256 * 1024;
/// A client whose unread replies exceed this is treated as dead.
const MAX_QUEUED: usize = 16 << 20;

/// Most port-mode connections that have not identified themselves yet
/// (a flood of connections must not grow the launcher without bound); past
/// it the oldest of them is closed for each new one.
const UNIDENTIFIED_MAX: usize = 4096;

/// What the launcher vouches for a port-mode peer: loopback and the
/// launcher's own uid ([`Trust::Local`], and the peer socket's inode for the
/// check that it is the claimed rank's), or nothing.
fn classify(s: &TcpStream, peer: SocketAddr) -> (Trust, Option<u32>) {
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
    /// Read into `b`'s spare capacity: only the pages a read fills are
    /// touched (zeroing the 64 KiB buffer first cost 16 page faults, about
    /// 40 µs of a one-rank launch on a VM).
    fn read_into(&mut self, b: &mut Vec<u8>) -> io::Result<usize> {
        use std::os::fd::AsFd;
        let fd = match &*self {
            Sock::Unix(s) => s.as_fd(),
            Sock::Tcp(s) => s.as_fd(),
        };
        Ok(rustix::io::read(fd, rustix::buffer::spare_capacity(b))?)
    }
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            Sock::Unix(s) => s.write(b),
            Sock::Tcp(s) => s.write(b),
        }
    }
}

/// One PMI connection's socket and what is queued for it.
struct ConnIo {
    sock: Sock,
    /// Port mode: inode of the peer's socket when it is local and ours.
    peer_inode: Option<u32>,
    /// Port mode: the peer's address (for messages).
    peer: Option<SocketAddr>,
    /// Port mode: not bound to a rank yet (counted in `unidentified`).
    unidentified: bool,
    out: Vec<u8>,
    sent: usize,
    close_when_flushed: bool,
    want_write: bool,
}

/// What one read of a connection gave.
enum Read {
    /// This many bytes, in the buffer.
    Data(usize),
    /// End of stream or an error: the connection is to be closed.
    Closed,
    /// Nothing to read now (or no such connection).
    Nothing,
}

/// What became of bytes queued for a connection.
enum Queued {
    Yes,
    /// Its unread replies passed [`MAX_QUEUED`]: treat it as dead.
    TooMuch,
    /// No such connection (closed meanwhile).
    NoConn,
}

/// The PMI connections and, in port mode, the listeners they come from:
/// their sockets, registration with the event loop, queued output and the
/// count of port-mode connections that have not identified themselves.
pub(super) struct Conns {
    registry: Registry,
    by_token: HashMap<Token, ConnIo>,
    /// Connections that still had input after their read budget.
    ready: VecDeque<Token>,
    /// Port mode: one listener per job (the job its connections belong to).
    listeners: HashMap<Token, (TcpListener, JobIdx)>,
    /// Port-mode connections not identified yet.
    unidentified: usize,
    /// Their tokens, oldest first (may hold tokens of connections that have
    /// identified themselves or closed since; skipped and pruned lazily).
    unidentified_order: VecDeque<Token>,
    next_token: usize,
}

impl Conns {
    /// No connection yet; tokens from `first_token` on, registered with
    /// `registry` (the event loop's).
    pub(super) fn new(registry: Registry, first_token: usize) -> Conns {
        Conns {
            registry,
            by_token: HashMap::new(),
            ready: VecDeque::new(),
            listeners: HashMap::new(),
            unidentified: 0,
            unidentified_order: VecDeque::new(),
            next_token: first_token,
        }
    }

    fn token(&mut self) -> Token {
        let t = Token(self.next_token);
        self.next_token += 1;
        t
    }

    /// Register `sock` with the event loop; returns its token.
    fn add(&mut self, mut sock: Sock) -> io::Result<Token> {
        let tok = self.token();
        self.registry
            .register(sock.source(), tok, Interest::READABLE | Interest::WRITABLE)?;
        self.by_token.insert(
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
        Ok(tok)
    }

    /// A port-mode connection from `peer` (`inode`: its socket's, when it
    /// is local and ours), not identified yet.
    fn add_port(
        &mut self,
        s: TcpStream,
        peer: SocketAddr,
        inode: Option<u32>,
    ) -> io::Result<Token> {
        let tok = self.add(Sock::Tcp(s))?;
        self.unidentified += 1;
        self.unidentified_order.push_back(tok);
        if self.unidentified_order.len() > 2 * UNIDENTIFIED_MAX {
            let conns = &self.by_token;
            self.unidentified_order
                .retain(|t| conns.get(t).is_some_and(|c| c.unidentified));
        }
        if let Some(c) = self.by_token.get_mut(&tok) {
            c.peer_inode = inode;
            c.peer = Some(peer);
            c.unidentified = true;
        }
        Ok(tok)
    }

    /// Port mode: listen for the ranks of `job` on `bind`, at a port the
    /// kernel picks; returns the address the ranks connect to.
    pub(super) fn listen(&mut self, bind: IpAddr, job: JobIdx) -> io::Result<SocketAddr> {
        let mut l = TcpListener::bind(SocketAddr::new(bind, 0))?;
        let tok = self.token();
        self.registry.register(&mut l, tok, Interest::READABLE)?;
        let mut addr = l.local_addr()?;
        if addr.ip().is_unspecified() {
            // Listening everywhere: local ranks still come by loopback.
            addr.set_ip([127, 0, 0, 1].into());
        }
        self.listeners.insert(tok, (l, job));
        Ok(addr)
    }

    pub(super) fn is_listener(&self, tok: Token) -> bool {
        self.listeners.contains_key(&tok)
    }

    /// `job` has ended: no more connections for it.
    pub(super) fn unlisten(&mut self, job: JobIdx) {
        let listener = self
            .listeners
            .iter()
            .find(|(_, (_, jb))| *jb == job)
            .map(|(t, _)| *t);
        if let Some(tok) = listener {
            if let Some((mut l, _)) = self.listeners.remove(&tok) {
                let _ = self.registry.deregister(&mut l);
            }
        }
    }

    /// The next connection waiting on listener `tok`, with its peer and the
    /// job it belongs to; `None` when there is none now.
    fn accepted(&mut self, tok: Token) -> Option<(TcpStream, SocketAddr, JobIdx)> {
        let (l, job) = self.listeners.get(&tok)?;
        loop {
            match l.accept() {
                Ok((s, peer)) => return Some((s, peer, *job)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    return None;
                }
            }
        }
    }

    /// When [`UNIDENTIFIED_MAX`] connections have not identified themselves:
    /// the oldest of them and its peer, to close for a newcomer. Refusing
    /// the newcomer instead would let a flood of idle connections keep the
    /// real ranks out for good; a rank identifies itself with its first
    /// messages, so the oldest idle connection is the least likely to be one.
    fn oldest_unidentified(&mut self) -> Option<(Token, String)> {
        if self.unidentified < UNIDENTIFIED_MAX {
            return None;
        }
        while let Some(tok) = self.unidentified_order.pop_front() {
            let Some(c) = self.by_token.get(&tok).filter(|c| c.unidentified) else {
                continue;
            };
            let peer = c
                .peer
                .map(|p| p.to_string())
                .unwrap_or_else(|| "an unknown peer".into());
            return Some((tok, peer));
        }
        None
    }

    fn is_unidentified(&self, tok: Token) -> bool {
        self.by_token.get(&tok).is_some_and(|c| c.unidentified)
    }

    /// Connection `tok` is bound to its rank now.
    fn identified(&mut self, tok: Token) {
        if let Some(c) = self.by_token.get_mut(&tok).filter(|c| c.unidentified) {
            c.unidentified = false;
            self.unidentified -= 1;
        }
    }

    /// Port mode: the inode of the peer's socket, when it is local and ours.
    fn peer_inode(&self, tok: Token) -> Option<u32> {
        self.by_token.get(&tok).and_then(|c| c.peer_inode)
    }

    /// Read what `tok` has into `buf` (emptied first, filled up to its
    /// capacity).
    fn read(&mut self, tok: Token, buf: &mut Vec<u8>) -> Read {
        let Some(c) = self.by_token.get_mut(&tok) else {
            return Read::Nothing;
        };
        loop {
            buf.clear();
            return match c.sock.read_into(buf) {
                Ok(0) => Read::Closed,
                Ok(n) => Read::Data(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Read::Nothing,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::debug!("read error on connection {}: {e}", tok.0);
                    Read::Closed
                }
            };
        }
    }

    /// `tok` still has input: read it again after the others.
    fn read_later(&mut self, tok: Token) {
        self.ready.push_back(tok);
    }

    /// Whether a connection still has input from an earlier read.
    pub(super) fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// How many connections have input left (to read each once now, and
    /// those that have more after that on the next round).
    pub(super) fn ready_count(&self) -> usize {
        self.ready.len()
    }

    /// The connection whose input has waited longest.
    pub(super) fn next_ready(&mut self) -> Option<Token> {
        self.ready.pop_front()
    }

    /// Queue `bytes` for `tok` (then [`Conns::write_queued`] it).
    fn queue(&mut self, tok: Token, bytes: &[u8]) -> Queued {
        let Some(c) = self.by_token.get_mut(&tok) else {
            return Queued::NoConn;
        };
        c.out.extend_from_slice(bytes);
        if c.out.len() - c.sent > MAX_QUEUED {
            return Queued::TooMuch;
        }
        Queued::Yes
    }

    /// Close `tok` once its queue is written; false when there is no such
    /// connection.
    pub(super) fn close_when_flushed(&mut self, tok: Token) -> bool {
        let Some(c) = self.by_token.get_mut(&tok) else {
            return false;
        };
        c.close_when_flushed = true;
        true
    }

    /// Write what is queued for `tok`, as far as the socket takes it;
    /// true when it is all written and the connection is to be closed.
    fn write_queued(&mut self, tok: Token) -> bool {
        let Some(c) = self.by_token.get_mut(&tok) else {
            return false;
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
            let _ = self.registry.reregister(c.sock.source(), tok, interest);
        }
        if !pending {
            c.out.clear();
            c.sent = 0;
            return c.close_when_flushed;
        }
        if c.sent > 1 << 20 {
            c.out.drain(..c.sent);
            c.sent = 0;
        }
        false
    }

    /// Forget `tok`: deregister and close its socket.
    fn remove(&mut self, tok: Token) {
        if let Some(mut c) = self.by_token.remove(&tok) {
            if c.unidentified {
                self.unidentified -= 1;
            }
            let _ = self.registry.deregister(c.sock.source());
        }
    }
}

impl Conns {
    /// A rank's socketpair end (`bound`: the job and rank it is).
    pub(super) fn add_conn(
        &mut self,
        server: &mut Server,
        sock: Sock,
        bound: Option<(JobIdx, u32)>,
    ) -> io::Result<()> {
        let tok = self.add(sock)?;
        server.connect(tok.0, bound, None);
        Ok(())
    }

    /// A rank's out-of-band socketpair end (FD mode).
    pub(super) fn add_oob_conn(
        &mut self,
        server: &mut Server,
        sock: Sock,
        job: JobIdx,
        rank: u32,
    ) -> io::Result<()> {
        let tok = self.add(sock)?;
        server.connect_oob(tok.0, job, rank);
        Ok(())
    }

    /// Send out-of-band `signal` to the rank running as `to` once the
    /// notice queued on its channel `conn` is written (or cannot be: a rank
    /// that does not read its channel still gets the signal).
    pub(super) fn oob_signal(
        &mut self,
        server: &mut Server,
        events: &mut Vec<Event>,
        conn: ConnId,
        to: Option<&RankProc>,
        signal: &str,
    ) {
        self.flush(server, events, Token(conn));
        let (Some(sig), Some(p)) = (super::os::signal_by_name(signal), to) else {
            return;
        };
        let (job, rank) = (p.job, p.rank);
        tracing::debug!(job, rank, "out-of-band {signal} to pid {}", p.pid);
        super::os::signal(p.pid, sig);
    }

    /// Take the port-mode connections waiting on listener `tok`.
    pub(super) fn accept(&mut self, server: &mut Server, events: &mut Vec<Event>, tok: Token) {
        while let Some((s, peer, job)) = self.accepted(tok) {
            if let Some((old, old_peer)) = self.oldest_unidentified() {
                crate::errln!(
                    "fastpmi: refused PMI connection {} from {old_peer}: closed unidentified to \
                     make room ({UNIDENTIFIED_MAX} connections had not identified themselves)",
                    old.0
                );
                self.close(server, events, old);
            }
            let _ = s.set_nodelay(true);
            let (trust, inode) = classify(&s, peer);
            let ctok = match self.add_port(s, peer, inode) {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!("cannot register PMI connection: {e}");
                    continue;
                }
            };
            server.connect(ctok.0, None, Some(job));
            server.set_peer(ctok.0, trust, peer.to_string());
            tracing::debug!("PMI connection {} from {peer} ({trust:?})", ctok.0);
        }
    }

    /// Hand what `tok` has to the server, up to [`READ_BUDGET`] bytes.
    pub(super) fn read_conn(
        &mut self,
        server: &mut Server,
        events: &mut Vec<Event>,
        tok: Token,
        buf: &mut Vec<u8>,
    ) {
        let mut budget = READ_BUDGET;
        loop {
            match self.read(tok, buf) {
                Read::Nothing => return,
                Read::Closed => {
                    self.close(server, events, tok);
                    return;
                }
                Read::Data(n) => {
                    server.on_bytes(tok.0, &buf[..n], events);
                    self.note_identified(server, tok);
                    budget = budget.saturating_sub(n);
                    // A short read drained the socket; later data raises a new
                    // edge, so the usual WouldBlock read can be skipped.
                    if n < buf.capacity() {
                        return;
                    }
                    if budget == 0 {
                        // Fairness: come back after the others.
                        self.read_later(tok);
                        return;
                    }
                }
            }
        }
    }

    /// Tell the server whether the socket of port-mode connection `conn`
    /// belongs to the process `claimed` runs as the rank it claims to be
    /// (or one of its descendants; `None`: no such rank runs).
    pub(super) fn check_peer(
        &mut self,
        server: &mut Server,
        events: &mut Vec<Event>,
        conn: ConnId,
        claimed: Option<&RankProc>,
    ) {
        let tok = Token(conn);
        let ok = match (self.peer_inode(tok), claimed) {
            (Some(inode), Some(p)) => peer::tree_holds_socket(p.pid, inode),
            _ => false,
        };
        server.peer_checked(conn, ok, events);
        self.note_identified(server, tok);
    }

    /// A port-mode connection that identified itself no longer counts
    /// against [`UNIDENTIFIED_MAX`].
    fn note_identified(&mut self, server: &Server, tok: Token) {
        if self.is_unidentified(tok) && server.is_bound(tok.0) {
            self.identified(tok);
        }
    }

    /// Queue the server's reply `bytes` for `conn` and write what it takes.
    pub(super) fn send(
        &mut self,
        server: &mut Server,
        events: &mut Vec<Event>,
        conn: ConnId,
        bytes: &[u8],
    ) {
        let tok = Token(conn);
        match self.queue(tok, bytes) {
            Queued::Yes => self.flush(server, events, tok),
            Queued::TooMuch => {
                tracing::warn!("connection {conn} does not read its replies; closing it");
                self.close(server, events, tok);
            }
            Queued::NoConn => {}
        }
    }

    fn close(&mut self, server: &mut Server, events: &mut Vec<Event>, tok: Token) {
        self.remove(tok);
        server.on_closed(tok.0, events);
    }

    /// Write what is queued for `tok`; close it if it was to be closed
    /// once written.
    pub(super) fn flush(&mut self, server: &mut Server, events: &mut Vec<Event>, tok: Token) {
        if self.write_queued(tok) {
            self.close(server, events, tok);
        }
    }
}

pub(super) fn stream_nonblocking(s: &UnixStream) -> io::Result<()> {
    // mio's from_std expects a non-blocking socket.
    let fd = std::os::fd::AsFd::as_fd(s);
    rustix::io::ioctl_fionbio(fd, true)?;
    Ok(())
}
