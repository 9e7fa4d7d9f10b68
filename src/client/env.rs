//! The PMI environment a launcher hands its processes, and which kind of
//! server set it up.
//!
//! * `PMI_FD` (+ `PMI_RANK`): a socket the process inherited (fastpmi,
//!   Hydra, Slurm's `slurmstepd`);
//! * `PMI_PORT` + `PMI_ID`: a TCP address to connect to;
//! * `PMI_JOBID`: the job id, sent back in `fullinit` as `pmijobid`
//!   (`slurmstepd` refuses a `fullinit` without it);
//! * `PMI_SPAWNED`: this job was spawned by another.
//!
//! `slurmstepd` (`srun --mpi=pmi2`) is recognised by its own variables:
//! `SLURM_MPI_TYPE=pmi2` and `PMI_JOBID` = `<SLURM_JOB_ID>.<SLURM_STEP_ID>`,
//! the id it gives a step. A launcher started inside a Slurm step sets its
//! own `PMI_JOBID` (and fastpmi's drops `SLURM_MPI_TYPE`), so its ranks are
//! not taken for Slurm's.

use super::PmiError;

/// Where the PMI server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// An inherited socket (`PMI_FD`).
    Fd(i32),
    /// `host:port` to connect to (`PMI_PORT`).
    Port(String),
}

/// Which PMI-2 server this process talks to, as far as the client needs to
/// know: what a server never answers must not be asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// fastpmi's launcher, Hydra, or another server that answers every
    /// PMI-2 command (possibly with an error).
    Generic,
    /// Slurm's `slurmstepd` (`srun --mpi=pmi2`): never answers
    /// `job-connect` / `job-disconnect` (a client that asks waits forever),
    /// ignores the `jobid` of `kvs-get` (other jobs' keys are not
    /// reachable), and has no job segment.
    SlurmStepd,
}

/// The PMI variables of this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PmiEnv {
    /// None: no PMI server, a singleton.
    pub endpoint: Option<Endpoint>,
    /// `PMI_RANK` (with `PMI_FD`) or `PMI_ID` (with `PMI_PORT`).
    pub rank: Option<i64>,
    pub jobid: Option<String>,
    pub spawned: bool,
    pub server: ServerKind,
}

impl PmiEnv {
    /// Read the process environment.
    pub fn from_process() -> Result<PmiEnv, PmiError> {
        PmiEnv::parse(|k| std::env::var(k).ok())
    }

    /// Read the variables through `var` (the process environment, or a
    /// table in tests).
    pub fn parse(var: impl Fn(&str) -> Option<String>) -> Result<PmiEnv, PmiError> {
        let int = |name: &str| -> Result<Option<i64>, PmiError> {
            match var(name) {
                Some(v) => v
                    .trim()
                    .parse()
                    .map(Some)
                    .map_err(|_| PmiError::Env(format!("{name}={v} is not a number"))),
                None => Ok(None),
            }
        };
        let spawned = int("PMI_SPAWNED")?.unwrap_or(0) != 0;
        let jobid = var("PMI_JOBID").filter(|j| !j.is_empty());
        let (endpoint, rank) = if let Some(fd) = int("PMI_FD")? {
            let fd = i32::try_from(fd)
                .map_err(|_| PmiError::Env(format!("PMI_FD={fd} is not a descriptor")))?;
            (Some(Endpoint::Fd(fd)), int("PMI_RANK")?)
        } else if let Some(port) = var("PMI_PORT") {
            let id =
                int("PMI_ID")?.ok_or_else(|| PmiError::Env("PMI_PORT without PMI_ID".into()))?;
            (Some(Endpoint::Port(port)), Some(id))
        } else {
            (None, None)
        };
        let step = var("SLURM_STEP_ID").or_else(|| var("SLURM_STEPID"));
        let slurm = endpoint.is_some()
            && var("SLURM_MPI_TYPE").as_deref() == Some("pmi2")
            && match (var("SLURM_JOB_ID").or_else(|| var("SLURM_JOBID")), step) {
                (Some(job), Some(step)) => jobid.as_deref() == Some(&format!("{job}.{step}")),
                _ => false,
            };
        Ok(PmiEnv {
            endpoint,
            rank,
            jobid,
            spawned,
            server: if slurm {
                ServerKind::SlurmStepd
            } else {
                ServerKind::Generic
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Result<PmiEnv, PmiError> {
        let m: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        PmiEnv::parse(|k| m.get(k).cloned())
    }

    /// What `srun --mpi=pmi2` sets for a task (Slurm 22.05).
    const SRUN: &[(&str, &str)] = &[
        ("PMI_FD", "11"),
        ("PMI_JOBID", "46.0"),
        ("PMI_RANK", "3"),
        ("PMI_SIZE", "4"),
        ("SLURM_MPI_TYPE", "pmi2"),
        ("SLURM_JOB_ID", "46"),
        ("SLURM_STEP_ID", "0"),
    ];

    #[test]
    fn slurm_task() {
        let e = env(SRUN).unwrap();
        assert_eq!(e.endpoint, Some(Endpoint::Fd(11)));
        assert_eq!(e.rank, Some(3));
        assert_eq!(e.jobid.as_deref(), Some("46.0"));
        assert_eq!(e.server, ServerKind::SlurmStepd);
        assert!(!e.spawned);
    }

    #[test]
    fn a_launcher_inside_a_slurm_step_is_not_slurm() {
        // fastpmi (or Hydra) started by srun: its ranks keep SLURM_JOB_ID and
        // SLURM_STEP_ID but get the launcher's own PMI_JOBID.
        let mut v: Vec<(&str, &str)> = SRUN.to_vec();
        v.retain(|(k, _)| *k != "PMI_JOBID");
        v.push(("PMI_JOBID", "fastpmi-123-0"));
        assert_eq!(env(&v).unwrap().server, ServerKind::Generic);
        // ... or no SLURM_MPI_TYPE=pmi2 (fastpmi removes it).
        let mut v: Vec<(&str, &str)> = SRUN.to_vec();
        v.retain(|(k, _)| *k != "SLURM_MPI_TYPE");
        assert_eq!(env(&v).unwrap().server, ServerKind::Generic);
        // A singleton inside a Slurm step has no server at all.
        let e = env(&[("SLURM_MPI_TYPE", "pmi2"), ("SLURM_JOB_ID", "1")]).unwrap();
        assert_eq!((e.endpoint, e.server), (None, ServerKind::Generic));
    }

    #[test]
    fn port_mode_and_errors() {
        let e = env(&[("PMI_PORT", "127.0.0.1:5000"), ("PMI_ID", "2")]).unwrap();
        assert_eq!(e.endpoint, Some(Endpoint::Port("127.0.0.1:5000".into())));
        assert_eq!(e.rank, Some(2));
        assert!(env(&[("PMI_PORT", "127.0.0.1:5000")]).is_err());
        assert!(env(&[("PMI_FD", "x")]).is_err());
        assert!(env(&[("PMI_FD", "99999999999")]).is_err());
        let e = env(&[("PMI_FD", "3"), ("PMI_JOBID", ""), ("PMI_SPAWNED", "1")]).unwrap();
        assert_eq!((e.jobid, e.spawned), (None, true));
    }
}
