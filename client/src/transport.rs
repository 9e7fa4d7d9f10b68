//! Which transport a [`Pmi`](super::Pmi) uses, and what only that
//! transport holds: one enum, so that a singleton with a segment or a
//! socket-only process with a deferred socket cannot be built.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use fastpmi_segment::JobSegment;

use super::conn::{lock, Deferred, Mux};
use super::{PmiError, TransportKind};

/// A spawned job's parent's job id and segment.
pub(super) type ParentSegment = (String, JobSegment);

/// The transport chosen at init.
pub(super) enum Transport {
    /// Put, get and fence straight in the job segment; the socket carries
    /// the rest (spawn, names, abort, job attributes, overflow).
    Shm(Box<Shm>),
    /// PMI-2 over the socket to the launcher (or another PMI server).
    Socket {
        mux: Mux,
        /// Why the segment is not used (no segment advertised, unknown
        /// layout stamp, `FASTPMI_TRANSPORT=socket`, ...).
        fallback: String,
    },
    /// No launcher: rank 0 of 1 with a local store.
    Singleton(Mutex<Local>),
}

/// What a rank on the job segment holds.
pub(super) struct Shm {
    pub(super) seg: JobSegment,
    /// A spawned job's parent's segment, read for `get_from(parent)`.
    pub(super) parent: Option<ParentSegment>,
    /// How this rank fences and stamps on the segment.
    pub(super) cfg: ShmCfg,
    /// The socket beside the segment, opened when first needed under
    /// fastpmi's launcher (so init needs no round trip).
    pub(super) link: Mutex<Link>,
}

/// The socket of a rank on the segment.
pub(super) enum Link {
    /// fastpmi's launcher's socket, not opened yet ([`Shm::open`] opens it).
    Deferred(Box<Deferred>),
    Open(Arc<Mux>),
    /// Opening the deferred socket failed: why.
    Failed(String),
    /// Finalized before the socket was ever opened: closed unopened.
    Closed,
}

/// A singleton's own store.
#[derive(Default)]
pub(super) struct Local {
    pub(super) kvs: HashMap<Vec<u8>, Vec<u8>>,
    pub(super) node: HashMap<Vec<u8>, Vec<u8>>,
}

/// Where a request the segment does not serve goes.
pub(super) enum Peer<'a> {
    /// The PMI server, over the socket (shared by all threads: replies are
    /// matched by `thrid`).
    Wire(&'a Mux),
    /// A singleton's store, locked for the call.
    Local(&'a mut Local),
}

impl Peer<'_> {
    /// The error for a request this peer cannot carry.
    pub(super) fn unusable(&self) -> PmiError {
        PmiError::Protocol("request not possible on this connection".into())
    }
}

impl Shm {
    /// The open socket, opening the deferred one first (`init` and
    /// `fullinit` happen then, on the rank's first request to the launcher).
    fn open(&self) -> Result<Arc<Mux>, PmiError> {
        let mut link = lock(&self.link);
        if matches!(&*link, Link::Deferred(_)) {
            if let Link::Deferred(d) = std::mem::replace(&mut *link, Link::Closed) {
                *link = match d.open() {
                    Ok(m) => Link::Open(Arc::new(m)),
                    Err(e) => Link::Failed(format!("opening the PMI socket: {e}")),
                };
            }
        }
        match &*link {
            Link::Open(m) => Ok(m.clone()),
            Link::Failed(why) => Err(PmiError::Protocol(why.clone())),
            Link::Closed => Err(PmiError::Finalized),
            Link::Deferred(_) => Err(PmiError::Protocol("the PMI socket is not open".into())),
        }
    }

    /// Finalize: a socket never opened is closed unopened (the segment
    /// says it all); `None` then, else the open socket.
    pub(super) fn finalize_link(&self) -> Option<Arc<Mux>> {
        let mut link = lock(&self.link);
        match &*link {
            Link::Open(m) => Some(m.clone()),
            Link::Deferred(_) | Link::Failed(_) | Link::Closed => {
                *link = Link::Closed;
                None
            }
        }
    }
}

impl Transport {
    pub(super) fn kind(&self) -> TransportKind {
        match self {
            Transport::Shm(_) => TransportKind::Shm,
            Transport::Socket { .. } => TransportKind::Socket,
            Transport::Singleton(_) => TransportKind::Singleton,
        }
    }

    pub(super) fn shm(&self) -> Option<&Shm> {
        match self {
            Transport::Shm(s) => Some(s),
            _ => None,
        }
    }

    /// Run `f` on the socket or the singleton's store. The socket is
    /// shared, not locked, during the call.
    pub(super) fn with<R>(
        &self,
        f: impl FnOnce(Peer<'_>) -> Result<R, PmiError>,
    ) -> Result<R, PmiError> {
        match self {
            Transport::Shm(s) => f(Peer::Wire(&*s.open()?)),
            Transport::Socket { mux, .. } => f(Peer::Wire(mux)),
            Transport::Singleton(local) => f(Peer::Local(&mut lock(local))),
        }
    }
}

/// What a rank on the segment reads once at init: how it fences and how it
/// stamps its phases.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct ShmCfg {
    /// Spins before sleeping in a fence: none when the job has more ranks
    /// than this process may run on (the ranks still to arrive need the CPU).
    pub(super) spins: u32,
    /// CPU yields before sleeping in a fence (`FASTPMI_FENCE_YIELDS`).
    pub(super) yields: u32,
    /// The rank's fence cohort (`Fence::cohort_of`), if any.
    pub(super) cohort: Option<u32>,
    /// Phase stamps are TSC ticks (the segment's `StampClock`).
    pub(super) tsc_stamps: bool,
    /// The rank's index in the segment (its rank, unless the segment is
    /// one node's part of a job spanning several node servers).
    pub(super) slot: u32,
}

impl ShmCfg {
    pub(super) fn new(seg: &JobSegment, rank: u32, yields: u32) -> ShmCfg {
        // Checked at attach: the segment holds the rank.
        let slot = seg.seg().slot_of(rank).unwrap_or(rank);
        ShmCfg {
            // The ranks that share this node's CPUs.
            spins: fence_spins(seg.seg().nranks()),
            yields,
            cohort: seg.seg().fence().cohort_of(slot),
            tsc_stamps: seg.seg().job().stamp_clock().is_tsc(),
            slot,
        }
    }

    /// CPU yields before sleeping in a fence of `generation`: none in the
    /// job's first (generation 0), whose ranks arrive as the launcher
    /// starts them, so those still to come are mostly not runnable yet and
    /// every yield is two context switches taken from the launch
    /// (docs/fence.md, "Yield before sleeping"). After the generation
    /// wraps at 2^31, one more fence goes without.
    pub(super) fn yields_in(&self, generation: u32) -> u32 {
        match generation {
            0 => 0,
            _ => self.yields,
        }
    }
}

/// Spins before a fence sleeps: none when the job has more ranks than this
/// process may run on. The CPUs come from the affinity mask alone (one
/// syscall): std's `available_parallelism` also reads the cgroup quota
/// files, about 15 syscalls and 70 us of every rank's init.
fn fence_spins(ranks: u32) -> u32 {
    let cpus = rustix::thread::sched_getaffinity(None).map_or(1, |set| set.count().max(1));
    if ranks > cpus {
        0
    } else {
        100
    }
}
