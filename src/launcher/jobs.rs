//! Creating a job (store, segment, watchers, port listener, server entry)
//! and starting its ranks: handed to the forker threads a few at a time
//! from the event loop, so early ranks are served while later ones are
//! still being created.

use std::ffi::OsString;
use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

use mio::net::{TcpListener, UnixStream};
use mio::Interest;

use super::conn::{stream_nonblocking, Sock};
use super::output::Forwarder;
use super::supervise::RankProc;
use super::{os, JobRt, Launcher, PARENT_SEGMENT_FD_IN_RANK, PMI_FD_IN_RANK, SEGMENT_FD_IN_RANK};
use fastpmi_codec::names::{self, attr};
use fastpmi_segment::{JobSegment, MemPool};
use fastpmi_server::store::{MemStore, ShmStore, Store};
use fastpmi_server::{JobIdx, JobSpec};

/// A new job's store and, when it has one, its segment.
type JobStore = (Box<dyn Store>, Option<Arc<JobSegment>>);

/// One application (MPMD section or spawn command) of a job to start.
pub(super) struct AppPlan {
    pub nranks: u32,
    pub program: PathBuf,
    /// The program as the user wrote it, for messages.
    pub shown: OsString,
    pub args: Vec<OsString>,
    /// Environment of every rank of this application (before PMI's own).
    pub env: Vec<(OsString, OsString)>,
    pub wdir: Option<PathBuf>,
    /// argv and environment of its ranks, built when the first one starts.
    pub image: OnceLock<Arc<os::ExecImage>>,
}

/// A rank not started yet.
pub(super) struct PendingRank {
    pub job: JobIdx,
    pub rank: u32,
    app: Arc<AppPlan>,
    /// PMI variables of this rank.
    pmi_env: Vec<(OsString, OsString)>,
    socketpair: bool,
    /// Output label: `rank` in the first job, `job,rank` in spawned ones.
    tag: String,
}

impl PendingRank {
    /// The program it will run.
    pub fn program(&self) -> &std::path::Path {
        &self.app.program
    }
}

#[derive(Debug, thiserror::Error)]
pub(super) enum LaunchError {
    #[error("-wdir {}: not a directory", .0.display())]
    Wdir(PathBuf),
    #[error(transparent)]
    Program(#[from] os::ProgramError),
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl Launcher {
    /// Create the first job and queue its ranks.
    pub(super) fn launch(&mut self) -> Result<(), LaunchError> {
        let cfg = self.cfg.clone();
        let size = cfg.world_size();
        // Resolve programs first: one clear error instead of one per rank.
        let mut plans = Vec::new();
        for app in &cfg.apps {
            if let Some(d) = &app.wdir {
                if !d.is_dir() {
                    return Err(LaunchError::Wdir(d.clone()));
                }
            }
            let program = os::resolve_program(&app.program, app.wdir.as_deref())?;
            let mut env = cfg.genv.clone();
            env.extend(app.env.iter().cloned());
            plans.push(AppPlan {
                nranks: app.nranks,
                program,
                shown: app.program.clone(),
                args: app.args.clone(),
                env,
                wdir: app.wdir.clone(),
                image: OnceLock::new(),
            });
        }
        self.forwarder = Some(Forwarder::start(cfg.label)?);
        let jobid = format!("fastpmi_{}_0", std::process::id());
        let job = self.create_job(jobid, plans, size, None)?;
        self.server
            .set_psets(job, crate::config::psets::of_config(&cfg));
        Ok(())
    }

    /// Create a job (first or spawned) and queue its ranks. `apps` may hold
    /// applications of 0 ranks (a spawn command that failed keeps its appnum).
    pub(super) fn create_job(
        &mut self,
        id: String,
        apps: Vec<AppPlan>,
        universe_size: u32,
        spawned_by: Option<SpawnedBy>,
    ) -> io::Result<JobIdx> {
        let size: u32 = apps.iter().map(|a| a.nranks).sum();
        let spawned = spawned_by.is_some();
        let spawner = spawned_by.map(|s| self.server.job_id(s.job).to_string());
        let spawner_slot =
            spawned_by.and_then(|s| self.jobs[s.job].slots.get(s.rank as usize).copied());
        let parent_segment = spawned_by.and_then(|s| self.jobs[s.job].segment.clone());
        let (store, segment) = self.job_store(size, &id, parent_segment.as_deref())?;
        // Ranks held in init (`--stop-in-init`) are held at the socket
        // handshake, so they must not attach without one.
        let direct = if self.tools_holding_new_jobs() {
            Vec::new()
        } else {
            direct_env(&*store, spawner.as_deref())
        };
        let job = self.server.add_job(JobSpec {
            id: id.clone(),
            apps: apps.iter().map(|a| a.nranks).collect(),
            universe_size,
            spawner,
            store,
        });
        debug_assert_eq!(job, self.jobs.len());
        self.tools_job_created(job);
        let stop = Arc::new(AtomicBool::new(false));
        let fence_watcher = segment.as_ref().and_then(|s| self.watch(s, &stop));
        self.jobs.push(JobRt {
            segment,
            parent_segment,
            fence_watcher,
            stop,
            live: size,
            torn_down: false,
            slots: self.slot_load.assign(size, spawner_slot),
        });
        self.set_fence_cohorts(job);
        let port = if self.cfg.pmi_port {
            let bind = self.cfg.pmi_port_bind.unwrap_or([127, 0, 0, 1].into());
            let mut l = TcpListener::bind(std::net::SocketAddr::new(bind, 0))?;
            let tok = self.token();
            self.poll
                .registry()
                .register(&mut l, tok, Interest::READABLE)?;
            let mut addr = l.local_addr()?;
            if addr.ip().is_unspecified() {
                // Listening everywhere: local ranks still come by loopback.
                addr.set_ip([127, 0, 0, 1].into());
            }
            self.listeners.insert(tok, (l, job));
            Some(addr)
        } else {
            None
        };
        // Port mode: a secret per job, for the challenge-response.
        let secret = match port {
            Some(_) => {
                let mut raw = [0u8; 32];
                getrandom::fill(&mut raw).map_err(|e| {
                    io::Error::other(format!("no randomness for the job secret: {e}"))
                })?;
                let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
                self.server.set_job_secret(job, hex.clone());
                Some(hex)
            }
            None => None,
        };
        let mut rank = 0u32;
        let impi = self
            .impi
            .as_ref()
            .map(|h| h.for_job(size, |r| self.rank_cpus(job, r).map(|(c, _)| c)));
        for (appnum, mut app) in apps.into_iter().enumerate() {
            if let Some(h) = &impi {
                let add = h.app_env(&app.env);
                app.env.extend(add);
            }
            let pin_info = impi.as_ref().filter(|h| h.sets_pin_info(&app.env));
            let app = Arc::new(app);
            for _ in 0..app.nranks {
                let mut env: Vec<(OsString, OsString)> = Vec::with_capacity(8);
                let mut set = |k: &str, v: String| env.push((k.into(), v.into()));
                if let Some(addr) = port {
                    set(names::env::PMI_PORT, addr.to_string());
                    set(names::env::PMI_ID, rank.to_string());
                    if let Some(sec) = &secret {
                        set(fastpmi_codec::names::env::AUTH_SECRET, sec.clone());
                    }
                } else {
                    // Always fd 3 in the rank (even `sh` can use it).
                    set(names::env::PMI_FD, PMI_FD_IN_RANK.to_string());
                    set(names::env::PMI_RANK, rank.to_string());
                    set(names::env::PMI_SIZE, size.to_string());
                    for (k, v) in &direct {
                        set(k, v.clone());
                    }
                    if !direct.is_empty() {
                        set(fastpmi_codec::names::env::APPNUM, appnum.to_string());
                    }
                }
                set(names::env::PMI_JOBID, id.clone());
                if spawned {
                    set(names::env::PMI_SPAWNED, "1".into());
                }
                set("MPI_LOCALNRANKS", size.to_string());
                set("MPI_LOCALRANKID", rank.to_string());
                if let Some(h) = pin_info {
                    let (k, v) = h.rank_env(rank);
                    set(k, v);
                }
                self.pending.push_back(PendingRank {
                    job,
                    rank,
                    app: app.clone(),
                    pmi_env: env,
                    socketpair: port.is_none(),
                    tag: if job == 0 {
                        rank.to_string()
                    } else {
                        format!("{job},{rank}")
                    },
                });
                rank += 1;
            }
        }
        tracing::debug!(ranks = size, job = %id, "starting ranks");
        Ok(job)
    }

    /// Ranks bound to the same CPUs wake each other from the fence
    /// (`placement::fence_cohorts`), unless `Knobs::fence_cohorts` is off.
    fn set_fence_cohorts(&self, job: JobIdx) {
        let rt = &self.jobs[job];
        let Some(seg) = &rt.segment else { return };
        if !self.cfg.knobs.fence_cohorts {
            return;
        }
        if let Some(of_rank) = super::placement::fence_cohorts(&rt.slots) {
            let fence = seg.seg().fence();
            fence.set_cohorts(&of_rank);
            tracing::debug!(cohorts = fence.cohort_count(), "fence released by cohorts");
        }
    }

    /// The store of a new job: its segment when one is configured, with the
    /// node attributes that tell clients how to map it.
    fn job_store(
        &mut self,
        size: u32,
        jobid: &str,
        parent: Option<&JobSegment>,
    ) -> io::Result<JobStore> {
        let (mut store, segment): (Box<dyn Store>, _) = match self.cfg.mem_pool {
            None => (
                Box::new(MemStore::new(size, fastpmi_codec::VALLEN_MAX)),
                None,
            ),
            Some(pool) => {
                let mut params = shm_layout::SegmentParams::for_ranks(size);
                if let Some(mb) = self.cfg.kvs_mb {
                    params = params.with_kvs_mb(mb);
                }
                let seg = Arc::new(JobSegment::create(pool, &params, jobid).map_err(|e| {
                    io::Error::other(format!(
                        "cannot create the {} job segment: {e}",
                        pool.attr()
                    ))
                })?);
                if fastpmi_segment::tsc_stamps_usable() {
                    if let Some(tsc) = fastpmi_segment::read_tsc() {
                        let clock = seg.seg().job().stamp_clock();
                        clock.set_tsc(tsc, fastpmi_segment::monotonic_ns());
                    }
                }
                if let Some(k) = self.cfg.knobs.fence_fanout {
                    seg.seg().fence().set_fanout(k);
                }
                tracing::debug!(
                    fence_fanout = seg.seg().fence().fanout(),
                    bytes = seg.mapping().len(),
                    pool = pool.attr(),
                    "job segment created"
                );
                (Box::new(ShmStore::new(seg.clone())), Some(seg))
            }
        };
        let mut attrs: Vec<(&str, String)> = vec![
            ("localRanksCount", size.to_string()),
            (
                attr::LOCAL_RANKS,
                (0..size)
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
        ];
        if let Some(seg) = &segment {
            let m = seg.mapping();
            if self.foreign.is_none() && self.cfg.knobs.advertise_foreign_segment {
                self.foreign = Some(fastpmi_segment::Mapping::foreign_stamp()?);
            }
            attrs.push((attr::MEM_POOL_TYPE, m.pool().attr().to_string()));
            match m.pool() {
                MemPool::AnonMmap => {
                    attrs.push((attr::MEM_ANON_MMAP_FD, SEGMENT_FD_IN_RANK.to_string()))
                }
                MemPool::Sysv => {
                    attrs.push((attr::MEM_SYSV_ID, m.sysv_id().unwrap_or(-1).to_string()))
                }
            }
            if let Some(p) = parent.map(JobSegment::mapping) {
                let v = match (p.fd(), p.sysv_id()) {
                    (Some(_), _) => Some(format!("fd:{PARENT_SEGMENT_FD_IN_RANK}")),
                    (None, Some(id)) => Some(format!("sysv:{id}")),
                    _ => None,
                };
                if let Some(v) = v {
                    attrs.push((fastpmi_codec::names::attr::PARENT_SEGMENT, v));
                }
            }
        }
        for (k, v) in attrs {
            store
                .put_launcher_attr(k.as_bytes(), v.as_bytes())
                .map_err(|e| io::Error::other(format!("node attribute {k}: {e}")))?;
        }
        Ok((store, segment))
    }

    /// Whether every rank of `job` has been started (or dropped). Pending
    /// ranks are handed out in order, job by job: none of `job` is left
    /// once the queue is empty or at a later job and no rank of it is still
    /// being started.
    pub(super) fn all_started(&self, job: JobIdx) -> bool {
        self.pending.front().is_none_or(|p| p.job > job)
            && !self.starting.values().any(|p| p.job == job)
    }

    /// Hand pending ranks to the forkers while one is free. The event loop
    /// calls this between polls, so early ranks are served while later ones
    /// are still being created.
    pub(super) fn spawn_next(&mut self) {
        while self.forkers.has_room() {
            let Some(p) = self.pending.pop_front() else {
                return;
            };
            self.tools_touched();
            if self.jobs[p.job].torn_down || self.interrupted.is_some() {
                self.rank_gone(p.job);
                continue;
            }
            let id = self.next_start;
            self.next_start += 1;
            match self.start_rank(id, &p) {
                Ok(()) => {
                    self.starting.insert(id, p);
                }
                Err(e) => self.not_started(p, e),
            }
        }
    }

    /// Take in what the forkers report: started ranks are supervised,
    /// failed ones fail their job.
    pub(super) fn forks_done(&mut self) {
        let mut any = false;
        while let Some(d) = self.forkers.try_done() {
            any = true;
            let Some(p) = self.starting.remove(&d.id) else {
                continue;
            };
            match d.result {
                Ok(s) => self.started(p, s),
                Err(e) => self.not_started(p, e),
            }
        }
        if any {
            if self.pending.is_empty() && self.starting.is_empty() {
                tracing::debug!("all ranks started");
            }
            self.tools_all_started();
            self.apply_events();
        }
    }

    /// Port-mode identity checks that waited for rank `rank` of `job` to be
    /// known (it started, or failed to: then no socket is its).
    fn run_waiting_checks(&mut self, job: JobIdx, rank: u32) {
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.checks_waiting)
            .into_iter()
            .partition(|&(_, j, r)| j == job && r == rank);
        self.checks_waiting = later;
        for (conn, job, rank) in now {
            let tok = mio::Token(conn);
            let ok = self.peer_is_rank(tok, job, rank);
            self.server.peer_checked(conn, ok, &mut self.events);
            self.note_identified(tok);
        }
    }

    fn not_started(&mut self, p: PendingRank, e: io::Error) {
        self.run_waiting_checks(p.job, p.rank);
        let message = format!(
            "cannot start {} ({}): {e}",
            self.server.rank_name(p.job, p.rank),
            p.app.shown.to_string_lossy()
        );
        self.rank_gone(p.job);
        self.record_failure(p.job, p.rank, message.clone(), 127, String::new(), false);
        self.server
            .fail_job(p.job, Some(p.rank), 127, &message, &mut self.events);
        self.fail_group(p.job, 127, &message);
    }

    /// Prepare rank `p` (its PMI socket, its descriptors) and hand it to a
    /// forker as start `id`.
    fn start_rank(&mut self, id: u64, p: &PendingRank) -> io::Result<()> {
        let mut pass = Vec::new();
        let mut owned = Vec::new();
        let mut keep: Vec<Arc<dyn Send + Sync>> = Vec::new();
        if p.socketpair {
            let (ours, theirs) = os::socketpair()?;
            pass.push((theirs.as_raw_fd(), PMI_FD_IN_RANK));
            owned.push(theirs);
            let segment = self.jobs[p.job].segment.clone();
            let foreign = self.foreign.as_ref().and_then(|m| m.fd());
            if let Some(fd) = foreign.or_else(|| segment.as_ref().and_then(|s| s.mapping().fd())) {
                pass.push((fd, SEGMENT_FD_IN_RANK));
            }
            if let Some(seg) = segment {
                keep.push(seg);
            }
            if let Some(seg) = self.jobs[p.job].parent_segment.clone() {
                if let Some(fd) = seg.mapping().fd() {
                    pass.push((fd, PARENT_SEGMENT_FD_IN_RANK));
                }
                keep.push(seg);
            }
            let stream = UnixStream::from_std(std::os::unix::net::UnixStream::from(ours));
            stream_nonblocking(&stream)?;
            self.add_conn(Sock::Unix(stream), Some((p.job, p.rank)), None)?;
        }
        let image = match p.app.image.get() {
            Some(i) => i.clone(),
            None => {
                // Every rank of an application sets the same PMI names.
                let per_rank: Vec<&std::ffi::OsStr> =
                    p.pmi_env.iter().map(|(k, _)| k.as_os_str()).collect();
                let i = os::ExecImage::new(
                    &p.app.program,
                    &p.app.args,
                    std::env::vars_os(),
                    ENV_REMOVE,
                    &p.app.env,
                    &per_rank,
                    p.app.wdir.as_deref(),
                )?;
                p.app.image.get_or_init(|| Arc::new(i)).clone()
            }
        };
        // Rank 0 of the first job reads the terminal's stdin.
        let on_terminal = p.rank == 0 && p.job == 0;
        self.forkers.submit(os::ForkJob {
            id,
            image,
            env: p.pmi_env.clone(),
            pass_fds: pass,
            owned,
            keep,
            stdin_inherit: on_terminal,
            // On request, as Hydra does: with the kernel's autogroups (one
            // scheduling group per session), ranks in the launcher's session
            // share one group's CPU against every other busy session's. The
            // rank on the terminal's stdin keeps the launcher's session and
            // process group (job control). docs/launch.md.
            new_session: self.rank_sessions && !on_terminal,
            cpus: self.rank_cpus(p.job, p.rank).map(|(_, set)| set.clone()),
        })
    }

    /// Rank `p` runs as `s`: supervise it.
    fn started(&mut self, p: PendingRank, s: os::Spawned) {
        if let Some(f) = &self.forwarder {
            f.add_rank(&p.tag, s.stdout, s.stderr);
        }
        if let Some(state) = self.jobs[p.job]
            .segment
            .as_ref()
            .and_then(|seg| seg.seg().rank(p.rank))
        {
            state.set_pid(s.pid);
        }
        let i = self.procs.len();
        self.by_pid.insert(s.pid, i);
        self.procs.push(RankProc {
            pid: s.pid,
            job: p.job,
            rank: p.rank,
            status: None,
            signaled: None,
            exe: p.app.program.clone(),
            started: std::time::Instant::now(),
            ended: None,
        });
        // Its job was torn down while it was being created.
        if self.jobs[p.job].torn_down || self.interrupted.is_some() {
            self.procs[i].signaled = Some(libc::SIGKILL);
            os::signal(s.pid, rustix::process::Signal::KILL);
        }
        self.run_waiting_checks(p.job, p.rank);
        // It may already have ended, reaped before it was known here.
        if let Some(status) = self.unclaimed_exits.remove(&s.pid) {
            self.rank_ended(i, status);
        }
    }
}

/// Who asked for a spawned job: the spawning job and rank. The children
/// attach to that job's segment as their parent's, and take the rank's
/// binding slot last among equally loaded ones
/// ([`super::placement::SlotLoad`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct SpawnedBy {
    pub(super) job: JobIdx,
    pub(super) rank: u32,
}

/// What fastpmi's client needs to attach to the job segment at init with
/// no round trip (`client::Direct`): the segment's node attributes, as the
/// launcher just put them, in the environment. Empty without a segment.
fn direct_env(store: &dyn Store, spawner: Option<&str>) -> Vec<(&'static str, String)> {
    let attr = |k: &str| {
        store
            .get_node_attr(k.as_bytes())
            .map(|v| String::from_utf8_lossy(&v).into_owned())
    };
    let segment = match attr(attr::MEM_POOL_TYPE).as_deref() {
        Some(pool @ "anonmmap") => attr(attr::MEM_ANON_MMAP_FD).map(|fd| format!("{pool}:{fd}")),
        Some(pool @ "sysv") => attr(attr::MEM_SYSV_ID).map(|id| format!("{pool}:{id}")),
        _ => None,
    };
    let Some(segment) = segment else {
        return Vec::new();
    };
    let mut env = vec![(fastpmi_codec::names::env::SEGMENT, segment)];
    if let Some(p) = spawner {
        env.push((fastpmi_codec::names::env::SPAWNER, p.to_string()));
        if let Some(v) = attr(fastpmi_codec::names::attr::PARENT_SEGMENT) {
            env.push((fastpmi_codec::names::env::PARENT_SEGMENT, v));
        }
    }
    env
}

/// Variables a rank must not inherit from the launcher's own environment:
/// another launcher's PMI wiring, and PMIx markers that make MPICH 4.1+
/// refuse to start.
const ENV_REMOVE: &[&str] = &[
    names::env::PMI_FD,
    names::env::PMI_PORT,
    names::env::PMI_ID,
    names::env::PMI_RANK,
    names::env::PMI_SIZE,
    names::env::PMI_JOBID,
    names::env::PMI_SPAWNED,
    names::env::PMI_TOTALVIEW,
    "PMIX_RANK",
    "PMIX_VERSION",
    "PMIX_NAMESPACE",
    "PMIX_SERVER_URI",
    "PRTE_LAUNCHED",
    "OMPI_COMM_WORLD_SIZE",
    "MPI_LOCALNRANKS",
    "MPI_LOCALRANKID",
    "FASTPMI_AUTH_SECRET",
    fastpmi_codec::names::env::SEGMENT,
    fastpmi_codec::names::env::APPNUM,
    fastpmi_codec::names::env::SPAWNER,
    fastpmi_codec::names::env::PARENT_SEGMENT,
    // srun --mpi=pmi2's marker: fastpmi's libraries would take the ranks
    // for Slurm's.
    "SLURM_MPI_TYPE",
];
