//! The watch of a running job from the harness's own thread: its output
//! pipes, read without blocking, and a pidfd that is readable once it has
//! exited (see the parent module).

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

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
                Ok(n) => {
                    self.bytes.extend_from_slice(&buf[..n]);
                    if let Some(k) = self.keep_tail {
                        if self.bytes.len() > 2 * k {
                            let cut = self.bytes.len() - k;
                            self.bytes.drain(..cut);
                        }
                    }
                }
                Err(rustix::io::Errno::AGAIN) => break,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => break self.fd = None,
            }
        }
    }

    pub(super) fn text(&self) -> String {
        let start = self
            .keep_tail
            .map_or(0, |k| self.bytes.len().saturating_sub(k));
        String::from_utf8_lossy(&self.bytes[start..]).into_owned()
    }
}

/// Read the pipes until the launcher exits (`pidfd` readable: the moment
/// returned) or `deadline` (`None`).
pub(super) fn watch(
    pidfd: &OwnedFd,
    out: &mut Pipe,
    err: &mut Pipe,
    deadline: Instant,
) -> Option<Instant> {
    use rustix::event::{PollFd, PollFlags};
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        let timeout = rustix::time::Timespec {
            tv_sec: left.as_secs() as _,
            tv_nsec: left.subsec_nanos() as _,
        };
        let (exited, o, e) = {
            let mut fds = vec![PollFd::new(pidfd, PollFlags::IN)];
            for p in [&*out, &*err] {
                if let Some(fd) = &p.fd {
                    fds.push(PollFd::new(fd, PollFlags::IN));
                }
            }
            match rustix::event::poll(&mut fds, Some(&timeout)) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(_) => return None,
            }
            let ready = |i: usize| fds.get(i).is_some_and(|f| !f.revents().is_empty());
            let now = Instant::now();
            let o = out.fd.is_some() && ready(1);
            let e = err.fd.is_some() && ready(if out.fd.is_some() { 2 } else { 1 });
            (ready(0).then_some(now), o, e)
        };
        if o {
            out.read();
        }
        if e {
            err.read();
        }
        if exited.is_some() {
            return exited;
        }
    }
}

/// Read both pipes until they are closed, at most `limit`; whether they
/// were.
pub(super) fn drain_until_closed(out: &mut Pipe, err: &mut Pipe, limit: Duration) -> bool {
    use rustix::event::{PollFd, PollFlags};
    let deadline = Instant::now() + limit;
    while out.fd.is_some() || err.fd.is_some() {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return false;
        };
        let timeout = rustix::time::Timespec {
            tv_sec: left.as_secs() as _,
            tv_nsec: left.subsec_nanos() as _,
        };
        {
            let mut fds: Vec<PollFd<'_>> = [&out.fd, &err.fd]
                .into_iter()
                .flatten()
                .map(|fd| PollFd::new(fd, PollFlags::IN))
                .collect();
            let _ = rustix::event::poll(&mut fds, Some(&timeout));
        }
        out.read();
        err.read();
    }
    true
}
