//! Registering jobs and ranks with the library before they start, and
//! letting ranks held in `PMIx_Init` go.

use std::ffi::OsString;

use fastpmi_server::status::PmixStep;
use fastpmi_server::JobIdx;

use super::host::{AppInfo, PmixHost, RankInfo};
use crate::launcher::Launcher;

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

impl Launcher {
    /// The PMIx server, started now if this is the first PMIx job (of
    /// `apps`), with the library `--pmix-lib` names, else the one its PMIx
    /// sections link (refused when they link different files), else the
    /// default list. A running server serves later jobs whatever they link
    /// (docs/pmix.md, "One personality per section").
    fn pmix_host(
        &mut self,
        apps: &[crate::launcher::starting::AppPlan],
    ) -> std::io::Result<&PmixHost> {
        let linked = apps
            .iter()
            .filter(|a| a.pmix && a.nranks > 0)
            .filter_map(|a| {
                Some((
                    a.shown.to_string_lossy().into_owned(),
                    a.pmix_lib.as_deref()?,
                ))
            });
        match &self.pmix {
            None => {
                let chosen = super::detect::one_library(linked).map_err(std::io::Error::other)?;
                let lib = self.cfg.pmix_lib.as_deref().or(chosen.as_deref());
                let host = PmixHost::start(lib, self.waker.clone()).map_err(|e| {
                    std::io::Error::other(format!("cannot serve PMIx clients: {e}"))
                })?;
                self.pmix = Some(host);
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
        Ok(self.pmix.as_ref().expect("started above"))
    }

    /// Register job `id` (its PMIx sections' ranks among `apps`).
    pub(in crate::launcher) fn register_pmix_job(
        &mut self,
        job: JobIdx,
        apps: &[crate::launcher::starting::AppPlan],
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
        let held = self.tools.holding_new_jobs();
        if held {
            self.pmix_host(apps)?.held.borrow_mut().insert(job);
        }
        self.pmix_host(apps)?
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
    pub(in crate::launcher) fn pmix_rank_env(
        &mut self,
        job: JobIdx,
        rank: u32,
    ) -> std::io::Result<Vec<(OsString, OsString)>> {
        self.server.pmix_rank(job, rank, PmixStep::Registered);
        let id = self.server.job_id(job).to_string();
        let id = id.as_str();
        self.pmix_host(&[])?
            .rank_env(id, rank)
            .map_err(|e| std::io::Error::other(format!("PMIx rank {rank} of {id}: {e}")))
    }

    /// Let the PMIx ranks of `job` held in `PMIx_Init` (`--stop-in-init`)
    /// go: the library's debugger-release event, once (the server counts
    /// them with the PMI ranks it releases).
    pub(in crate::launcher) fn pmix_release(&mut self, job: JobIdx) {
        let Some(host) = &self.pmix else { return };
        if !self.server.is_pmix_job(job) || !host.held.borrow_mut().remove(&job) {
            return;
        }
        let id = self.server.job_id(job).to_string();
        if let Err(e) = host.server.release_debugger(&id) {
            crate::errln!("fastpmi: cannot release the PMIx ranks of {id}: {e}");
        }
    }
}
