//! The rendezvous query protocol, version 1 (reference: `docs/tools.md`).
//!
//! One request per connection: a single line of JSON (at most
//! [`MAX_REQUEST`] bytes, `\n`-terminated), answered by a single line of
//! JSON, after which the launcher closes the connection.

use serde::{Deserialize, Serialize};

/// The protocol version this build speaks.
pub const VERSION: u32 = 1;
/// Longest request line accepted.
pub const MAX_REQUEST: usize = 4096;

/// A request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    pub version: u32,
    pub op: Op,
    /// A job id (`ps`, `release`); absent: every job of the launcher.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// The launcher and its jobs (one line of `fastpmi ps`).
    Info,
    /// The proc table: every rank of every job (or of `job`).
    Ps,
    /// Release ranks held in init (`--stop-in-init`).
    Release,
    /// Ask the ranks for an application checkpoint (out-of-band
    /// `cmd=checkpoint`, docs/oob.md).
    Checkpoint,
}

/// One job's checkpoint request, as `checkpoint` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointSent {
    pub job: String,
    /// The request's number in this job (from 1).
    pub seq: u64,
    /// Ranks that got it: those with an open out-of-band channel.
    pub ranks: u32,
    pub size: u32,
}

/// The launcher, as `info` describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LauncherInfo {
    pub pid: u32,
    pub command: String,
    pub age_seconds: f64,
    pub jobs: Vec<JobBrief>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobBrief {
    pub id: String,
    pub size: u32,
    /// Ranks not reaped yet.
    pub live: u32,
    pub held: bool,
}

/// One rank's row of the proc table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankRow {
    pub rank: u32,
    pub pid: Option<u32>,
    pub executable: String,
    pub appnum: i32,
    /// `shm`, `socket`, `pmix` (a PMIx client) or `none` (no PMI yet).
    pub transport: String,
    /// Machine-readable state: `launching`, `no_pmi`, `held_in_init`,
    /// `in_init`, `running`, `in_fence`, `between_fences`, `waiting_attr`,
    /// `finalized`, `exited`, `dead` (a fault-tolerant job's).
    pub kind: String,
    /// Human-readable state ("in fence 3", "running without PMI", ...).
    pub state: String,
    /// The fence it is in (`in_fence`).
    #[serde(default)]
    pub fence: Option<u64>,
    /// The node attribute it waits for (`waiting_attr`; absent when the
    /// rank waits in shared memory, where the key is not recorded).
    #[serde(default)]
    pub attr: Option<String>,
    /// Seconds in this state.
    pub seconds: f64,
    /// The last PMI operation it started.
    #[serde(default)]
    pub last_op: Option<String>,
    /// Fences it entered.
    pub fences: u64,
    /// How it ended (`exited`).
    #[serde(default)]
    pub exit: Option<String>,
    /// The CPUs the launcher bound it to (`0-1,4`); absent when unbound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
    /// Its process's state, from `/proc/PID/stat`: `running`, `sleeping`,
    /// `uninterruptible`, `stopped`, `traced`, `zombie`, `dead`, `other`;
    /// null when it has no live process (not started, reaped) or the
    /// process ended while the table was read.
    #[serde(default)]
    pub process: Option<String>,
    /// Seconds since the process last ran on a CPU (the scheduler's
    /// `/proc/PID/sched`), for a stopped, traced, uninterruptible or zombie
    /// process; absent otherwise, or where the kernel does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_last_ran: Option<f64>,
    /// The kernel function an uninterruptible process waits in
    /// (`/proc/PID/wchan`), where the kernel says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_wchan: Option<String>,
}

/// A process-group fence in progress (`docs/groups.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupFenceRow {
    pub group: String,
    /// `segment`: the group's barrier slot in the job segment (its members
    /// record their arrival in their rank records); `server`: the server's
    /// barrier.
    pub barrier: String,
    pub arrived: u32,
    /// Members expected (those that have not left).
    pub size: u32,
    /// The members that have not arrived, `rank R` in this job or `rank R
    /// of job J`.
    pub missing: Vec<String>,
    /// Seconds since the first member arrived.
    pub seconds: f64,
}

/// One job's proc table and its summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobTable {
    pub id: String,
    pub size: u32,
    #[serde(default)]
    pub spawner: Option<String>,
    pub held: bool,
    #[serde(default)]
    pub failed: Option<String>,
    pub fences_completed: u64,
    /// Ranks that have not arrived at the fence in progress (fence
    /// `fences_completed + 1`, when some rank has arrived at it).
    #[serde(default)]
    pub missing: Vec<u32>,
    /// Process-group fences in progress with a member in this job.
    #[serde(default)]
    pub group_fences: Vec<GroupFenceRow>,
    /// One line per ongoing wait ("fence 3: 255/256 arrived, missing: ...").
    pub summary: Vec<String>,
    pub ranks: Vec<RankRow>,
}

/// A reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    pub version: u32,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher: Option<LauncherInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<Vec<JobTable>>,
    /// `release`: ranks released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released: Option<usize>,
    /// `checkpoint`: one entry per job asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<Vec<CheckpointSent>>,
}

impl Reply {
    pub fn error(msg: impl Into<String>) -> Reply {
        Reply {
            version: VERSION,
            ok: false,
            error: Some(msg.into()),
            launcher: None,
            jobs: None,
            released: None,
            checkpoints: None,
        }
    }

    pub fn ok() -> Reply {
        Reply {
            version: VERSION,
            ok: true,
            error: None,
            launcher: None,
            jobs: None,
            released: None,
            checkpoints: None,
        }
    }
}

/// Why a request line is refused; its text is the message sent back.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("not a JSON request: {0}")]
    NotJson(serde_json::Error),
    #[error("protocol version {0} not supported (this launcher speaks {VERSION})")]
    Version(u64),
    #[error("request without \"version\" (this launcher speaks {VERSION})")]
    NoVersion,
    #[error("bad request: {0}")]
    Bad(serde_json::Error),
}

/// Parse a request line.
pub fn parse_request(line: &[u8]) -> Result<Request, RequestError> {
    // Look at the version first, so a newer client hears which one is spoken.
    let v: serde_json::Value = serde_json::from_slice(line).map_err(RequestError::NotJson)?;
    match v.get("version").and_then(|v| v.as_u64()) {
        Some(n) if n == VERSION as u64 => {}
        Some(n) => return Err(RequestError::Version(n)),
        None => return Err(RequestError::NoVersion),
    }
    serde_json::from_value(v).map_err(RequestError::Bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests() {
        let r = parse_request(br#"{"version":1,"op":"ps","job":"j"}"#).unwrap();
        assert_eq!(r.op, Op::Ps);
        assert_eq!(r.job.as_deref(), Some("j"));
        assert!(parse_request(b"garbage")
            .unwrap_err()
            .to_string()
            .contains("not a JSON"));
        assert!(parse_request(br#"{"version":2,"op":"ps"}"#)
            .unwrap_err()
            .to_string()
            .contains("version 2 not supported"));
        assert!(parse_request(br#"{"op":"ps"}"#)
            .unwrap_err()
            .to_string()
            .contains("version"));
        assert!(parse_request(br#"{"version":1,"op":"frob"}"#).is_err());
        assert!(parse_request(br#"{"version":1,"op":"ps","x":1}"#).is_err());
    }
}
