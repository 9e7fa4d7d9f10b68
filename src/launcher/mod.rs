//! The launcher: starts the ranks, serves PMI on one non-blocking event
//! loop, supervises the processes and tears the job down on failure.

pub mod os;
pub mod output;

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream, UnixStream};
use mio::{Events, Interest, Poll, Token};
use rustix::process::Signal;
use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGTERM};
use signal_hook_mio::v1_0::Signals;

use crate::cli::LaunchConfig;
use crate::server::{ConnId, Event, FailCause, JobIdx, JobSpec, Server};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::shm::{JobSegment, MemPool, SharedFutex};
use crate::store::{MemStore, ShmStore, Store};
use output::{Forwarder, Stream};

const SIGNALS: Token = Token(0);
const WAKER: Token = Token(2);
/// Fence watcher target meaning "no socket rank waits".
const NO_TARGET: u64 = u64::MAX;
/// How often to look for fences that a finalized or exited rank blocks.
const STUCK_CHECK: Duration = Duration::from_millis(100);
/// Descriptor number of the PMI socket inside every rank.
const PMI_FD_IN_RANK: i32 = 3;
/// Descriptor number of the job segment's memfd inside every rank
/// (advertised as the node attribute `memAnonMMAPfd`).
const SEGMENT_FD_IN_RANK: i32 = 4;
const LISTENER: Token = Token(1);
const FIRST_CONN: usize = 16;
/// Time between SIGTERM and SIGKILL when a job is torn down.
const KILL_GRACE: Duration = Duration::from_millis(1000);
/// Bytes read from one connection before others get their turn.
const READ_BUDGET: usize = 256 * 1024;
/// A client whose unread replies exceed this is treated as dead.
const MAX_QUEUED: usize = 16 << 20;

enum Sock {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Sock {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Sock::Unix(s) => s,
            Sock::Tcp(s) => s,
        }
    }
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Sock::Unix(s) => s.read(b),
            Sock::Tcp(s) => s.read(b),
        }
    }
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            Sock::Unix(s) => s.write(b),
            Sock::Tcp(s) => s.write(b),
        }
    }
}

struct ConnIo {
    sock: Sock,
    out: Vec<u8>,
    sent: usize,
    close_when_flushed: bool,
    want_write: bool,
}

/// A new job's store and, when it has one, its segment.
type JobStore = (Box<dyn Store>, Option<Arc<JobSegment>>);

/// A rank not started yet.
struct PendingRank {
    job: JobIdx,
    rank: u32,
    program: std::path::PathBuf,
    /// The program as the user wrote it, for messages.
    shown: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    wdir: Option<std::path::PathBuf>,
    socketpair: bool,
}

struct RankProc {
    pid: u32,
    job: JobIdx,
    rank: u32,
    status: Option<ExitStatus>,
    /// The signal the launcher itself sent, if any.
    signaled: Option<i32>,
}

/// Why the job ended badly, first cause wins.
struct Failure {
    job: JobIdx,
    rank: u32,
    message: String,
    code: i32,
    /// What the rank was doing, kept for a better message once it is reaped.
    activity: String,
    /// Replace code and message by the rank's own exit status when it ends
    /// badly by itself (e.g. a lost connection that was really a SIGKILL).
    prefer_status: bool,
}

pub struct Launcher {
    poll: Poll,
    server: Server,
    conns: HashMap<Token, ConnIo>,
    ready: VecDeque<Token>,
    procs: Vec<RankProc>,
    by_pid: HashMap<u32, usize>,
    failure: Option<Failure>,
    kill_at: Option<Instant>,
    interrupted: Option<i32>,
    signals: Signals,
    listener: Option<TcpListener>,
    port_job: Option<JobIdx>,
    next_token: usize,
    events: Vec<Event>,
    forwarder: Option<Forwarder>,
    pending: VecDeque<PendingRank>,
    /// Job segments, by job index (None: socket-only job).
    segments: Vec<Option<Arc<JobSegment>>>,
    waker: Arc<mio::Waker>,
    /// Tells the segment watcher threads to exit.
    stop_watchers: Arc<AtomicBool>,
    /// Per job with a segment: the fence watcher's target generation and
    /// its thread (to unpark it).
    fence_watchers: Vec<Option<(Arc<AtomicU64>, std::thread::Thread)>>,
    /// Decoy segment with an unknown stamp (FASTPMI_ADVERTISE_FOREIGN_SEGMENT).
    foreign: Option<crate::shm::Mapping>,
}

/// Run a job to the end; returns the launcher's exit status.
pub fn run(cfg: &LaunchConfig) -> i32 {
    let mut l = match Launcher::new() {
        Ok(l) => l,
        Err(e) => {
            crate::errln!("fastpmi: cannot start the event loop: {e}");
            return 1;
        }
    };
    match l.launch(cfg) {
        Ok(()) => l.serve(cfg),
        // Shell convention for a program that cannot be found or run.
        Err(LaunchError::Program(msg)) => {
            crate::errln!("fastpmi: {msg}");
            127
        }
        Err(LaunchError::Io(e)) => {
            crate::errln!("fastpmi: {e}");
            1
        }
    }
}

impl Launcher {
    fn new() -> io::Result<Launcher> {
        os::raise_nofile_limit();
        os::cloexec_inherited_fds();
        let poll = Poll::new()?;
        let waker = Arc::new(mio::Waker::new(poll.registry(), WAKER)?);
        let mut signals = Signals::new([SIGCHLD, SIGINT, SIGTERM, SIGHUP])?;
        poll.registry()
            .register(&mut signals, SIGNALS, Interest::READABLE)?;
        Ok(Launcher {
            poll,
            server: Server::new(),
            conns: HashMap::new(),
            ready: VecDeque::new(),
            procs: Vec::new(),
            by_pid: HashMap::new(),
            failure: None,
            kill_at: None,
            interrupted: None,
            signals,
            listener: None,
            port_job: None,
            next_token: FIRST_CONN,
            events: Vec::new(),
            forwarder: None,
            pending: VecDeque::new(),
            segments: Vec::new(),
            waker,
            stop_watchers: Arc::new(AtomicBool::new(false)),
            foreign: None,
            fence_watchers: Vec::new(),
        })
    }

    fn token(&mut self) -> Token {
        let t = Token(self.next_token);
        self.next_token += 1;
        t
    }

    fn add_conn(
        &mut self,
        mut sock: Sock,
        bound: Option<(JobIdx, u32)>,
        port_job: Option<JobIdx>,
    ) -> io::Result<()> {
        let tok = self.token();
        self.poll.registry().register(
            sock.source(),
            tok,
            Interest::READABLE | Interest::WRITABLE,
        )?;
        self.conns.insert(
            tok,
            ConnIo {
                sock,
                out: Vec::new(),
                sent: 0,
                close_when_flushed: false,
                want_write: false,
            },
        );
        self.server.connect(tok.0, bound, port_job);
        Ok(())
    }

    /// Create the world job and start every rank.
    fn launch(&mut self, cfg: &LaunchConfig) -> Result<(), LaunchError> {
        let size = cfg.world_size();
        // Resolve programs first: one clear error instead of one per rank.
        let mut programs = Vec::new();
        for app in &cfg.apps {
            if let Some(d) = &app.wdir {
                if !d.is_dir() {
                    return Err(LaunchError::Program(format!(
                        "-wdir {}: not a directory",
                        d.display()
                    )));
                }
            }
            let p = os::resolve_program(&app.program, app.wdir.as_deref())
                .map_err(LaunchError::Program)?;
            programs.push(p);
        }
        let jobid = format!("fastpmi_{}_0", std::process::id());
        let (store, segment) = self.job_store(cfg, size, &jobid)?;
        let job = self.server.add_job(JobSpec {
            id: jobid.clone(),
            apps: cfg.apps.iter().map(|a| a.nranks).collect(),
            universe_size: size,
            spawner: None,
            store,
        });
        self.segments.push(segment);
        if cfg.pmi_port {
            let mut l = TcpListener::bind("127.0.0.1:0".parse().expect("valid address"))?;
            self.poll
                .registry()
                .register(&mut l, LISTENER, Interest::READABLE)?;
            self.listener = Some(l);
            self.port_job = Some(job);
        }
        let port = self.listener.as_ref().map(|l| l.local_addr()).transpose()?;
        self.forwarder = Some(Forwarder::start(cfg.label)?);
        let mut rank = 0u32;
        for (appnum, app) in cfg.apps.iter().enumerate() {
            for _ in 0..app.nranks {
                let mut env: Vec<(OsString, OsString)> = cfg.genv.clone();
                env.extend(app.env.iter().cloned());
                let mut set = |k: &str, v: String| env.push((k.into(), v.into()));
                if let Some(addr) = port {
                    set("PMI_PORT", addr.to_string());
                    set("PMI_ID", rank.to_string());
                } else {
                    // Always fd 3 in the rank (even `sh` can use it).
                    set("PMI_FD", PMI_FD_IN_RANK.to_string());
                    set("PMI_RANK", rank.to_string());
                    set("PMI_SIZE", size.to_string());
                }
                set("PMI_JOBID", jobid.clone());
                set("MPI_LOCALNRANKS", size.to_string());
                set("MPI_LOCALRANKID", rank.to_string());
                self.pending.push_back(PendingRank {
                    job,
                    rank,
                    program: programs[appnum].clone(),
                    shown: app.program.clone(),
                    args: app.args.clone(),
                    env,
                    wdir: app.wdir.clone(),
                    socketpair: port.is_none(),
                });
                rank += 1;
            }
        }
        tracing::debug!(ranks = size, job = %jobid, "starting ranks");
        Ok(())
    }

    /// The store of a new job: its segment when one is configured, with the
    /// node attributes that tell clients how to map it.
    fn job_store(
        &mut self,
        cfg: &LaunchConfig,
        size: u32,
        jobid: &str,
    ) -> Result<JobStore, LaunchError> {
        let (mut store, segment): (Box<dyn Store>, _) = match cfg.mem_pool {
            None => {
                self.fence_watchers.push(None);
                (Box::new(MemStore::new(size, crate::wire::VALLEN_MAX)), None)
            }
            Some(pool) => {
                let mut params = shm_layout::SegmentParams::for_ranks(size);
                if let Some(mb) = cfg.kvs_mb {
                    params = params.with_kvs_mb(mb);
                }
                let seg = Arc::new(JobSegment::create(pool, &params, jobid).map_err(|e| {
                    io::Error::other(format!(
                        "cannot create the {} job segment: {e}",
                        pool.attr()
                    ))
                })?);
                tracing::debug!(
                    bytes = seg.mapping().len(),
                    pool = pool.attr(),
                    "job segment created"
                );
                self.watch(&seg);
                (Box::new(ShmStore::new(seg.clone())), Some(seg))
            }
        };
        let mut attrs: Vec<(&str, String)> = vec![
            ("localRanksCount", size.to_string()),
            (
                "localRanks",
                (0..size)
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
        ];
        if let Some(seg) = &segment {
            let m = seg.mapping();
            if std::env::var_os("FASTPMI_ADVERTISE_FOREIGN_SEGMENT").is_some_and(|v| v == "1") {
                // Testing aid: ranks get a segment stamped by "another version".
                self.foreign = Some(crate::shm::Mapping::foreign_stamp()?);
            }
            attrs.push(("memPoolType", m.pool().attr().to_string()));
            match m.pool() {
                MemPool::AnonMmap => attrs.push(("memAnonMMAPfd", SEGMENT_FD_IN_RANK.to_string())),
                MemPool::Sysv => attrs.push(("memSYSVid", m.sysv_id().unwrap_or(-1).to_string())),
            }
        }
        for (k, v) in attrs {
            store
                .put_node_attr(0, k.as_bytes(), v.as_bytes())
                .map_err(|e| io::Error::other(format!("node attribute {k}: {e}")))?;
        }
        Ok((store, segment))
    }

    /// Threads that sleep on the segment's fence generation and node-attribute
    /// counter and wake the event loop, so socket ranks waiting on a fence or
    /// attribute that a shared-memory rank completes are answered at once.
    fn watch(&mut self, seg: &Arc<JobSegment>) {
        // The fence watcher sleeps on the generation word only while socket
        // ranks wait in a fence (`target` = the generation they arrived in):
        // waking the launcher on every shared-memory fence would cost the
        // ranks CPU time on a crowded node.
        let target = Arc::new(AtomicU64::new(NO_TARGET));
        let fence = {
            let (seg, waker, stop, target) = (
                seg.clone(),
                self.waker.clone(),
                self.stop_watchers.clone(),
                target.clone(),
            );
            move || {
                // The launcher never spins: the ranks need the CPU.
                let f = seg.seg().fence().with_spin_limit(0);
                while !stop.load(Ordering::Relaxed) {
                    let t = target.load(Ordering::Acquire);
                    if t == NO_TARGET {
                        std::thread::park_timeout(Duration::from_millis(100));
                        continue;
                    }
                    let arrival = shm_layout::Arrival {
                        generation: t as u32,
                        last: false,
                    };
                    match f.wait_timeout(arrival, &SharedFutex, Duration::from_millis(100)) {
                        Ok(true) => {
                            // Done with this target unless the loop set a new one.
                            let _ = target.compare_exchange(
                                t,
                                NO_TARGET,
                                Ordering::AcqRel,
                                Ordering::Relaxed,
                            );
                            let _ = waker.wake();
                        }
                        Ok(false) => {}
                        // Aborted: the event loop already knows; stop watching.
                        Err(_) => return,
                    }
                }
            }
        };
        let attrs = {
            let (seg, waker, stop) = (seg.clone(), self.waker.clone(), self.stop_watchers.clone());
            move || {
                let a = seg.seg().node_attrs();
                let mut seen = a.changes();
                while !stop.load(Ordering::Relaxed) && seg.seg().abort_status().is_none() {
                    let now = a.wait_changed(seen, &SharedFutex, Duration::from_millis(100));
                    if now != seen {
                        seen = now;
                        let _ = waker.wake();
                    }
                }
            }
        };
        match std::thread::Builder::new()
            .name("fastpmi-fence-watch".into())
            .spawn(fence)
        {
            Ok(h) => self.fence_watchers.push(Some((target, h.thread().clone()))),
            Err(e) => {
                tracing::warn!("cannot start the fence watcher: {e}");
                self.fence_watchers.push(None);
            }
        }
        if let Err(e) = std::thread::Builder::new()
            .name("fastpmi-attr-watch".into())
            .spawn(attrs)
        {
            tracing::warn!("cannot start the node-attribute watcher: {e}");
        }
    }

    /// Point each job's fence watcher at the fence its socket ranks wait in.
    fn update_fence_watchers(&self) {
        for (job, w) in self.fence_watchers.iter().enumerate() {
            let Some((target, thread)) = w else { continue };
            let want = self.server.fence_wait_generation(job).unwrap_or(NO_TARGET);
            if target.load(Ordering::Acquire) != want {
                target.store(want, Ordering::Release);
                if want != NO_TARGET {
                    thread.unpark();
                }
            }
        }
    }

    /// Start the next pending rank. The event loop calls this between polls
    /// so early ranks are served while later ones are still being forked.
    fn spawn_next(&mut self) {
        let Some(p) = self.pending.pop_front() else {
            return;
        };
        if let Err(e) = self.spawn_rank(&p) {
            let message = format!(
                "cannot start rank {} ({}): {e}",
                p.rank,
                p.shown.to_string_lossy()
            );
            self.record_failure(p.job, p.rank, message.clone(), 127, String::new(), false);
            self.server
                .fail_job(p.job, Some(p.rank), 127, &message, &mut self.events);
            self.pending.clear();
            self.begin_teardown(Signal::TERM);
        } else if self.pending.is_empty() {
            tracing::debug!("all ranks started");
        }
    }

    fn spawn_rank(&mut self, p: &PendingRank) -> io::Result<()> {
        let mut pass = Vec::new();
        let mut child_end = None;
        if p.socketpair {
            let (ours, theirs) = os::socketpair()?;
            pass.push((theirs.as_raw_fd(), PMI_FD_IN_RANK));
            let foreign = self.foreign.as_ref().and_then(|m| m.fd());
            if let Some(fd) =
                foreign.or_else(|| self.segments[p.job].as_ref().and_then(|s| s.mapping().fd()))
            {
                pass.push((fd, SEGMENT_FD_IN_RANK));
            }
            let stream = UnixStream::from_std(std::os::unix::net::UnixStream::from(ours));
            stream_nonblocking(&stream)?;
            self.add_conn(Sock::Unix(stream), Some((p.job, p.rank)), None)?;
            child_end = Some(theirs);
        }
        let spawned = os::spawn_rank(&os::RankCommand {
            program: &p.program,
            args: &p.args,
            env: &p.env,
            env_remove: ENV_REMOVE,
            wdir: p.wdir.as_deref(),
            pass_fds: &pass,
            stdin_inherit: p.rank == 0,
        });
        // The rank has its copy (or failed to start): close ours.
        drop(child_end);
        let s = spawned?;
        if let Some(f) = &self.forwarder {
            f.add(p.rank, Stream::Out, s.stdout);
            f.add(p.rank, Stream::Err, s.stderr);
        }
        if let Some(state) = self.segments[p.job]
            .as_ref()
            .and_then(|seg| seg.seg().rank(p.rank))
        {
            state.set_pid(s.pid);
        }
        self.by_pid.insert(s.pid, self.procs.len());
        self.procs.push(RankProc {
            pid: s.pid,
            job: p.job,
            rank: p.rank,
            status: None,
            signaled: None,
        });
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
enum LaunchError {
    #[error("{0}")]
    Program(String),
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Variables a rank must not inherit from the launcher's own environment:
/// another launcher's PMI wiring (also Slurm's `SLURM_MPI_TYPE` when fastpmi
/// runs inside `srun --mpi=pmi2`: the ranks' server is fastpmi, not
/// slurmstepd), and PMIx markers that make MPICH 4.1+ refuse to start.
const ENV_REMOVE: &[&str] = &[
    "PMI_FD",
    "PMI_PORT",
    "PMI_ID",
    "PMI_RANK",
    "PMI_SIZE",
    "PMI_JOBID",
    "PMI_SPAWNED",
    "PMI_TOTALVIEW",
    "SLURM_MPI_TYPE",
    "PMIX_RANK",
    "PMIX_VERSION",
    "PMIX_NAMESPACE",
    "PMIX_SERVER_URI",
    "PRTE_LAUNCHED",
    "OMPI_COMM_WORLD_SIZE",
    "MPI_LOCALNRANKS",
    "MPI_LOCALRANKID",
];

fn stream_nonblocking(s: &UnixStream) -> io::Result<()> {
    // mio's from_std expects a non-blocking socket.
    let fd = std::os::fd::AsFd::as_fd(s);
    rustix::io::ioctl_fionbio(fd, true)?;
    Ok(())
}

impl Launcher {
    fn running(&self) -> usize {
        self.procs.iter().filter(|p| p.status.is_none()).count()
    }

    /// The event loop: until every rank has been reaped.
    fn serve(&mut self, cfg: &LaunchConfig) -> i32 {
        let mut events = Events::with_capacity(1024);
        let mut buf = vec![0u8; 64 * 1024];
        self.apply_events();
        while self.running() > 0 || !self.pending.is_empty() {
            if self.failure.is_some() || self.interrupted.is_some() {
                self.pending.clear();
            }
            self.spawn_next();
            let timeout = if !self.ready.is_empty() || !self.pending.is_empty() {
                Some(Duration::ZERO)
            } else {
                let kill = self
                    .kill_at
                    .map(|t| t.saturating_duration_since(Instant::now()));
                // Shared-memory ranks stuck in a fence send nothing: look.
                let stuck = self.server.needs_stuck_check().then_some(STUCK_CHECK);
                kill.into_iter().chain(stuck).min()
            };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    crate::errln!("fastpmi: event loop failed: {e}");
                    self.begin_teardown(Signal::KILL);
                }
            }
            for ev in events.iter() {
                match ev.token() {
                    SIGNALS => self.on_signals(),
                    WAKER => self.server.poll_store(&mut self.events),
                    LISTENER => self.accept(),
                    tok => {
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            self.read_conn(tok, &mut buf);
                        }
                        if ev.is_writable() {
                            self.flush(tok);
                        }
                    }
                }
                self.apply_events();
            }
            // Connections that still had input after their read budget.
            for _ in 0..self.ready.len() {
                if let Some(tok) = self.ready.pop_front() {
                    self.read_conn(tok, &mut buf);
                    self.apply_events();
                }
            }
            self.update_fence_watchers();
            if self.server.needs_stuck_check() {
                self.server.check_stuck_all(&mut self.events);
                self.apply_events();
            }
            if self.kill_at.is_some_and(|t| Instant::now() >= t) {
                self.kill_at = None;
                for p in self.procs.iter_mut().filter(|p| p.status.is_none()) {
                    tracing::debug!(rank = p.rank, "SIGKILL after grace period");
                    p.signaled = Some(libc::SIGKILL);
                    os::signal(p.pid, Signal::KILL);
                }
            }
        }
        self.stop_watchers.store(true, Ordering::Relaxed);
        if let Some(f) = self.forwarder.take() {
            f.finish(Duration::from_millis(500));
        }
        let _ = cfg;
        if cfg.stats {
            eprint!("{}", self.stats_report());
        }
        self.exit_code()
    }

    /// `--stats`: what each transport served, so a user can see which path
    /// the job took. Socket figures are counted by the server; shared-memory
    /// ones by the ranks themselves in their state words in the segment.
    pub fn stats_report(&self) -> String {
        let sock = self.server.stats;
        let mut shm = shm_layout::RankStats::default();
        for seg in self.segments.iter().flatten() {
            for r in seg.seg().ranks() {
                let st = r.stats();
                shm.puts += st.puts;
                shm.gets += st.gets;
                shm.fences += st.fences;
                shm.node_attr_ops += st.node_attr_ops;
            }
        }
        let ranks = self.procs.len();
        let mut out = format!("fastpmi stats: {ranks} ranks\n");
        out += &format!(
            "  {:<14} {:>10} {:>10} {:>10} {:>10}\n",
            "transport", "puts", "gets", "fences", "node-attr"
        );
        out += &format!(
            "  {:<14} {:>10} {:>10} {:>10} {:>10}\n",
            "socket", sock.puts, sock.gets, sock.fences, sock.node_attr_ops
        );
        out += &format!(
            "  {:<14} {:>10} {:>10} {:>10} {:>10}\n",
            "shared-memory", shm.puts, shm.gets, shm.fences, shm.node_attr_ops
        );
        out
    }

    fn exit_code(&self) -> i32 {
        if let Some(f) = &self.failure {
            crate::errln!("fastpmi: {}", f.message);
            return f.code;
        }
        if let Some(sig) = self.interrupted {
            crate::errln!(
                "fastpmi: interrupted by {}; ranks stopped",
                os::signal_name(sig)
            );
            return 128 + sig;
        }
        0
    }

    fn on_signals(&mut self) {
        let pending: Vec<i32> = self.signals.pending().collect();
        for sig in pending {
            match sig {
                SIGCHLD => self.reap(),
                SIGINT | SIGTERM | SIGHUP => {
                    let again = self.interrupted.is_some();
                    self.interrupted.get_or_insert(sig);
                    let s = if again {
                        Signal::KILL
                    } else {
                        Signal::from_named_raw(sig).unwrap_or(Signal::TERM)
                    };
                    tracing::debug!("forwarding {} to the ranks", os::signal_name(sig));
                    let msg = format!("launcher received {}", os::signal_name(sig));
                    for job in self
                        .procs
                        .iter()
                        .map(|p| p.job)
                        .collect::<std::collections::BTreeSet<_>>()
                    {
                        self.server
                            .fail_job(job, None, 128 + sig, &msg, &mut self.events);
                    }
                    self.begin_teardown(s);
                }
                _ => {}
            }
        }
        // Signals coalesce; reap anyway so no exit is missed.
        self.reap();
    }

    fn reap(&mut self) {
        for (pid, status) in os::reap() {
            let Some(&i) = self.by_pid.get(&pid) else {
                continue;
            };
            let p = &mut self.procs[i];
            if p.status.is_some() {
                continue;
            }
            p.status = Some(status);
            let (job, rank, ours) = (p.job, p.rank, p.signaled);
            let clean = status.success();
            tracing::debug!(rank, "rank {}", os::describe_status(status));
            let by_us = ours.is_some_and(|s| os::status_code(status) == 128 + s);
            if !clean && !by_us {
                let activity = self.server.rank_activity(job, rank);
                let message = format!("rank {rank} {} {activity}", os::describe_status(status))
                    .trim_end()
                    .to_string();
                let code = os::status_code(status);
                match &mut self.failure {
                    // The failing rank's own status says more than "lost connection".
                    Some(f) if f.prefer_status && f.job == job && f.rank == rank => {
                        f.message =
                            format!("rank {rank} {} {}", os::describe_status(status), f.activity)
                                .trim_end()
                                .to_string();
                        f.code = code;
                        f.prefer_status = false;
                    }
                    Some(_) => {}
                    None => {
                        self.record_failure(job, rank, message.clone(), code, activity, false);
                        self.server
                            .fail_job(job, Some(rank), code, &message, &mut self.events);
                        self.begin_teardown(Signal::TERM);
                    }
                }
            }
            self.server.rank_exited(job, rank, clean, &mut self.events);
        }
        self.apply_events();
    }

    fn record_failure(
        &mut self,
        job: JobIdx,
        rank: u32,
        message: String,
        code: i32,
        activity: String,
        prefer_status: bool,
    ) {
        if self.failure.is_none() {
            self.failure = Some(Failure {
                job,
                rank,
                message,
                code,
                activity,
                prefer_status,
            });
        }
    }

    /// Send `sig` to every running rank and arm the SIGKILL deadline.
    fn begin_teardown(&mut self, sig: Signal) {
        for p in self.procs.iter_mut().filter(|p| p.status.is_none()) {
            if p.signaled.is_none() || sig == Signal::KILL {
                p.signaled = Some(sig.as_raw());
                os::signal(p.pid, sig);
            }
        }
        if sig != Signal::KILL && self.kill_at.is_none() {
            self.kill_at = Some(Instant::now() + KILL_GRACE);
        }
    }

    fn accept(&mut self) {
        loop {
            let Some(l) = self.listener.as_ref() else {
                return;
            };
            match l.accept() {
                Ok((s, _)) => {
                    let _ = s.set_nodelay(true);
                    let pj = self.port_job;
                    if let Err(e) = self.add_conn(Sock::Tcp(s), None, pj) {
                        tracing::warn!("cannot register PMI connection: {e}");
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    return;
                }
            }
        }
    }

    fn read_conn(&mut self, tok: Token, buf: &mut [u8]) {
        let mut budget = READ_BUDGET;
        loop {
            let Some(c) = self.conns.get_mut(&tok) else {
                return;
            };
            match c.sock.read(buf) {
                Ok(0) => {
                    self.close(tok);
                    return;
                }
                Ok(n) => {
                    self.server.on_bytes(tok.0, &buf[..n], &mut self.events);
                    budget = budget.saturating_sub(n);
                    // A short read drained the socket; later data raises a new
                    // edge, so the usual WouldBlock read can be skipped.
                    if n < buf.len() {
                        return;
                    }
                    if budget == 0 {
                        // Fairness: come back after the others.
                        self.ready.push_back(tok);
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::debug!("read error on connection {}: {e}", tok.0);
                    self.close(tok);
                    return;
                }
            }
        }
    }

    fn close(&mut self, tok: Token) {
        if let Some(mut c) = self.conns.remove(&tok) {
            let _ = self.poll.registry().deregister(c.sock.source());
        }
        self.server.on_closed(tok.0, &mut self.events);
    }

    fn flush(&mut self, tok: Token) {
        let Some(c) = self.conns.get_mut(&tok) else {
            return;
        };
        while c.sent < c.out.len() {
            match c.sock.write(&c.out[c.sent..]) {
                Ok(0) => break,
                Ok(n) => c.sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    // Peer gone; its EOF will be seen on the read side.
                    c.out.clear();
                    c.sent = 0;
                    break;
                }
            }
        }
        let pending = c.sent < c.out.len();
        if pending != c.want_write {
            c.want_write = pending;
            let interest = if pending {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            let _ = self
                .poll
                .registry()
                .reregister(c.sock.source(), tok, interest);
        }
        if !pending {
            c.out.clear();
            c.sent = 0;
            if c.close_when_flushed {
                self.close(tok);
            }
        } else if c.sent > 1 << 20 {
            c.out.drain(..c.sent);
            c.sent = 0;
        }
    }

    /// Carry out what the server asked for.
    fn apply_events(&mut self) {
        while !self.events.is_empty() {
            let batch = std::mem::take(&mut self.events);
            for ev in batch {
                match ev {
                    Event::Send { conn, bytes } => {
                        let tok = Token(conn as ConnId);
                        if let Some(c) = self.conns.get_mut(&tok) {
                            c.out.extend_from_slice(&bytes);
                            if c.out.len() - c.sent > MAX_QUEUED {
                                tracing::warn!(
                                    "connection {conn} does not read its replies; closing it"
                                );
                                self.close(tok);
                                continue;
                            }
                            self.flush(tok);
                        }
                    }
                    Event::Close { conn } => {
                        let tok = Token(conn);
                        if let Some(c) = self.conns.get_mut(&tok) {
                            c.close_when_flushed = true;
                            self.flush(tok);
                        }
                    }
                    Event::JobFailed {
                        job,
                        rank,
                        cause,
                        message,
                    } => {
                        let activity = self.server.rank_activity(job, rank);
                        let (code, prefer) = match cause {
                            FailCause::Abort { code } => (code & 0xff, false),
                            FailCause::ConnectionLost | FailCause::ExitedEarly => (1, true),
                        };
                        self.record_failure(job, rank, message, code, activity, prefer);
                        self.begin_teardown(Signal::TERM);
                    }
                }
            }
        }
    }
}
