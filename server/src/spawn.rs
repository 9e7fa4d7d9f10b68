//! Spawn: a rank asks for a new job. The server checks the request and
//! hands it to the launcher as [`Event::Spawn`]; the launcher creates the
//! job (store, segment, ranks) and answers with [`Server::finish_spawn`].
//! Other connections are served meanwhile, and a threaded client's other
//! threads too (the reply is addressed by `thrid`).

use std::collections::HashMap;

use super::{ConnId, Event, JobIdx, ReplyTo, Server};
use fastpmi_codec::spawn::SpawnRequest;
use fastpmi_codec::Response;

/// Most spawns waiting for the launcher at once (bounded memory).
pub const SPAWNS_IN_FLIGHT_MAX: usize = 1024;

/// Value of an MPI errcode for a process that could not be started
/// (`MPI_ERR_SPAWN` in MPICH and Intel MPI).
pub const ERRCODE_SPAWN: i32 = 42;

/// What the launcher made of a spawn request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpawnOutcome {
    /// The job exists (its ranks are being started); one errcode per
    /// requested process, 0 where it is started.
    Started { jobid: String, errcodes: Vec<i32> },
    /// Nothing was started.
    Failed(String),
}

#[derive(Debug, Default)]
pub(crate) struct Spawns {
    pending: HashMap<u64, ReplyTo>,
    next: u64,
}

impl Server {
    /// Answer spawn `id` (from [`Event::Spawn`]).
    pub fn finish_spawn(&mut self, id: u64, outcome: SpawnOutcome, out: &mut Vec<Event>) {
        let Some(to) = self.spawns.pending.remove(&id) else {
            return;
        };
        let resp = match outcome {
            SpawnOutcome::Started { jobid, errcodes } => Response::Spawned {
                jobid,
                // Absent errcodes mean "all started" to MPICH.
                errcodes: if errcodes.iter().all(|&c| c == 0) {
                    Vec::new()
                } else {
                    errcodes
                },
            },
            SpawnOutcome::Failed(msg) => Response::error(msg),
        };
        super::reply(out, &to, &resp, None);
    }

    /// Put a spawn's pre-put pair into the new job's KVS (before any of its
    /// ranks starts).
    pub fn preput(
        &mut self,
        job: JobIdx,
        key: &[u8],
        value: &[u8],
    ) -> Result<(), crate::store::StoreError> {
        self.jobs[job].store.put(0, key, value)
    }

    /// Drop pending spawns of a closed connection (the job is still made).
    pub(super) fn forget_spawns_of(&mut self, conn: ConnId) {
        self.spawns.pending.retain(|_, to| to.conn != conn);
    }
}

/// A rank of `job` asked to spawn.
pub(super) fn request(
    s: &mut Server,
    job: JobIdx,
    rank: u32,
    to: &ReplyTo,
    req: SpawnRequest,
    out: &mut Vec<Event>,
) -> Option<Response> {
    s.stats.other += 1;
    if let Err(e) = req.validate() {
        return Some(Response::error(e.to_string()));
    }
    if s.spawns.pending.len() >= SPAWNS_IN_FLIGHT_MAX {
        return Some(Response::error(format!(
            "{SPAWNS_IN_FLIGHT_MAX} spawns already in progress"
        )));
    }
    let id = s.spawns.next;
    s.spawns.next += 1;
    s.spawns.pending.insert(id, to.clone());
    out.push(Event::Spawn { id, job, rank, req });
    None
}
