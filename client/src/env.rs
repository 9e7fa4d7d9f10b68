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
//! fastpmi's launcher adds, for its own client, what lets init attach to
//! the job segment with no round trip on the socket (see [`Direct`]).
//!
//! `FASTPMI_FENCE_YIELDS` (0..=16, default [`DEFAULT_FENCE_YIELDS`]) sets
//! how many times a rank waiting in a shared-memory fence gives up its CPU
//! before it sleeps (docs/fence.md); 0 sleeps at once.
//!
//! `slurmstepd` (`srun --mpi=pmi2`) is recognised by its own variables:
//! `SLURM_MPI_TYPE=pmi2` and `PMI_JOBID` = `<SLURM_JOB_ID>.<SLURM_STEP_ID>`,
//! the id it gives a step. A launcher started inside a Slurm step sets its
//! own `PMI_JOBID` (and fastpmi's drops `SLURM_MPI_TYPE`), so its ranks are
//! not taken for Slurm's.

use fastpmi_codec::names::env::{
    APPNUM, FENCE_YIELDS, PARENT_SEGMENT, PMI_FD, PMI_ID, PMI_JOBID, PMI_PORT, PMI_RANK, PMI_SIZE,
    PMI_SPAWNED, SEGMENT, SPAWNER,
};

use super::PmiError;

/// CPU yields before a fence waiter sleeps, unless [`FENCE_YIELDS`] says
/// otherwise. Measured on 2 cores, in the two harness runs that compared
/// every size (docs/fence.md), a fence with 2 took this share of the time
/// it took with none: 16 ranks 0.17x and 0.46x, 64 ranks 0.59x and 0.49x,
/// 256 ranks 0.65x and 0.45x, 1024 ranks 0.90x and 0.89x; 3, 4 or 8
/// yields were within the noise of 2 (bare C barrier, 1024 processes).
pub const DEFAULT_FENCE_YIELDS: u32 = 2;

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

/// What fastpmi's launcher tells its ranks in the environment, beside
/// `PMI_FD`, so that its own client's init is only: read the environment,
/// map the segment, check its stamp and owner, register. The socket is
/// opened (`init`, `fullinit`) only when the rank first needs the launcher.
/// The inherited descriptors are the proof of membership, as for `PMI_FD`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Direct {
    pub size: u32,
    pub segment: String,
    pub appnum: i32,
    pub spawner: Option<String>,
    pub parent_segment: Option<String>,
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
    /// Set by fastpmi's launcher for a rank with an inherited socket and a
    /// job segment.
    pub direct: Option<Direct>,
    /// CPU yields before a shared-memory fence waiter sleeps.
    pub fence_yields: u32,
    /// The server is fastpmi's launcher: it handed over a job segment, an
    /// out-of-band channel (`PMI_OOB_FD`) or a job secret, which no other
    /// server does. Only then are fastpmi's own wire keys sent.
    pub fastpmi: bool,
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
        let spawned = int(PMI_SPAWNED)?.unwrap_or(0) != 0;
        let fence_yields = match int(FENCE_YIELDS)? {
            None => DEFAULT_FENCE_YIELDS,
            Some(n) => u32::try_from(n)
                .ok()
                .filter(|&n| n <= shm_layout::MAX_YIELDS)
                .ok_or_else(|| {
                    PmiError::Env(format!(
                        "{FENCE_YIELDS}={n} is out of range (0..={})",
                        shm_layout::MAX_YIELDS
                    ))
                })?,
        };
        let jobid = var(PMI_JOBID).filter(|j| !j.is_empty());
        let (endpoint, rank) = if let Some(fd) = int(PMI_FD)? {
            let fd = i32::try_from(fd)
                .map_err(|_| PmiError::Env(format!("PMI_FD={fd} is not a descriptor")))?;
            (Some(Endpoint::Fd(fd)), int(PMI_RANK)?)
        } else if let Some(port) = var(PMI_PORT) {
            let id = int(PMI_ID)?.ok_or_else(|| PmiError::Env("PMI_PORT without PMI_ID".into()))?;
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
        let direct = match (&endpoint, rank, &jobid, var(SEGMENT)) {
            (Some(Endpoint::Fd(_)), Some(_), Some(_), Some(segment)) if !slurm => {
                let size = int(PMI_SIZE)?
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| PmiError::Env(format!("{} without PMI_SIZE", SEGMENT)))?;
                Some(Direct {
                    size,
                    segment,
                    appnum: int(APPNUM)?.unwrap_or(0) as i32,
                    spawner: var(SPAWNER).filter(|j| !j.is_empty()),
                    parent_segment: var(PARENT_SEGMENT).filter(|v| !v.is_empty()),
                })
            }
            _ => None,
        };
        let fastpmi = !slurm
            && (direct.is_some()
                || var(fastpmi_codec::names::env::PMI_OOB_FD).is_some()
                || var(fastpmi_codec::names::env::AUTH_SECRET).is_some());
        Ok(PmiEnv {
            endpoint,
            rank,
            jobid,
            spawned,
            direct,
            fence_yields,
            fastpmi,
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
    fn fastpmis_direct_init_variables() {
        let base = [
            ("PMI_FD", "3"),
            ("PMI_RANK", "1"),
            ("PMI_SIZE", "4"),
            ("PMI_JOBID", "fastpmi_9_1"),
        ];
        let mut v = base.to_vec();
        v.extend([
            (SEGMENT, "anonmmap:4"),
            (APPNUM, "2"),
            (SPAWNER, "fastpmi_9_0"),
            (PARENT_SEGMENT, "fd:5"),
        ]);
        let d = env(&v).unwrap().direct.unwrap();
        assert_eq!(
            d,
            Direct {
                size: 4,
                segment: "anonmmap:4".into(),
                appnum: 2,
                spawner: Some("fastpmi_9_0".into()),
                parent_segment: Some("fd:5".into()),
            }
        );
        // Without the segment variable (another launcher): none.
        assert_eq!(env(&base).unwrap().direct, None);
        // Nor in port mode, where the rank must authenticate first.
        let port = [
            ("PMI_PORT", "127.0.0.1:5000"),
            ("PMI_ID", "1"),
            ("PMI_JOBID", "j"),
            (SEGMENT, "sysv:7"),
        ];
        assert_eq!(env(&port).unwrap().direct, None);
        // The segment without the job size is an error, not a guess.
        let mut v = base.to_vec();
        v.retain(|(k, _)| *k != "PMI_SIZE");
        v.push((SEGMENT, "sysv:7"));
        assert!(env(&v).is_err());
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

    #[test]
    fn fence_yields_default_override_and_errors() {
        let base = [("PMI_FD", "3"), ("PMI_RANK", "0")];
        assert_eq!(env(&base).unwrap().fence_yields, DEFAULT_FENCE_YIELDS);
        let with = |v: &'static str| {
            let mut e = base.to_vec();
            e.push((FENCE_YIELDS, v));
            env(&e)
        };
        assert_eq!(with("0").unwrap().fence_yields, 0);
        assert_eq!(with(" 16 ").unwrap().fence_yields, shm_layout::MAX_YIELDS);
        for bad in ["17", "-1", "two", ""] {
            let err = with(bad).unwrap_err().to_string();
            assert!(err.contains(FENCE_YIELDS), "{bad}: {err}");
        }
    }
}
