//! OS glue of the launcher: socketpairs, process spawning, signals, reaping.
//! The only `unsafe` of the launcher lives here.

mod forkers;
pub mod hwloc;
mod spawn;

pub use forkers::{devnull, forkers_for, ForkDone, ForkJob, Forkers};
pub use spawn::{CpuSet, ExecImage, RankCommand, Spawned, Spawner, SLOTS_PER_SPAWNER};

use std::ffi::OsString;
use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

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

/// How many CPUs this process may run on (1 if the kernel does not say).
pub fn usable_cpus() -> usize {
    rustix::thread::sched_getaffinity(None).map_or(1, |s| s.count() as usize)
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

/// Descriptors the launcher holds per rank: PMI socket, out-of-band socket,
/// stdout and stderr pipes.
const FDS_PER_RANK: u64 = 4;
/// Descriptors per forker thread: its slots, and both ends of each of a
/// starting rank's four.
const FDS_PER_FORKER: u64 = SLOTS_PER_SPAWNER as u64 + 8;

/// Grow the descriptor table once, up front, to what a job of `ranks`
/// ranks started by `forkers` threads needs (capped by `nofile`, the
/// open-file limit [`raise_nofile_limit`] returns), instead of by doubling
/// while the ranks start.
///
/// Why: in a process with threads, every growth of the table waits for an
/// RCU grace period (`expand_fdtable` calls `synchronize_rcu` when the table
/// is shared), and while it waits no rank starts: on a 2-vCPU VM each wait
/// left both CPUs idle for 5-30 ms, five times during a 1024-rank launch
/// (docs/launch.md). Call it before the launcher starts threads: a
/// single-threaded process grows its table without waiting. Best effort: a
/// failure only brings the waits back.
pub fn reserve_descriptors(ranks: u32, forkers: usize, nofile: u64) {
    let want = u64::from(ranks) * FDS_PER_RANK
        + forkers as u64 * FDS_PER_FORKER
        // stdio, epoll, signals, waker, listeners, the segment, hwloc's file
        + 64;
    // The table starts with 64 slots (NR_OPEN_DEFAULT).
    let Ok(top) = i32::try_from(want.min(nofile).saturating_sub(1)) else {
        return;
    };
    if top < 64 {
        return;
    }
    let Ok(null) = devnull() else {
        return;
    };
    // The lowest free descriptor >= top: the table grows to hold it, and
    // keeps its size once both are closed (dropped here).
    let _high = rustix::io::fcntl_dupfd_cloexec(&null, top);
}

/// One malloc arena for all of the launcher's threads. glibc gives each
/// new thread that allocates an arena of its own (a 64 MiB reservation,
/// its first pages faulted in, trimmed again at exit), up to 8 per CPU:
/// the output thread and every forker paid for one, 3% of a one- and a
/// 16-rank launch on a 2-vCPU VM. The threads allocate little and rarely,
/// so sharing one arena's lock costs nothing measurable. Call it before
/// the launcher starts threads.
pub fn one_malloc_arena() {
    // SAFETY: mallopt only changes a malloc setting; called while the
    // launcher has a single thread.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Mark every descriptor the launcher inherited (beyond stdio) close-on-exec,
/// so ranks get only what the launcher hands them on purpose.
pub fn cloexec_inherited_fds() {
    // One call on Linux 5.11 and later; listing /proc/self/fd cost 30-50 µs
    // of a one-rank launch.
    // SAFETY: CLOSE_RANGE_CLOEXEC closes nothing, it only sets a flag on
    // every open descriptor from 3 up.
    if unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    } == 0
    {
        return;
    }
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

/// Why a program cannot be run.
#[derive(Debug, thiserror::Error)]
pub enum ProgramError {
    #[error("{}: is a directory", .0.display())]
    IsDirectory(PathBuf),
    #[error("{}: permission denied (not executable)", .0.display())]
    NotExecutable(PathBuf),
    #[error("{}: {}", .0.display(), io_text(.1))]
    Unreadable(PathBuf, io::Error),
    #[error("{}: command not found", .0.display())]
    NotFound(PathBuf),
}

/// Resolve `program` the way execvp would, to report a missing program once
/// and clearly instead of per rank.
pub fn resolve_program(program: &OsString, wdir: Option<&Path>) -> Result<PathBuf, ProgramError> {
    use std::os::unix::fs::PermissionsExt;
    let name = Path::new(program);
    let check = |p: &Path| -> Result<(), ProgramError> {
        match std::fs::metadata(p) {
            Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(()),
            Ok(m) if m.is_dir() => Err(ProgramError::IsDirectory(p.to_path_buf())),
            Ok(_) => Err(ProgramError::NotExecutable(p.to_path_buf())),
            Err(e) => Err(ProgramError::Unreadable(p.to_path_buf(), e)),
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
    Err(ProgramError::NotFound(name.to_path_buf()))
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

/// The signal of a name the out-of-band channel accepts
/// (`fastpmi_codec::oob::SIGNALS`).
pub fn signal_by_name(name: &str) -> Option<Signal> {
    let raw = match name {
        "SIGHUP" => libc::SIGHUP,
        "SIGINT" => libc::SIGINT,
        "SIGQUIT" => libc::SIGQUIT,
        "SIGUSR1" => libc::SIGUSR1,
        "SIGUSR2" => libc::SIGUSR2,
        "SIGALRM" => libc::SIGALRM,
        "SIGTERM" => libc::SIGTERM,
        "SIGCONT" => libc::SIGCONT,
        "SIGURG" => libc::SIGURG,
        "SIGWINCH" => libc::SIGWINCH,
        "SIGIO" => libc::SIGIO,
        "SIGPWR" => libc::SIGPWR,
        _ => return None,
    };
    Signal::from_named_raw(raw)
}

/// A read-only mapping of the file at `path` (None when it cannot be
/// opened or mapped, or is empty).
pub fn map_readonly(path: &Path) -> Option<memmap2::Mmap> {
    let f = std::fs::File::open(path).ok()?;
    // SAFETY: a private read-only mapping, only read through the returned
    // slice; a file truncated meanwhile can fault this process as reading
    // any program being replaced would, and the launcher maps only the
    // programs it is about to start.
    unsafe { memmap2::Mmap::map(&f) }.ok()
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
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        _ => "signal",
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_out_of_band_signal_name_has_a_signal() {
        for name in fastpmi_codec::oob::SIGNALS {
            assert!(super::signal_by_name(name).is_some(), "{name}");
        }
    }
}
