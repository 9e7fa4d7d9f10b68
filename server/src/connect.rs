//! Jobs of one launcher and their connections: `job-connect` and
//! `job-disconnect`, reads of a connected job's KVS (`kvs-get` with
//! `jobid=`), and the groups of connected jobs that fail together.

use std::collections::BTreeSet;

use super::{JobIdx, Server};
use fastpmi_codec::Response;

impl Server {
    /// Mark two jobs connected (a spawned job and its parent, or a
    /// `job-connect`): each may read the other's KVS, and they fail together.
    pub fn connect_jobs(&mut self, a: JobIdx, b: JobIdx) {
        if a != b {
            self.jobs[a].connected.insert(b);
            self.jobs[b].connected.insert(a);
        }
    }

    /// `job` and every job connected to it, directly or through others.
    pub fn connected_group(&self, job: JobIdx) -> Vec<JobIdx> {
        let mut seen = BTreeSet::from([job]);
        let mut todo = vec![job];
        while let Some(j) = todo.pop() {
            for &k in &self.jobs[j].connected {
                if seen.insert(k) {
                    todo.push(k);
                }
            }
        }
        seen.into_iter().collect()
    }

    pub fn job_index(&self, id: &str) -> Option<JobIdx> {
        self.jobs.iter().position(|j| j.id == id)
    }

    pub fn job_id(&self, job: JobIdx) -> &str {
        &self.jobs[job].id
    }

    pub fn job_count(&self) -> usize {
        self.jobs.len()
    }

    pub fn job_size(&self, job: JobIdx) -> u32 {
        self.jobs[job].size
    }

    /// How messages name a rank: "rank 3" in the first job, "rank 3 of job
    /// J" in a spawned one.
    pub fn rank_name(&self, job: JobIdx, rank: u32) -> String {
        self.jobs[job].rank_label(job, rank)
    }
}

/// The job a request with `jobid=` addresses: the caller's own when absent,
/// else a job connected to it.
pub(super) fn target(s: &Server, job: JobIdx, jobid: Option<&str>) -> Result<JobIdx, Response> {
    let Some(id) = jobid else { return Ok(job) };
    if id == s.jobs[job].id {
        return Ok(job);
    }
    match s.job_index(id) {
        Some(t) if s.jobs[job].connected.contains(&t) => Ok(t),
        Some(_) => Err(Response::error(format!(
            "job {id} is not connected to this job (job-connect first)"
        ))),
        None => Err(Response::error(format!("no job {id} in this launcher"))),
    }
}

pub(super) fn job_connect(s: &mut Server, job: JobIdx, jobid: &str) -> Response {
    s.stats.other += 1;
    match s.job_index(jobid) {
        Some(t) => {
            s.connect_jobs(job, t);
            Response::Connected
        }
        None => Response::error(format!("no job {jobid} in this launcher")),
    }
}

pub(super) fn job_disconnect(s: &mut Server, job: JobIdx, jobid: &str) -> Response {
    s.stats.other += 1;
    match s.job_index(jobid) {
        // Its own job: always "connected", nothing to undo.
        Some(t) if t == job => Response::Ok,
        Some(t) if s.jobs[job].connected.contains(&t) => {
            s.jobs[job].connected.remove(&t);
            s.jobs[t].connected.remove(&job);
            Response::Ok
        }
        Some(_) => Response::error(format!("job {jobid} is not connected to this job")),
        None => Response::error(format!("no job {jobid} in this launcher")),
    }
}
