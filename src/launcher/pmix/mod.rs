//! The launcher as a PMIx server (docs/pmix.md): OpenPMIx's server library
//! ([`os::pmix`]) started at the first job with a PMIx section, each such
//! job registered as a namespace (its fastpmi job id), each of its ranks
//! registered before it starts and given the library's environment instead
//! of PMI's. Upcalls (abort, finalize) come back through the event loop.

pub mod detect;
mod groups;
mod names;
mod query;
mod remote;
mod system;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;

use fastpmi_server::JobIdx;

use super::os::pmix::{InfoList, PmixError, Server, Upcall};
use fastpmi_server::status::PmixStep;
use fastpmi_server::NameOp;
use names::{Completion, LookupSink, NameOps};

/// The running PMIx server of a launcher.
pub(super) struct PmixHost {
    server: Server,
    /// Name-service requests of PMIx clients waiting for the shared name
    /// server: by the token of each of their operations.
    names: NameOps,
    /// The library's rendezvous files (this launcher's, in the private
    /// directory), removed at exit.
    tmpdir: PathBuf,
    upcalls: Receiver<Upcall>,
    hostname: String,
    /// Processes whose data this launcher offered other launchers.
    offered: std::collections::HashSet<(String, u32)>,
    /// Other launchers' namespaces registered with the library.
    foreign: std::collections::HashSet<String>,
    /// The node's system rendezvous file, when this launcher holds it.
    system: Option<system::SystemRendezvous>,
    /// Jobs whose ranks wait in PMIx_Init for the debugger release.
    held: std::cell::RefCell<std::collections::BTreeSet<JobIdx>>,
    /// The PMIx groups constructed and not destructed: their members.
    groups: std::collections::BTreeMap<String, Vec<(String, u32)>>,
}

/// One application of a job to register: its rank count.
pub(super) struct AppInfo {
    pub nranks: u32,
    /// Its process set (`--pset`; the first when it names several).
    pub pset: Option<String>,
}

/// What the launcher knows of a job's ranks that PMIx registers.
pub(super) struct RankInfo {
    /// Every CPU of the node (`0-15`): an unbound rank's set.
    pub all_cpus: String,
    /// The CPUs each rank is bound to, as a list (`0-1,4`), if bound.
    pub cpus: Vec<Option<String>>,
}

impl PmixHost {
    /// Load the library and start the server.
    pub(super) fn start(lib: Option<&Path>, waker: Arc<mio::Waker>) -> Result<PmixHost, PmixError> {
        let dir = crate::private_dir::dir();
        let tmpdir = dir.join(format!("pmix-{}", std::process::id()));
        let made = crate::private_dir::ensure_dir(&dir).and_then(|()| {
            remove_dead(&dir);
            std::fs::create_dir_all(&tmpdir)?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&tmpdir, std::fs::Permissions::from_mode(0o700))
        });
        if let Err(e) = made {
            return Err(PmixError::Failed {
                call: "creating the PMIx server's directory",
                status: -1,
                text: format!("{}: {e}", tmpdir.display()),
            });
        }
        let (tx, rx) = mpsc::channel();
        let tx = std::sync::Mutex::new(tx);
        let sink = Box::new(move |u: Upcall| {
            let _ = tx.lock().map(|t| t.send(u));
            let _ = waker.wake();
        });
        let server = match Server::start(lib, &tmpdir, sink) {
            Ok(s) => s,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmpdir);
                return Err(e);
            }
        };
        tracing::debug!("PMIx server library {} started", server.path.display());
        let hostname = rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned();
        let ours = tmpdir.join(format!("pmix.{hostname}.tool.{}", std::process::id()));
        let system = system::SystemRendezvous::claim(&hostname, &ours);
        Ok(PmixHost {
            server,
            names: NameOps::default(),
            offered: Default::default(),
            foreign: Default::default(),
            groups: Default::default(),
            held: Default::default(),
            system,
            tmpdir,
            upcalls: rx,
            hostname,
        })
    }

    /// Register job `nspace` of `size` ranks, all on this node, in `apps`
    /// (`held`: waiting in `PMIx_Init` for the debugger release).
    // Each argument is one part of the registration, passed through once.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn register_job(
        &self,
        nspace: &str,
        apps: &[AppInfo],
        universe: u32,
        topology_xml: Option<&str>,
        ranks: &RankInfo,
        parent: Option<(&str, u32)>,
        held: bool,
    ) -> Result<(), PmixError> {
        let size: u32 = apps.iter().map(|a| a.nranks).sum();
        let mut job = InfoList::default();
        // `--stop-in-init`: every rank waits in PMIx_Init for
        // PMIX_DEBUGGER_RELEASE (`Server::release_debugger`).
        if held {
            job.rank("pmix.dbg.init", super::os::pmix::PMIX_RANK_WILDCARD);
        }
        job.u32("pmix.univ.size", universe.max(size));
        job.u32("pmix.job.size", size);
        job.u32("pmix.max.size", universe.max(size));
        job.string("pmix.jobid", nspace)?;
        job.u32("pmix.num.nodes", 1);
        job.string("pmix.nmap", &self.server.regex(&self.hostname, false)?)?;
        // Every rank on this node, listed (the library's "raw" parser does
        // not expand ranges).
        let peers: Vec<String> = (0..size).map(|r| r.to_string()).collect();
        let peers = peers.join(",");
        job.string("pmix.pmap", &self.server.regex(&peers, true)?)?;
        job.u32("pmix.job.napps", apps.len() as u32);
        // A spawned job: its parent (Open MPI's children connect to it).
        if let Some((ns, r)) = parent {
            job.proc_("pmix.parent", super::os::pmix::proc_of(ns, r));
            job.flag("pmix.spawned", true);
        }
        // The ranks' session directories (Open MPI's files), in this
        // launcher's directory: removed with it at exit.
        let nsdir = self.tmpdir.join(nspace);
        job.string("pmix.tmpdir", &self.tmpdir.to_string_lossy())?;
        job.string("pmix.nsdir", &nsdir.to_string_lossy())?;
        // The node's topology the launcher already has: ranks load it from
        // XML instead of each discovering it (Open MPI asks for this key
        // when nothing better is offered).
        if let Some(xml) = topology_xml {
            job.string("pmix.hwlocxml2", xml)?;
        }
        // This node: every rank (what PRRTE registers per node).
        let mut node = InfoList::default();
        node.u32("pmix.nodeid", 0);
        node.string("pmix.hname", &self.hostname)?;
        node.string("pmix.lpeers", &peers)?;
        node.u32("pmix.local.size", size);
        node.u32("pmix.node.size", size);
        node.rank("pmix.lldr", 0);
        // More ranks than CPUs: Open MPI then yields while it waits (in
        // MPI_Init's fence, say) instead of spinning on CPUs the ranks
        // still starting need. What prterun says with --oversubscribe.
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
        if size > cpus {
            node.flag("pmix.ndosub", true);
        }
        job.array("pmix.node.arr", node);
        let mut first = 0u32;
        for (appnum, app) in apps.iter().enumerate() {
            let mut a = InfoList::default();
            a.u32("pmix.appnum", appnum as u32);
            a.u32("pmix.app.size", app.nranks);
            a.rank("pmix.aldr", first);
            if let Some(ps) = &app.pset {
                a.string("pmix.pset.nm", ps)?;
            }
            job.array("pmix.app.arr", a);
            for r in 0..app.nranks {
                let rank = first + r;
                let mut p = InfoList::default();
                p.rank("pmix.rank", rank);
                p.u32("pmix.appnum", appnum as u32);
                p.rank("pmix.apprank", r);
                p.rank("pmix.grank", rank);
                p.u16("pmix.lrank", rank.min(u16::MAX as u32) as u16);
                p.u16("pmix.nrank", rank.min(u16::MAX as u32) as u16);
                p.u32("pmix.nodeid", 0);
                p.string("pmix.hname", &self.hostname)?;
                // Not the rank's pset name as well: Open MPI 5.0's
                // MPI_Group_from_session_pset then reallocates an array it
                // did not allocate and corrupts its heap (docs/pmix.md).
                let pdir = nsdir.join(rank.to_string());
                if let Err(e) = std::fs::create_dir_all(&pdir) {
                    return Err(PmixError::Failed {
                        call: "creating a rank's session directory",
                        status: -1,
                        text: format!("{}: {e}", pdir.display()),
                    });
                }
                p.string("pmix.pdir", &pdir.to_string_lossy())?;
                // Its binding (Open MPI then knows it is bound), and its
                // locality, which Open MPI asks of every process it
                // connects to (a spawned job's, say).
                let bound = ranks.cpus.get(rank as usize).and_then(Option::as_deref);
                if let Some(cpus) = bound {
                    p.string("pmix.cpuset", cpus)?;
                }
                match self.server.locality(bound.unwrap_or(&ranks.all_cpus)) {
                    Ok(loc) => p.string("pmix.locstr", &loc)?,
                    Err(e) => tracing::debug!("rank {rank}: no locality string: {e}"),
                }
                job.array("pmix.pdata", p);
            }
            first += app.nranks;
        }
        self.server.register_nspace(nspace, size, job)
    }

    /// The environment of rank `rank` of `nspace`, registered now.
    pub(super) fn rank_env(
        &self,
        nspace: &str,
        rank: u32,
    ) -> Result<Vec<(OsString, OsString)>, PmixError> {
        let uid = rustix::process::geteuid().as_raw();
        let gid = rustix::process::getegid().as_raw();
        let mut env: Vec<(OsString, OsString)> = self
            .server
            .register_client(nspace, rank, uid, gid)?
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        // The library's native security (same uid): without it every rank
        // warns that the munge component is missing.
        env.push(("PMIX_MCA_psec".into(), "native".into()));
        Ok(env)
    }

    /// Upcalls that arrived since the last call.
    pub(super) fn upcalls(&self) -> Vec<Upcall> {
        self.upcalls.try_iter().collect()
    }

    /// Stop the server and remove its files and the ranks' session
    /// directories (the launcher is exiting).
    pub(super) fn remove_files(&self) {
        if let Some(s) = &self.system {
            s.release();
        }
        self.server.finalize();
        let _ = std::fs::remove_dir_all(&self.tmpdir);
    }
}

/// The CPUs this launcher may run on (its ranks too, unbound), as a list.
fn allowed_cpus() -> String {
    let cpus: Vec<u32> = match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU as u32)
            .filter(|&c| set.is_set(c as usize))
            .collect(),
        Err(_) => (0..std::thread::available_parallelism().map_or(1, |n| n.get()) as u32).collect(),
    };
    crate::ranges::ranges(&cpus)
}

/// What the launcher sets for every rank of a PMIx application unless the
/// user does: placed before the application's own variables (`-env`,
/// `-genv`, which win) and left out where the launcher's environment has
/// the name (the ranks inherit that).
///
/// - Open MPI 4.1's ORTE takes a process nobody claims for a singleton
///   (its `schizo/orte` sets ess=singleton) unless a resource manager's
///   variables are present: its own MCA parameters switch that off, no
///   resource manager impersonated. Open MPI 5 has neither framework in
///   the application and ignores both.
/// - `FI_PROVIDER=^verbs` on a node without an RDMA device
///   ([`super::fabric`]).
pub(super) fn app_env_defaults() -> Vec<(OsString, OsString)> {
    let mut all = vec![("OMPI_MCA_schizo", "^orte"), ("OMPI_MCA_ess", "pmi")];
    if super::fabric::verbs_finds_nothing() {
        all.push(("FI_PROVIDER", "^verbs"));
    }
    all.into_iter()
        .filter(|(k, _)| std::env::var_os(k).is_none())
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
}

/// Remove the PMIx directories of launchers that are gone (a launcher
/// killed with SIGKILL leaves its own behind).
fn remove_dead(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("pmix-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && !Path::new(&format!("/proc/{pid}")).exists() {
            tracing::debug!("removing {} (its launcher is gone)", e.path().display());
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl super::Launcher {
    /// The PMIx server, started now if this is the first PMIx job.
    fn pmix_host(&mut self) -> std::io::Result<&PmixHost> {
        if self.pmix.is_none() {
            let host = PmixHost::start(self.cfg.pmix_lib.as_deref(), self.waker.clone())
                .map_err(|e| std::io::Error::other(format!("cannot serve PMIx clients: {e}")))?;
            self.pmix = Some(host);
        }
        Ok(self.pmix.as_ref().expect("started above"))
    }

    /// Register job `id` (its PMIx sections' ranks among `apps`).
    pub(super) fn register_pmix_job(
        &mut self,
        job: JobIdx,
        apps: &[super::starting::AppPlan],
        universe: u32,
        parent: Option<(JobIdx, u32)>,
    ) -> std::io::Result<()> {
        let id = self.server.job_id(job).to_string();
        let id = id.as_str();
        let size: u32 = apps.iter().map(|a| a.nranks).sum();
        let ranks = RankInfo {
            all_cpus: allowed_cpus(),
            cpus: (0..size)
                .map(|r| {
                    self.binding
                        .rank_cpus(job, r)
                        .map(|(cpus, _)| crate::ranges::ranges(cpus))
                })
                .collect(),
        };
        // The first job's sections carry the command line's sets.
        let psets = |i: usize| {
            (job == 0)
                .then(|| self.cfg.apps.get(i)?.psets.first().cloned())
                .flatten()
        };
        let parent_ns = parent.map(|(j, r)| (self.server.job_id(j).to_string(), r));
        let infos: Vec<AppInfo> = apps
            .iter()
            .enumerate()
            .map(|(i, a)| AppInfo {
                nranks: a.nranks,
                pset: psets(i),
            })
            .collect();
        let xml = self
            .publish_topology()
            .and_then(|p| std::fs::read_to_string(p).ok());
        let held = self.tools_holding_new_jobs();
        if held {
            self.pmix_host()?.held.borrow_mut().insert(job);
        }
        self.pmix_host()?
            .register_job(
                id,
                &infos,
                universe,
                xml.as_deref(),
                &ranks,
                parent_ns.as_ref().map(|(n, r)| (n.as_str(), *r)),
                held,
            )
            .map_err(|e| std::io::Error::other(format!("PMIx job {id}: {e}")))
    }

    /// The environment of PMIx rank `rank` of job `id`.
    pub(super) fn pmix_rank_env(
        &mut self,
        job: JobIdx,
        rank: u32,
    ) -> std::io::Result<Vec<(OsString, OsString)>> {
        self.server.pmix_rank(job, rank, PmixStep::Registered);
        let id = self.server.job_id(job).to_string();
        let id = id.as_str();
        self.pmix_host()?
            .rank_env(id, rank)
            .map_err(|e| std::io::Error::other(format!("PMIx rank {rank} of {id}: {e}")))
    }

    /// Jobs `jobs` are being torn down: tell their PMIx clients which rank
    /// ended (the one that failed the launcher, when it is in them).
    pub(super) fn pmix_notify_failure(&mut self, jobs: &[JobIdx]) {
        let Some(host) = &self.pmix else { return };
        let Some((job, rank, code)) = self.procs.failed_rank() else {
            return;
        };
        if !jobs.contains(&job) || !self.server.is_pmix_job(job) {
            return;
        }
        let id = self.server.job_id(job).to_string();
        if let Err(e) = host.server.notify_terminated(&id, rank, code) {
            tracing::debug!("PMIx event for rank {rank} of {id}: {e}");
        }
    }

    /// Let the PMIx ranks of `job` held in `PMIx_Init` (`--stop-in-init`)
    /// go: the library's debugger-release event, once (the server counts
    /// them with the PMI ranks it releases).
    pub(super) fn pmix_release(&mut self, job: JobIdx) {
        let Some(host) = &self.pmix else { return };
        if !self.server.is_pmix_job(job) || !host.held.borrow_mut().remove(&job) {
            return;
        }
        let id = self.server.job_id(job).to_string();
        if let Err(e) = host.server.release_debugger(&id) {
            crate::errln!("fastpmi: cannot release the PMIx ranks of {id}: {e}");
        }
    }

    /// What PMIx clients asked for since the last look.
    pub(super) fn pmix_upcalls(&mut self) {
        let Some(host) = &self.pmix else { return };
        for u in host.upcalls() {
            match u {
                Upcall::Abort {
                    nspace,
                    rank,
                    status,
                    message,
                } => {
                    let Some(job) = self.server.job_index(&nspace) else {
                        continue;
                    };
                    let name = self.server.rank_name(job, rank);
                    let code = if status == 0 { 1 } else { status.clamp(1, 255) };
                    let message = if message.is_empty() {
                        format!("{name} called PMIx_Abort with status {status}")
                    } else {
                        format!("{name} called PMIx_Abort with status {status}: {message}")
                    };
                    if self.procs.interrupted().is_none() {
                        self.record_failure(job, rank, message.clone(), code, String::new(), false);
                        self.server
                            .fail_job(job, Some(rank), code, &message, &mut self.events);
                        self.fail_group(job, code, &message);
                    }
                }
                Upcall::Publish {
                    nspace,
                    pairs,
                    done,
                    ..
                } => {
                    let (keys, ops) = pairs
                        .into_iter()
                        .map(|(service, v)| {
                            let port = names::encode(v);
                            (service.clone(), NameOp::Publish { service, port })
                        })
                        .unzip();
                    self.pmix_names(&nspace, keys, ops, Completion::Op(done));
                }
                Upcall::Unpublish {
                    nspace, keys, done, ..
                } => {
                    let ops = keys
                        .iter()
                        .map(|k| NameOp::Unpublish { service: k.clone() })
                        .collect();
                    self.pmix_names(&nspace, keys, ops, Completion::Op(done));
                }
                Upcall::Lookup {
                    nspace,
                    keys,
                    wait,
                    timeout,
                    done,
                    ..
                } => {
                    let deadline = wait.then(|| {
                        timeout.map(|t| {
                            std::time::Instant::now() + std::time::Duration::from_secs(t.into())
                        })
                    });
                    self.pmix_lookup(nspace, keys, deadline, LookupSink::Pmix(done));
                }
                Upcall::Connected { nspace, rank } => {
                    if let Some(job) = self.server.job_index(&nspace) {
                        self.server.pmix_rank(job, rank, PmixStep::Connected);
                    }
                }
                Upcall::Finalized { nspace, rank } => {
                    if let Some(job) = self.server.job_index(&nspace) {
                        self.server.pmix_rank(job, rank, PmixStep::Finalized);
                    }
                }
                Upcall::Query {
                    nspace,
                    queries,
                    done,
                    ..
                } => self.pmix_query(&nspace, queries, done),
                Upcall::Spawn {
                    nspace,
                    rank,
                    apps,
                    done,
                } => self.pmix_spawn(&nspace, rank, apps, done),
                Upcall::Connect { procs, done } => self.pmix_connect(&procs, done),
                Upcall::Dmodex { nspace, rank, done } => self.pmix_dmodex(&nspace, rank, done),
                Upcall::LocalModex { nspace, rank, data } => {
                    self.pmix_offer_modex(&nspace, rank, data)
                }
                Upcall::Group {
                    construct,
                    name,
                    members,
                    ctxid,
                    endpoints,
                    done,
                } => self.pmix_group(construct, &name, &members, ctxid, endpoints, done),
            }
        }
        self.apply_events();
    }
}
