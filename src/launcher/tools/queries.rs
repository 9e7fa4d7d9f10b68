//! The answers to the tools' queries, which their connection threads hand
//! to the event loop: the launcher's brief (`fastpmi ps`'s header), a
//! snapshot, `fastpmi release` of ranks held in init (and the debugger's
//! release under `--stop-in-init`), `fastpmi checkpoint`.

use fastpmi_server::{Event, JobIdx, Server};

use super::{CheckpointRefused, Query, ReleaseError, ToolsRt, View};
use crate::config::LaunchConfig;
use crate::launcher::binding::Binding;
use crate::launcher::jobs::Jobs;
use crate::launcher::pmix::PmixHost;
use crate::launcher::starting::Starter;
use crate::launcher::supervise::Procs;
use crate::tools::proto::{CheckpointSent, JobBrief, LauncherInfo};

/// What answering the tools reaches of the launcher's other parts.
pub(in crate::launcher) struct Served<'a> {
    pub server: &'a mut Server,
    pub events: &'a mut Vec<Event>,
    pub jobs: &'a Jobs,
    pub procs: &'a Procs,
    pub starter: &'a Starter,
    pub binding: &'a Binding,
    pub cfg: &'a LaunchConfig,
    /// The PMIx server, which holds PMIx ranks in init.
    pub pmix: Option<&'a PmixHost>,
}

impl Served<'_> {
    fn view(&self) -> View<'_> {
        View {
            server: self.server,
            jobs: self.jobs,
            procs: self.procs,
            starter: self.starter,
            binding: self.binding,
            cfg: self.cfg,
        }
    }
}

impl ToolsRt {
    /// Answer what the tools' connection threads asked.
    pub(in crate::launcher) fn serve_queries(&mut self, at: &mut Served<'_>) {
        while let Ok(q) = self.queries.try_recv() {
            match q {
                Query::Info(tx) => {
                    let _ = tx.send(self.launcher_info(at.server, at.jobs));
                }
                Query::Snapshot(tx) => {
                    let _ = tx.send(self.snapshot_asked(at.view()));
                }
                Query::Release(job, tx) => {
                    let _ = tx.send(self.release(job.as_deref(), at));
                }
                Query::Checkpoint(job, tx) => {
                    let _ = tx.send(checkpoint(job.as_deref(), at.server, at.events, at.jobs));
                }
            }
        }
    }

    /// Ranks started: the MPIR proc table; the ranks of a job whose
    /// debugger continued go on (`--stop-in-init`). True when a job was
    /// released (its replies are events to carry out before the next).
    pub(in crate::launcher) fn all_started(&mut self, at: &mut Served<'_>) -> bool {
        let stop = at.cfg.stop_in_init;
        let Some(job) = self.mpir_all_started(at.jobs.len(), at.starter, at.procs, stop) else {
            return false;
        };
        let id = (job > 0).then(|| at.server.job_id(job).to_string());
        let _ = self.release(id.as_deref(), at);
        true
    }

    /// Release the ranks held in init, by the server and the PMIx host: of
    /// `job` (an id), or of every job (then later jobs are not held either).
    fn release(&mut self, job: Option<&str>, at: &mut Served<'_>) -> Result<usize, ReleaseError> {
        let mut n = 0;
        for j in self.release_targets(job, at.server, at.jobs.len())? {
            n += at.server.release_init(j, at.events);
            if let Some(host) = at.pmix {
                host.release(at.server, j);
            }
        }
        tracing::debug!("released {n} ranks held in init");
        Ok(n)
    }

    fn launcher_info(&self, server: &Server, jobs: &Jobs) -> LauncherInfo {
        LauncherInfo {
            pid: std::process::id(),
            command: self.command.clone(),
            age_seconds: self.started.elapsed().as_secs_f64(),
            jobs: (0..jobs.len())
                .filter(|&j| jobs.live(j) > 0)
                .map(|j| {
                    let st = server.job_status(j);
                    JobBrief {
                        id: st.id,
                        size: st.size,
                        live: jobs.live(j),
                        held: st.holding,
                    }
                })
                .collect(),
        }
    }

    /// Every job whose ranks are not all reaped.
    /// The jobs `fastpmi release` releases the held ranks of: `job` (an
    /// id), or every one of the `jobs` created so far (then later jobs are
    /// not held either).
    fn release_targets(
        &mut self,
        job: Option<&str>,
        server: &Server,
        jobs: usize,
    ) -> Result<Vec<JobIdx>, ReleaseError> {
        match job {
            None => {
                self.hold_new_jobs = false;
                Ok((0..jobs).collect())
            }
            Some(id) => {
                let j = (0..jobs)
                    .find(|&j| server.job_id(j) == id)
                    .ok_or_else(|| ReleaseError::NoJob(id.to_string()))?;
                Ok(vec![j])
            }
        }
    }
}

/// `fastpmi checkpoint`: ask the ranks of `job` (an id), or of every job
/// still running, for a checkpoint on their out-of-band channels.
fn checkpoint(
    job: Option<&str>,
    server: &mut Server,
    events: &mut Vec<Event>,
    jobs: &Jobs,
) -> Result<Vec<CheckpointSent>, CheckpointRefused> {
    let ids: Vec<String> = match job {
        Some(id) => vec![id.to_string()],
        None => (0..jobs.len())
            .filter(|&j| !jobs.torn_down(j) && !server.job_failed(j))
            .map(|j| server.job_id(j).to_string())
            .collect(),
    };
    if ids.is_empty() {
        return Err(CheckpointRefused::NoRunningJob);
    }
    let mut sent = Vec::new();
    for id in ids {
        let r = server.checkpoint(&id, events)?;
        tracing::debug!(job = %id, "checkpoint {} sent to {} of {} ranks", r.seq, r.ranks, r.size);
        sent.push(CheckpointSent {
            job: id,
            seq: r.seq,
            ranks: r.ranks,
            size: r.size,
        });
    }
    Ok(sent)
}
