//! Creating a job: its store and segment, its server entry and node
//! server, its binding, port and Intel MPI hints, and its ranks' queue
//! entries, one step after the other ([`NewJob`]).

use std::ffi::OsString;
use std::io;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use crate::config::{LaunchConfig, Personality};
use crate::launcher::binding::Binding;
use crate::launcher::conn::Conns;
use crate::launcher::impi::JobHints;
use crate::launcher::nest::Nest;
use crate::launcher::os;
use crate::launcher::singletons;
use crate::launcher::starting::{
    AppPlan, PendingRank, OOB_FD_IN_RANK, PARENT_SEGMENT_FD_IN_RANK, PMI_FD_IN_RANK,
    SEGMENT_FD_IN_RANK,
};
use fastpmi_codec::names::{self, attr, parent_segment, pool};
use fastpmi_segment::{JobSegment, MemPool};
use fastpmi_server::place::NodePlace;
use fastpmi_server::store::{MemStore, ShmStore, Store};
use fastpmi_server::{JobIdx, JobSpec, Server};

use super::{JobStore, Jobs};

impl Jobs {
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

/// Why the first job cannot be launched.
#[derive(Debug, thiserror::Error)]
pub(in crate::launcher) enum LaunchError {
    #[error("-wdir {}: not a directory", .0.display())]
    Wdir(PathBuf),
    #[error(transparent)]
    Program(#[from] os::ProgramError),
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// The applications of the first job, their programs resolved (one clear
/// error instead of one per rank), its id and universe size: a node
/// server's ranks are part of the outer job, under its id.
pub(in crate::launcher) fn first_job(
    cfg: &LaunchConfig,
    nest: Option<&Nest>,
) -> Result<(Vec<AppPlan>, String, u32), LaunchError> {
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
        let (pmix, pmix_lib) = personality(cfg, app, &program, &env);
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
    crate::launcher::timeline::step("programs resolved");
    let (jobid, universe) = match nest {
        Some(n) => (n.jobid.clone(), n.place.total),
        None => (
            format!("fastpmi_{}_0", std::process::id()),
            cfg.world_size(),
        ),
    };
    Ok((plans, jobid, universe))
}

/// What creating a job's server entry reaches of the other parts.
pub(in crate::launcher) struct Entry<'a> {
    pub cfg: &'a LaunchConfig,
    pub server: &'a mut Server,
    /// Nested mode: the first job is part of the outer one.
    pub nest: Option<&'a mut Nest>,
    pub waker: &'a Arc<mio::Waker>,
}

/// A job being created (first or spawned), from its server entry until
/// its ranks are queued: what each step leaves the next.
pub(in crate::launcher) struct NewJob {
    pub(in crate::launcher) job: JobIdx,
    id: String,
    size: u32,
    spawned_by: Option<SpawnedBy>,
    /// A node server's job: the outer job's rank of its first.
    nested: Option<u32>,
    /// Ranks of the whole job (a node server's outer job's).
    world: u32,
    /// What its ranks need to attach to the segment at init.
    direct: Vec<(&'static str, String)>,
    /// Until [`Jobs::settle`] takes them.
    segment: Option<Arc<JobSegment>>,
    parent_segment: Option<Arc<JobSegment>>,
    /// Port mode: where its ranks connect, and the job's secret.
    port: Option<(SocketAddr, String)>,
    /// Intel MPI's hints for its ranks.
    impi: Option<JobHints>,
    /// The next rank to queue.
    next_rank: u32,
}

/// One application of a [`NewJob`], its ranks to queue.
pub(in crate::launcher) struct NewApp {
    app: Arc<AppPlan>,
    appnum: usize,
    ranks: Range<u32>,
    /// Its environment leaves `I_MPI_PIN_INFO` to the launcher.
    pin_info: bool,
}

impl NewApp {
    /// Its ranks are PMIx clients (their environment is PMIx's).
    pub(in crate::launcher) fn pmix(&self) -> bool {
        self.app.pmix
    }

    /// Its ranks' numbers in their job.
    pub(in crate::launcher) fn ranks(&self) -> Range<u32> {
        self.ranks.clone()
    }
}

impl Jobs {
    /// The first steps of creating a job (first or spawned) of `apps`: its
    /// store and segment, and its entry in the server's job table. `held`:
    /// its ranks are held in init (`--stop-in-init`).
    pub(in crate::launcher) fn create(
        &mut self,
        to: Entry<'_>,
        id: String,
        apps: &[AppPlan],
        universe_size: u32,
        spawned_by: Option<SpawnedBy>,
        held: bool,
    ) -> io::Result<NewJob> {
        let size: u32 = apps.iter().map(|a| a.nranks).sum();
        let spawned = spawned_by.is_some();
        let spawner = spawned_by.map(|s| to.server.job_id(s.job).to_string());
        let parent_segment = spawned_by.and_then(|s| self.segment(s.job).cloned());
        // The first job of a node server is part of a bigger one; what it
        // spawns runs on this node alone.
        let place = match (&to.nest, spawned) {
            (Some(n), false) => Some(n.place.clone()),
            _ => None,
        };
        let (store, segment) =
            self.new_store(to.cfg, size, &id, parent_segment.as_deref(), place.as_ref())?;
        let nested = place.as_ref().map(|p| p.first);
        let world = place.as_ref().map_or(size, |p| p.total);
        // Ranks held in init (`--stop-in-init`) are held at the socket
        // handshake, so they must not attach without one.
        let direct = if held {
            Vec::new()
        } else {
            direct_env(&*store, spawner.as_deref())
        };
        let job = to.server.add_job(JobSpec {
            id: id.clone(),
            apps: apps.iter().map(|a| a.nranks).collect(),
            universe_size,
            spawner,
            store,
        });
        if to.cfg.fault_tolerant {
            to.server.set_fault_tolerant(job, true);
        }
        if let Some(p) = place {
            to.server.set_place(job, p);
            if let (Some(n), Some(seg)) = (to.nest, &segment) {
                n.start(job, seg.clone(), to.waker.clone());
            }
        }
        Ok(NewJob {
            job,
            id,
            size,
            spawned_by,
            nested,
            world,
            direct,
            segment,
            parent_segment,
            port: None,
            impi: None,
            next_rank: 0,
        })
    }

    /// The launcher's side of `new`, and its ranks' binding.
    pub(in crate::launcher) fn settle(
        &mut self,
        new: &mut NewJob,
        binding: &mut Binding,
        cfg: &LaunchConfig,
    ) {
        let added = self.add(new.segment.take(), new.parent_segment.take(), new.size);
        debug_assert_eq!(new.job, added);
        binding.assign(new.job, new.size, new.spawned_by.map(|s| (s.job, s.rank)));
        self.set_fence_cohorts(new.job, cfg, binding);
    }

    /// Ranks bound to the same CPUs wake each other from the fence
    /// (`placement::fence_cohorts`), unless `Knobs::fence_cohorts` is off.
    fn set_fence_cohorts(&self, job: JobIdx, cfg: &LaunchConfig, binding: &Binding) {
        let Some(seg) = self.segment(job) else {
            return;
        };
        if !cfg.knobs.fence_cohorts {
            return;
        }
        if let Some(of_rank) = binding.fence_cohorts(job) {
            let fence = seg.seg().fence();
            fence.set_cohorts(&of_rank);
            tracing::debug!(cohorts = fence.cohort_count(), "fence released by cohorts");
        }
    }
}

impl NewJob {
    /// Port mode: listen for its ranks, with a secret for the
    /// challenge-response; and Intel MPI's hints for them.
    pub(in crate::launcher) fn open(
        &mut self,
        conns: &mut Conns,
        server: &mut Server,
        cfg: &LaunchConfig,
        binding: &Binding,
    ) -> io::Result<()> {
        let job = self.job;
        if cfg.pmi_port {
            let bind = cfg.pmi_port_bind.unwrap_or([127, 0, 0, 1].into());
            let addr = conns.listen(bind, job)?;
            // A secret per job, for the challenge-response.
            let mut raw = [0u8; 32];
            getrandom::fill(&mut raw)
                .map_err(|e| io::Error::other(format!("no randomness for the job secret: {e}")))?;
            let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
            server.set_job_secret(job, hex.clone());
            self.port = Some((addr, hex));
        }
        self.impi = binding.impi().map(|h| {
            h.for_job(self.size, self.nested, |r| {
                binding.rank_cpus(job, r).map(|(c, _)| c)
            })
        });
        Ok(())
    }

    /// Application `appnum` of the job, next in line: its ranks follow the
    /// previous application's. Its PMI ranks are watched for Open MPI's
    /// library.
    pub(in crate::launcher) fn app(
        &mut self,
        appnum: usize,
        mut app: AppPlan,
        singletons: &mut singletons::Watch,
    ) -> NewApp {
        if let Some(h) = &self.impi {
            let add = h.app_env(&app.env);
            app.env.extend(add);
        }
        let pin_info = self
            .impi
            .as_ref()
            .is_some_and(|h| h.sets_pin_info(&app.env));
        let app = Arc::new(app);
        let ranks = self.next_rank..self.next_rank + app.nranks;
        self.next_rank = ranks.end;
        if !app.pmix {
            singletons.watch(self.job, ranks.clone());
        }
        NewApp {
            app,
            appnum,
            ranks,
            pin_info,
        }
    }

    /// Rank `rank` of `app`, to queue, with its PMI variables added to
    /// `env` (a PMIx rank's: PMIx's own).
    pub(in crate::launcher) fn rank(
        &self,
        app: &NewApp,
        rank: u32,
        mut env: Vec<(OsString, OsString)>,
    ) -> PendingRank {
        let global = self.nested.unwrap_or(0) + rank;
        let port = self.port.as_ref();
        let mut set = |k: &str, v: String| env.push((k.into(), v.into()));
        if app.app.pmix {
            // Nothing of PMI's.
        } else if let Some((addr, secret)) = port {
            set(names::env::PMI_PORT, addr.to_string());
            set(names::env::PMI_ID, global.to_string());
            set(fastpmi_codec::names::env::AUTH_SECRET, secret.clone());
        } else {
            // Always fd 3 in the rank (even `sh` can use it).
            set(names::env::PMI_FD, PMI_FD_IN_RANK.to_string());
            set(names::env::PMI_OOB_FD, OOB_FD_IN_RANK.to_string());
            set(names::env::PMI_RANK, global.to_string());
            set(names::env::PMI_SIZE, self.world.to_string());
            for (k, v) in &self.direct {
                set(k, v.clone());
            }
            if !self.direct.is_empty() {
                set(fastpmi_codec::names::env::APPNUM, app.appnum.to_string());
            }
        }
        if !app.app.pmix {
            set(names::env::PMI_JOBID, self.id.clone());
            if self.spawned_by.is_some() {
                set(names::env::PMI_SPAWNED, "1".into());
            }
        }
        set("MPI_LOCALNRANKS", self.size.to_string());
        set("MPI_LOCALRANKID", rank.to_string());
        if let Some(h) = self.impi.as_ref().filter(|_| app.pin_info) {
            let (k, v) = h.rank_env(rank);
            set(k, v);
        }
        PendingRank::new(
            self.job,
            rank,
            app.app.clone(),
            env,
            port.is_none() && !app.app.pmix,
        )
    }

    /// Its ranks are queued: the job is created.
    pub(in crate::launcher) fn queued(self) -> JobIdx {
        tracing::debug!(ranks = self.size, job = %self.id, "starting ranks");
        self.job
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
    use crate::launcher::pmix::detect;
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
pub(in crate::launcher) struct SpawnedBy {
    pub(in crate::launcher) job: JobIdx,
    pub(in crate::launcher) rank: u32,
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
