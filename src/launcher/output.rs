//! Forwarding of the ranks' stdout/stderr, line by line, on its own thread
//! so that a slow terminal or pipe never stalls the PMI event loop.
//!
//! The thread starts when a rank first writes ([`Output`]): until then the
//! event loop holds the pipes, and closes those that end without output. A
//! job whose ranks write nothing (most of a small job's start-up figures)
//! never starts it: creating it and exiting with it, a second thread whose
//! CPU the exit's TLB flush must interrupt, cost a one-rank job about
//! 0.08 ms of 1.8 (docs/launch.md).

use std::collections::HashMap;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::unix::pipe::Receiver;
use mio::{Events, Interest, Poll, Registry, Token, Waker};

const WAKER: Token = Token(0);
/// A line longer than this is forwarded in pieces.
const MAX_LINE: usize = 64 * 1024;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Stream {
    Out,
    Err,
}

enum Msg {
    Add(Source),
    /// No more pipes will come; exit once all hit EOF or the deadline passes.
    Finish {
        deadline: Instant,
    },
}

/// The ranks' output: pipes the event loop holds until one has output,
/// then the forwarding thread, which takes every pipe from then on.
pub struct Output {
    label: bool,
    forwarder: Option<Forwarder>,
    /// Pipes without output yet, registered with the event loop.
    held: HashMap<Token, Source>,
    /// The event loop's tokens for held pipes: from here up.
    first_token: usize,
    next: usize,
    /// The thread could not be started: the event loop forwards.
    on_loop: bool,
}

/// Past this many held pipes (16 ranks) the thread starts anyway: a big
/// job's output and pipe ends are then read beside the event loop, not on
/// it.
const HELD_MAX: usize = 32;

/// What a held pipe has for the reader now.
#[derive(Debug, PartialEq, Eq)]
enum Held {
    Output,
    /// Every writer has closed it and nothing is left to read.
    Ended,
    /// Neither (a wake-up without data).
    Quiet,
}

/// The end first, then what is left: a pipe whose writers were all gone
/// before the count can get nothing more, so an empty one is done (asked
/// the other way round, a last write and exit between the two would be
/// lost).
fn held_state(pipe: &Receiver) -> Held {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut fds = [PollFd::new(pipe, PollFlags::IN)];
    let zero = rustix::time::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let ended = poll(&mut fds, Some(&zero)).is_ok() && fds[0].revents().contains(PollFlags::HUP);
    match rustix::io::ioctl_fionread(pipe) {
        Ok(0) if ended => Held::Ended,
        Ok(0) => Held::Quiet,
        // Something to read, or no count: the forwarder reads until the end.
        _ => Held::Output,
    }
}

impl Output {
    /// No thread yet; held pipes get the event loop's tokens from
    /// `first_token` up.
    pub fn new(label: bool, first_token: usize) -> Output {
        Output {
            label,
            forwarder: None,
            held: HashMap::new(),
            first_token,
            next: first_token,
            on_loop: false,
        }
    }

    /// Forward a rank's stdout and stderr (read ends of its pipes).
    pub fn add_rank(&mut self, registry: &Registry, tag: &str, stdout: OwnedFd, stderr: OwnedFd) {
        for (stream, fd) in [(Stream::Out, stdout), (Stream::Err, stderr)] {
            let pipe = Receiver::from(fd);
            // A blocking read would stall every other rank's output behind
            // this one.
            if let Err(e) = pipe.set_nonblocking(true) {
                tracing::warn!("rank {tag}: cannot make its output pipe non-blocking: {e}");
                continue;
            }
            let mut src = Source {
                tag: tag.to_string(),
                stream,
                pipe,
                partial: Vec::new(),
            };
            match &self.forwarder {
                Some(f) => f.add([src]),
                None => {
                    let tok = Token(self.next);
                    self.next += 1;
                    match registry.register(&mut src.pipe, tok, Interest::READABLE) {
                        Ok(()) => {
                            self.held.insert(tok, src);
                        }
                        Err(e) => {
                            tracing::debug!("rank {tag}: output pipe not held ({e})");
                            self.start(registry);
                            match &self.forwarder {
                                Some(f) => f.add([src]),
                                // Dropped: its writes fail, the rank goes on.
                                None => tracing::warn!("rank {tag}: output not forwarded"),
                            }
                        }
                    }
                }
            }
        }
        if self.held.len() > HELD_MAX {
            self.start(registry);
        }
    }

    /// Whether `tok` is a held pipe's.
    pub fn holds(&self, tok: Token) -> bool {
        tok.0 >= self.first_token
    }

    /// The event loop saw held pipe `tok` ready: output starts the thread
    /// (with every held pipe); an end without output closes the pipe here.
    pub fn ready(&mut self, registry: &Registry, tok: Token) {
        let Some(src) = self.held.get(&tok) else {
            return;
        };
        match held_state(&src.pipe) {
            Held::Quiet => {}
            Held::Ended => self.close(registry, tok),
            Held::Output => {
                if !self.on_loop {
                    self.start(registry);
                }
                if !self.on_loop {
                    return;
                }
                // No thread: forward here, now (the poll reports only new
                // output), so the rank never blocks on a full pipe.
                let mut buf = Vec::with_capacity(64 * 1024);
                let more = self
                    .held
                    .get_mut(&tok)
                    .is_some_and(|src| drain(src, &mut buf, self.label));
                if !more {
                    self.close(registry, tok);
                }
            }
        }
    }

    /// Held pipe `tok` has ended: its unterminated last line, if any, is
    /// still output.
    fn close(&mut self, registry: &Registry, tok: Token) {
        if let Some(mut src) = self.held.remove(&tok) {
            let _ = registry.deregister(&mut src.pipe);
            last_line(src, self.label);
        }
    }

    /// Start the thread (once) and hand it every held pipe.
    fn start(&mut self, registry: &Registry) {
        if self.forwarder.is_none() && !self.on_loop {
            match Forwarder::start(self.label) {
                Ok(f) => self.forwarder = Some(f),
                Err(e) => {
                    crate::errln!(
                        "fastpmi: cannot start the output thread ({e}): the event loop forwards the ranks' output"
                    );
                    self.on_loop = true;
                }
            }
        }
        if let Some(f) = &self.forwarder {
            f.add(self.held.drain().map(|(_, mut src)| {
                let _ = registry.deregister(&mut src.pipe);
                src
            }));
        }
    }

    /// Write everything the ranks wrote, waiting at most `grace` for pipes
    /// that are not at end-of-file yet (grandchildren of ranks may hold
    /// them): on the thread, or, where it never started, on this one.
    pub fn finish(&mut self, registry: &Registry, grace: Duration) {
        let mut left = Vec::new();
        for (_, mut src) in self.held.drain() {
            let _ = registry.deregister(&mut src.pipe);
            if held_state(&src.pipe) == Held::Ended {
                last_line(src, self.label);
            } else {
                left.push(src);
            }
        }
        if let Some(f) = self.forwarder.take() {
            f.add(left);
            f.finish(grace);
        } else if !left.is_empty() {
            forward_here(left, self.label, grace);
        }
    }
}

/// What the thread does for `sources` until `grace` has passed, on the
/// calling thread.
fn forward_here(sources: Vec<Source>, label: bool, grace: Duration) {
    let Ok(poll) = Poll::new() else {
        for src in sources {
            last_line(src, label);
        }
        return;
    };
    let (tx, rx) = mpsc::channel();
    let open = AtomicUsize::new(sources.len());
    for src in sources {
        let _ = tx.send(Msg::Add(src));
    }
    let _ = tx.send(Msg::Finish {
        deadline: Instant::now() + grace,
    });
    run(poll, rx, label, &open);
}

/// Handle to the forwarding thread.
struct Forwarder {
    tx: mpsc::Sender<Msg>,
    waker: std::sync::Arc<Waker>,
    thread: Option<JoinHandle<()>>,
    /// Pipes handed over whose output is not all written yet.
    open: Arc<AtomicUsize>,
}

struct Source {
    /// Label of the rank (`rank`, or `job,rank` for spawned jobs).
    tag: String,
    stream: Stream,
    pipe: Receiver,
    partial: Vec<u8>,
}

impl Forwarder {
    fn start(label: bool) -> io::Result<Forwarder> {
        let poll = Poll::new()?;
        let waker = std::sync::Arc::new(Waker::new(poll.registry(), WAKER)?);
        let (tx, rx) = mpsc::channel();
        let open = Arc::new(AtomicUsize::new(0));
        let o = open.clone();
        let thread = std::thread::Builder::new()
            .name("fastpmi-output".into())
            .spawn(move || run(poll, rx, label, &o))?;
        Ok(Forwarder {
            tx,
            waker,
            thread: Some(thread),
            open,
        })
    }

    /// Forward `sources` (with one wake for all).
    fn add(&self, sources: impl IntoIterator<Item = Source>) {
        let mut sent = false;
        for src in sources {
            self.open.fetch_add(1, Ordering::AcqRel);
            if self.tx.send(Msg::Add(src)).is_ok() {
                sent = true;
            } else {
                self.open.fetch_sub(1, Ordering::AcqRel);
            }
        }
        if sent {
            let _ = self.waker.wake();
        }
    }

    /// Wait until every pipe reached end-of-file, at most `grace` (ranks may
    /// leave grandchildren holding the pipes open).
    /// When every pipe has already ended and its output is written, the
    /// thread (idle in its poll) is left to the process's exit: waking and
    /// joining it was 0.06 ms of a one-rank job.
    fn finish(mut self, grace: Duration) {
        if self.open.load(Ordering::Acquire) == 0 {
            return;
        }
        let _ = self.tx.send(Msg::Finish {
            deadline: Instant::now() + grace,
        });
        let _ = self.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(mut poll: Poll, rx: mpsc::Receiver<Msg>, label: bool, open: &AtomicUsize) {
    let mut events = Events::with_capacity(256);
    let mut sources: HashMap<Token, Source> = HashMap::new();
    let mut next = 1usize;
    let mut deadline: Option<Instant> = None;
    // Filled by reads, never zeroed: a rank that writes little touches
    // one page of it, not sixteen.
    let mut buf = Vec::with_capacity(64 * 1024);
    loop {
        // Messages first: one sent before the first poll needs no wake.
        while let Ok(msg) = rx.try_recv() {
            match msg {
                Msg::Add(mut src) => {
                    let tok = Token(next);
                    next += 1;
                    let registered = poll
                        .registry()
                        .register(&mut src.pipe, tok, Interest::READABLE)
                        .is_ok();
                    // Data may already be waiting: edge-triggered polls
                    // report only new edges.
                    if drain(&mut src, &mut buf, label) && registered {
                        sources.insert(tok, src);
                    } else {
                        if registered {
                            let _ = poll.registry().deregister(&mut src.pipe);
                        }
                        ended(src, label, open);
                    }
                }
                Msg::Finish { deadline: d } => deadline = Some(d),
            }
        }
        if let Some(d) = deadline {
            if sources.is_empty() || Instant::now() >= d {
                break;
            }
        }
        let timeout = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if let Err(e) = poll.poll(&mut events, timeout) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        for ev in events.iter() {
            if ev.token() == WAKER {
                continue;
            }
            let tok = ev.token();
            let Some(src) = sources.get_mut(&tok) else {
                continue;
            };
            if !drain(src, &mut buf, label) {
                let mut src = sources.remove(&tok).expect("present");
                let _ = poll.registry().deregister(&mut src.pipe);
                ended(src, label, open);
            }
        }
    }
    // Whatever is left unterminated is still output.
    for (_, src) in sources.drain() {
        ended(src, label, open);
    }
}

/// A pipe is done: its unterminated last line is still output.
fn ended(src: Source, label: bool, open: &AtomicUsize) {
    last_line(src, label);
    open.fetch_sub(1, Ordering::AcqRel);
}

/// Write a pipe's unterminated last line, if any.
fn last_line(mut src: Source, label: bool) {
    if !src.partial.is_empty() {
        src.partial.push(b'\n');
        emit(&src, label);
    }
}

/// Read what is available; forward complete lines. Returns false at EOF.
fn drain(src: &mut Source, buf: &mut Vec<u8>, label: bool) -> bool {
    loop {
        buf.clear();
        let read = rustix::io::read(src.pipe.as_fd(), rustix::buffer::spare_capacity(buf));
        match read.map_err(io::Error::from) {
            Ok(0) => return false,
            Ok(n) => {
                src.partial.extend_from_slice(&buf[..n]);
                if let Some(last_nl) = src.partial.iter().rposition(|&b| b == b'\n') {
                    let rest = src.partial.split_off(last_nl + 1);
                    emit(src, label);
                    src.partial = rest;
                } else if src.partial.len() >= MAX_LINE {
                    src.partial.push(b'\n');
                    emit(src, label);
                    src.partial.clear();
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return false,
        }
    }
}

/// Write the complete lines in `src.partial` (it ends with a newline).
fn emit(src: &Source, label: bool) {
    let data = &src.partial;
    let out: Vec<u8> = if label {
        let prefix = format!("[{}] ", src.tag);
        let mut v = Vec::with_capacity(data.len() + 16);
        for line in data.split_inclusive(|&b| b == b'\n') {
            v.extend_from_slice(prefix.as_bytes());
            v.extend_from_slice(line);
        }
        v
    } else {
        data.clone()
    };
    // A closed stdout (e.g. `| head`) must not kill the launcher: drop output.
    let _ = match src.stream {
        Stream::Out => io::stdout()
            .lock()
            .write_all(&out)
            .and_then(|_| io::stdout().lock().flush()),
        Stream::Err => io::stderr().lock().write_all(&out),
    };
}
