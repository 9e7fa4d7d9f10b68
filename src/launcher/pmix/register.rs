//! Registering jobs and ranks with the library before they start, and
//! letting ranks held in `PMIx_Init` go.

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;

use fastpmi_server::status::PmixStep;
use fastpmi_server::{JobIdx, Server};

use super::host::{AppInfo, PmixHost, RankInfo};
use crate::config::LaunchConfig;
use crate::launcher::binding::Binding;
use crate::launcher::starting::AppPlan;

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

/// What registering a job reads of the launcher's other parts.
pub(in crate::launcher) struct Registration<'a> {
    pub server: &'a Server,
    /// The ranks' CPU binding.
    pub binding: &'a Binding,
    /// The command line's sets (`--pset`) and `--pmix-lib`.
    pub cfg: &'a LaunchConfig,
    /// Wakes the event loop when an upcall comes (a server started now).
    pub waker: &'a Arc<mio::Waker>,
    /// The node's topology as XML, when published.
    pub topology_xml: Option<String>,
    /// Its ranks wait in `PMIx_Init` (`--stop-in-init`, tools holding new
    /// jobs).
    pub held: bool,
}

impl PmixHost {
    /// The PMIx server of `slot`, started now if this is the first PMIx
    /// job (of `apps`), with the library `--pmix-lib` names (`pmix_lib`),
    /// else the one its PMIx sections link (refused when they link
    /// different files), else the default list. A running server serves
    /// later jobs whatever they link (docs/pmix.md, "One personality per
    /// section").
    fn started<'a>(
        slot: &'a mut Option<PmixHost>,
        apps: &[AppPlan],
        pmix_lib: Option<&Path>,
        waker: &Arc<mio::Waker>,
    ) -> std::io::Result<&'a PmixHost> {
        let linked = apps
            .iter()
            .filter(|a| a.pmix && a.nranks > 0)
            .filter_map(|a| {
                Some((
                    a.shown.to_string_lossy().into_owned(),
                    a.pmix_lib.as_deref()?,
                ))
            });
        match slot {
            None => {
                let chosen = super::detect::one_library(linked).map_err(std::io::Error::other)?;
                let lib = pmix_lib.or(chosen.as_deref());
                let host = PmixHost::start(lib, waker.clone()).map_err(|e| {
                    std::io::Error::other(format!("cannot serve PMIx clients: {e}"))
                })?;
                *slot = Some(host);
            }
            Some(host) => {
                let running = &host.server.path;
                let same =
                    |l: &std::path::Path| std::fs::canonicalize(running).is_ok_and(|r| r == l);
                for (prog, lib) in linked.filter(|(_, l)| !same(l)) {
                    // PMIx's cross-version protocol lets a client of one
                    // version talk to a server of another.
                    tracing::debug!(
                        "{prog} links {}; served by the running PMIx server library {}",
                        lib.display(),
                        running.display()
                    );
                }
            }
        }
        Ok(slot.as_ref().expect("started above"))
    }

    /// Register job `id` (its PMIx sections' ranks among `apps`) with the
    /// server of `slot`, started now if need be.
    pub(in crate::launcher) fn register_job_in(
        slot: &mut Option<PmixHost>,
        job: JobIdx,
        apps: &[AppPlan],
        universe: u32,
        parent: Option<(JobIdx, u32)>,
        with: Registration,
    ) -> std::io::Result<()> {
        let Registration {
            server,
            binding,
            cfg,
            waker,
            topology_xml: xml,
            held,
        } = with;
        let id = server.job_id(job).to_string();
        let id = id.as_str();
        let size: u32 = apps.iter().map(|a| a.nranks).sum();
        let ranks = RankInfo {
            all_cpus: allowed_cpus(),
            cpus: (0..size)
                .map(|r| {
                    binding
                        .rank_cpus(job, r)
                        .map(|(cpus, _)| crate::ranges::ranges(cpus))
                })
                .collect(),
        };
        // The first job's sections carry the command line's sets.
        let psets = |i: usize| {
            (job == 0)
                .then(|| cfg.apps.get(i)?.psets.first().cloned())
                .flatten()
        };
        let parent_ns = parent.map(|(j, r)| (server.job_id(j).to_string(), r));
        let infos: Vec<AppInfo> = apps
            .iter()
            .enumerate()
            .map(|(i, a)| AppInfo {
                nranks: a.nranks,
                pset: psets(i),
            })
            .collect();
        let lib = cfg.pmix_lib.as_deref();
        if held {
            Self::started(slot, apps, lib, waker)?
                .held
                .borrow_mut()
                .insert(job);
        }
        Self::started(slot, apps, lib, waker)?
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

    /// The environment of PMIx rank `rank` of job `id`, from the server of
    /// `slot` (started now if need be, with `--pmix-lib`'s library).
    pub(in crate::launcher) fn rank_env_in(
        slot: &mut Option<PmixHost>,
        server: &mut Server,
        job: JobIdx,
        rank: u32,
        pmix_lib: Option<&Path>,
        waker: &Arc<mio::Waker>,
    ) -> std::io::Result<Vec<(OsString, OsString)>> {
        server.pmix_rank(job, rank, PmixStep::Registered);
        let id = server.job_id(job).to_string();
        let id = id.as_str();
        Self::started(slot, &[], pmix_lib, waker)?
            .rank_env(id, rank)
            .map_err(|e| std::io::Error::other(format!("PMIx rank {rank} of {id}: {e}")))
    }

    /// Let the PMIx ranks of `job` held in `PMIx_Init` (`--stop-in-init`)
    /// go: the library's debugger-release event, once (the server counts
    /// them with the PMI ranks it releases).
    pub(in crate::launcher) fn release(&self, server: &Server, job: JobIdx) {
        if !server.is_pmix_job(job) || !self.held.borrow_mut().remove(&job) {
            return;
        }
        let id = server.job_id(job).to_string();
        if let Err(e) = self.server.release_debugger(&id) {
            crate::errln!("fastpmi: cannot release the PMIx ranks of {id}: {e}");
        }
    }
}
