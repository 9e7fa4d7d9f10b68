//! OS glue of the launcher: socketpairs, process spawning, signals, reaping.
//! The only `unsafe` of the launcher lives here.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use rustix::process::{Pid, Signal};

/// A connected pair of stream sockets, both close-on-exec. The child's end
/// is made inheritable only inside the child, between fork and exec.
pub fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    let (a, b) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    Ok((a, b))
}

/// Raise the soft open-file limit to the hard limit: each rank costs the
/// launcher three descriptors (PMI socket, stdout and stderr pipes).
pub fn raise_nofile_limit() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut lim = getrlimit(Resource::Nofile);
    if lim.current != lim.maximum {
        lim.current = lim.maximum;
        let _ = setrlimit(Resource::Nofile, lim);
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// Mark every descriptor the launcher inherited (beyond stdio) close-on-exec,
/// so ranks get only what the launcher hands them on purpose.
pub fn cloexec_inherited_fds() {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let fds: Vec<RawFd> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: fcntl on a descriptor number only changes its flags; a
        // number that was closed meanwhile (the read_dir handle) fails harmlessly.
        let bfd = unsafe { rustix::fd::BorrowedFd::borrow_raw(fd) };
        if let Ok(flags) = rustix::io::fcntl_getfd(bfd) {
            let _ = rustix::io::fcntl_setfd(bfd, flags | rustix::io::FdFlags::CLOEXEC);
        }
    }
}

/// What one rank process gets.
pub struct RankCommand<'a> {
    pub program: &'a Path,
    pub args: &'a [OsString],
    pub env: &'a [(OsString, OsString)],
    pub env_remove: &'a [&'a str],
    pub wdir: Option<&'a Path>,
    /// Descriptors the rank inherits: `(launcher's fd, number in the rank)`.
    /// Targets must be 3 and up, distinct.
    pub pass_fds: &'a [(RawFd, RawFd)],
    pub stdin_inherit: bool,
}

/// A started rank: its pid and the read ends of its output pipes.
pub struct Spawned {
    pub pid: u32,
    pub stdout: std::process::ChildStdout,
    pub stderr: std::process::ChildStderr,
}

/// Start one rank. It dies with the launcher (`PR_SET_PDEATHSIG`) and
/// inherits nothing but stdio and `keep_fds`: every other descriptor of the
/// launcher is close-on-exec.
pub fn spawn_rank(rc: &RankCommand<'_>) -> io::Result<Spawned> {
    let mut cmd = Command::new(rc.program);
    cmd.args(rc.args);
    for k in rc.env_remove {
        cmd.env_remove(k);
    }
    for (k, v) in rc.env {
        cmd.env(k, v);
    }
    if let Some(d) = rc.wdir {
        cmd.current_dir(d);
    }
    cmd.stdin(if rc.stdin_inherit {
        Stdio::inherit()
    } else {
        Stdio::null()
    });
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let pass: Vec<(RawFd, RawFd)> = rc.pass_fds.to_vec();
    let parent = rustix::process::getpid();
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe operations are allowed. It makes raw syscalls only
    // (prctl, getppid, fcntl, dup2 through rustix), allocates nothing and
    // takes no locks; `pass` was allocated before the fork and is only read.
    // The descriptors it borrows are open in the launcher, hence in the child.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            // The launcher may have died before prctl took effect.
            if rustix::process::getppid() != Some(parent) {
                return Err(io::Error::other("launcher exited"));
            }
            // Two steps so a source number that is another's target is not
            // clobbered: park every source above the targets (close-on-exec
            // copies), then dup2 onto the small numbers (dup2 clears CLOEXEC).
            let mut parked = [-1 as RawFd; 8];
            for (i, &(src, _)) in pass.iter().enumerate().take(parked.len()) {
                let b = rustix::fd::BorrowedFd::borrow_raw(src);
                let tmp = rustix::io::fcntl_dupfd_cloexec(b, 64)?;
                parked[i] = std::os::fd::IntoRawFd::into_raw_fd(tmp);
            }
            for (i, &(_, dst)) in pass.iter().enumerate().take(parked.len()) {
                let tmp = rustix::fd::BorrowedFd::borrow_raw(parked[i]);
                let raw = libc::dup2(tmp.as_raw_fd(), dst);
                if raw < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| io::Error::other("no stdout pipe"))?;
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| io::Error::other("no stderr pipe"))?;
    // The child is reaped with waitpid(-1) by the event loop; dropping the
    // handle neither waits nor kills.
    Ok(Spawned {
        pid: child.id(),
        stdout,
        stderr,
    })
}

/// Resolve `program` the way execvp would, to report a missing program once
/// and clearly instead of per rank.
pub fn resolve_program(program: &OsString, wdir: Option<&Path>) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let name = Path::new(program);
    let check = |p: &Path| -> Result<(), String> {
        match std::fs::metadata(p) {
            Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(()),
            Ok(m) if m.is_dir() => Err(format!("{}: is a directory", p.display())),
            Ok(_) => Err(format!(
                "{}: permission denied (not executable)",
                p.display()
            )),
            Err(e) => Err(format!("{}: {}", p.display(), io_text(&e))),
        }
    };
    if program.to_string_lossy().contains('/') {
        let full = match (name.is_relative(), wdir) {
            (true, Some(d)) => d.join(name),
            _ => name.to_path_buf(),
        };
        check(&full)?;
        return Ok(name.to_path_buf());
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    for dir in std::env::split_paths(&path) {
        let cand = dir.join(name);
        if check(&cand).is_ok() {
            return Ok(cand);
        }
    }
    Err(format!("{}: command not found", name.display()))
}

fn io_text(e: &io::Error) -> String {
    let s = e.to_string();
    s.split(" (os error").next().unwrap_or(&s).to_string()
}

/// Send `sig` to `pid`; a process that is already gone is not an error.
pub fn signal(pid: u32, sig: Signal) {
    if let Some(p) = Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(p, sig);
    }
}

/// Reap every exited child without blocking.
pub fn reap() -> Vec<(u32, ExitStatus)> {
    let mut out = Vec::new();
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: waitpid with a valid out-pointer to a local; WNOHANG never blocks.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            break;
        }
        out.push((pid as u32, ExitStatus::from_raw(status)));
    }
    out
}

/// Describe an exit status the way users read it.
pub fn describe_status(st: ExitStatus) -> String {
    match (st.code(), st.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(s)) => format!("was killed by signal {s} ({})", signal_name(s)),
        _ => "ended".to_string(),
    }
}

/// Shell convention: code, or 128+signal.
pub fn status_code(st: ExitStatus) -> i32 {
    match (st.code(), st.signal()) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        _ => 1,
    }
}

pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}
