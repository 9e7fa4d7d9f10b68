//! Deaths across node servers (fault-tolerant nested jobs,
//! docs/nested.md): the outer job's KVS and fence carry pairs, but nothing
//! pushes an event from one node server to another, and a dead node
//! server never arrives at an outer fence. So the node servers of a
//! fault-tolerant job also hold a TCP connection to each other: each opens
//! a door before the first trade and puts its card (address, port, a
//! random token) in the outer KVS; after it, node server `n` connects to
//! every node server below it and proves it read the card (the target's
//! token). Over these connections go, one line each:
//!
//! - `died RANK KIND CODE`: a rank of the sender's node died (kind
//!   `exited`, `signaled`, `aborted`, `lost`, `node`), sent again when a
//!   lost connection turns out to be an exit or a signal;
//! - `stop ROUND`: the sender's last trade round (see `Exchange::end`);
//! - `bye`: the sender's ranks are all done; its connection's end is not a
//!   death.
//!
//! A connection that ends without `bye` is the death of every rank of its
//! node server (they die with it: `PR_SET_PDEATHSIG`). The lines' form is
//! [`super::lines`].

use std::collections::{BTreeSet, HashMap};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use fastpmi_server::deaths::DeathCause;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};

use super::agreement::Agreement;
use super::door::{Card, Door};
use super::lines::{died_line, parse_line, same_token, Line};

const DOOR: Token = Token(0);
const WAKE: Token = Token(1);
const FIRST_PEER: usize = 2;
/// The longest line any node server sends.
const LINE_MAX: usize = 128;
/// How long a connection may take to say who it is.
const HELLO_WAIT: Duration = Duration::from_secs(10);
/// How long every other node server has to connect once the cards are
/// traded (they connect before starting their ranks).
const FORM_WAIT: Duration = Duration::from_secs(60);
/// Connections that have not said who they are, at most.
const STRANGERS_MAX: usize = 64;
/// How long the last words (`bye`) may take to go out.
const BYE_WAIT: Duration = Duration::from_secs(1);

/// What a node server heard from the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Heard {
    /// A rank of another node died (`rank`: its rank in the job).
    Died { rank: u32, cause: DeathCause },
    /// Node server `node` ended without saying bye: its ranks are dead.
    Lost { node: u32 },
    /// Node server `node` could not be reached: deaths would go unheard.
    Unreachable { node: u32, why: String },
}

/// What the launcher asks the mesh thread to send.
enum Say {
    Line(String),
    Bye(mpsc::SyncSender<()>),
}

/// A handle that tells the other node servers something (clonable: the
/// exchange thread proposes its last round with one).
#[derive(Clone)]
pub(super) struct Teller {
    tx: mpsc::Sender<Say>,
    wake: Arc<Waker>,
}

impl Teller {
    fn say(&self, s: Say) {
        if self.tx.send(s).is_ok() {
            let _ = self.wake.wake();
        }
    }

    /// Rank `rank` (of the job) of this node died of `cause`.
    pub(super) fn died(&self, rank: u32, cause: DeathCause) {
        self.say(Say::Line(died_line(rank, cause)));
    }

    /// This node server's last trade round is `round`.
    pub(super) fn stop(&self, round: u64) {
        self.say(Say::Line(format!("stop {round}")));
    }

    /// This node server's ranks are done: say so and wait (a while) for
    /// it to go out.
    pub(super) fn bye(&self) {
        let (tx, rx) = mpsc::sync_channel(1);
        self.say(Say::Bye(tx));
        let _ = rx.recv_timeout(BYE_WAIT);
    }
}

/// The mesh as the launcher holds it.
pub(super) struct Mesh {
    pub(super) teller: Teller,
    pub(super) agreement: Arc<Agreement>,
    heard: Arc<Mutex<Vec<Heard>>>,
}

impl Mesh {
    /// Connect node server `me` to the others (`cards[n]`: node server
    /// `n`'s) on a thread of its own, which wakes the launcher with
    /// `waker` when it heard something.
    pub(super) fn start(
        door: Door,
        me: u32,
        cards: Vec<Card>,
        waker: Arc<Waker>,
    ) -> io::Result<Mesh> {
        let poll = Poll::new()?;
        let wake = Arc::new(Waker::new(poll.registry(), WAKE)?);
        door.listener.set_nonblocking(true)?;
        let mut listener = TcpListener::from_std(door.listener);
        poll.registry()
            .register(&mut listener, DOOR, Interest::READABLE)?;
        let (tx, rx) = mpsc::channel();
        let heard: Arc<Mutex<Vec<Heard>>> = Default::default();
        let agreement: Arc<Agreement> = Default::default();
        let thread = Thread {
            poll,
            listener,
            rx,
            me,
            token: door.token,
            cards,
            peers: HashMap::new(),
            next: FIRST_PEER,
            log: Vec::new(),
            heard: heard.clone(),
            agreement: agreement.clone(),
            main: waker,
            bye: None,
        };
        std::thread::Builder::new()
            .name("fastpmi-nest-mesh".into())
            .spawn(move || thread.run())?;
        Ok(Mesh {
            teller: Teller { tx, wake },
            agreement,
            heard,
        })
    }

    /// What was heard since last asked.
    pub(super) fn heard(&self) -> Vec<Heard> {
        std::mem::take(&mut *self.heard.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

struct Peer {
    stream: TcpStream,
    /// Its node, once it proved it read this node's card (or was dialled).
    node: Option<u32>,
    input: Vec<u8>,
    output: Vec<u8>,
    since: Instant,
    said_bye: bool,
    writable: bool,
}

struct Thread {
    poll: Poll,
    listener: TcpListener,
    rx: mpsc::Receiver<Say>,
    me: u32,
    token: String,
    cards: Vec<Card>,
    peers: HashMap<Token, Peer>,
    next: usize,
    /// Every line said so far: a node server that connects late hears it.
    log: Vec<String>,
    heard: Arc<Mutex<Vec<Heard>>>,
    agreement: Arc<Agreement>,
    main: Arc<Waker>,
    /// `bye` was asked for: tell the asker once it went out.
    bye: Option<mpsc::SyncSender<()>>,
}

impl Thread {
    fn run(mut self) {
        let started = Instant::now();
        for n in 0..self.me {
            if let Err(why) = self.dial(n) {
                self.hear(Heard::Unreachable {
                    node: n,
                    why: why.to_string(),
                });
            }
        }
        let mut unformed: BTreeSet<u32> = (self.me + 1..self.cards.len() as u32).collect();
        let mut events = Events::with_capacity(64);
        loop {
            if let Err(e) = self.poll.poll(&mut events, Some(Duration::from_secs(1))) {
                if e.kind() != io::ErrorKind::Interrupted {
                    tracing::warn!("node server mesh: {e}");
                    return;
                }
            }
            for ev in events.iter() {
                match ev.token() {
                    DOOR => self.accept(),
                    WAKE => self.drain(),
                    t => self.serve(t),
                }
            }
            for p in self.peers.values() {
                if let Some(n) = p.node {
                    unformed.remove(&n);
                }
            }
            let now = Instant::now();
            if !unformed.is_empty() && now.duration_since(started) > FORM_WAIT {
                for node in std::mem::take(&mut unformed) {
                    self.hear(Heard::Unreachable {
                        node,
                        why: format!("it did not connect within {}s", FORM_WAIT.as_secs()),
                    });
                }
            }
            self.peers
                .retain(|_, p| p.node.is_some() || now.duration_since(p.since) < HELLO_WAIT);
            if self.bye.is_some() && self.peers.values().all(|p| p.output.is_empty()) {
                if let Some(tx) = self.bye.take() {
                    let _ = tx.send(());
                }
                return;
            }
        }
    }

    fn hear(&self, h: Heard) {
        if let Heard::Lost { node } | Heard::Unreachable { node, .. } = &h {
            self.agreement.gone(*node);
        }
        self.heard.lock().unwrap_or_else(|p| p.into_inner()).push(h);
        let _ = self.main.wake();
    }

    /// Connect to node server `n` (below this one) and say who this is.
    fn dial(&mut self, n: u32) -> io::Result<()> {
        let card = self.cards[n as usize].clone();
        let addrs: Vec<SocketAddr> = (card.host.as_str(), card.port).to_socket_addrs()?.collect();
        let deadline = Instant::now() + Duration::from_secs(10);
        let stream = loop {
            let mut last = io::Error::other(format!("{} resolves to no address", card.host));
            let mut got = None;
            for a in &addrs {
                match std::net::TcpStream::connect_timeout(a, Duration::from_secs(5)) {
                    Ok(s) => {
                        got = Some(s);
                        break;
                    }
                    Err(e) => last = e,
                }
            }
            match got {
                Some(s) => break s,
                None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
                None => {
                    return Err(io::Error::new(
                        last.kind(),
                        format!("{}:{}: {last}", card.host, card.port),
                    ))
                }
            }
        };
        stream.set_nonblocking(true)?;
        let _ = stream.set_nodelay(true);
        let hello = format!("hello {} {}\n", self.me, card.token);
        let t = self.add(TcpStream::from_std(stream), Some(n))?;
        if let Some(p) = self.peers.get_mut(&t) {
            // The hello, then what was said before this peer joined.
            p.output.splice(0..0, hello.bytes());
        }
        self.flush(t);
        Ok(())
    }

    fn add(&mut self, mut stream: TcpStream, node: Option<u32>) -> io::Result<Token> {
        let t = Token(self.next);
        self.next += 1;
        self.poll
            .registry()
            .register(&mut stream, t, Interest::READABLE)?;
        let output = match node {
            Some(_) => self.said(),
            None => Vec::new(),
        };
        self.peers.insert(
            t,
            Peer {
                stream,
                node,
                input: Vec::new(),
                output,
                since: Instant::now(),
                said_bye: false,
                writable: false,
            },
        );
        Ok(t)
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((s, from)) => {
                    let strangers = self.peers.values().filter(|p| p.node.is_none()).count();
                    if strangers >= STRANGERS_MAX {
                        tracing::warn!("node server mesh: too many connections, dropped {from}");
                        continue;
                    }
                    let _ = s.set_nodelay(true);
                    if let Err(e) = self.add(s, None) {
                        tracing::warn!("node server mesh: {e}");
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!("node server mesh: accept: {e}");
                    return;
                }
            }
        }
    }

    /// What the launcher asked to say: to every node server connected,
    /// and kept for those that connect later.
    fn drain(&mut self) {
        while let Ok(s) = self.rx.try_recv() {
            let line = match s {
                Say::Line(l) => l,
                Say::Bye(tx) => {
                    self.bye = Some(tx);
                    "bye".to_string()
                }
            };
            let ts: Vec<Token> = self
                .peers
                .iter()
                .filter(|(_, p)| p.node.is_some())
                .map(|(t, _)| *t)
                .collect();
            for t in ts {
                if let Some(p) = self.peers.get_mut(&t) {
                    p.output.extend_from_slice(line.as_bytes());
                    p.output.push(b'\n');
                }
                self.flush(t);
            }
            self.log.push(line);
        }
    }

    fn serve(&mut self, t: Token) {
        let mut buf = [0u8; 4096];
        let mut ended = false;
        if let Some(p) = self.peers.get_mut(&t) {
            loop {
                match p.stream.read(&mut buf) {
                    Ok(0) => {
                        ended = true;
                        break;
                    }
                    Ok(n) => p.input.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        ended = true;
                        break;
                    }
                }
            }
        }
        let ok = self.lines(t);
        self.flush(t);
        if ended || !ok {
            self.drop_peer(t);
        }
    }

    /// Handles the complete lines `t` sent; false when it must go.
    fn lines(&mut self, t: Token) -> bool {
        loop {
            let Some(p) = self.peers.get_mut(&t) else {
                return false;
            };
            let Some(end) = p.input.iter().position(|&b| b == b'\n') else {
                return p.input.len() <= LINE_MAX;
            };
            if end > LINE_MAX {
                return false;
            }
            let raw: Vec<u8> = p.input.drain(..=end).collect();
            let line = String::from_utf8_lossy(&raw[..end]).into_owned();
            let Some(node) = p.node else {
                if !self.hello(t, &line) {
                    tracing::warn!("node server mesh: refused a connection: {line:?}");
                    return false;
                }
                continue;
            };
            match parse_line(&line) {
                Some(Line::Died { rank, cause }) => self.hear(Heard::Died { rank, cause }),
                Some(Line::Stop(round)) => self.agreement.propose(node, round),
                Some(Line::Bye) => {
                    p.said_bye = true;
                    self.agreement.gone(node);
                }
                None => tracing::warn!("node server mesh: node server {node} sent {line:?}"),
            }
        }
    }

    /// Every line said so far, for a node server that just joined.
    fn said(&self) -> Vec<u8> {
        self.log
            .iter()
            .flat_map(|l| l.bytes().chain(std::iter::once(b'\n')))
            .collect()
    }

    /// `hello NODE TOKEN` from a node server above this one.
    fn hello(&mut self, t: Token, line: &str) -> bool {
        let mut w = line.split(' ');
        let (Some("hello"), Some(node), Some(token), None) =
            (w.next(), w.next(), w.next(), w.next())
        else {
            return false;
        };
        let Ok(node) = node.parse::<u32>() else {
            return false;
        };
        let taken = self.peers.values().any(|p| p.node == Some(node));
        if node <= self.me || node as usize >= self.cards.len() || taken {
            return false;
        }
        if !same_token(token, &self.token) {
            return false;
        }
        let log = self.said();
        if let Some(p) = self.peers.get_mut(&t) {
            p.node = Some(node);
            p.output.extend_from_slice(&log);
        }
        true
    }

    fn flush(&mut self, t: Token) {
        let Some(p) = self.peers.get_mut(&t) else {
            return;
        };
        while !p.output.is_empty() {
            match p.stream.write(&p.output) {
                Ok(0) => break,
                Ok(n) => {
                    p.output.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let want = !p.output.is_empty();
        if want != p.writable {
            p.writable = want;
            let i = if want {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            let _ = self.poll.registry().reregister(&mut p.stream, t, i);
        }
    }

    fn drop_peer(&mut self, t: Token) {
        let Some(mut p) = self.peers.remove(&t) else {
            return;
        };
        let _ = self.poll.registry().deregister(&mut p.stream);
        if let (Some(node), false) = (p.node, p.said_bye) {
            self.hear(Heard::Lost { node });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};

    /// Two meshes on this host: a death said by one is heard by the other,
    /// a stranger with the wrong token is refused, and an end without bye
    /// is a lost node.
    #[test]
    fn deaths_cross_and_a_silent_end_is_a_lost_node() {
        let poll = Poll::new().unwrap();
        let main = Arc::new(Waker::new(poll.registry(), Token(9)).unwrap());
        let d0 = Door::open(Some(IpAddr::V4(Ipv4Addr::LOCALHOST))).unwrap();
        let d1 = Door::open(Some(IpAddr::V4(Ipv4Addr::LOCALHOST))).unwrap();
        let cards = vec![
            Card::parse(&d0.card().unwrap()).unwrap(),
            Card::parse(&d1.card().unwrap()).unwrap(),
        ];
        // A stranger who did not read the card.
        let port0 = cards[0].port;
        let mut stranger = std::net::TcpStream::connect(("127.0.0.1", port0)).unwrap();
        let m0 = Mesh::start(d0, 0, cards.clone(), main.clone()).unwrap();
        stranger
            .write_all(format!("hello 1 {}\n", "00".repeat(32)).as_bytes())
            .unwrap();
        let m1 = Mesh::start(d1, 1, cards, main).unwrap();
        m1.teller.died(20, DeathCause::Signaled(9));
        let wait = |m: &Mesh, want: &Heard| {
            let until = Instant::now() + Duration::from_secs(10);
            let mut all = Vec::new();
            while Instant::now() < until {
                all.extend(m.heard());
                if all.contains(want) {
                    return all;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            panic!("never heard {want:?}: {all:?}");
        };
        wait(
            &m0,
            &Heard::Died {
                rank: 20,
                cause: DeathCause::Signaled(9),
            },
        );
        // The stranger was refused: its connection is closed.
        let mut b = [0u8; 1];
        stranger
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        assert_eq!(stranger.read(&mut b).unwrap_or(0), 0);
        // Node 0 says a stop, then bye: node 1 hears the stop, and no loss.
        m0.teller.stop(3);
        assert_eq!(m1.agreement.last_round(1, 2, 2), Some(3));
        m0.teller.bye();
        std::thread::sleep(Duration::from_millis(200));
        assert!(!m1.heard().iter().any(|h| matches!(h, Heard::Lost { .. })));

        // A node server 1 that says a death and ends without bye.
        let d = Door::open(Some(IpAddr::V4(Ipv4Addr::LOCALHOST))).unwrap();
        let c0 = Card::parse(&d.card().unwrap()).unwrap();
        let token0 = c0.token.clone();
        let port = c0.port;
        let m = Mesh::start(d, 0, vec![c0.clone(), c0], m1.teller.wake.clone()).unwrap();
        let mut one = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        one.write_all(format!("hello 1 {token0}\ndied 5 exited 3\n").as_bytes())
            .unwrap();
        wait(
            &m,
            &Heard::Died {
                rank: 5,
                cause: DeathCause::Exited(3),
            },
        );
        drop(one);
        wait(&m, &Heard::Lost { node: 1 });
    }
}
