//! Starting rank processes with vfork semantics.
//!
//! `std::process::Command` with a `pre_exec` step forks the launcher (page
//! tables of a multi-threaded process with large mappings) for every rank.
//! Here a rank is created with `clone(CLONE_VM | CLONE_VFORK)`, as glibc's
//! `posix_spawn` does: the child borrows the launcher's memory until it
//! execs, so creating it costs about as much as `posix_spawn`, while the
//! child can still do what `posix_spawn` cannot: `PR_SET_PDEATHSIG`. The
//! child function makes raw, async-signal-safe libc calls only (sigaction,
//! prctl, getppid, close_range, dup2, chdir, sched_setaffinity, sigprocmask,
//! execve, _exit), reads data the parent prepared (the binding's CPU mask
//! too), and writes nothing but its error slot.
//!
//! What one rank needs is prepared once per application ([`ExecImage`]:
//! program, argv, the environment shared by all its ranks) so that a rank
//! costs the launcher only its own few PMI variables, two pipes and the
//! clone.

use std::ffi::{c_char, c_int, c_void, CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

/// Stack of the vfork child: it runs a handful of libc calls, then execs.
const CHILD_STACK: usize = 64 * 1024;
/// Most descriptors a rank gets placed: stdio, the PMI socket, the job's
/// segment and its parent's, the out-of-band channel (numbers 0 to 6).
const MAX_MOVES: usize = 7;
/// Descriptors a spawner holds for its children: one slot per move.
pub const SLOTS_PER_SPAWNER: usize = MAX_MOVES;
/// A spawner's slots (see [`Spawner`]) are at or above this number, clear
/// of every target: as low as that allows, because every child copies (and
/// closes at exec) each descriptor below its spawner's last slot.
const SLOT_FLOOR: RawFd = MAX_MOVES as RawFd;

/// Program, arguments and environment shared by every rank of one
/// application, built once.
pub struct ExecImage {
    program: CString,
    /// `argv` (argv[0] is the program as resolved) then the same behind
    /// `/bin/sh` for a script without `#!` (what execvp does on ENOEXEC).
    argv: Vec<CString>,
    sh_argv: Vec<CString>,
    /// `KEY=value` of every variable except the per-rank ones.
    env: Vec<CString>,
    wdir: Option<CString>,
}

fn cstr(b: &[u8], what: &str) -> io::Result<CString> {
    CString::new(b).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} contains a NUL byte"),
        )
    })
}

fn env_entry(k: &OsStr, v: &OsStr) -> io::Result<CString> {
    let mut b = Vec::with_capacity(k.len() + v.len() + 1);
    b.extend_from_slice(k.as_bytes());
    b.push(b'=');
    b.extend_from_slice(v.as_bytes());
    cstr(&b, "an environment variable")
}

impl ExecImage {
    /// `inherited` is the launcher's environment, `remove` the names a rank
    /// must not inherit, `set` the application's variables (later wins) and
    /// `per_rank` the names each rank sets itself (they win over all).
    pub fn new(
        program: &Path,
        args: &[OsString],
        inherited: impl IntoIterator<Item = (OsString, OsString)>,
        remove: &[&str],
        set: &[(OsString, OsString)],
        per_rank: &[&OsStr],
        wdir: Option<&Path>,
    ) -> io::Result<ExecImage> {
        let program_c = cstr(program.as_os_str().as_bytes(), "the program path")?;
        let mut argv = Vec::with_capacity(args.len() + 1);
        argv.push(program_c.clone());
        for a in args {
            argv.push(cstr(a.as_bytes(), "an argument")?);
        }
        let mut sh_argv = Vec::with_capacity(argv.len() + 1);
        sh_argv.push(c"/bin/sh".to_owned());
        sh_argv.extend(argv.iter().cloned());
        // Order of the inherited environment kept; a variable set again
        // replaces the inherited one in place, as Command::env did.
        let mut vars: Vec<(OsString, OsString)> = inherited
            .into_iter()
            .filter(|(k, _)| !remove.iter().any(|r| OsStr::new(r) == k))
            .collect();
        for (k, v) in set {
            match vars.iter_mut().find(|(have, _)| have == k) {
                Some(slot) => slot.1 = v.clone(),
                None => vars.push((k.clone(), v.clone())),
            }
        }
        let env = vars
            .iter()
            .filter(|(k, _)| !per_rank.contains(&k.as_os_str()))
            .map(|(k, v)| env_entry(k, v))
            .collect::<io::Result<Vec<_>>>()?;
        let wdir = wdir
            .map(|d| cstr(d.as_os_str().as_bytes(), "the working directory"))
            .transpose()?;
        Ok(ExecImage {
            program: program_c,
            argv,
            sh_argv,
            env,
            wdir,
        })
    }
}

/// What one rank gets besides its application's image.
pub struct RankCommand<'a> {
    pub image: &'a ExecImage,
    /// This rank's own variables (`PMI_RANK`, ...).
    pub env: &'a [(OsString, OsString)],
    /// Descriptors the rank inherits: `(launcher's fd, number in the rank)`.
    /// Targets must be 3 and up, distinct.
    pub pass_fds: &'a [(RawFd, RawFd)],
    pub stdin_inherit: bool,
    /// Start the rank in a session of its own (`setsid`).
    pub new_session: bool,
    /// The rank's timer slack in nanoseconds (`PR_SET_TIMERSLACK`, kept
    /// through exec); 0 leaves the launcher's.
    pub timer_slack_ns: u64,
    /// CPUs the rank is bound to (`sched_setaffinity` before exec).
    pub cpus: Option<&'a CpuSet>,
}

/// A CPU mask prepared by the parent for a rank's binding.
#[derive(Clone)]
pub struct CpuSet(libc::cpu_set_t);

impl CpuSet {
    /// The set of `cpus` (OS numbers); an error past `CPU_SETSIZE`.
    pub fn new(cpus: &[u32]) -> io::Result<CpuSet> {
        // SAFETY: cpu_set_t is plain data, all zeroes is the empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in cpus {
            if c as usize >= libc::CPU_SETSIZE as usize {
                return Err(io::Error::other(format!(
                    "CPU {c} is past the {} CPUs a binding can name",
                    libc::CPU_SETSIZE
                )));
            }
            // SAFETY: `c` is below CPU_SETSIZE (checked above), so the bit
            // is inside `set`.
            unsafe { libc::CPU_SET(c as usize, &mut set) };
        }
        Ok(CpuSet(set))
    }

    /// Whether `cpu` is in the set.
    fn contains(&self, cpu: usize) -> bool {
        // SAFETY: CPU_ISSET reads one bit of the set, and only for a `cpu`
        // below CPU_SETSIZE (checked first).
        cpu < libc::CPU_SETSIZE as usize && unsafe { libc::CPU_ISSET(cpu, &self.0) }
    }
}

/// Move the calling thread off `rank`'s CPUs, when it runs on one of them
/// and may run on another: a rank just started then has its CPU to itself
/// while the launcher goes on setting up. On a 2-vCPU VM, half the
/// one-rank launches found the launcher on the rank's CPU, and this made
/// them 0.2 ms shorter on average (docs/launch.md). Not done by forker
/// threads: at 2 and 16 ranks it gained nothing there. The thread's
/// affinity is left as it was: only where it runs now changes.
pub fn step_off(rank: &CpuSet) {
    if !rank.contains(rustix::thread::sched_getcpu()) {
        return;
    }
    let Ok(mine) = rustix::thread::sched_getaffinity(None) else {
        return;
    };
    let mut elsewhere = mine;
    for cpu in 0..rustix::thread::CpuSet::MAX_CPU {
        if rank.contains(cpu) {
            elsewhere.unset(cpu);
        }
    }
    if elsewhere.count() == 0 {
        return;
    }
    // The first call moves the thread (its CPU is not in the new set); the
    // second, which includes where it now is, moves nothing.
    if rustix::thread::sched_setaffinity(None, &elsewhere).is_ok() {
        let _ = rustix::thread::sched_setaffinity(None, &mine);
    }
}

/// A started rank: its pid and the read ends of its output pipes
/// (close-on-exec, blocking).
pub struct Spawned {
    pub pid: u32,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

/// Creates ranks: the vfork child's stack, `/dev/null`, and slots, kept
/// for every spawn of the launcher.
///
/// Slots: a launcher with 1024 ranks holds about 3,000 descriptors. A
/// child that copied them all (a plain clone) closes every one at exec, so
/// a job's start cost grew with the square of its size (a tenth of the CPU
/// of a 1024-rank start). Instead the child shares the launcher's table
/// (`CLONE_FILES`) and its first change is `close_range(share_below, ~0,
/// CLOSE_RANGE_UNSHARE)`: the kernel gives it a private table holding only
/// the descriptors below `share_below`. So everything the child needs goes
/// there first: the spawner owns `MAX_MOVES` low descriptors (placeholders
/// on `/dev/null`, made before the ranks' descriptors exist), copies a
/// rank's descriptors onto them before the clone and back to placeholders
/// after. Nobody else can be given those numbers while they are occupied.
/// The slots of every spawner are made when the launcher starts, at the
/// lowest numbers above the targets, and the spawners share one
/// `/dev/null`: a child copies the whole range below its own slots, so
/// each number there costs every rank a copy and a close at exec.
pub struct Spawner {
    /// Reserved at the first spawn (a spawner whose thread never starts
    /// costs no memory) and never initialised: only the child writes it,
    /// so zeroing 64 KiB per spawner (with its page faults) was waste.
    stack: Vec<u128>,
    devnull: Arc<OwnedFd>,
    slots: Vec<OwnedFd>,
    share_below: RawFd,
}

/// Everything the child reads, prepared by the parent; `err` is the one
/// thing it writes (the errno of the step that failed).
struct ChildArgs {
    path: *const c_char,
    argv: *const *const c_char,
    sh_argv: *const *const c_char,
    envp: *const *const c_char,
    wdir: *const c_char,
    moves: [(RawFd, RawFd); MAX_MOVES],
    nmoves: usize,
    /// The child's private table keeps the descriptors below this.
    share_below: RawFd,
    /// Start a session of its own (`setsid`).
    new_session: bool,
    /// `RankCommand::timer_slack_ns`.
    timer_slack_ns: u64,
    parent: libc::pid_t,
    /// Binding, or null.
    cpus: *const libc::cpu_set_t,
    err: AtomicI32,
    stage: AtomicI32,
}

/// Steps of the child, to say which one failed.
const STAGE_PDEATHSIG: i32 = 1;
const STAGE_PARENT_GONE: i32 = 2;
const STAGE_FDS: i32 = 3;
const STAGE_CHDIR: i32 = 4;
const STAGE_EXEC: i32 = 5;
const STAGE_BIND: i32 = 6;
const STAGE_SESSION: i32 = 7;

impl Spawner {
    /// `devnull` ([`super::devnull`]) is shared between spawners.
    pub fn new(devnull: Arc<OwnedFd>) -> io::Result<Spawner> {
        let slots = (0..MAX_MOVES)
            .map(|_| rustix::io::fcntl_dupfd_cloexec(&devnull, SLOT_FLOOR).map_err(io::Error::from))
            .collect::<io::Result<Vec<_>>>()?;
        let share_below = slots.iter().map(|s| s.as_raw_fd()).max().unwrap_or(0) + 1;
        Ok(Spawner {
            stack: Vec::new(),
            devnull,
            slots,
            share_below,
        })
    }

    /// Put the slots back on `/dev/null`, dropping the rank's copies.
    fn clear_slots(&mut self, used: usize) {
        for slot in &mut self.slots[..used] {
            // dup3 onto an occupied number replaces it atomically; it
            // cannot fail for two valid descriptors.
            let _ = rustix::io::dup3(&self.devnull, slot, rustix::io::DupFlags::CLOEXEC);
        }
    }

    /// Start one rank. It dies with the launcher (`PR_SET_PDEATHSIG`),
    /// gets default signal dispositions and an empty signal mask, and
    /// inherits nothing but stdio and `pass_fds`: every other descriptor of
    /// the launcher is close-on-exec.
    pub fn spawn(&mut self, rc: &RankCommand<'_>) -> io::Result<Spawned> {
        if rc.pass_fds.len() + 3 > MAX_MOVES {
            return Err(io::Error::other("too many descriptors for a rank"));
        }
        let pipe = || rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC);
        let (out_r, out_w) = pipe()?;
        let (err_r, err_w) = pipe()?;
        if let Some(&(_, t)) = rc
            .pass_fds
            .iter()
            .find(|&&(_, t)| !(3..SLOT_FLOOR).contains(&t))
        {
            return Err(io::Error::other(format!(
                "descriptor number {t} for a rank is outside 3..{SLOT_FLOOR}"
            )));
        }
        let mut wanted: Vec<(BorrowedFd<'_>, RawFd)> = Vec::with_capacity(MAX_MOVES);
        if !rc.stdin_inherit {
            wanted.push((self.devnull.as_fd(), 0));
        }
        wanted.push((out_w.as_fd(), 1));
        wanted.push((err_w.as_fd(), 2));
        for &(src, dst) in rc.pass_fds {
            // SAFETY: the caller's descriptors, open for this call.
            wanted.push((unsafe { BorrowedFd::borrow_raw(src) }, dst));
        }
        let mut moves = [(-1, -1); MAX_MOVES];
        let n = wanted.len();
        for (i, (src, dst)) in wanted.into_iter().enumerate() {
            if let Err(e) = rustix::io::dup3(src, &mut self.slots[i], rustix::io::DupFlags::CLOEXEC)
            {
                self.clear_slots(i);
                return Err(e.into());
            }
            moves[i] = (self.slots[i].as_raw_fd(), dst);
        }
        let rank_env = rc
            .env
            .iter()
            .map(|(k, v)| env_entry(k, v))
            .collect::<io::Result<Vec<_>>>()?;
        let img = rc.image;
        let ptrs = |v: &mut dyn Iterator<Item = &CString>| -> Vec<*const c_char> {
            v.map(|c| c.as_ptr()).chain([std::ptr::null()]).collect()
        };
        let argv = ptrs(&mut img.argv.iter());
        let sh_argv = ptrs(&mut img.sh_argv.iter());
        let envp = ptrs(&mut img.env.iter().chain(rank_env.iter()));
        let args = ChildArgs {
            path: img.program.as_ptr(),
            argv: argv.as_ptr(),
            sh_argv: sh_argv.as_ptr(),
            envp: envp.as_ptr(),
            wdir: img.wdir.as_ref().map_or(std::ptr::null(), |d| d.as_ptr()),
            moves,
            nmoves: n,
            share_below: self.share_below,
            new_session: rc.new_session,
            timer_slack_ns: rc.timer_slack_ns,
            parent: rustix::process::getpid().as_raw_nonzero().get(),
            cpus: rc.cpus.map_or(std::ptr::null(), |c| &c.0),
            err: AtomicI32::new(0),
            stage: AtomicI32::new(0),
        };
        if self.stack.capacity() == 0 {
            self.stack = Vec::with_capacity(CHILD_STACK / 16);
        }
        // The end of the reserved (not initialised) memory.
        let top = self
            .stack
            .as_mut_ptr()
            .wrapping_add(self.stack.capacity())
            .cast::<c_void>();
        // SAFETY: sigset_t is plain data; sigfillset/pthread_sigmask get
        // valid pointers to locals.
        let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            // No handler of the launcher may run in the child, which shares
            // its memory: signals stay blocked until the child has reset
            // every handler to the default.
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        }
        // SAFETY: CLONE_VM | CLONE_VFORK: the parent is suspended until the
        // child execs or exits, so `args`, the argv/envp arrays and the
        // stack (64 KiB reserved in `self.stack`, 16-byte aligned top, used
        // by no one else, never read by the parent) stay
        // valid and untouched for the child's whole life. The child runs
        // `child_main`, which only makes async-signal-safe calls and never
        // returns. SIGCHLD as exit signal: the event loop reaps it with
        // waitpid(-1) like any child. CLONE_FILES: the child unshares the
        // table itself, keeping only the slots' range (see `Spawner`).
        let pid = unsafe {
            libc::clone(
                child_main,
                top,
                libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_FILES | libc::SIGCHLD,
                (&args as *const ChildArgs).cast_mut().cast::<c_void>(),
            )
        };
        let clone_err = io::Error::last_os_error();
        // SAFETY: restores the mask saved above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
        self.clear_slots(n);
        drop((out_w, err_w));
        if pid < 0 {
            return Err(clone_err);
        }
        let err = args.err.load(Ordering::Acquire);
        if err != 0 || args.stage.load(Ordering::Acquire) != STAGE_EXEC {
            // The child exited without exec: reap it here, report why.
            let mut status = 0;
            // SAFETY: waitpid on our own child with a pointer to a local.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            let e = io::Error::from_raw_os_error(err);
            return Err(match args.stage.load(Ordering::Acquire) {
                STAGE_PARENT_GONE => io::Error::other("launcher exited"),
                STAGE_PDEATHSIG => io::Error::new(e.kind(), format!("prctl: {e}")),
                STAGE_FDS => io::Error::new(e.kind(), format!("descriptors: {e}")),
                STAGE_CHDIR => io::Error::new(e.kind(), format!("chdir: {e}")),
                STAGE_BIND => io::Error::new(e.kind(), format!("binding (sched_setaffinity): {e}")),
                STAGE_SESSION => io::Error::new(e.kind(), format!("setsid: {e}")),
                _ => e,
            });
        }
        Ok(Spawned {
            pid: pid as u32,
            stdout: out_r,
            stderr: err_r,
        })
    }
}

/// Record the failing step's errno and exit as a program that cannot run.
fn child_fail(a: &ChildArgs, stage: i32) -> ! {
    let e = io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO);
    a.stage.store(stage, Ordering::Release);
    a.err
        .store(if e == 0 { libc::EIO } else { e }, Ordering::Release);
    // SAFETY: _exit is async-signal-safe and ends the child at once.
    unsafe { libc::_exit(127) }
}

/// The vfork child: signal dispositions, PDEATHSIG, descriptors, working
/// directory, mask, exec. Nothing here allocates or takes a lock.
extern "C" fn child_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the parent's `ChildArgs`, alive while the parent is
    // suspended (CLONE_VFORK); shared access only (atomics for writes).
    let a = unsafe { &*arg.cast::<ChildArgs>() };
    // SAFETY: every call below is an async-signal-safe libc wrapper of one
    // syscall, on locals or on the parent's prepared, NUL-terminated data.
    unsafe {
        // Handlers would run the launcher's code in the shared memory; an
        // ignored SIGPIPE (the Rust runtime's) must not reach the program.
        for sig in 1..libc::SIGRTMAX() + 1 {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            let mut cur: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut cur) != 0 {
                continue;
            }
            let h = cur.sa_sigaction;
            if h != libc::SIG_DFL && (h != libc::SIG_IGN || sig == libc::SIGPIPE) {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
            child_fail(a, STAGE_PDEATHSIG);
        }
        // The launcher may have died before prctl took effect.
        if libc::getppid() != a.parent {
            a.stage.store(STAGE_PARENT_GONE, Ordering::Release);
            a.err.store(libc::ESRCH, Ordering::Release);
            libc::_exit(127);
        }
        // A session of its own (see `RankCommand::new_session`).
        if a.new_session && libc::setsid() < 0 {
            child_fail(a, STAGE_SESSION);
        }
        // Best effort: a refusal leaves the default slack.
        if a.timer_slack_ns != 0 {
            libc::prctl(libc::PR_SET_TIMERSLACK, a.timer_slack_ns as libc::c_ulong);
        }
        // Leave the launcher's table (shared until now, untouched): a
        // private one with only the numbers below the slots' end. Kernels
        // before 5.9 lack close_range: copy the whole table then.
        if libc::syscall(
            libc::SYS_close_range,
            a.share_below as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_UNSHARE,
        ) != 0
            && libc::unshare(libc::CLONE_FILES) != 0
        {
            child_fail(a, STAGE_FDS);
        }
        // Sources are slots (>= SLOT_FLOOR), targets below it: no move
        // clobbers another's source. dup2 clears CLOEXEC on the target.
        for &(src, dst) in &a.moves[..a.nmoves] {
            if libc::dup2(src, dst) < 0 {
                child_fail(a, STAGE_FDS);
            }
        }
        if !a.wdir.is_null() && libc::chdir(a.wdir) != 0 {
            child_fail(a, STAGE_CHDIR);
        }
        // The binding: one syscall on the parent's prepared mask, inherited
        // through exec.
        if !a.cpus.is_null()
            && libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), a.cpus) != 0
        {
            child_fail(a, STAGE_BIND);
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        a.stage.store(STAGE_EXEC, Ordering::Release);
        libc::execve(a.path, a.argv, a.envp);
        if *libc::__errno_location() == libc::ENOEXEC {
            // A script without `#!`: the shell runs it, as execvp would.
            libc::execve(c"/bin/sh".as_ptr(), a.sh_argv, a.envp);
        }
        child_fail(a, STAGE_EXEC)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread on a rank's CPU moves to another it may use, and keeps
    /// its affinity. (The scheduler may move a thread at any time on a busy
    /// machine: a few tries, each starting on the rank's CPU.)
    #[test]
    fn step_off_moves_the_thread_and_keeps_its_affinity() {
        std::thread::spawn(|| {
            let mine = rustix::thread::sched_getaffinity(None).unwrap();
            let cpus: Vec<usize> = (0..rustix::thread::CpuSet::MAX_CPU)
                .filter(|&c| mine.is_set(c))
                .collect();
            let first = cpus[0];
            let rank = CpuSet::new(&[first as u32]).unwrap();
            let mut moved = false;
            for _ in 0..5 {
                // Onto the rank's CPU, then allowed all again: it stays
                // there unless moved.
                let mut only = rustix::thread::CpuSet::new();
                only.set(first);
                rustix::thread::sched_setaffinity(None, &only).unwrap();
                rustix::thread::sched_setaffinity(None, &mine).unwrap();
                step_off(&rank);
                assert_eq!(rustix::thread::sched_getaffinity(None).unwrap(), mine);
                if rustix::thread::sched_getcpu() != first {
                    moved = true;
                    break;
                }
            }
            assert_eq!(moved, cpus.len() > 1, "CPUs {cpus:?}");
        })
        .join()
        .unwrap();
    }
}
