//! The watch of a running job from the harness's own thread: its output
//! pipes, read without blocking, and a pidfd that is readable once it has
//! exited (see the parent module).

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

/// Append `data` to captured output, keeping about the last `keep_tail`
/// bytes (at most twice that between trims) when it says so.
pub(super) fn append(v: &mut Vec<u8>, data: &[u8], keep_tail: Option<usize>) {
    v.extend_from_slice(data);
    if let Some(k) = keep_tail {
        if v.len() > 2 * k {
            let cut = v.len() - k;
            v.drain(..cut);
        }
    }
}

/// Captured output as text: its last `keep_tail` bytes, or all of it.
pub(super) fn text(v: &[u8], keep_tail: Option<usize>) -> String {
    let start = keep_tail.map_or(0, |k| v.len().saturating_sub(k));
    String::from_utf8_lossy(&v[start..]).into_owned()
}

/// One of the launcher's output pipes, read without blocking.
pub(super) struct Pipe {
    fd: Option<OwnedFd>,
    bytes: Vec<u8>,
    keep_tail: Option<usize>,
}

impl Pipe {
    pub(super) fn new(fd: OwnedFd, keep_tail: Option<usize>) -> Pipe {
        // Without it a read would block the watch; then take the pipe as
        // closed rather than hang.
        let fd = rustix::io::ioctl_fionbio(&fd, true).is_ok().then_some(fd);
        Pipe {
            fd,
            bytes: Vec::new(),
            keep_tail,
        }
    }

    /// Read what is there; the pipe is closed at end of file or error.
    fn read(&mut self) {
        let Some(fd) = &self.fd else { return };
        let mut buf = [0u8; 16 * 1024];
        loop {
            match rustix::io::read(fd, &mut buf) {
                Ok(0) => break self.fd = None,
                Ok(n) => append(&mut self.bytes, &buf[..n], self.keep_tail),
                Err(rustix::io::Errno::AGAIN) => break,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => break self.fd = None,
            }
        }
    }

    pub(super) fn text(&self) -> String {
        text(&self.bytes, self.keep_tail)
    }
}

/// Wait at most `left` for one of the open pipes or `pidfd` to be readable,
/// then read what the pipes hold; the moment `pidfd` was seen readable.
/// An error only where `poll` itself fails (never for an interruption).
fn step(
    pidfd: Option<&OwnedFd>,
    out: &mut Pipe,
    err: &mut Pipe,
    left: Duration,
) -> Result<Option<Instant>, rustix::io::Errno> {
    use rustix::event::{PollFd, PollFlags};
    let timeout = rustix::time::Timespec {
        tv_sec: left.as_secs() as _,
        tv_nsec: left.subsec_nanos() as _,
    };
    let exited = {
        let mut fds: Vec<PollFd<'_>> = pidfd
            .into_iter()
            .chain(out.fd.as_ref())
            .chain(err.fd.as_ref())
            .map(|fd| PollFd::new(fd, PollFlags::IN))
            .collect();
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e),
        }
        let now = Instant::now();
        (pidfd.is_some() && !fds[0].revents().is_empty()).then_some(now)
    };
    out.read();
    err.read();
    Ok(exited)
}

/// Read the pipes until the launcher exits (`pidfd` readable: the moment
/// returned) or `deadline` (`None`, as when `poll` fails).
pub(super) fn watch(
    pidfd: &OwnedFd,
    out: &mut Pipe,
    err: &mut Pipe,
    deadline: Instant,
) -> Option<Instant> {
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        if let Some(exited) = step(Some(pidfd), out, err, left).ok()? {
            return Some(exited);
        }
    }
}

/// Read both pipes until they are closed, at most `limit`; whether they
/// were.
pub(super) fn drain_until_closed(out: &mut Pipe, err: &mut Pipe, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while out.fd.is_some() || err.fd.is_some() {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return false;
        };
        if step(None, out, err, left).is_err() {
            return false;
        }
    }
    true
}
