//! Creating a job (store, segment, watchers, port listener, server entry)
//! and queueing its ranks (started in [`super::starting`]). [`Jobs`] owns
//! the launcher's side of each job.

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use super::starting::{AppPlan, PendingRank};
use super::watch::{self, FenceWatcher};
use super::{
    os, Launcher, OOB_FD_IN_RANK, PARENT_SEGMENT_FD_IN_RANK, PMI_FD_IN_RANK, SEGMENT_FD_IN_RANK,
};
use crate::config::{LaunchConfig, Personality};
use fastpmi_codec::names::{self, attr, parent_segment, pool};
use fastpmi_segment::{JobSegment, MemPool};
use fastpmi_server::place::NodePlace;
use fastpmi_server::store::{MemStore, ShmStore, Store};
use fastpmi_server::{JobIdx, JobSpec};

/// A new job's store and, when it has one, its segment.
type JobStore = (Box<dyn Store>, Option<Arc<JobSegment>>);

/// What the launcher keeps of each job besides the server's protocol state
/// (same index as the server's job table).
struct JobRt {
    /// The job segment (None: socket-only job, or the job has ended).
    segment: Option<Arc<JobSegment>>,
    /// A spawned job's parent's segment, handed to its ranks.
    parent_segment: Option<Arc<JobSegment>>,
    /// The fence watcher (stopped with the job).
    fence_watcher: Option<FenceWatcher>,
    /// The watcher threads were started (see [`Jobs::watch`]).
    watched: bool,
    /// Tells this job's watcher threads to exit.
    stop: Arc<AtomicBool>,
    /// Ranks not reaped yet (started or pending).
    live: u32,
    /// Its ranks were sent SIGTERM because the job failed.
    torn_down: bool,
}

/// The launcher's side of its jobs (first and spawned): their segments and
/// watcher threads, how many of their ranks live, whether they were torn
/// down, and the shared-memory counts of those that have ended.
pub(super) struct Jobs {
    jobs: Vec<JobRt>,
    /// Shared-memory operation counts of jobs whose segment is gone.
    shm_stats_done: shm_layout::RankStats,
    /// Decoy segment with an unknown stamp (`Knobs::advertise_foreign_segment`).
    foreign: Option<fastpmi_segment::Mapping>,
}

impl Jobs {
    pub(super) fn new() -> Jobs {
        Jobs {
            jobs: Vec::new(),
            shm_stats_done: Default::default(),
            foreign: None,
        }
    }

    /// Jobs created so far (job indexes are `0..len`).
    pub(super) fn len(&self) -> usize {
        self.jobs.len()
    }

    /// A new job of `size` ranks with its segments; returns its index.
    fn add(
        &mut self,
        segment: Option<Arc<JobSegment>>,
        parent_segment: Option<Arc<JobSegment>>,
        size: u32,
    ) -> JobIdx {
        self.jobs.push(JobRt {
            segment,
            parent_segment,
            fence_watcher: None,
            watched: false,
            stop: Arc::new(AtomicBool::new(false)),
            live: size,
            torn_down: false,
        });
        self.jobs.len() - 1
    }

    pub(super) fn segment(&self, job: JobIdx) -> Option<&Arc<JobSegment>> {
        self.jobs.get(job)?.segment.as_ref()
    }

    pub(super) fn parent_segment(&self, job: JobIdx) -> Option<&Arc<JobSegment>> {
        self.jobs.get(job)?.parent_segment.as_ref()
    }

    /// The descriptor of the decoy segment handed to ranks instead of
    /// their job's, when there is one.
    pub(super) fn foreign_fd(&self) -> Option<std::os::fd::RawFd> {
        self.foreign.as_ref().and_then(|m| m.fd())
    }

    /// Ranks of `job` not reaped yet (0: the job has ended).
    pub(super) fn live(&self, job: JobIdx) -> u32 {
        self.jobs[job].live
    }

    pub(super) fn torn_down(&self, job: JobIdx) -> bool {
        self.jobs[job].torn_down
    }

    pub(super) fn tear_down(&mut self, job: JobIdx) {
        self.jobs[job].torn_down = true;
    }

    pub(super) fn tear_down_all(&mut self) {
        for j in &mut self.jobs {
            j.torn_down = true;
        }
    }

    /// A rank of `job` was reaped or will never start; true when it was
    /// the last: then the job's watchers stop and its segments go.
    pub(super) fn rank_gone(&mut self, job: JobIdx) -> bool {
        let j = &mut self.jobs[job];
        j.live = j.live.saturating_sub(1);
        if j.live > 0 {
            return false;
        }
        j.stop.store(true, Ordering::Relaxed);
        j.fence_watcher = None;
        j.parent_segment = None;
        if let Some(seg) = j.segment.take() {
            add_stats(&mut self.shm_stats_done, &seg);
        }
        true
    }

    /// The launcher is exiting: every watcher thread stops.
    pub(super) fn stop_all(&self) {
        for j in &self.jobs {
            j.stop.store(true, Ordering::Relaxed);
        }
    }

    /// Shared-memory operation counts of every job, ended or not.
    pub(super) fn shm_stats(&self) -> shm_layout::RankStats {
        let mut shm = self.shm_stats_done;
        for seg in self.jobs.iter().filter_map(|j| j.segment.as_ref()) {
            add_stats(&mut shm, seg);
        }
        shm
    }

    /// The fence watcher of `job`, its watcher threads started now if they
    /// were not ([`watch::start`]; only a job with a segment has them).
    /// They are started when a socket rank first waits: until then nothing
    /// needs the loop woken, and a job that never has one (every job of
    /// fastpmi's own libraries) runs two threads fewer.
    pub(super) fn watch(&mut self, job: JobIdx, waker: &Arc<mio::Waker>) -> Option<&FenceWatcher> {
        let j = self.jobs.get_mut(job)?;
        if !j.watched && j.live > 0 {
            j.watched = true;
            j.fence_watcher = j
                .segment
                .as_ref()
                .and_then(|s| watch::start(s, &j.stop, waker));
        }
        j.fence_watcher.as_ref()
    }

    /// The fence watcher of each job that has one.
    pub(super) fn fence_watchers(&self) -> impl Iterator<Item = (JobIdx, &FenceWatcher)> {
        self.jobs
            .iter()
            .enumerate()
            .filter_map(|(job, j)| Some((job, j.fence_watcher.as_ref()?)))
    }

    /// The store of a new job: its segment when one is configured, with the
    /// node attributes that tell clients how to map it.
    fn new_store(
        &mut self,
        cfg: &LaunchConfig,
        size: u32,
        jobid: &str,
        parent: Option<&JobSegment>,
        place: Option<&NodePlace>,
    ) -> io::Result<JobStore> {
        let (mut store, segment): (Box<dyn Store>, _) = match cfg.mem_pool {
            None => (
                Box::new(MemStore::new(size, fastpmi_codec::VALLEN_MAX)),
                None,
            ),
            Some(pool) => {
                let mut params = shm_layout::SegmentParams::for_ranks(size);
                if let Some(p) = place {
                    // The other nodes' pairs land here too.
                    let whole = shm_layout::SegmentParams::for_ranks(p.total);
                    params.kvs_slots = whole.kvs_slots;
                    params.kvs_arena_bytes = whole.kvs_arena_bytes;
                }
                if let Some(mb) = cfg.kvs_mb {
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
                if let Some(k) = cfg.knobs.fence_fanout {
                    seg.seg().fence().set_fanout(k);
                }
                if let Some(p) = place {
                    seg.seg().set_place(p.first, p.total);
                    // The node server trades before the ranks are released.
                    seg.seg().fence().set_server_party(true);
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
            (attr::LOCAL_RANKS_COUNT, size.to_string()),
            (
                attr::LOCAL_RANKS,
                (0..size)
                    .map(|r| (place.map_or(0, |p| p.first) + r).to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
        ];
        if place.is_some() {
            // A miss may be in the outer job: clients ask the launcher.
            attrs.push((attr::MISS_ASKS, "1".into()));
        }
        if let Some(seg) = &segment {
            let m = seg.mapping();
            if self.foreign.is_none() && cfg.knobs.advertise_foreign_segment {
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
                    (Some(_), _) => Some(format!(
                        "{}:{PARENT_SEGMENT_FD_IN_RANK}",
                        parent_segment::FD
                    )),
                    (None, Some(id)) => Some(format!("{}:{id}", parent_segment::SYSV)),
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
}

fn add_stats(sum: &mut shm_layout::RankStats, seg: &JobSegment) {
    for r in seg.seg().ranks() {
        let st = r.stats();
        sum.puts += st.puts;
        sum.gets += st.gets;
        sum.fences += st.fences;
        sum.node_attr_ops += st.node_attr_ops;
    }
}

/// Why the first job cannot be launched.
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
            let (pmix, pmix_lib) = personality(&cfg, app, &program, &env);
            plans.push(AppPlan {
                nranks: app.nranks,
                program,
                shown: app.program.clone(),
                args: app.args.clone(),
                env,
                wdir: app.wdir.clone(),
                image: OnceLock::new(),
                pmix,
                pmix_lib,
                fault_tolerant: cfg.fault_tolerant,
            });
        }
        super::timeline::step("programs resolved");
        // A node server's ranks are part of the outer job, under its id.
        let (jobid, universe) = match &self.nest {
            Some(n) => (n.jobid.clone(), n.place.total),
            None => (format!("fastpmi_{}_0", std::process::id()), size),
        };
        let job = self.create_job(jobid, plans, universe, None)?;
        super::timeline::step("first job created");
        self.server
            .set_psets(job, crate::config::psets::of_config(&cfg));
        // The first ranks go to the forkers now; what only the loop needs
        // (the topology's XML, the tools' rendezvous) is set up while they
        // start: no request is served before it. Their output pipes are
        // held by the loop until one has output (`output::Output`).
        self.spawn_next();
        super::timeline::step("first ranks handed to the forkers");
        self.publish_topology();
        super::timeline::step("topology published");
        self.tools.listen(self.poll.registry(), super::RENDEZVOUS);
        super::timeline::step("rendezvous ready");
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
        let parent_segment = spawned_by.and_then(|s| self.jobs.segment(s.job).cloned());
        // The first job of a node server is part of a bigger one; what it
        // spawns runs on this node alone.
        let place = match (&self.nest, spawned) {
            (Some(n), false) => Some(n.place.clone()),
            _ => None,
        };
        let (store, segment) = self.jobs.new_store(
            &self.cfg,
            size,
            &id,
            parent_segment.as_deref(),
            place.as_ref(),
        )?;
        let nested = place.as_ref().map(|p| p.first);
        let first = nested.unwrap_or(0);
        let global = |rank: u32| first + rank;
        let world = place.as_ref().map_or(size, |p| p.total);
        // Ranks held in init (`--stop-in-init`) are held at the socket
        // handshake, so they must not attach without one.
        let direct = if self.tools.holding_new_jobs() {
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
        if self.cfg.fault_tolerant {
            self.server.set_fault_tolerant(job, true);
        }
        if let Some(p) = place {
            self.server.set_place(job, p);
            if let (Some(n), Some(seg)) = (&mut self.nest, &segment) {
                n.start(job, seg.clone(), self.waker.clone());
            }
        }
        self.tools.job_created(job, &mut self.server);
        let added = self.jobs.add(segment, parent_segment, size);
        debug_assert_eq!(job, added);
        self.binding
            .assign(job, size, spawned_by.map(|s| (s.job, s.rank)));
        self.set_fence_cohorts(job);
        // Before its ranks are registered (each gets its environment), with
        // their binding.
        if apps.iter().any(|a| a.pmix && a.nranks > 0) {
            let parent = spawned_by.map(|s| (s.job, s.rank));
            self.register_pmix_job(job, &apps, universe_size, parent)?;
        }
        let port = if self.cfg.pmi_port {
            let bind = self.cfg.pmi_port_bind.unwrap_or([127, 0, 0, 1].into());
            Some(self.conns.listen(bind, job)?)
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
        let impi = self.binding.impi().map(|h| {
            h.for_job(size, nested, |r| {
                self.binding.rank_cpus(job, r).map(|(c, _)| c)
            })
        });
        for (appnum, mut app) in apps.into_iter().enumerate() {
            if let Some(h) = &impi {
                let add = h.app_env(&app.env);
                app.env.extend(add);
            }
            let pin_info = impi.as_ref().filter(|h| h.sets_pin_info(&app.env));
            let app = Arc::new(app);
            if !app.pmix {
                self.singletons.watch(job, rank..rank + app.nranks);
            }
            for _ in 0..app.nranks {
                let mut env: Vec<(OsString, OsString)> = Vec::with_capacity(8);
                if app.pmix {
                    // PMIx's environment only: one personality per rank.
                    env = self.pmix_rank_env(job, rank)?;
                }
                let mut set = |k: &str, v: String| env.push((k.into(), v.into()));
                if app.pmix {
                    // Nothing of PMI's.
                } else if let Some(addr) = port {
                    set(names::env::PMI_PORT, addr.to_string());
                    set(names::env::PMI_ID, global(rank).to_string());
                    if let Some(sec) = &secret {
                        set(fastpmi_codec::names::env::AUTH_SECRET, sec.clone());
                    }
                } else {
                    // Always fd 3 in the rank (even `sh` can use it).
                    set(names::env::PMI_FD, PMI_FD_IN_RANK.to_string());
                    set(names::env::PMI_OOB_FD, OOB_FD_IN_RANK.to_string());
                    set(names::env::PMI_RANK, global(rank).to_string());
                    set(names::env::PMI_SIZE, world.to_string());
                    for (k, v) in &direct {
                        set(k, v.clone());
                    }
                    if !direct.is_empty() {
                        set(fastpmi_codec::names::env::APPNUM, appnum.to_string());
                    }
                }
                if !app.pmix {
                    set(names::env::PMI_JOBID, id.clone());
                    if spawned {
                        set(names::env::PMI_SPAWNED, "1".into());
                    }
                }
                set("MPI_LOCALNRANKS", size.to_string());
                set("MPI_LOCALRANKID", rank.to_string());
                if let Some(h) = pin_info {
                    let (k, v) = h.rank_env(rank);
                    set(k, v);
                }
                self.starter.queue(PendingRank::new(
                    job,
                    rank,
                    app.clone(),
                    env,
                    port.is_none() && !app.pmix,
                ));
                rank += 1;
            }
        }
        tracing::debug!(ranks = size, job = %id, "starting ranks");
        Ok(job)
    }

    /// Ranks bound to the same CPUs wake each other from the fence
    /// (`placement::fence_cohorts`), unless `Knobs::fence_cohorts` is off.
    fn set_fence_cohorts(&self, job: JobIdx) {
        let Some(seg) = self.jobs.segment(job) else {
            return;
        };
        if !self.cfg.knobs.fence_cohorts {
            return;
        }
        if let Some(of_rank) = self.binding.fence_cohorts(job) {
            let fence = seg.seg().fence();
            fence.set_cohorts(&of_rank);
            tracing::debug!(cohorts = fence.cohort_count(), "fence released by cohorts");
        }
    }
}

/// A section's personality, and the OpenPMIx library its program links
/// when it is PMIx and the user named none (docs/pmix.md, "One
/// personality per section").
fn personality(
    cfg: &LaunchConfig,
    app: &crate::config::App,
    program: &std::path::Path,
    env: &[(OsString, OsString)],
) -> (bool, Option<PathBuf>) {
    use super::pmix::detect;
    let probe = || detect::probe(program, &app.args, app.wdir.as_deref(), env);
    let (pmix, links) = match app.personality {
        Personality::Pmi => return (false, None),
        Personality::Pmix => (true, probe().links),
        Personality::Auto => {
            let v = probe();
            (v.pmix, v.links)
        }
    };
    let lib = links
        .filter(|_| pmix && cfg.pmix_lib.is_none())
        .and_then(|f| detect::linked_pmix(&f, env));
    (pmix, lib)
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
        Some(p) if p == pool::ANON_MMAP => {
            attr(attr::MEM_ANON_MMAP_FD).map(|fd| format!("{p}:{fd}"))
        }
        Some(p) if p == pool::SYSV => attr(attr::MEM_SYSV_ID).map(|id| format!("{p}:{id}")),
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
