//! Forwarding of the ranks' stdout/stderr, line by line, on its own thread
//! so that a slow terminal or pipe never stalls the PMI event loop.

use std::collections::HashMap;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::unix::pipe::Receiver;
use mio::{Events, Interest, Poll, Token, Waker};

const WAKER: Token = Token(0);
/// A line longer than this is forwarded in pieces.
const MAX_LINE: usize = 64 * 1024;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Stream {
    Out,
    Err,
}

enum Msg {
    Add {
        tag: String,
        stream: Stream,
        pipe: Receiver,
    },
    /// No more pipes will come; exit once all hit EOF or the deadline passes.
    Finish { deadline: Instant },
}

/// Handle to the forwarding thread.
pub struct Forwarder {
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
    pub fn start(label: bool) -> io::Result<Forwarder> {
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

    /// Forward a rank's stdout and stderr (read ends of its pipes).
    pub fn add_rank(&self, tag: &str, stdout: OwnedFd, stderr: OwnedFd) {
        let mut sent = false;
        for (stream, fd) in [(Stream::Out, stdout), (Stream::Err, stderr)] {
            let pipe = Receiver::from(fd);
            // A blocking read would stall every other rank's output behind
            // this one.
            if let Err(e) = pipe.set_nonblocking(true) {
                tracing::warn!("rank {tag}: cannot make its output pipe non-blocking: {e}");
                continue;
            }
            let tag = tag.to_string();
            self.open.fetch_add(1, Ordering::AcqRel);
            if self.tx.send(Msg::Add { tag, stream, pipe }).is_ok() {
                sent = true;
            } else {
                self.open.fetch_sub(1, Ordering::AcqRel);
            }
        }
        // One wake for both.
        if sent {
            let _ = self.waker.wake();
        }
    }

    /// Wait until every pipe reached end-of-file, at most `grace` (ranks may
    /// leave grandchildren holding the pipes open).
    /// When every pipe has already ended and its output is written, the
    /// thread (idle in its poll) is left to the process's exit: waking and
    /// joining it was 0.06 ms of a one-rank job.
    pub fn finish(mut self, grace: Duration) {
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
        while let Ok(msg) = rx.try_recv() {
            match msg {
                Msg::Add {
                    tag,
                    stream,
                    mut pipe,
                } => {
                    let tok = Token(next);
                    next += 1;
                    let registered = poll
                        .registry()
                        .register(&mut pipe, tok, Interest::READABLE)
                        .is_ok();
                    let mut src = Source {
                        tag,
                        stream,
                        pipe,
                        partial: Vec::new(),
                    };
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
    }
    // Whatever is left unterminated is still output.
    for (_, src) in sources.drain() {
        ended(src, label, open);
    }
}

/// A pipe is done: its unterminated last line is still output.
fn ended(mut src: Source, label: bool, open: &AtomicUsize) {
    if !src.partial.is_empty() {
        src.partial.push(b'\n');
        emit(&src, label);
    }
    open.fetch_sub(1, Ordering::AcqRel);
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
