//! The fastpmi Rust client.
//!
//! [`Pmi::init`] picks the transport: the job segment when the launcher
//! advertises one (fastpmi's in the environment, [`Direct`], so init needs
//! no round trip; otherwise node attributes `memPoolType`, `memAnonMMAPfd` /
//! `memSYSVid`) whose layout stamp this client knows; otherwise PMI-2 over
//! the socket the launcher handed over (`PMI_FD`, or `PMI_PORT` +
//! `PMI_ID`); with no PMI environment at all, a singleton (rank 0 of 1 with
//! a local store). `FASTPMI_TRANSPORT=socket` forces the socket.
//!
//! ```no_run
//! let pmi = fastpmi_client::Pmi::init()?;
//! pmi.put("bc", format!("card-of-{}", pmi.rank()))?;
//! pmi.fence()?;
//! for r in 0..pmi.size() {
//!     let card = pmi.get("bc-unused", Some(r))?; // None: key not found
//!     let _ = card;
//! }
//! pmi.finalize()?;
//! # Ok::<(), fastpmi_client::PmiError>(())
//! ```

mod attrs;
mod conn;
mod deaths;
mod env;
mod groups;
mod init;
mod kvscopy;
pub mod logging;
pub use kvscopy::Pair;
mod names;
mod oob;
pub use oob::{Notice as OobNotice, OobChannel, SIGNALS as OOB_SIGNALS};
mod os;
mod spawn;
mod transport;

/// The codec the client speaks, for the C libraries (which depend on this
/// crate only): limits, names, spawn requests.
pub use fastpmi_codec as codec;
/// The PMI return codes of `pmi2.h` / `pmi.h` ([`PmiError::code`]).
pub use fastpmi_codec::codes;
pub use fastpmi_codec::spawn::{SpawnCmd, SpawnRequest};
pub use groups::{Group, Invitation, MemberSpec, NOT_SUPPORTED};
pub use spawn::Spawned;

use std::sync::atomic::{AtomicBool, Ordering};

use shm_layout::{KvsError, RankOp, RankPhase, WaitError};

use fastpmi_segment::{JobSegment, SharedFutex};

use fastpmi_codec::{Deframer, Message, Protocol, Request, WireError};

use conn::{Stream, WireConn};
pub use env::{Direct, Endpoint, PmiEnv, ServerKind, DEFAULT_FENCE_YIELDS};
use transport::{Peer, Transport};

/// Errors of the client. Each has one PMI error code (see [`PmiError::code`]).
#[derive(Debug, thiserror::Error)]
pub enum PmiError {
    #[error("PMI environment: {0}")]
    Env(String),
    #[error("PMI connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("PMI protocol: {0}")]
    Protocol(String),
    #[error("malformed reply from the PMI server: {0}")]
    Wire(#[from] WireError),
    #[error("PMI server refused {cmd} (rc={rc}): {msg}")]
    Server { cmd: String, rc: i32, msg: String },
    #[error("invalid argument: {0}")]
    InvalidArg(String),
    #[error("not supported: {0}")]
    Unsupported(String),
    #[error("PMI is finalized")]
    Finalized,
    #[error("the job was aborted (rank {rank}, code {code})")]
    Aborted { code: i32, rank: u32 },
    /// Ranks of a fault-tolerant job died: the operation can never
    /// complete (`ranks`: the dead set when it gave up).
    #[error("{message}")]
    RanksDied { ranks: Vec<u32>, message: String },
}

impl PmiError {
    /// The PMI-2 error code for the C ABI.
    pub fn code(&self) -> codes::Code {
        match self {
            PmiError::InvalidArg(_) => codes::ERR_INVALID_ARG,
            PmiError::Finalized => codes::ERR_INIT,
            _ => codes::ERR_OTHER,
        }
    }
}

/// How this process does put/get/fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    /// Straight in the job segment (the socket, under fastpmi's launcher
    /// opened only when first needed, stays for spawn, names, abort, job
    /// attributes and overflow).
    Shm,
    /// PMI-2 over the launcher's socket.
    Socket,
    /// No launcher: rank 0 of 1 with a local store.
    Singleton,
}

/// A PMI-2 client. All methods take `&self` and may be called from any
/// thread; shared-memory operations never take a lock.
pub struct Pmi {
    rank: u32,
    size: u32,
    appnum: i32,
    spawned: bool,
    jobid: String,
    transport: Transport,
    server: ServerKind,
    finalized: AtomicBool,
    groups: groups::GroupState,
    /// The server keeps values longer than one PMI-2 value for this client
    /// (fastpmi's launcher, which reads continued commands).
    large_values: bool,
}

fn aborted(a: shm_layout::Aborted) -> PmiError {
    PmiError::Aborted {
        code: a.code,
        rank: a.rank,
    }
}

impl Pmi {
    pub fn rank(&self) -> u32 {
        self.rank
    }
    pub fn size(&self) -> u32 {
        self.size
    }
    pub fn appnum(&self) -> i32 {
        self.appnum
    }
    pub fn spawned(&self) -> bool {
        self.spawned
    }
    pub fn job_id(&self) -> &str {
        &self.jobid
    }
    /// Which kind of PMI server this process talks to.
    pub fn server(&self) -> ServerKind {
        self.server
    }

    /// Refuse what slurmstepd never answers, before asking it.
    fn not_on_slurm(&self, what: &str) -> Result<(), PmiError> {
        if self.server == ServerKind::SlurmStepd {
            return Err(PmiError::Unsupported(format!(
                "{what}: Slurm's PMI-2 server (slurmstepd) does not implement it"
            )));
        }
        Ok(())
    }

    pub fn transport(&self) -> TransportKind {
        self.transport.kind()
    }

    /// The job segment and what goes with it, on shared memory.
    fn shm(&self) -> Option<&transport::Shm> {
        self.transport.shm()
    }

    /// Largest value `put` accepts: the segment's limit on shared memory,
    /// `PMI2_MAX_VALLEN` on the wire.
    pub fn max_value_len(&self) -> usize {
        self.shm().map_or(fastpmi_codec::VALLEN_MAX, |s| {
            s.seg.seg().kvs().max_value_len()
        })
    }

    /// Longest value [`Pmi::put`] takes: under fastpmi's launcher (and as a
    /// singleton) [`fastpmi_codec::LARGE_VALUE_MAX`], kept by the launcher
    /// and carried in continued commands when longer than a message
    /// (docs/continued.md); under other servers [`Pmi::max_value_len`].
    pub fn large_value_max(&self) -> usize {
        if self.large_values {
            fastpmi_codec::LARGE_VALUE_MAX.max(self.max_value_len())
        } else {
            self.max_value_len()
        }
    }

    fn live(&self) -> Result<(), PmiError> {
        if self.finalized.load(Ordering::Acquire) {
            Err(PmiError::Finalized)
        } else {
            Ok(())
        }
    }

    /// Run `f` on the socket (opened first if deferred) or, for a
    /// singleton, its local store.
    fn with<R>(&self, f: impl FnOnce(Peer<'_>) -> Result<R, PmiError>) -> Result<R, PmiError> {
        self.transport.with(f)
    }

    /// Now, as a phase stamp of this segment's kind.
    fn stamp(&self) -> u64 {
        fastpmi_segment::phase_stamp(self.shm().is_some_and(|s| s.cfg.tsc_stamps))
    }

    fn state(&self) -> Option<&shm_layout::RankState> {
        self.shm().and_then(|s| s.seg.seg().rank(s.cfg.slot))
    }

    fn check_kv(&self, key: &[u8], value: Option<&[u8]>) -> Result<(), PmiError> {
        if key.is_empty() || key.len() > fastpmi_codec::KEYLEN_MAX {
            return Err(PmiError::InvalidArg(format!(
                "key length {} (1..={})",
                key.len(),
                fastpmi_codec::KEYLEN_MAX
            )));
        }
        if key
            .iter()
            .any(|&b| b == b';' || b == b'=' || b.is_ascii_whitespace() || b == 0)
        {
            return Err(PmiError::InvalidArg(
                "key contains ';', '=', blanks or NUL".into(),
            ));
        }
        if let Some(v) = value {
            if v.len() > self.large_value_max() {
                return Err(PmiError::InvalidArg(format!(
                    "value of {} bytes (max {})",
                    v.len(),
                    self.large_value_max()
                )));
            }
            if v.iter().any(|&b| b == 0 || b == b'\n') {
                return Err(PmiError::InvalidArg("value contains NUL or newline".into()));
            }
        }
        Ok(())
    }

    /// Did the launcher keep pairs outside the segment (segment full)?
    fn overflowed(&self, seg: &JobSegment) -> bool {
        seg.seg()
            .node_attrs()
            .get(fastpmi_codec::names::attr::OVERFLOW.as_bytes())
            .is_some()
    }

    /// The launcher may know keys beyond the segment's: a job over node
    /// servers, whose outer job a miss is asked of (docs/nested.md).
    fn miss_asks(&self, seg: &JobSegment) -> bool {
        seg.seg()
            .node_attrs()
            .get(fastpmi_codec::names::attr::MISS_ASKS.as_bytes())
            .is_some()
    }

    /// Put a key into the job's KVS (visible to all after the next fence).
    /// A key put twice keeps the last value.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<(), PmiError> {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.live()?;
        self.check_kv(key, Some(value))?;
        if let Some(shm) = self.shm() {
            match shm.seg.seg().kvs().put(key, value, &SharedFutex) {
                Ok(_) => {
                    if let Some(st) = self.state() {
                        st.count_put();
                        st.set_last_op(RankOp::Put);
                    }
                    return Ok(());
                }
                Err(KvsError::Aborted(a)) => return Err(aborted(a)),
                // Full, or longer than the segment's values: the launcher
                // keeps it in its overflow table.
                Err(KvsError::TableFull { .. } | KvsError::ArenaFull { .. })
                    if value.len() <= fastpmi_codec::VALLEN_MAX => {}
                Err(KvsError::ValueTooLong { .. }) if self.large_values => {}
                Err(e) => return Err(PmiError::InvalidArg(e.to_string())),
            }
        }
        self.with(|t| match t {
            Peer::Wire(c) => {
                let req = Request::Put {
                    key: key.to_vec(),
                    value: value.to_vec(),
                };
                c.call(Protocol::Pmi2, &req, req.response())?;
                Ok(())
            }
            Peer::Local(l) => {
                l.kvs.insert(key.to_vec(), value.to_vec());
                Ok(())
            }
        })
    }

    /// Get a key of this job; `src` is the rank that put it, if known.
    pub fn get(
        &self,
        key: impl AsRef<[u8]>,
        src: Option<u32>,
    ) -> Result<Option<Vec<u8>>, PmiError> {
        self.get_from(None, key, src)
    }

    /// Get a key of job `jobid` (None = this job).
    pub fn get_from(
        &self,
        jobid: Option<&str>,
        key: impl AsRef<[u8]>,
        src: Option<u32>,
    ) -> Result<Option<Vec<u8>>, PmiError> {
        self.get_with(jobid, key, src, |v| v.map(<[u8]>::to_vec))
    }

    /// Like [`Pmi::get_from`], but hands the value to `f` by reference: on
    /// shared memory it is read straight from the segment, with no copy or
    /// allocation (what the C library uses to fill the caller's buffer).
    pub fn get_with<R>(
        &self,
        jobid: Option<&str>,
        key: impl AsRef<[u8]>,
        src: Option<u32>,
        f: impl FnOnce(Option<&[u8]>) -> R,
    ) -> Result<R, PmiError> {
        let key = key.as_ref();
        self.live()?;
        self.check_kv(key, None)?;
        let own = jobid.is_none_or(|j| j.is_empty() || j == self.jobid);
        if !own {
            // slurmstepd would answer from this job's KVS whatever jobid says.
            self.not_on_slurm("reading another job's keys (kvs-get with a jobid)")?;
        }
        // The parent's KVS, straight from its segment (a spawned job).
        if let Some((pj, seg)) = self.shm().and_then(|s| s.parent.as_ref()) {
            if jobid == Some(pj.as_str()) {
                if let Some(st) = self.state() {
                    st.count_get();
                }
                if let Some(v) = seg.seg().kvs().get(key) {
                    return Ok(f(Some(v)));
                }
                if !self.overflowed(seg) {
                    return Ok(f(None));
                }
            }
        }
        if let (Some(shm), true) = (self.shm(), own) {
            if let Some(st) = self.state() {
                st.count_get();
                st.set_last_op(RankOp::Get);
            }
            if let Some(v) = shm.seg.seg().kvs().get(key) {
                return Ok(f(Some(v)));
            }
            // Hydra's special key, as MPICH reads it (PMI2_ID_NULL): only
            // after a miss, so a hit costs nothing more.
            if key == fastpmi_codec::names::attr::DEAD_PROCESSES.as_bytes() {
                if let Some(v) = self.segment_dead_processes() {
                    return Ok(f(v.as_deref()));
                }
            }
            if !self.overflowed(&shm.seg) && !self.miss_asks(&shm.seg) {
                return Ok(f(None));
            }
        }
        let got = self.with(|t| match t {
            Peer::Wire(c) => {
                let req = Request::Get {
                    jobid: jobid.map(str::to_string),
                    src: src.map(i64::from),
                    key: key.to_vec(),
                };
                let m = c.call(Protocol::Pmi2, &req, req.response())?;
                Ok(found_value(&m))
            }
            Peer::Local(_) if !own => Err(PmiError::Protocol(format!(
                "no job {} here: a singleton has only its own KVS",
                jobid.unwrap_or_default()
            ))),
            Peer::Local(l) => Ok(l.kvs.get(key).cloned()),
        })?;
        Ok(f(got.as_deref()))
    }

    /// Barrier over the job; afterwards every put made before it is visible.
    pub fn fence(&self) -> Result<(), PmiError> {
        self.live()?;
        if let Some(shm) = self.shm() {
            let st = self.state();
            if let Some(st) = st {
                st.count_fence();
                st.set_last_op(RankOp::Fence);
                st.set_phase_at(RankPhase::InFence, self.stamp());
            }
            let fence = shm.seg.seg().fence();
            let yields = shm.cfg.yields_in(fence.generation());
            let r = fence
                .for_rank_in(shm.cfg.slot, shm.cfg.cohort)
                .with_spin_limit(shm.cfg.spins)
                .with_yield_limit(yields)
                .fence(&SharedFutex);
            if let Some(st) = st {
                st.set_phase_at(RankPhase::Running, self.stamp());
            }
            return r.map(|_| ()).map_err(|e| self.fence_error(e));
        }
        self.with(|t| match t {
            Peer::Wire(c) => c
                .call(
                    Protocol::Pmi2,
                    &Request::Barrier,
                    Request::Barrier.response(),
                )
                .map(|_| ()),
            Peer::Local(_) => Ok(()),
        })
    }

    /// The parent job whose segment this spawned process maps (its KVS is
    /// then read from there by [`Pmi::get_from`]), if any.
    pub fn parent_segment(&self) -> Option<&str> {
        self.shm()
            .and_then(|s| s.parent.as_ref())
            .map(|(j, _)| j.as_str())
    }

    /// Size in bytes of the mapped job segment (None on the socket).
    pub fn segment_len(&self) -> Option<usize> {
        self.shm().map(|s| s.seg.mapping().len())
    }

    /// Why this process talks to the launcher over the socket instead of the
    /// job segment (no segment advertised, unknown layout stamp,
    /// `FASTPMI_TRANSPORT=socket`, ...); `None` on shared memory and for a
    /// singleton.
    pub fn fallback_reason(&self) -> Option<&str> {
        match &self.transport {
            Transport::Socket { fallback, .. } => Some(fallback),
            Transport::Shm(_) | Transport::Singleton(_) => None,
        }
    }

    /// A request that only the launcher can answer. A singleton has no
    /// launcher: name service and jobs are unavailable.
    fn wire(&self, req: &Request, expect: &str) -> Result<Message, PmiError> {
        self.live()?;
        self.with(|t| match t {
            Peer::Wire(c) => c.call(Protocol::Pmi2, req, expect),
            Peer::Local(_) => Err(PmiError::Protocol(format!(
                "{} needs a launcher (this process is a singleton)",
                fastpmi_codec::command::request_name(req)
            ))),
        })
    }

    /// Ask the launcher to end the whole job with `code`, then exit.
    pub fn abort(&self, code: i32, message: &str) -> ! {
        self.abort_with(code, message, true)
    }

    /// Abort with `code`: the whole job (`world`), or only this process
    /// (`PMI2_Abort(0, ...)`: a fault-tolerant job goes on without it;
    /// any other job ends, as for a world abort). Exits either way.
    pub fn abort_with(&self, code: i32, message: &str, world: bool) -> ! {
        let _ = self.send_abort(code, message, world);
        std::process::exit(code & 0xff)
    }

    /// Ask the launcher to end the whole job with `code`, and go on (a
    /// node server that still has its own ranks to stop; the launcher
    /// answers nothing, it ends the job). A singleton has nobody to ask.
    pub fn request_abort(&self, code: i32, message: &str) -> Result<(), PmiError> {
        self.send_abort(code, message, true)
    }

    fn send_abort(&self, code: i32, message: &str, world: bool) -> Result<(), PmiError> {
        self.with(|t| {
            if let Peer::Wire(c) = t {
                c.send(&Request::Abort {
                    exitcode: Some(code.into()),
                    message: message.to_string(),
                    isworld: world,
                })?;
            }
            Ok(())
        })
    }

    /// Whether the server is fastpmi's launcher (it offers `kvs-getall`
    /// and `kvs-putall`, and values longer than a message).
    pub fn server_is_fastpmi(&self) -> bool {
        self.large_values
    }

    /// Leave PMI cleanly. Also done on drop.
    pub fn finalize(&self) -> Result<(), PmiError> {
        if self.finalized.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if let Some(st) = self.state() {
            st.set_last_op(RankOp::Finalize);
            st.set_phase_at(RankPhase::Finalized, self.stamp());
        }
        match &self.transport {
            // On the segment the launcher is fastpmi's, which reads the
            // Finalized phase set above from there: no need to wait for its
            // answer. Waiting made the ranks of a large job leave one at a
            // time, each woken in turn by the launcher's reply. A socket
            // never opened closes here unopened.
            Transport::Shm(shm) => match shm.finalize_link() {
                Some(c) => c.send(&Request::Finalize),
                None => Ok(()),
            },
            Transport::Socket { mux, .. } => mux
                .call(
                    Protocol::Pmi2,
                    &Request::Finalize,
                    Request::Finalize.response(),
                )
                .map(|_| ()),
            Transport::Singleton(_) => Ok(()),
        }
    }
}

impl Drop for Pmi {
    fn drop(&mut self) {
        let _ = self.finalize();
    }
}

pub(crate) fn found_value(m: &Message) -> Option<Vec<u8>> {
    if m.get_bool("found") == Some(true) {
        m.get("value").map(<[u8]>::to_vec)
    } else {
        None
    }
}
