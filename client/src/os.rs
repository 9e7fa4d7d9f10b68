//! OS glue of the client: adopting the inherited PMI descriptors.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// Take ownership of the descriptor named by `PMI_FD`, after checking that
/// it is an open socket (a stale or wrong number must not be adopted).
pub fn adopt_pmi_fd(fd: RawFd) -> std::io::Result<std::os::unix::net::UnixStream> {
    adopt_socket("PMI_FD", fd)
}

/// [`adopt_pmi_fd`] for the descriptor named by variable `var`.
pub fn adopt_socket(var: &str, fd: RawFd) -> std::io::Result<std::os::unix::net::UnixStream> {
    if fd < 0 {
        return Err(std::io::Error::other(format!(
            "{var}={fd} is not a descriptor"
        )));
    }
    // SAFETY: only inspects the descriptor number; fails cleanly if closed.
    let borrowed = unsafe { rustix::fd::BorrowedFd::borrow_raw(fd) };
    let st = rustix::fs::fstat(borrowed)
        .map_err(|e| std::io::Error::other(format!("{var}={fd}: {e}")))?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::Socket {
        return Err(std::io::Error::other(format!("{var}={fd} is not a socket")));
    }
    // Keep it away from programs this process may exec.
    let _ = rustix::io::fcntl_setfd(borrowed, rustix::io::FdFlags::CLOEXEC);
    // SAFETY: the launcher handed this descriptor to this process for PMI
    // and nothing else in the process owns it (callers adopt each variable's
    // descriptor once); it was checked open above.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    Ok(std::os::unix::net::UnixStream::from(owned))
}
