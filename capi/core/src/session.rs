//! The process-wide PMI session of a C library: one
//! [`fastpmi_client::Pmi`] from init to finalize.
//!
//! Entry points take a clone of the session's `Arc` under a read lock and
//! release the lock at once, so a blocking call (fence, node attribute wait)
//! never holds it and any thread may call in. Finalize takes the session
//! out: later calls get `ERR_INIT`, and init may be called again.

use std::ffi::c_int;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use fastpmi_client::{Pmi, PmiError};

use crate::codes::*;
use crate::mapping;
use fastpmi_client::codec::names::attr;

/// Attach what failed to a client error and map it to its code.
pub trait Ctx<T> {
    fn ctx(self, what: &str) -> Result<T, Rc>;
}

impl<T> Ctx<T> for Result<T, PmiError> {
    fn ctx(self, what: &str) -> Result<T, Rc> {
        self.map_err(|e| from_client(what, &e))
    }
}

/// One initialised PMI client plus what the C APIs derive from it.
pub struct Session {
    pub pmi: Pmi,
    local: OnceLock<Vec<u32>>,
    ring_seq: AtomicU64,
}

static SESSION: RwLock<Option<Arc<Session>>> = RwLock::new(None);

/// Initialise (or return the session already initialised). `api` names the
/// caller in the error log line (`PMI2_Init`, `PMI_Init`).
pub fn init(api: &str) -> Result<Arc<Session>, Rc> {
    fastpmi_client::logging::init(fastpmi_client::logging::Unset::Warnings);
    let mut slot = SESSION.write().unwrap_or_else(|p| p.into_inner());
    if let Some(s) = &*slot {
        return Ok(s.clone());
    }
    let pmi = Pmi::init().map_err(|e| {
        tracing::error!("{api} failed: {e}");
        code_of(&e)
    })?;
    tracing::debug!(
        "{api}: rank {} of {}, job {}, transport {:?}",
        pmi.rank(),
        pmi.size(),
        pmi.job_id(),
        pmi.transport()
    );
    let s = Arc::new(Session {
        pmi,
        local: OnceLock::new(),
        ring_seq: AtomicU64::new(0),
    });
    *slot = Some(s.clone());
    Ok(s)
}

/// The current session, or `ERR_INIT` before init / after finalize.
pub fn current() -> Result<Arc<Session>, Rc> {
    SESSION
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
        .ok_or(ERR_INIT)
}

pub fn is_initialized() -> bool {
    SESSION.read().unwrap_or_else(|p| p.into_inner()).is_some()
}

/// Tell the user why the job is aborted when the server will not:
/// slurmstepd cancels the step and drops the message.
pub fn report_abort(s: &Session, api: &str, code: c_int, msg: &str) {
    if s.pmi.server() == fastpmi_client::ServerKind::SlurmStepd {
        tracing::error!(
            "{api}: rank {} aborts the job (code {code}): {msg}",
            s.rank()
        );
    } else {
        tracing::debug!("{api}: code {code}: {msg}");
    }
}

/// The last finalized session, kept until the next finalize or the
/// process's exit: dropping it unmaps the job segment, and a munmap of a
/// shared mapping the process touched from both CPUs costs a TLB shoot-down
/// (an inter-processor interrupt, a VM exit under a hypervisor) in every
/// rank, just before exit unmaps everything anyway.
static RETIRED: Mutex<Option<Arc<Session>>> = Mutex::new(None);

/// Finalize and forget the session; `ERR_INIT` if there is none.
pub fn finalize(api: &str) -> Result<(), Rc> {
    let s = SESSION
        .write()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .ok_or(ERR_INIT)?;
    let r = s.pmi.finalize().ctx(api);
    // The previous retired session (init and finalize called again) goes.
    drop(RETIRED.lock().unwrap_or_else(|p| p.into_inner()).replace(s));
    r
}

/// Parse a comma-separated list of C `int`s (`localRanks`, `1,2,3`).
pub fn parse_int_list(v: &[u8]) -> Option<Vec<c_int>> {
    std::str::from_utf8(v)
        .ok()?
        .split(',')
        .map(|x| x.trim().parse::<c_int>().ok())
        .collect()
}

impl Session {
    pub fn rank(&self) -> u32 {
        self.pmi.rank()
    }

    pub fn size(&self) -> u32 {
        self.pmi.size()
    }

    /// Is `jobid` (a PMI-2 job id or PMI-1 kvsname) this job's? NULL and
    /// empty mean this job too (`PMI2_KVS_Get(NULL, ...)`).
    pub fn is_own_job(&self, jobid: Option<&str>) -> bool {
        jobid.is_none_or(|j| j.is_empty() || j == self.pmi.job_id())
    }

    /// Ranks on this node, in increasing order: the `localRanks` node
    /// attribute, else derived from `PMI_process_mapping` (Hydra has no
    /// `localRanks`), else this rank alone. Computed once.
    pub fn local_ranks(&self) -> &[u32] {
        self.local.get_or_init(|| {
            let (rank, size) = (self.rank(), self.size());
            match self.pmi.node_attr_int_array(attr::LOCAL_RANKS) {
                Ok(Some(v))
                    if !v.is_empty() && v.iter().all(|&r| (0..size as i64).contains(&r)) =>
                {
                    return v.into_iter().map(|r| r as u32).collect();
                }
                Ok(_) => {}
                Err(e) => tracing::debug!("localRanks: {e}"),
            }
            match self.pmi.job_attr(attr::PROCESS_MAPPING) {
                Ok(Some(m)) => {
                    let m = String::from_utf8_lossy(&m);
                    if let Some(v) = mapping::local_ranks(&m, rank, size) {
                        return v;
                    }
                    tracing::debug!("PMI_process_mapping {m:?} does not place rank {rank}");
                }
                Ok(None) => {}
                Err(e) => tracing::debug!("PMI_process_mapping: {e}"),
            }
            vec![rank]
        })
    }

    /// `universeSize` job attribute, else the job size.
    pub fn universe_size(&self) -> Result<u32, Rc> {
        Ok(self
            .pmi
            .job_attr(attr::UNIVERSE_SIZE)
            .ctx(attr::UNIVERSE_SIZE)?
            .and_then(|v| std::str::from_utf8(&v).ok()?.trim().parse().ok())
            .unwrap_or(self.size()))
    }

    /// An integer-array attribute (`PMI2_Info_Get{Node,Job}AttrIntArray`):
    /// `None` if not found, `ERR_OTHER` if the value is not a list of ints.
    pub fn int_array(&self, node: bool, key: &[u8], what: &str) -> Result<Option<Vec<c_int>>, Rc> {
        if node {
            let v = self.pmi.node_attr_int_array(key).ctx(what)?;
            return v
                .map(|v| {
                    v.into_iter()
                        .map(|x| c_int::try_from(x).map_err(|_| ERR_OTHER))
                        .collect()
                })
                .transpose();
        }
        match self.pmi.job_attr(key).ctx(what)? {
            None => Ok(None),
            Some(v) => parse_int_list(&v).map(Some).ok_or_else(|| {
                tracing::debug!(
                    "{what}: {} = {:?} is not a list of integers",
                    String::from_utf8_lossy(key),
                    String::from_utf8_lossy(&v)
                );
                ERR_OTHER
            }),
        }
    }

    /// `PMIX_Ring` over the KVS: put this rank's value under a key of this
    /// ring round, fence, read the left and right neighbours' values.
    /// Returns (left, right). Values travel with a one-byte prefix so an
    /// empty value is never an empty KVS value.
    pub fn ring(&self, value: &[u8]) -> Result<(Vec<u8>, Vec<u8>), Rc> {
        let (rank, size) = (self.rank(), self.size());
        if size <= 1 {
            return Ok((value.to_vec(), value.to_vec()));
        }
        let round = self.ring_seq.fetch_add(1, Ordering::Relaxed);
        let key = |r: u32| format!("fastpmi-ring-{round}-{r}");
        let mut stored = Vec::with_capacity(value.len() + 1);
        stored.push(b'r');
        stored.extend_from_slice(value);
        self.pmi.put(key(rank), &stored).ctx("PMIX_Ring put")?;
        self.pmi.fence().ctx("PMIX_Ring fence")?;
        let get = |r: u32| -> Result<Vec<u8>, Rc> {
            match self.pmi.get(key(r), Some(r)).ctx("PMIX_Ring get")? {
                Some(mut v) if v.first() == Some(&b'r') => {
                    v.remove(0);
                    Ok(v)
                }
                other => {
                    tracing::debug!("PMIX_Ring: rank {r}'s value is {other:?}");
                    Err(ERR_OTHER)
                }
            }
        };
        let left = get((rank + size - 1) % size)?;
        let right = get((rank + 1) % size)?;
        Ok((left, right))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_lists() {
        assert_eq!(parse_int_list(b"0,1, 2"), Some(vec![0, 1, 2]));
        assert_eq!(parse_int_list(b"7"), Some(vec![7]));
        assert_eq!(parse_int_list(b"(vector,(0,1,4))"), None);
        assert_eq!(parse_int_list(b""), None);
        assert_eq!(parse_int_list(b"99999999999"), None);
    }
}

#[cfg(test)]
mod singleton_tests {
    use super::*;

    /// The only test of this binary that touches the global session.
    #[test]
    fn singleton_lifecycle() {
        for k in ["PMI_FD", "PMI_PORT", "PMI_ID", "PMI_RANK", "PMI_SIZE"] {
            assert!(std::env::var_os(k).is_none(), "{k} set: not a singleton");
        }
        assert_eq!(current().err(), Some(ERR_INIT));
        assert_eq!(finalize("t"), Err(ERR_INIT));
        let s = init("t").unwrap();
        assert!(is_initialized());
        assert_eq!((s.rank(), s.size()), (0, 1));
        assert!(s.is_own_job(None) && s.is_own_job(Some("")));
        assert!(s.is_own_job(Some(s.pmi.job_id())) && !s.is_own_job(Some("other")));
        assert_eq!(s.local_ranks(), &[0]);
        assert_eq!(s.universe_size(), Ok(1));
        assert_eq!(s.ring(b"v").unwrap(), (b"v".to_vec(), b"v".to_vec()));
        assert_eq!(s.int_array(true, b"localRanks", "t"), Ok(Some(vec![0])));
        assert_eq!(
            s.int_array(false, b"PMI_process_mapping", "t"),
            Err(ERR_OTHER)
        );
        assert_eq!(s.int_array(false, b"universeSize", "t"), Ok(Some(vec![1])));
        // A second init hands back the same session.
        assert!(Arc::ptr_eq(&s, &init("t").unwrap()));
        assert_eq!(finalize("t"), Ok(()));
        assert!(!is_initialized());
        // Calls through a stale handle report finalized.
        assert_eq!(s.pmi.put("k", "v").ctx("t"), Err(ERR_INIT));
        // And a new session can start.
        let s2 = init("t").unwrap();
        assert!(!Arc::ptr_eq(&s, &s2));
        assert_eq!(finalize("t"), Ok(()));
    }
}
