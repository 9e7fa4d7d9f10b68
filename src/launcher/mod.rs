//! The launcher: starts the ranks of every job (the first one and those its
//! ranks spawn), serves PMI on one non-blocking event loop, supervises the
//! processes and tears jobs down on failure.
//!
//! One room per concern: [`conn`] (PMI connections and their I/O), [`jobs`]
//! (creating a job and starting its ranks), [`spawn`] (turning a spawn
//! request into a job), [`watch`] (threads that sleep on a job's segment),
//! [`supervise`] (reaping, failures, signals, exit status), [`names`] (the
//! shared name server's client).

mod conn;
mod impi;
mod jobs;
pub mod mpir;
mod names;
pub mod os;
pub mod output;
mod peer;
pub mod placement;
mod spawn;
mod supervise;
pub use supervise::stats_row;
mod tools;
pub mod topology;
mod watch;

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token};
use rustix::process::Signal;
use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGTERM, SIGUSR1};
use signal_hook_mio::v1_0::Signals;

use crate::config::LaunchConfig;
use conn::ConnIo;
use fastpmi_segment::JobSegment;
use fastpmi_server::{ConnId, Event, FailCause, JobIdx, Server};
use jobs::PendingRank;
use output::Forwarder;
use supervise::{Failure, RankProc};

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
/// Descriptor number of the parent job's memfd in a spawned job's ranks
/// (node attribute `fastpmi-parentSegment` = `fd:5`): fastpmi's clients
/// read the parent's KVS from it.
const PARENT_SEGMENT_FD_IN_RANK: i32 = 5;
const FIRST_CONN: usize = 16;
/// Time between SIGTERM and SIGKILL when a job is torn down.
const KILL_GRACE: Duration = Duration::from_millis(1000);
/// Bytes read from one connection before others get their turn.
const READ_BUDGET: usize = 256 * 1024;
/// A client whose unread replies exceed this is treated as dead.
const MAX_QUEUED: usize = 16 << 20;

/// What the launcher keeps of each job besides the server's protocol state
/// (same index as the server's job table).
struct JobRt {
    /// The job segment (None: socket-only job, or the job has ended).
    segment: Option<Arc<JobSegment>>,
    /// A spawned job's parent's segment, handed to its ranks.
    parent_segment: Option<Arc<JobSegment>>,
    /// The fence watcher's target generation and its thread (to unpark it).
    fence_watcher: Option<(Arc<AtomicU64>, std::thread::Thread)>,
    /// Tells this job's watcher threads to exit.
    stop: Arc<AtomicBool>,
    /// Ranks not reaped yet (started or pending).
    live: u32,
    /// Its ranks were sent SIGTERM because the job failed.
    torn_down: bool,
    /// The binding slot of each rank (empty: not bound).
    slots: Vec<u32>,
}

pub struct Launcher {
    cfg: LaunchConfig,
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
    /// Port mode: one listener per job (the job its connections belong to).
    listeners: HashMap<Token, (TcpListener, JobIdx)>,
    /// Port-mode connections not identified yet.
    unidentified: usize,
    /// Their tokens, oldest first (may hold tokens of connections that have
    /// identified themselves or closed since; skipped and pruned lazily).
    unidentified_order: VecDeque<Token>,
    next_token: usize,
    events: Vec<Event>,
    forwarder: Option<Forwarder>,
    /// Threads that create ranks, several at a time.
    forkers: os::Forkers,
    /// Ranks start sessions of their own (`Knobs::rank_sessions`).
    rank_sessions: bool,
    pending: VecDeque<PendingRank>,
    /// Ranks handed to the forkers, by start id.
    starting: HashMap<u64, PendingRank>,
    next_start: u64,
    /// Port-mode identity checks of ranks still being created.
    checks_waiting: Vec<(ConnId, JobIdx, u32)>,
    /// Exits reaped before the forker that created the process reported
    /// its pid.
    unclaimed_exits: HashMap<u32, std::process::ExitStatus>,
    /// Spawns answered once their job has no pending rank left.
    spawns_starting: Vec<(u64, JobIdx, fastpmi_server::SpawnOutcome)>,
    jobs: Vec<JobRt>,
    waker: Arc<mio::Waker>,
    /// Shared-memory operation counts of jobs whose segment is gone.
    shm_stats_done: shm_layout::RankStats,
    /// Client of a shared `fastpmi nameserver` (`--nameserver`).
    names: Option<names::NameClient>,
    /// Decoy segment with an unknown stamp (FASTPMI_ADVERTISE_FOREIGN_SEGMENT).
    foreign: Option<fastpmi_segment::Mapping>,
    /// The node's topology as XML, for `PMI_hwloc_xmlfile`.
    _topology: Option<topology::TopologyXml>,
    /// Rank binding: CPU lists per slot and their masks (a job's ranks get
    /// the slots `slot_load` assigns, see `rank_cpus`); `None`: ranks are
    /// not bound.
    binding: Option<(placement::Plan, Vec<os::CpuSet>)>,
    /// Ranks of live jobs per binding slot.
    slot_load: placement::SlotLoad,
    /// Intel MPI's launcher hints, from the topology.
    impi: Option<impi::Hints>,
    /// Rendezvous, stop-in-init, MPIR, fence timeout (see [`tools`]).
    tools: tools::ToolsRt,
}

/// Why the launcher could not set itself up.
#[derive(Debug, thiserror::Error)]
enum StartError {
    #[error(transparent)]
    Placement(#[from] placement::PlacementError),
    #[error("cannot start the event loop: {0}")]
    Io(#[from] io::Error),
}

/// Run a job to the end; returns the launcher's exit status.
pub fn run(cfg: &LaunchConfig) -> i32 {
    let mut l = match Launcher::new(cfg) {
        Ok(l) => l,
        Err(e) => {
            crate::errln!("fastpmi: {e}");
            return 1;
        }
    };
    match l.launch() {
        Ok(()) => l.serve(),
        // Shell convention for a program that cannot be found or run.
        Err(e @ (jobs::LaunchError::Wdir(_) | jobs::LaunchError::Program(_))) => {
            crate::errln!("fastpmi: {e}");
            127
        }
        Err(e @ jobs::LaunchError::Io(_)) => {
            crate::errln!("fastpmi: {e}");
            1
        }
    }
}

impl Launcher {
    fn new(cfg: &LaunchConfig) -> Result<Launcher, StartError> {
        let nofile = os::raise_nofile_limit();
        let forkers = cfg.knobs.forkers;
        // Before any thread of the launcher exists (see the function).
        os::reserve_descriptors(cfg.world_size(), forkers, nofile);
        os::cloexec_inherited_fds();
        let poll = Poll::new()?;
        let waker = Arc::new(mio::Waker::new(poll.registry(), WAKER)?);
        let mut signals = Signals::new([SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1])?;
        poll.registry()
            .register(&mut signals, SIGNALS, Interest::READABLE)?;
        let mut server = Server::new();
        let (topology, objects) = match topology::load() {
            Ok(t) => {
                tracing::debug!(path = %t.xml.path, bytes = t.xml.bytes, "node topology exported");
                server.set_hwloc_xmlfile(t.xml.path.clone());
                (Some(t.xml), Some(t.objects))
            }
            Err(why) => {
                tracing::debug!("no PMI_hwloc_xmlfile, no binding: {why}");
                (None, None)
            }
        };
        let impi = objects.as_ref().and_then(impi::Hints::from_topology);
        let binding = placement::plan(&cfg.placement, objects.as_ref())?
            .map(|plan| {
                let sets = plan
                    .slots
                    .iter()
                    .map(|c| os::CpuSet::new(c))
                    .collect::<io::Result<Vec<_>>>()?;
                io::Result::Ok((plan, sets))
            })
            .transpose()?;
        if cfg.placement.print {
            for r in 0..cfg.world_size() {
                match &binding {
                    Some((plan, _)) => crate::errln!(
                        "fastpmi: rank {r} bound to cpus {}",
                        crate::ranges::ranges(plan.cpus(r))
                    ),
                    None => crate::errln!("fastpmi: rank {r} not bound"),
                }
            }
        }
        server.set_tolerate_group_failures(cfg.tolerate_group_failures);
        let names = match &cfg.nameserver {
            Some(addr) => {
                server.use_remote_names();
                Some(names::NameClient::start(addr.clone(), waker.clone())?)
            }
            None => None,
        };
        let tools = tools::ToolsRt::start(waker.clone(), cfg.stop_in_init);
        Ok(Launcher {
            cfg: cfg.clone(),
            poll,
            server,
            conns: HashMap::new(),
            ready: VecDeque::new(),
            procs: Vec::new(),
            by_pid: HashMap::new(),
            failure: None,
            kill_at: None,
            interrupted: None,
            signals,
            listeners: HashMap::new(),
            unidentified: 0,
            unidentified_order: VecDeque::new(),
            next_token: FIRST_CONN,
            events: Vec::new(),
            forwarder: None,
            forkers: os::Forkers::new(forkers, waker.clone())?,
            rank_sessions: cfg.knobs.rank_sessions,
            pending: VecDeque::new(),
            starting: HashMap::new(),
            next_start: 0,
            checks_waiting: Vec::new(),
            unclaimed_exits: HashMap::new(),
            spawns_starting: Vec::new(),
            jobs: Vec::new(),
            waker,
            shm_stats_done: Default::default(),
            names,
            foreign: None,
            _topology: topology,
            slot_load: placement::SlotLoad::new(binding.as_ref().map_or(0, |(p, _)| p.slots.len())),
            binding,
            impi,
            tools,
        })
    }

    /// The CPUs `rank` of `job` is bound to, if it is.
    fn rank_cpus(&self, job: JobIdx, rank: u32) -> Option<(&[u32], &os::CpuSet)> {
        let (plan, sets) = self.binding.as_ref()?;
        let i = *self.jobs.get(job)?.slots.get(rank as usize)? as usize;
        Some((plan.slots.get(i)?, sets.get(i)?))
    }

    fn running(&self) -> usize {
        self.procs.iter().filter(|p| p.status.is_none()).count()
    }

    /// The event loop: until every rank of every job has been reaped.
    fn serve(&mut self) -> i32 {
        let mut events = Events::with_capacity(1024);
        let mut buf = vec![0u8; 64 * 1024];
        self.apply_events();
        while self.running() > 0 || !self.pending.is_empty() || !self.starting.is_empty() {
            self.spawn_next();
            if !self.spawns_starting.is_empty() {
                self.answer_started_spawns();
            }
            let timeout = if !self.ready.is_empty()
                || (!self.pending.is_empty() && self.forkers.has_room())
            {
                Some(Duration::ZERO)
            } else {
                let kill = self
                    .kill_at
                    .map(|t| t.saturating_duration_since(Instant::now()));
                // Shared-memory ranks stuck in a fence send nothing: look.
                let stuck = self.server.needs_stuck_check().then_some(STUCK_CHECK);
                // Group invitations and joins that time out.
                let groups = self
                    .server
                    .next_group_deadline()
                    .map(|t| t.saturating_duration_since(Instant::now()));
                kill.into_iter()
                    .chain(stuck)
                    .chain(groups)
                    .chain(self.tools_tick())
                    .min()
            };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    crate::errln!("fastpmi: event loop failed: {e}");
                    self.begin_teardown(Signal::KILL);
                }
            }
            if !events.is_empty() || !self.ready.is_empty() {
                self.tools_touched();
            }
            for ev in events.iter() {
                match ev.token() {
                    SIGNALS => self.on_signals(),
                    WAKER => {
                        self.forks_done();
                        self.server.poll_store(&mut self.events);
                        self.name_replies();
                        self.serve_tool_queries();
                    }
                    tok if self.listeners.contains_key(&tok) => self.accept(tok),
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
            self.server.group_timers(Instant::now(), &mut self.events);
            self.apply_events();
            self.update_fence_watchers();
            self.check_fence_timeouts();
            if self.server.needs_stuck_check() {
                self.server.check_stuck_all(&mut self.events);
                self.apply_events();
            }
            if self.kill_at.is_some_and(|t| Instant::now() >= t) {
                self.kill_at = None;
                for p in self
                    .procs
                    .iter_mut()
                    .filter(|p| p.status.is_none() && p.signaled.is_some())
                {
                    tracing::debug!(rank = p.rank, "SIGKILL after grace period");
                    p.signaled = Some(libc::SIGKILL);
                    os::signal(p.pid, Signal::KILL);
                }
            }
            self.tools_republish();
        }
        for j in &self.jobs {
            j.stop.store(true, Ordering::Relaxed);
        }
        if let Some(f) = self.forwarder.take() {
            f.finish(Duration::from_millis(500));
        }
        if self.cfg.stats {
            eprint!("{}", self.stats_report());
        }
        let failed = self.failure_message();
        self.tools_exit(failed.as_deref());
        self.exit_code()
    }

    /// Whether the socket of port-mode connection `tok` belongs to the
    /// process started as `rank` of `job` (or one of its descendants).
    fn peer_is_rank(&self, tok: Token, job: JobIdx, rank: u32) -> bool {
        let Some(inode) = self.conns.get(&tok).and_then(|c| c.peer_inode) else {
            return false;
        };
        self.procs
            .iter()
            .find(|p| p.job == job && p.rank == rank && p.status.is_none())
            .is_some_and(|p| peer::tree_holds_socket(p.pid, inode))
    }

    /// Answers of the shared name server, handed to the waiting ranks.
    fn name_replies(&mut self) {
        let Some(n) = &self.names else { return };
        for (id, result) in n.replies() {
            self.server.name_reply(id, result, &mut self.events);
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
                        if self.interrupted.is_some() {
                            continue;
                        }
                        let activity = self.server.rank_activity(job, rank);
                        let (code, prefer) = match cause {
                            FailCause::Abort { code } => (code, false),
                            FailCause::ConnectionLost | FailCause::ExitedEarly => (1, true),
                            FailCause::ProtocolError => (1, false),
                        };
                        self.record_failure(job, rank, message.clone(), code, activity, prefer);
                        self.fail_group(job, code, &message);
                    }
                    Event::Spawn { id, job, rank, req } => self.spawn_job(id, job, rank, req),
                    Event::CheckPeer { conn, job, rank } => {
                        // Its forker has not reported the pid yet: check
                        // once it has (`started`, `not_started`).
                        if self
                            .starting
                            .values()
                            .any(|p| p.job == job && p.rank == rank)
                        {
                            self.checks_waiting.push((conn, job, rank));
                            continue;
                        }
                        let ok = self.peer_is_rank(Token(conn), job, rank);
                        self.server.peer_checked(conn, ok, &mut self.events);
                        self.note_identified(Token(conn));
                    }
                    Event::Refuse { conn, reason } => {
                        crate::errln!("fastpmi: refused PMI connection {conn} from {reason}");
                    }
                    Event::Names { id, owner, op } => match &self.names {
                        Some(n) => n.send(id, owner, op),
                        None => self.server.name_reply(
                            id,
                            Err("no name server".into()),
                            &mut self.events,
                        ),
                    },
                }
            }
        }
    }
}
