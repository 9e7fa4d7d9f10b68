//! Nested mode (docs/nested.md): started as a rank of an outer PMI job of
//! several ranks (`srun --mpi=pmi2`, `mpiexec.hydra`, another fastpmi),
//! the launcher is that job's server for its node. Its ranks are one job
//! with the ranks of every other node server: global `PMI_RANK` and
//! `PMI_SIZE`, a process mapping with one node per node server, the outer
//! job's id. Each node's ranks fence on its segment, whose barrier has one
//! party more: the exchange thread here, which wakes when every local rank
//! has arrived, trades the node's new pairs with the other node servers
//! through the outer job's KVS ([`trade`]), writes theirs into the
//! segment and then arrives, releasing the ranks. A failure on any node
//! becomes an abort of the outer job, which ends every node server.

mod trade;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use fastpmi_client::{Pmi, PmiError, ServerKind};
use fastpmi_codec::names;
use fastpmi_segment::{JobSegment, SharedFutex};
use fastpmi_server::place::{NodePlace, OuterGetFailed};
use fastpmi_server::{NameError, NameOp};

use super::names::NameClient;

use crate::config::LaunchConfig;
use trade::{Pair, Trader};

/// How long the exchange thread sleeps before it looks at `stop` again.
const STOP_CHECK: Duration = Duration::from_millis(200);

/// How long a failure that a rank's exit status may explain better (a lost
/// connection is often a kill) waits for it before it is reported.
const SETTLE: Duration = Duration::from_millis(200);

/// This launcher's place as a node server of an outer job.
pub(super) struct Nest {
    outer: Arc<Pmi>,
    /// This node server's rank in the outer job.
    node: u32,
    nodes: u32,
    pub(super) place: NodePlace,
    /// The job id every node server's ranks share (the outer job's).
    pub(super) jobid: String,
    /// What the exchange thread could not do (the job then fails).
    failures: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    /// The job's failure was reported to the outer server.
    reported: bool,
    /// Gets that missed on this node, to the outer job (a thread of its
    /// own asks; [`Nest::outer_gets_done`] hands the answers over).
    gets: Option<mpsc::Sender<(u64, Vec<u8>)>>,
    got: Arc<Mutex<Vec<OuterGot>>>,
}

/// The outer job's answer to one get.
type OuterGot = (u64, Result<Option<Vec<u8>>, OuterGetFailed>);

/// Why a fence round across the node servers failed.
#[derive(Debug, thiserror::Error)]
enum RoundError {
    #[error(
        "the job segment is full and node servers trade only what is in it \
         (raise --kvs-mb)"
    )]
    Overflowed,
    #[error(transparent)]
    Trade(#[from] trade::TradeError),
    #[error("{key}: {source}")]
    Put {
        key: String,
        source: shm_layout::KvsError,
    },
}

/// Why the launcher cannot be a node server of the job it was started in.
#[derive(Debug, thiserror::Error)]
pub(super) enum NestError {
    #[error("started as a rank of a PMI job, but its server failed: {0}")]
    Init(PmiError),
    #[error("as a node server of job {jobid}: {why}")]
    Trade {
        jobid: String,
        why: trade::TradeError,
    },
    #[error(
        "a node server serves PMI ranks only: run PMIx programs (section {0}) \
         with --nest off, one job per node"
    )]
    Pmix(usize),
    #[error("a node server needs the job segment: --mem-pool none needs --nest off")]
    NoSegment,
    #[error("job {jobid} has {total} ranks over its node servers: more than {max}")]
    TooLarge { jobid: String, total: u64, max: u32 },
}

impl Nest {
    /// The launcher's place in an outer job, when it was started as a rank
    /// of one of more than one rank (and `--nest` is not off); `None`
    /// otherwise, the outer server never spoken to.
    pub(super) fn join(cfg: &LaunchConfig) -> Result<Option<Nest>, NestError> {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        let wired = var(names::env::PMI_FD).is_some() || var(names::env::PMI_PORT).is_some();
        let single = std::env::var(names::env::PMI_SIZE).is_ok_and(|s| s.trim() == "1");
        if !cfg.nest || !wired || single {
            return Ok(None);
        }
        let outer = Pmi::init().map_err(NestError::Init)?;
        if outer.size() <= 1 {
            // A job of one: this launcher's job is the whole job.
            let _ = outer.finalize();
            return Ok(None);
        }
        let jobid = outer.job_id().to_string();
        if let Some(i) = cfg
            .apps
            .iter()
            .position(|a| a.personality == crate::config::Personality::Pmix)
        {
            return Err(NestError::Pmix(i));
        }
        if cfg.mem_pool.is_none() {
            return Err(NestError::NoSegment);
        }
        let t = Trader {
            outer: &outer,
            node: outer.rank(),
            nodes: outer.size(),
        };
        let counts = t.counts(cfg.world_size()).map_err(|why| NestError::Trade {
            jobid: jobid.clone(),
            why,
        })?;
        let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
        let max = crate::cli::MAX_RANKS;
        if total > u64::from(max) {
            return Err(NestError::TooLarge { jobid, total, max });
        }
        let first = counts[..t.node as usize].iter().sum();
        let place = NodePlace {
            first,
            total: total as u32,
            mapping: trade::mapping(&counts),
        };
        tracing::debug!(
            node = t.node,
            nodes = t.nodes,
            first,
            total,
            mapping = %place.mapping,
            "node server of job {jobid}"
        );
        Ok(Some(Nest {
            node: t.node,
            nodes: t.nodes,
            outer: Arc::new(outer),
            place,
            jobid,
            failures: Default::default(),
            stop: Default::default(),
            reported: false,
            gets: None,
            got: Default::default(),
        }))
    }

    /// Start the exchange thread of the job on `seg` (its barrier already
    /// has the server party), and the thread that asks the outer job for
    /// keys that miss here.
    pub(super) fn start(&mut self, seg: Arc<JobSegment>, waker: Arc<mio::Waker>) {
        let (tx, rx) = mpsc::channel::<(u64, Vec<u8>)>();
        let (outer, got, wake) = (self.outer.clone(), self.got.clone(), waker.clone());
        let asker = std::thread::Builder::new()
            .name("fastpmi-nest-get".into())
            .spawn(move || {
                for (id, key) in rx {
                    let r = outer
                        .get(&key, None)
                        .map_err(|e| OuterGetFailed(e.to_string()));
                    got.lock().unwrap_or_else(|p| p.into_inner()).push((id, r));
                    let _ = wake.wake();
                }
            });
        match asker {
            Ok(_) => self.gets = Some(tx),
            Err(e) => tracing::warn!("no thread for gets of the outer job: {e}"),
        }
        let ex = Exchange {
            outer: self.outer.clone(),
            node: self.node,
            nodes: self.nodes,
            seg,
            failures: self.failures.clone(),
            stop: self.stop.clone(),
            waker,
        };
        let spawned = std::thread::Builder::new()
            .name("fastpmi-nest".into())
            .spawn(move || ex.run());
        if let Err(e) = spawned {
            self.failures
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(format!("cannot start the node exchange thread: {e}"));
        }
    }

    /// The name service of the outer job: a node server's ranks publish
    /// and look up where every node's do.
    pub(super) fn names(&self, waker: Arc<mio::Waker>) -> std::io::Result<NameClient> {
        let outer = self.outer.clone();
        NameClient::with(waker, move |_owner, op| {
            let r = match op {
                NameOp::Publish { service, port } => outer.publish(service, port).map(|()| None),
                NameOp::Unpublish { service } => outer.unpublish(service).map(|()| None),
                NameOp::Lookup { service } => outer.lookup(service),
            };
            r.map_err(|e| NameError::Remote(format!("the outer PMI server: {e}")))
        })
    }

    /// Ask the outer job for `key` (get `id` of the server).
    pub(super) fn ask_outer(&self, id: u64, key: Vec<u8>) -> Result<(), OuterGetFailed> {
        match &self.gets {
            Some(tx) => tx
                .send((id, key))
                .map_err(|e| OuterGetFailed(e.to_string())),
            None => Err(OuterGetFailed("no thread to ask the outer job".into())),
        }
    }

    /// The outer job's answers so far.
    pub(super) fn outer_gets_done(&self) -> Vec<OuterGot> {
        std::mem::take(&mut *self.got.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// What the exchange thread could not do since last asked.
    pub(super) fn failures(&self) -> Vec<String> {
        std::mem::take(&mut *self.failures.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The job failed here: the outer server ends it on every node.
    pub(super) fn report_failure(&mut self, code: i32, message: &str) {
        if std::mem::replace(&mut self.reported, true) {
            return;
        }
        // Hydra rejects PMI-2's abort (and kills every process once this
        // launcher exits non-zero); fastpmi and slurmstepd end the job on it.
        let aborts =
            self.outer.server_is_fastpmi() || self.outer.server() == ServerKind::SlurmStepd;
        if !aborts {
            return;
        }
        let msg = format!("node server {} of job {}: {message}", self.node, self.jobid);
        if let Err(e) = self.outer.request_abort(code.max(1), &msg) {
            crate::errln!("fastpmi: cannot tell the outer PMI server that the job failed: {e}");
        }
    }

    /// Every rank here has ended: leave the outer job (cleanly unless it
    /// failed or the launcher was interrupted, when it is being ended).
    fn finish(&mut self, interrupted: bool) {
        self.stop.store(true, Ordering::Relaxed);
        if !self.reported && !interrupted {
            if let Err(e) = self.outer.finalize() {
                tracing::debug!("finalize with the outer PMI server: {e}");
            }
        }
    }
}

impl super::Launcher {
    /// What the exchange thread could not do fails the job; a failed job
    /// is reported to the outer server, which ends it on every node.
    pub(super) fn nest_tick(&mut self) {
        let Some(n) = &self.nest else { return };
        for why in n.failures() {
            if !self.procs.has_failure() {
                self.record_failure(0, 0, why.clone(), 1, String::new(), false);
                self.server.fail_job(0, None, 1, &why, &mut self.events);
                self.fail_group(0, 1, &why);
            }
        }
        if self.procs.interrupted().is_some() {
            return;
        }
        let Some(n) = self.nest.as_mut().filter(|n| !n.reported) else {
            return;
        };
        if let Some((msg, code)) = self.procs.settled_failure(SETTLE) {
            // The outer launcher may end this one at once.
            self.procs.announce_failure();
            n.report_failure(code, &msg);
        }
    }

    /// A get that missed here goes to the outer job.
    pub(super) fn nest_outer_get(&mut self, id: u64, key: Vec<u8>) {
        let asked = match &self.nest {
            Some(n) => n.ask_outer(id, key),
            None => Err(OuterGetFailed("not a node server".into())),
        };
        if let Err(why) = asked {
            self.server.outer_get_reply(id, Err(why), &mut self.events);
        }
    }

    /// The outer job's answers to gets, handed to the waiting ranks.
    pub(super) fn nest_outer_replies(&mut self) {
        let Some(n) = &self.nest else { return };
        for (id, r) in n.outer_gets_done() {
            self.server.outer_get_reply(id, r, &mut self.events);
        }
    }

    /// How soon the loop must look again at a failure not yet reported.
    pub(super) fn nest_wait(&self) -> Option<Duration> {
        let n = self.nest.as_ref()?;
        (!n.reported && self.procs.has_failure()).then_some(Duration::from_millis(50))
    }

    /// Every rank has ended: leave the outer job.
    pub(super) fn nest_finish(&mut self) {
        self.nest_tick();
        let interrupted = self.procs.interrupted().is_some();
        if let Some(n) = &mut self.nest {
            n.finish(interrupted);
        }
    }
}

/// The exchange thread's state.
struct Exchange {
    outer: Arc<Pmi>,
    node: u32,
    nodes: u32,
    seg: Arc<JobSegment>,
    failures: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    waker: Arc<mio::Waker>,
}

impl Exchange {
    fn run(self) {
        // Every pair the segment and the other nodes agree on: what a round
        // need not send, or write, again.
        let mut known: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        let fence = self.seg.seg().fence();
        let mut round = 0u64;
        loop {
            match fence.wait_ranks(&SharedFutex, STOP_CHECK) {
                Ok(true) => {}
                Ok(false) if self.stop.load(Ordering::Relaxed) => return,
                Ok(false) => continue,
                // The launcher aborted the job: nothing more to trade.
                Err(_) => return,
            }
            round += 1;
            if let Err(why) = self.round(round, &mut known) {
                // The ranks stay held: the launcher fails the job, which
                // releases them with an error.
                self.failures
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(format!("fence {round} across node servers failed: {why}"));
                let _ = self.waker.wake();
                return;
            }
            fence.arrive(&SharedFutex);
        }
    }

    fn round(&self, round: u64, known: &mut HashMap<Vec<u8>, Vec<u8>>) -> Result<(), RoundError> {
        let seg = self.seg.seg();
        let overflowed = seg
            .node_attrs()
            .get(names::attr::OVERFLOW.as_bytes())
            .is_some();
        if overflowed {
            return Err(RoundError::Overflowed);
        }
        let mine: Vec<Pair> = seg
            .kvs()
            .entries()
            .filter(|(k, v)| known.get(*k).map(Vec::as_slice) != Some(*v))
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect();
        for (k, v) in &mine {
            known.insert(k.clone(), v.clone());
        }
        let t = Trader {
            outer: &self.outer,
            node: self.node,
            nodes: self.nodes,
        };
        let theirs = t.round(round, &mine)?;
        for (k, v) in theirs {
            if known.get(&k) == Some(&v) {
                continue;
            }
            seg.kvs()
                .put(&k, &v, &SharedFutex)
                .map_err(|source| RoundError::Put {
                    key: fastpmi_codec::show(&k),
                    source,
                })?;
            known.insert(k, v);
        }
        Ok(())
    }
}
