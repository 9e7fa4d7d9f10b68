//! The launcher: starts the ranks of every job (the first one and those its
//! ranks spawn), serves PMI on one non-blocking event loop, supervises the
//! processes and tears jobs down on failure.
//!
//! One room per concern, each a part that owns its state and is reached
//! through its own methods: [`conn`] (PMI connections and their I/O:
//! `Conns`), [`jobs`] (creating a job: `Jobs`), [`starting`] (starting its
//! ranks: `Starter`), [`supervise`] (reaping, failures, signals, exit
//! status: `Procs`), [`deaths`] (fault-tolerant jobs), [`binding`]
//! (topology and CPU binding: `Binding`), [`tools`] (rendezvous, MPIR,
//! reports, `--fence-timeout`: `ToolsRt`), [`pmix`] (`PmixHost`), [`nest`],
//! [`singletons`], [`output`]. Besides: [`spawn`] (turning a spawn request
//! into a job), [`watch`] (threads that sleep on a job's segment),
//! [`names`] (the shared name server's client), and the computations
//! [`placement`], [`topology`], [`impi`]; [`os`] is the OS glue.
//!
//! [`Launcher`] holds the parts; its methods are here (set-up, the event
//! loop and the loop's hooks: [`Woken`], [`Due`]) and in [`events`] (what
//! the server core asked for, and the reactions that span parts).

mod binding;
mod conn;
mod deaths;
mod events;
mod fabric;
mod impi;
mod jobs;
pub mod mpir;
mod names;
mod nest;
pub mod os;
pub mod output;
mod peer;
pub mod placement;
mod pmix;
mod singletons;
mod spawn;
mod starting;
mod supervise;
pub use supervise::stats_row;
mod timeline;
mod tools;
pub mod topology;
mod watch;

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};
use rustix::process::Signal;
use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGTERM, SIGUSR1};
use signal_hook_mio::v1_0::Signals;

use crate::config::LaunchConfig;
use binding::Binding;
use conn::{Conns, FIRST_CONN};
use fastpmi_server::{Event, Server};
use jobs::Jobs;
use output::Output;
use starting::Starter;
use supervise::Procs;

const SIGNALS: Token = Token(0);
const WAKER: Token = Token(2);
/// The tools' rendezvous, until its first connection (`ToolsRt::accept`).
const RENDEZVOUS: Token = Token(3);
/// How often to look for fences that a finalized or exited rank blocks.
const STUCK_CHECK: Duration = Duration::from_millis(100);
/// How often to look for continued commands that stopped coming, and for
/// PMIx ranks whose finalize was not heard before their exit.
const CONTINUED_CHECK: Duration = Duration::from_millis(250);
/// Event-loop tokens of the ranks' output pipes it holds (`output::Output`),
/// far above the connections'.
const FIRST_HELD_OUTPUT: usize = usize::MAX / 2;

/// What the parts' threads hand over (forks done, upcalls, replies, tool
/// queries), taken when the waker fires, in this order.
#[derive(Clone, Copy)]
enum Woken {
    PmixUpcalls,
    Forks,
    Store,
    Names,
    Outer,
    ToolQueries,
}

const WOKEN: [Woken; 6] = [
    Woken::PmixUpcalls,
    Woken::Forks,
    Woken::Store,
    Woken::Names,
    Woken::Outer,
    Woken::ToolQueries,
];

/// What the parts do after each round of the loop, in this order.
#[derive(Clone, Copy)]
enum Due {
    /// Group timers and continued commands that stopped coming.
    ServerTimers,
    /// PMIx ranks whose finalize was not heard before their exit.
    PmixExits,
    /// Fence watchers pointed at the fences socket ranks wait in.
    Watchers,
    FenceTimeouts,
    /// Fences that a finalized or exited shared-memory rank blocks.
    StuckFences,
    /// SIGKILL to ranks past their grace (teardown, dead ranks).
    Kills,
    /// `fastpmi ps`'s snapshot.
    ToolsSnapshot,
    Nest,
    /// Name lookups, recorded files, dead PMIx ranks.
    Pmix,
    Singletons,
}

const DUE: [Due; 10] = [
    Due::ServerTimers,
    Due::PmixExits,
    Due::Watchers,
    Due::FenceTimeouts,
    Due::StuckFences,
    Due::Kills,
    Due::ToolsSnapshot,
    Due::Nest,
    Due::Pmix,
    Due::Singletons,
];

/// The launcher: the event loop's own state, and the parts it orchestrates,
/// each the only way to its state.
pub struct Launcher {
    cfg: LaunchConfig,
    poll: Poll,
    signals: Signals,
    waker: Arc<mio::Waker>,
    server: Server,
    /// What the server asked for, carried out by `apply_events`.
    events: Vec<Event>,
    /// The ranks' output (labelled with `-l`).
    output: Output,
    /// Client of a shared `fastpmi nameserver` (`--nameserver`).
    names: Option<names::NameClient>,
    /// Segments, watchers and liveness of each job.
    jobs: Jobs,
    /// PMI connections and port-mode listeners.
    conns: Conns,
    /// Ranks on their way: queued, being created, waited for.
    starter: Starter,
    /// Rank processes, and the failure or signal the launcher exits with.
    procs: Procs,
    /// Topology, CPU binding and Intel MPI's hints.
    binding: Binding,
    /// Rendezvous, stop-in-init, MPIR, fence timeout (see [`tools`]).
    tools: tools::ToolsRt,
    /// The PMIx server, once a job has a PMIx section (see [`pmix`]).
    pmix: Option<pmix::PmixHost>,
    /// PMI ranks watched for Open MPI's library ([`singletons`]).
    singletons: singletons::Watch,
    /// Nested mode: this launcher is a node server of an outer job.
    nest: Option<nest::Nest>,
    /// Deaths in fault-tolerant jobs (see [`deaths`]).
    deaths: deaths::Deaths,
}

/// Why the launcher could not set itself up.
#[derive(Debug, thiserror::Error)]
enum StartError {
    #[error(transparent)]
    Binding(#[from] binding::BindingError),
    #[error("cannot start the event loop: {0}")]
    Io(#[from] io::Error),
}

/// Run a job to the end; returns the launcher's exit status.
pub fn run(cfg: &LaunchConfig) -> i32 {
    timeline::begin();
    let mut l = match Launcher::new(cfg) {
        Ok(l) => l,
        Err(e) => {
            crate::errln!("fastpmi: {e}");
            return 1;
        }
    };
    match nest::Nest::join(cfg) {
        Ok(n) => l.nest = n,
        Err(e) => {
            crate::errln!("fastpmi: {e}");
            return 1;
        }
    }
    // A node server's ranks publish and look up in the outer job's name
    // service (unless a shared name server was named).
    if let (Some(n), None) = (&l.nest, &l.names) {
        match n.names(l.waker.clone()) {
            Ok(c) => {
                l.server.use_remote_names();
                l.names = Some(c);
            }
            Err(e) => {
                crate::errln!("fastpmi: cannot start the name-service thread: {e}");
                return 1;
            }
        }
    }
    let launched = l.launch();
    let code = match &launched {
        Ok(()) => l.serve(),
        Err(_) => 0,
    };
    timeline::step("exit");
    if let Some(p) = &mut l.pmix {
        p.remove_files();
    }
    match launched {
        Ok(()) => {
            // What is left (descriptors, mappings, parked threads) is the
            // kernel's to free at exit, all at once; the rendezvous is
            // already removed and the output flushed. Freeing it piece by
            // piece took 0.1 ms of a 2.7 ms one-rank job.
            std::mem::forget(l);
            code
        }
        // Shell convention for a program that cannot be found or run.
        Err(e @ (jobs::create::LaunchError::Wdir(_) | jobs::create::LaunchError::Program(_))) => {
            crate::errln!("fastpmi: {e}");
            127
        }
        Err(e @ jobs::create::LaunchError::Io(_)) => {
            crate::errln!("fastpmi: {e}");
            1
        }
    }
}

impl Launcher {
    fn new(cfg: &LaunchConfig) -> Result<Launcher, StartError> {
        let nofile = os::raise_nofile_limit();
        let eager = cfg.knobs.forkers.min(2 * os::usable_cpus());
        let forkers = os::forkers_for(cfg.world_size(), eager, cfg.knobs.forkers);
        // Before any thread of the launcher exists (see the function).
        os::reserve_descriptors(cfg.world_size(), forkers, nofile);
        os::cloexec_inherited_fds();
        os::one_malloc_arena();
        timeline::step("descriptors ready");
        let poll = Poll::new()?;
        let waker = Arc::new(mio::Waker::new(poll.registry(), WAKER)?);
        let mut signals = Signals::new([SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1])?;
        poll.registry()
            .register(&mut signals, SIGNALS, Interest::READABLE)?;
        let mut server = Server::new();
        timeline::step("event loop ready");
        let binding = Binding::new(&cfg.placement, cfg.knobs.topology_cache)?;
        timeline::step("topology and binding ready");
        if cfg.placement.print {
            binding.print(cfg.world_size());
        }
        server.set_tolerate_group_failures(cfg.tolerate_group_failures);
        let names = match &cfg.nameserver {
            Some(addr) => {
                server.use_remote_names();
                Some(names::NameClient::start(addr.clone(), waker.clone())?)
            }
            None => None,
        };
        let tools = tools::ToolsRt::new(waker.clone(), cfg.stop_in_init);
        let starter = Starter::new(
            os::Forkers::new(forkers, eager, waker.clone())?,
            cfg.knobs.rank_sessions,
        );
        // After the forkers' descriptor slots, which must have the lowest
        // numbers (see `os::Spawner`).
        let conns = Conns::new(poll.registry().try_clone()?, FIRST_CONN);
        timeline::step("forkers ready");
        Ok(Launcher {
            cfg: cfg.clone(),
            poll,
            signals,
            server,
            events: Vec::new(),
            output: Output::new(cfg.label, FIRST_HELD_OUTPUT),
            names,
            jobs: Jobs::new(),
            conns,
            starter,
            procs: Procs::new(),
            binding,
            tools,
            waker,
            pmix: None,
            singletons: Default::default(),
            nest: None,
            deaths: Default::default(),
        })
    }

    /// Create the first job and queue its ranks.
    fn launch(&mut self) -> Result<(), jobs::create::LaunchError> {
        let (plans, jobid, universe) = jobs::create::first_job(&self.cfg, self.nest.as_ref())?;
        let job = self.create_job(jobid, plans, universe, None)?;
        timeline::step("first job created");
        self.server
            .set_psets(job, crate::config::psets::of_config(&self.cfg));
        // The first ranks go to the forkers now; what only the loop needs
        // (the topology's XML, the tools' rendezvous) is set up while they
        // start: no request is served before it. Their output pipes are
        // held by the loop until one has output (`output::Output`).
        self.spawn_next();
        timeline::step("first ranks handed to the forkers");
        self.publish_topology();
        timeline::step("topology published");
        self.tools.listen(self.poll.registry(), RENDEZVOUS);
        timeline::step("rendezvous ready");
        Ok(())
    }

    /// Export the topology's XML (once) and answer `PMI_hwloc_xmlfile` with
    /// it; where it is.
    fn publish_topology(&mut self) -> Option<&str> {
        let path = self.binding.publish()?;
        self.server.set_hwloc_xmlfile(path.to_string());
        Some(path)
    }

    /// The event loop: until every rank of every job has been reaped. It
    /// knows the parts only through their hooks ([`Due`], [`Woken`],
    /// [`Launcher::deadline`]): a new part adds hooks, not branches here.
    fn serve(&mut self) -> i32 {
        let mut events = Events::with_capacity(1024);
        // Filled by reads, never zeroed (see `Conns::read`).
        let mut buf = Vec::with_capacity(64 * 1024);
        self.apply_events();
        while self.procs.running() > 0 || !self.starter.is_idle() || self.server.has_pmix_exits() {
            self.spawn_next();
            if self.starter.spawns_waiting() {
                self.answer_started_spawns();
            }
            let timeout = if self.conns.has_ready() || self.starter.can_start() {
                Some(Duration::ZERO)
            } else {
                self.deadline()
            };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    crate::errln!("fastpmi: event loop failed: {e}");
                    self.begin_teardown(Signal::KILL);
                }
            }
            if !events.is_empty() || self.conns.has_ready() {
                self.tools.touched();
            }
            for ev in events.iter() {
                match ev.token() {
                    SIGNALS => self.on_signals(),
                    WAKER => {
                        for w in WOKEN {
                            self.woken(w);
                        }
                    }
                    RENDEZVOUS => self.tools.accept(self.poll.registry()),
                    tok if self.output.holds(tok) => self.output.ready(self.poll.registry(), tok),
                    tok if self.conns.is_listener(tok) => {
                        self.conns.accept(&mut self.server, &mut self.events, tok)
                    }
                    tok => {
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            self.read_conn(tok, &mut buf);
                        }
                        if ev.is_writable() {
                            self.conns.flush(&mut self.server, &mut self.events, tok);
                        }
                    }
                }
                self.apply_events();
            }
            // Connections that still had input after their read budget.
            for _ in 0..self.conns.ready_count() {
                if let Some(tok) = self.conns.next_ready() {
                    self.read_conn(tok, &mut buf);
                    self.apply_events();
                }
            }
            for d in DUE {
                self.due(d);
            }
        }
        self.nest_tick();
        let interrupted = self.procs.interrupted().is_some();
        if let Some(n) = &mut self.nest {
            n.finish(interrupted);
        }
        timeline::step("all ranks ended");
        self.jobs.stop_all();
        self.output
            .finish(self.poll.registry(), Duration::from_millis(500));
        timeline::step("output written");
        if self.cfg.stats {
            eprint!(
                "{}",
                self.procs.stats_report(&self.server, self.jobs.shm_stats())
            );
        }
        let failed = self.procs.failure_message();
        self.tools.exit(failed.as_deref());
        match (self.procs.exit_code(), self.deaths.first_status()) {
            // `--fail-on-death`: the first dead rank's status.
            (0, Some(status)) if self.cfg.fail_on_death => status,
            (code, _) => code,
        }
    }

    /// How long the loop may sleep: until the first part has work due.
    fn deadline(&self) -> Option<Duration> {
        let kill = self.procs.kill_wait();
        // Shared-memory ranks stuck in a fence send nothing: look.
        let stuck = self.server.needs_stuck_check().then_some(STUCK_CHECK);
        // Group invitations and joins that time out.
        let groups = self
            .server
            .next_group_deadline()
            .map(|t| t.saturating_duration_since(Instant::now()));
        let continued = (self.server.has_continuations() || self.server.has_pmix_exits())
            .then_some(CONTINUED_CHECK);
        let failed = self.procs.has_failure();
        kill.into_iter()
            .chain(self.deaths.wait())
            .chain(stuck)
            .chain(continued)
            .chain(groups)
            .chain(self.tools.tick(self.cfg.fence_timeout))
            .chain(self.nest.as_ref().and_then(|n| n.wait(failed)))
            .chain(self.pmix.as_ref().and_then(pmix::PmixHost::tick))
            .chain(self.singletons.wait())
            .min()
    }

    fn woken(&mut self, w: Woken) {
        match w {
            Woken::PmixUpcalls => self.pmix_upcalls(),
            Woken::Forks => self.forks_done(),
            Woken::Store => self.server.poll_store(&mut self.events),
            Woken::Names => {
                if let Some(n) = &self.names {
                    n.hand_replies(&mut self.server, &mut self.events);
                }
            }
            Woken::Outer => {
                if let Some(n) = &self.nest {
                    n.outer_replies(&mut self.server, &mut self.events);
                }
            }
            Woken::ToolQueries => self.serve_tool_queries(),
        }
    }

    fn due(&mut self, d: Due) {
        match d {
            Due::ServerTimers => {
                self.server.group_timers(Instant::now(), &mut self.events);
                if self.server.has_continuations() {
                    self.server
                        .expire_continuations(Instant::now(), &mut self.events);
                }
            }
            Due::PmixExits => {
                if self.server.has_pmix_exits() {
                    self.pmix_upcalls();
                    self.server
                        .check_pmix_exits(Instant::now(), &mut self.events);
                    self.pmix_end_ranks_and_jobs();
                    self.apply_events();
                }
                self.apply_events();
            }
            Due::Watchers => self.jobs.update_watchers(&self.server, &self.waker),
            Due::FenceTimeouts => self.check_fence_timeouts(),
            Due::StuckFences => {
                if self.server.needs_stuck_check() {
                    self.server.check_stuck_all(&mut self.events);
                    self.apply_events();
                }
            }
            Due::Kills => {
                self.procs.kill_overdue();
                self.deaths.kill_doomed(&mut self.procs);
            }
            Due::ToolsSnapshot => self.tools_republish(),
            Due::Nest => {
                if self.nest.is_some() {
                    self.nest_tick();
                    self.apply_events();
                }
            }
            Due::Pmix => {
                let Some(host) = &mut self.pmix else { return };
                if host.due(&mut self.server, &mut self.events, &self.procs) {
                    // With a shared name server the lookups are events to
                    // send now: the loop would otherwise sleep on them.
                    self.apply_events();
                }
            }
            Due::Singletons => self.singletons.check(&self.server, &self.procs),
        }
    }
}
