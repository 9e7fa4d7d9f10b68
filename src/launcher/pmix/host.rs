//! The running PMIx server of a launcher and what it keeps: the library's
//! handle, the upcalls' channel, the rendezvous files and the state the
//! upcall families share.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use fastpmi_server::JobIdx;
use pmix_host::{ClientUpcall, InfoList, PmixError, Server, Upcall};

use super::names::NameOps;
use super::system;

/// The running PMIx server of a launcher.
pub(in crate::launcher) struct PmixHost {
    pub(super) server: Server,
    /// Name-service requests of PMIx clients waiting for the shared name
    /// server: by the token of each of their operations.
    pub(super) names: NameOps,
    /// The library's rendezvous files (this launcher's, in the private
    /// directory), removed at exit.
    pub(super) tmpdir: PathBuf,
    pub(super) upcalls: Receiver<Upcall>,
    pub(super) hostname: String,
    /// Processes whose data this launcher offered other launchers.
    pub(super) offered: std::collections::HashSet<(String, u32)>,
    /// Other launchers' namespaces registered with the library.
    pub(super) foreign: std::collections::HashSet<String>,
    /// The node's system rendezvous file, when this launcher holds it.
    pub(super) system: Option<system::SystemRendezvous>,
    /// Jobs whose ranks wait in PMIx_Init for the debugger release.
    pub(super) held: std::cell::RefCell<std::collections::BTreeSet<JobIdx>>,
    /// The PMIx groups constructed and not destructed: their members.
    pub(super) groups: std::collections::BTreeMap<String, Vec<(String, u32)>>,
    /// Those of `groups` built with `PMIX_GROUP_NOTIFY_TERMINATION`.
    pub(super) notify_termination: std::collections::BTreeSet<String>,
    /// PMIx ranks that ended and are still registered with the library:
    /// deregistered once their exit is judged (a finalize may be late).
    pub(super) ended_ranks: Vec<(JobIdx, u32)>,
    /// Dead ranks of fault-tolerant jobs, and when each was reaped:
    /// deregistered once the library let go of them (see
    /// `PmixHost::rank_ended`).
    pub(super) dead_ranks: Vec<(JobIdx, u32, Instant)>,
    /// What the library reported of each client's connection.
    pub(super) seen: ClientsSeen,
    /// Jobs whose every rank ended, still registered: deregistered once
    /// none of their ranks is.
    pub(super) ended_jobs: Vec<JobIdx>,
    /// The namespaces of this launcher's jobs registered with the library
    /// and not yet deregistered.
    pub(super) registered: std::cell::RefCell<std::collections::BTreeSet<String>>,
    /// The shared files the ranks map, recorded for a launch after a
    /// SIGKILL of this one ([`super::leftovers`]).
    pub(super) recorder: super::leftovers::Recorder,
    /// When the ranks' files are recorded next, and the interval after.
    pub(super) next_record: std::cell::Cell<Option<(Instant, Duration)>>,
}

/// One application of a job to register: its rank count.
pub(super) struct AppInfo {
    pub nranks: u32,
    /// Its process set (`--pset`; the first when it names several).
    pub pset: Option<String>,
}

/// What the launcher knows of a job's ranks that PMIx registers.
pub(super) struct RankInfo {
    /// Every CPU of the node (`0-15`): an unbound rank's set.
    pub all_cpus: String,
    /// The CPUs each rank is bound to, as a list (`0-1,4`), if bound.
    pub cpus: Vec<Option<String>>,
}

impl PmixHost {
    /// Load the library and start the server.
    pub(super) fn start(lib: Option<&Path>, waker: Arc<mio::Waker>) -> Result<PmixHost, PmixError> {
        let dir = crate::private_dir::dir();
        let tmpdir = dir.join(format!("pmix-{}", std::process::id()));
        // What dead launchers left is swept at every launch, PMI or PMIx
        // (`leftovers::remove_dead`, with the rendezvous).
        let made = crate::private_dir::ensure_dir(&dir).and_then(|()| {
            std::fs::create_dir_all(&tmpdir)?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&tmpdir, std::fs::Permissions::from_mode(0o700))
        });
        if let Err(e) = made {
            return Err(PmixError::Failed {
                call: "creating the PMIx server's directory",
                status: -1,
                text: format!("{}: {e}", tmpdir.display()),
            });
        }
        let (tx, rx) = mpsc::channel();
        let tx = std::sync::Mutex::new(tx);
        let seen = ClientsSeen::default();
        let noted = seen.clone();
        let sink = Box::new(move |u: Upcall| {
            if let Upcall::Client(c) = &u {
                noted.note(c);
            }
            let _ = tx.lock().map(|t| t.send(u));
            let _ = waker.wake();
        });
        let server = match Server::start(lib, &tmpdir, sink) {
            Ok(s) => s,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmpdir);
                return Err(e);
            }
        };
        tracing::debug!("PMIx server library {} started", server.path.display());
        let hostname = rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned();
        let ours = tmpdir.join(format!("pmix.{hostname}.tool.{}", std::process::id()));
        let system = system::SystemRendezvous::claim(&hostname, &ours);
        Ok(PmixHost {
            server,
            names: NameOps::default(),
            offered: Default::default(),
            foreign: Default::default(),
            groups: Default::default(),
            notify_termination: Default::default(),
            dead_ranks: Vec::new(),
            seen,
            held: Default::default(),
            ended_ranks: Vec::new(),
            ended_jobs: Vec::new(),
            registered: Default::default(),
            recorder: Default::default(),
            next_record: Default::default(),
            system,
            tmpdir,
            upcalls: rx,
            hostname,
        })
    }

    /// Register job `nspace` of `size` ranks, all on this node, in `apps`
    /// (`held`: waiting in `PMIx_Init` for the debugger release).
    // Each argument is one part of the registration, passed through once.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn register_job(
        &self,
        nspace: &str,
        apps: &[AppInfo],
        universe: u32,
        topology_xml: Option<&str>,
        ranks: &RankInfo,
        parent: Option<(&str, u32)>,
        held: bool,
    ) -> Result<(), PmixError> {
        let size: u32 = apps.iter().map(|a| a.nranks).sum();
        let mut job = InfoList::default();
        // `--stop-in-init`: every rank waits in PMIx_Init for
        // PMIX_DEBUGGER_RELEASE (`Server::release_debugger`).
        if held {
            job.rank(
                pmix_host::keys::PMIX_DEBUG_STOP_IN_INIT,
                pmix_host::PMIX_RANK_WILDCARD,
            );
        }
        job.u32(pmix_host::keys::PMIX_UNIV_SIZE, universe.max(size));
        job.u32(pmix_host::keys::PMIX_JOB_SIZE, size);
        job.u32(pmix_host::keys::PMIX_MAX_PROCS, universe.max(size));
        job.string(pmix_host::keys::PMIX_JOBID, nspace)?;
        job.u32(pmix_host::keys::PMIX_NUM_NODES, 1);
        job.string(
            pmix_host::keys::PMIX_NODE_MAP,
            &self.server.regex(&self.hostname, false)?,
        )?;
        // Every rank on this node, listed (the library's "raw" parser does
        // not expand ranges).
        let peers: Vec<String> = (0..size).map(|r| r.to_string()).collect();
        let peers = peers.join(",");
        job.string(
            pmix_host::keys::PMIX_PROC_MAP,
            &self.server.regex(&peers, true)?,
        )?;
        job.u32(pmix_host::keys::PMIX_JOB_NUM_APPS, apps.len() as u32);
        // A spawned job: its parent (Open MPI's children connect to it).
        if let Some((ns, r)) = parent {
            job.proc_(pmix_host::keys::PMIX_PARENT_ID, pmix_host::proc_of(ns, r));
            job.flag(pmix_host::keys::PMIX_SPAWNED, true);
        }
        // The ranks' session directories (Open MPI's files), in this
        // launcher's directory: removed with it at exit.
        let nsdir = self.tmpdir.join(nspace);
        job.string(pmix_host::keys::PMIX_TMPDIR, &self.tmpdir.to_string_lossy())?;
        job.string(pmix_host::keys::PMIX_NSDIR, &nsdir.to_string_lossy())?;
        // The node's topology the launcher already has: ranks load it from
        // XML instead of each discovering it (Open MPI asks for this key
        // when nothing better is offered).
        if let Some(xml) = topology_xml {
            job.string(pmix_host::keys::PMIX_HWLOC_XML_V2, xml)?;
        }
        // This node: every rank (what PRRTE registers per node).
        let mut node = InfoList::default();
        node.u32(pmix_host::keys::PMIX_NODEID, 0);
        node.string(pmix_host::keys::PMIX_HOSTNAME, &self.hostname)?;
        node.string(pmix_host::keys::PMIX_LOCAL_PEERS, &peers)?;
        node.u32(pmix_host::keys::PMIX_LOCAL_SIZE, size);
        node.u32(pmix_host::keys::PMIX_NODE_SIZE, size);
        node.rank(pmix_host::keys::PMIX_LOCALLDR, 0);
        // More ranks than CPUs: Open MPI then yields while it waits (in
        // MPI_Init's fence, say) instead of spinning on CPUs the ranks
        // still starting need. What prterun says with --oversubscribe.
        if super::env::oversubscribed(size) {
            node.flag(pmix_host::keys::PMIX_NODE_OVERSUBSCRIBED, true);
        }
        job.array(pmix_host::keys::PMIX_NODE_INFO_ARRAY, node);
        let mut first = 0u32;
        for (appnum, app) in apps.iter().enumerate() {
            let mut a = InfoList::default();
            a.u32(pmix_host::keys::PMIX_APPNUM, appnum as u32);
            a.u32(pmix_host::keys::PMIX_APP_SIZE, app.nranks);
            a.rank(pmix_host::keys::PMIX_APPLDR, first);
            if let Some(ps) = &app.pset {
                a.string(pmix_host::keys::PMIX_PSET_NAME, ps)?;
            }
            job.array(pmix_host::keys::PMIX_APP_INFO_ARRAY, a);
            for r in 0..app.nranks {
                let rank = first + r;
                let mut p = InfoList::default();
                p.rank(pmix_host::keys::PMIX_RANK, rank);
                p.u32(pmix_host::keys::PMIX_APPNUM, appnum as u32);
                p.rank(pmix_host::keys::PMIX_APP_RANK, r);
                p.rank(pmix_host::keys::PMIX_GLOBAL_RANK, rank);
                p.u16(
                    pmix_host::keys::PMIX_LOCAL_RANK,
                    rank.min(u16::MAX as u32) as u16,
                );
                p.u16(
                    pmix_host::keys::PMIX_NODE_RANK,
                    rank.min(u16::MAX as u32) as u16,
                );
                p.u32(pmix_host::keys::PMIX_NODEID, 0);
                p.string(pmix_host::keys::PMIX_HOSTNAME, &self.hostname)?;
                // Not the rank's pset name as well: Open MPI 5.0's
                // MPI_Group_from_session_pset then reallocates an array it
                // did not allocate and corrupts its heap (docs/pmix.md).
                let pdir = nsdir.join(rank.to_string());
                if let Err(e) = std::fs::create_dir_all(&pdir) {
                    return Err(PmixError::Failed {
                        call: "creating a rank's session directory",
                        status: -1,
                        text: format!("{}: {e}", pdir.display()),
                    });
                }
                p.string(pmix_host::keys::PMIX_PROCDIR, &pdir.to_string_lossy())?;
                // Its binding (Open MPI then knows it is bound), and its
                // locality, which Open MPI asks of every process it
                // connects to (a spawned job's, say).
                let bound = ranks.cpus.get(rank as usize).and_then(Option::as_deref);
                if let Some(cpus) = bound {
                    p.string(pmix_host::keys::PMIX_CPUSET, cpus)?;
                }
                match self.server.locality(bound.unwrap_or(&ranks.all_cpus)) {
                    Ok(loc) => p.string(pmix_host::keys::PMIX_LOCALITY_STRING, &loc)?,
                    Err(e) => tracing::debug!("rank {rank}: no locality string: {e}"),
                }
                job.array(pmix_host::keys::PMIX_PROC_INFO_ARRAY, p);
            }
            first += app.nranks;
        }
        self.server.register_nspace(nspace, size, job)?;
        self.registered.borrow_mut().insert(nspace.to_string());
        // Its ranks' files are recorded soon after they start, then less
        // and less often ([`super::leftovers`]).
        self.next_record
            .set(Some((Instant::now() + FIRST_RECORD, FIRST_RECORD)));
        Ok(())
    }

    /// The environment of rank `rank` of `nspace`, registered now.
    pub(super) fn rank_env(
        &self,
        nspace: &str,
        rank: u32,
    ) -> Result<Vec<(OsString, OsString)>, PmixError> {
        let uid = rustix::process::geteuid().as_raw();
        let gid = rustix::process::getegid().as_raw();
        let mut env: Vec<(OsString, OsString)> = self
            .server
            .register_client(nspace, rank, uid, gid)?
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        // The library's native security (same uid): without it every rank
        // warns that the munge component is missing.
        env.push(("PMIX_MCA_psec".into(), "native".into()));
        Ok(env)
    }

    /// Upcalls that arrived since the last call.
    pub(in crate::launcher) fn upcalls(&self) -> Vec<Upcall> {
        self.upcalls.try_iter().collect()
    }

    /// Stop the server and remove its files and the ranks' session
    /// directories (the launcher is exiting).
    pub(in crate::launcher) fn remove_files(&mut self) {
        if let Some(s) = &self.system {
            s.release();
        }
        // Completions still held would answer into a finalized library.
        self.names = NameOps::default();
        // Every job still registered ends here, its epilogs run, however
        // the launcher ends (a signal, a failure): the library's finalize
        // runs them too, but may not finish (`Server::finalize`).
        let left: Vec<String> = self.registered.borrow().iter().cloned().collect();
        for id in left {
            self.end_job(&id);
        }
        self.server.finalize();
        let _ = std::fs::remove_dir_all(&self.tmpdir);
    }

    /// Deregister job `nspace` from the library (its clients' epilogs and
    /// its own run) and remove its session directory.
    pub(super) fn end_job(&self, nspace: &str) {
        if !self.registered.borrow_mut().remove(nspace) {
            return;
        }
        if let Err(e) = self.server.deregister_nspace(nspace) {
            tracing::debug!("{e}");
        }
        let _ = std::fs::remove_dir_all(self.tmpdir.join(nspace));
        self.seen.forget_job(nspace);
        tracing::debug!("PMIx job {nspace} deregistered");
    }
}

/// What the library last reported of a client's connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Connected,
    Finalized,
    /// Closed before its finalize, and accounted for by the library.
    Lost,
}

/// What the library reported of each client's connection, by (namespace,
/// rank), noted by the upcalls' sink on the library's thread, in the
/// library's order: a rank reaped before the event loop reads its
/// `Connected` upcall still counts as connected. Entries go with the
/// client's deregistration.
#[derive(Clone, Default)]
pub(super) struct ClientsSeen(Arc<Mutex<HashMap<(String, u32), Seen>>>);

impl ClientsSeen {
    fn note(&self, u: &ClientUpcall) {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match u {
            ClientUpcall::Connected { nspace, rank } => {
                seen.insert((nspace.clone(), *rank), Seen::Connected);
            }
            ClientUpcall::Finalized { nspace, rank } => {
                seen.insert((nspace.clone(), *rank), Seen::Finalized);
            }
            // Only a client's, which connected: the library reports the
            // loss of a tool too.
            ClientUpcall::LostConnection { nspace, rank } => {
                if let Some(s) = seen.get_mut(&(nspace.clone(), *rank)) {
                    *s = Seen::Lost;
                }
            }
            ClientUpcall::Abort { .. } => {}
        }
    }

    /// Whether the library has let go of the connection of `rank` of
    /// `nspace`, so that deregistering it leaves nothing counted: it never
    /// connected, or it finalized, or the library reported it lost (its
    /// namespace's count of local processes lowered; the library reports
    /// no loss after a finalize).
    pub(super) fn let_go(&self, nspace: &str, rank: u32) -> bool {
        let seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        seen.get(&(nspace.to_string(), rank))
            .is_none_or(|s| *s != Seen::Connected)
    }

    /// `rank` of `nspace` was deregistered.
    pub(super) fn forget(&self, nspace: &str, rank: u32) {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        seen.remove(&(nspace.to_string(), rank));
    }

    fn forget_job(&self, nspace: &str) {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        seen.retain(|(ns, _), _| ns != nspace);
    }
}

/// When the ranks' shared files are first recorded after a job starts;
/// the interval then doubles up to [`LAST_RECORD_EVERY`].
const FIRST_RECORD: Duration = Duration::from_secs(1);
pub(super) const LAST_RECORD_EVERY: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    fn connected(rank: u32) -> ClientUpcall {
        ClientUpcall::Connected {
            nspace: "job".into(),
            rank,
        }
    }

    #[test]
    fn a_dead_client_is_let_go_once_its_lost_connection_is_reported() {
        let seen = ClientsSeen::default();
        // Never connected: nothing of it is counted.
        assert!(seen.let_go("job", 0));
        seen.note(&connected(0));
        seen.note(&connected(1));
        assert!(!seen.let_go("job", 0));
        seen.note(&ClientUpcall::LostConnection {
            nspace: "job".into(),
            rank: 0,
        });
        assert!(seen.let_go("job", 0));
        // A finalized client's loss is never reported, nor needed.
        seen.note(&ClientUpcall::Finalized {
            nspace: "job".into(),
            rank: 1,
        });
        assert!(seen.let_go("job", 1));
        // A tool's loss adds nothing.
        seen.note(&ClientUpcall::LostConnection {
            nspace: "tool".into(),
            rank: 0,
        });
        seen.forget("job", 0);
        seen.forget_job("job");
        assert!(seen.0.lock().unwrap().is_empty());
    }
}
