//! The launcher's rendezvous: a Unix socket `<dir>/<launcher pid>.sock` in
//! a per-user directory (`$XDG_RUNTIME_DIR/fastpmi/`, else
//! `/tmp/fastpmi-<uid>/`), directory 0700 and socket 0600, serving only
//! peers of the launcher's uid (`SO_PEERCRED`).
//!
//! Connections are served on their own threads, never on the event loop;
//! each has read and write deadlines and at most [`MAX_CLIENTS`] are served
//! at once, so a client that connects and never reads or writes costs one
//! sleeping thread for a few seconds and nothing else.

use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::proto::{self, Reply, Request};

/// Clients served at once; more are told to retry and closed.
pub const MAX_CLIENTS: usize = 8;
/// How long a refused client's unread bytes are drained before closing.
const LINGER: Duration = Duration::from_millis(200);
/// How long the accept thread waits for a same-user request line before
/// it hands the connection to a thread of its own.
const FAST_WAIT: Duration = Duration::from_millis(20);
/// How long a client may take to send its request or read the reply.
pub const CLIENT_DEADLINE: Duration = Duration::from_secs(2);

pub use crate::private_dir::{check_dir, dir, ensure_dir};

/// The launcher pid a rendezvous socket's file name (`<pid>.sock`) names.
pub fn socket_pid(name: &std::ffi::OsStr) -> Option<u32> {
    name.to_str()?.strip_suffix(".sock")?.parse().ok()
}

/// The socket of launcher `pid` in `dir`.
pub fn socket_path(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("{pid}.sock"))
}

/// What answers requests (called on a connection's thread).
pub type Handler = Arc<dyn Fn(Request) -> Reply + Send + Sync>;

/// A listening rendezvous; dropping it removes the socket file.
pub struct Rendezvous {
    path: PathBuf,
    inode: u64,
}

impl Rendezvous {
    /// Listen at `<dir>/<our pid>.sock`. Connections wait in the backlog
    /// until the listener is handed to [`serve`] (the launcher does that
    /// when the first one arrives: most jobs are never asked about, and
    /// they start and end one thread fewer).
    pub fn bind(dir: &Path) -> io::Result<(Rendezvous, UnixListener)> {
        ensure_dir(dir)?;
        remove_dead(dir);
        let path = socket_path(dir, std::process::id());
        // A file of that name is from a dead process that had our pid.
        let _ = fs::remove_file(&path);
        let listener = UnixListener::bind(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600))?;
        let inode = fs::symlink_metadata(&path)?.ino();
        tracing::debug!(path = %path.display(), "rendezvous listening");
        Ok((Rendezvous { path, inode }, listener))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Rendezvous {
    fn drop(&mut self) {
        // Only ours: never a socket a later process with our pid created.
        if fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.inode) {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Remove the sockets in `dir` of launchers that are gone (their process
/// no longer exists: killed with SIGKILL, they could not remove their own),
/// so that the directory does not grow with them. A socket whose pid lives
/// on, perhaps in another process, is left to `fastpmi ps`, which asks it.
pub fn remove_dead(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Some(pid) = socket_pid(&e.file_name()) else {
            continue;
        };
        let is_socket = e
            .file_type()
            .is_ok_and(|t| std::os::unix::fs::FileTypeExt::is_socket(&t));
        if is_socket && !crate::private_dir::process_alive(pid) {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// Serve the connections of `listener` with `handler`, on a thread of its
/// own (connections each on theirs, see the module docs).
pub fn serve(listener: UnixListener, handler: Handler) -> io::Result<()> {
    let active = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("fastpmi-rendezvous".into())
        .spawn(move || accept_loop(listener, handler, active))?;
    Ok(())
}

fn accept_loop(listener: UnixListener, handler: Handler, active: Arc<AtomicUsize>) {
    super::ahead_of_ranks();
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        if active.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
            active.fetch_sub(1, Ordering::AcqRel);
            let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
            // Short: this is the accept loop.
            refuse(
                &mut stream,
                &Reply::error("too many clients; try again"),
                Duration::from_millis(20),
            );
            continue;
        }
        let rest = match try_fast(&stream, &handler) {
            Fast::Done => {
                active.fetch_sub(1, Ordering::AcqRel);
                continue;
            }
            Fast::Rest(rest) => Some(rest),
            Fast::Slow => None,
        };
        let (h, a) = (handler.clone(), active.clone());
        let spawned = std::thread::Builder::new()
            .name("fastpmi-rendezvous-client".into())
            .spawn(move || {
                // A real-time class is not inherited.
                super::ahead_of_ranks();
                match rest {
                    Some(rest) => {
                        let _ = stream.set_write_timeout(Some(CLIENT_DEADLINE));
                        let _ = stream.write_all(&rest);
                    }
                    None => serve_client(stream, &h),
                }
                a.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            active.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

enum Fast {
    /// Answered completely.
    Done,
    /// Answered, but this much of the reply did not fit the socket buffer.
    Rest(Vec<u8>),
    /// Not taken: serve it on a thread of its own.
    Slow,
}

/// `fastpmi ps` has sent its whole request by the time the launcher accepts
/// the connection: a `ps` from this user whose request line is already
/// there is answered on the accept thread (one thread start and one
/// scheduling hand-off less, which is what a loaded node makes slow; the
/// answer needs nothing of the event loop). Anything else (no full line
/// yet, another operation, another user, bad input) is left unread for the
/// thread path, which refuses or serves it as always.
fn try_fast(stream: &UnixStream, handler: &Handler) -> Fast {
    let me = rustix::process::geteuid().as_raw();
    if !rustix::net::sockopt::socket_peercred(stream).is_ok_and(|c| c.uid.as_raw() == me) {
        return Fast::Slow;
    }
    // `fastpmi ps` writes its request right after connecting, but on a
    // loaded node the accept can come first: wait for it a little here
    // rather than start a thread (the slow path on a busy node).
    let mut fds = [rustix::event::PollFd::new(
        stream,
        rustix::event::PollFlags::IN,
    )];
    let wait = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: FAST_WAIT.as_nanos() as _,
    };
    if !matches!(rustix::event::poll(&mut fds, Some(&wait)), Ok(1..)) {
        return Fast::Slow;
    }
    let mut buf = [0u8; 256];
    let flags = rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT;
    let Ok((n, _)) = rustix::net::recv(stream, &mut buf[..], flags) else {
        return Fast::Slow;
    };
    let Some(end) = buf[..n].iter().position(|&b| b == b'\n') else {
        return Fast::Slow;
    };
    let req = match proto::parse_request(buf[..end].trim_ascii()) {
        Ok(req) if req.op == proto::Op::Ps => req,
        _ => return Fast::Slow,
    };
    // Consume the line peeked at (it is all there: this does not block).
    if (&*stream).read_exact(&mut buf[..end + 1]).is_err() {
        return Fast::Done;
    }
    let Ok(mut line) = serde_json::to_vec(&handler(req)) else {
        return Fast::Done;
    };
    line.push(b'\n');
    if stream.set_nonblocking(true).is_err() {
        return Fast::Done;
    }
    let mut sent = 0;
    while sent < line.len() {
        match (&*stream).write(&line[sent..]) {
            Ok(0) => return Fast::Done,
            Ok(k) => sent += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if stream.set_nonblocking(false).is_err() {
                    return Fast::Done;
                }
                return Fast::Rest(line.split_off(sent));
            }
            Err(_) => return Fast::Done,
        }
    }
    Fast::Done
}

fn send(stream: &mut UnixStream, reply: &Reply) -> io::Result<()> {
    let mut line = serde_json::to_vec(reply).map_err(io::Error::other)?;
    line.push(b'\n');
    stream.write_all(&line)
}

/// Send a refusal before the request was read: then discard (a bounded
/// amount of) what the client sent, so closing does not reset the
/// connection and lose the reply.
fn refuse(stream: &mut UnixStream, reply: &Reply, linger: Duration) {
    if send(stream, reply).is_err() {
        return;
    }
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let _ = stream.set_read_timeout(Some(linger));
    let _ = io::copy(&mut (&*stream).take(64 * 1024), &mut io::sink());
}

fn serve_client(mut stream: UnixStream, handler: &Handler) {
    let _ = stream.set_read_timeout(Some(CLIENT_DEADLINE));
    let _ = stream.set_write_timeout(Some(CLIENT_DEADLINE));
    let me = rustix::process::geteuid().as_raw();
    match rustix::net::sockopt::socket_peercred(&stream) {
        Ok(c) if c.uid.as_raw() == me => {}
        Ok(c) => {
            tracing::warn!(
                "rendezvous: refused a connection from uid {} pid {}",
                c.uid.as_raw(),
                c.pid.as_raw_nonzero()
            );
            refuse(
                &mut stream,
                &Reply::error(format!(
                    "refused: uid {} is not the launcher's user",
                    c.uid.as_raw()
                )),
                LINGER,
            );
            return;
        }
        Err(e) => {
            refuse(
                &mut stream,
                &Reply::error(format!("refused: no peer credentials: {e}")),
                LINGER,
            );
            return;
        }
    }
    let mut line = Vec::new();
    let mut reader = BufReader::new((&stream).take(proto::MAX_REQUEST as u64 + 1));
    match reader.read_until(b'\n', &mut line) {
        Ok(_) if line.len() > proto::MAX_REQUEST => {
            refuse(
                &mut stream,
                &Reply::error(format!("request longer than {} bytes", proto::MAX_REQUEST)),
                LINGER,
            );
            return;
        }
        Ok(0) => return,
        Ok(_) => {}
        // Nothing (complete) within the deadline: drop it.
        Err(_) => return,
    }
    let reply = match proto::parse_request(line.trim_ascii()) {
        Ok(req) => handler(req),
        Err(e) => Reply::error(e.to_string()),
    };
    let _ = send(&mut stream, &reply);
}

/// Send `req` to the socket at `path` and read the reply.
pub fn query(path: &Path, req: &Request, timeout: Duration) -> io::Result<Reply> {
    let buf = query_raw(path, req, timeout)?;
    serde_json::from_slice(buf.trim_ascii()).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unreadable reply from {}: {e}", path.display()),
        )
    })
}

/// Send `req` to the socket at `path` and return the reply's bytes unparsed.
pub fn query_raw(path: &Path, req: &Request, timeout: Duration) -> io::Result<Vec<u8>> {
    let mut s = UnixStream::connect(path)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    let mut line = serde_json::to_vec(req).map_err(io::Error::other)?;
    line.push(b'\n');
    s.write_all(&line)?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    Ok(buf)
}
