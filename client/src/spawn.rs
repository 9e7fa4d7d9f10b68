//! Spawn from the Rust client: a PMI-2 `spawn` to whatever server this
//! process talks to (fastpmi, Hydra, Slurm), answered by `thrid`, so other
//! threads keep using the connection meanwhile.

use super::{Pmi, PmiError};
use fastpmi_codec::spawn::SpawnRequest;
use fastpmi_codec::Request;

/// What a spawn started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spawned {
    /// Id of the new job (for [`Pmi::get_from`] and [`Pmi::job_connect`]).
    pub jobid: String,
    /// One code per requested process: 0 when it was started.
    pub errcodes: Vec<i32>,
}

impl Pmi {
    /// Start a new job of `req.cmds` (one application per command, appnum
    /// = its index) with `req.preput` in its KVS before any of it runs.
    pub fn spawn(&self, req: &SpawnRequest) -> Result<Spawned, PmiError> {
        req.validate()
            .map_err(|e| PmiError::InvalidArg(e.to_string()))?;
        let spawn = Request::Spawn(req.clone());
        let m = self.wire(&spawn, spawn.response())?;
        let total = req.total_procs() as usize;
        let errcodes = match m.get_str("errcodes") {
            None => vec![0; total],
            Some(list) => {
                let codes = list
                    .split(',')
                    .map(|c| c.trim().parse::<i32>())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| PmiError::Protocol(format!("spawn errcodes {list:?}")))?;
                if codes.len() != total {
                    return Err(PmiError::Protocol(format!(
                        "spawn answered {} errcodes for {total} processes",
                        codes.len()
                    )));
                }
                codes
            }
        };
        Ok(Spawned {
            jobid: m.get_str("jobid").unwrap_or_default().to_string(),
            errcodes,
        })
    }
}
