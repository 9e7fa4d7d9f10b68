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
//! becomes an abort of the outer job, which ends every node server; in a
//! fault-tolerant job a death is told to the other node servers instead
//! ([`mesh`]).

mod agreement;
mod door;
mod exchange;
mod lines;
mod mesh;
mod trade;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use fastpmi_client::{Pmi, PmiError, ServerKind};
use fastpmi_codec::names;
use fastpmi_segment::JobSegment;
use fastpmi_server::deaths::DeathCause;
use fastpmi_server::place::{NodePlace, OuterGetFailed};
use fastpmi_server::{Event, JobIdx, NameError, NameOp, Server};

use super::names::NameClient;

use crate::config::LaunchConfig;
use door::{Card, Door};
use exchange::Exchange;
use mesh::{Heard, Mesh};
use trade::Trader;

/// How long a failure that a rank's exit status may explain better (a lost
/// connection is often a kill) waits for it before it is reported.
pub(super) const SETTLE: Duration = Duration::from_millis(200);

/// How often the loop looks at a failure not yet reported to the outer
/// server.
const REPORT_CHECK: Duration = Duration::from_millis(50);

/// How long a node server that is done waits for the last trade rounds
/// after a death (they end sooner: when every node server took its part,
/// or one is gone).
const LAST_ROUNDS: Duration = Duration::from_secs(30);

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
    /// Fault-tolerant jobs: the door to the other node servers until the
    /// job starts, their cards, then the mesh ([`mesh`]).
    door: Option<Door>,
    cards: Vec<Card>,
    mesh: Option<Mesh>,
    /// Each node server's rank count (a lost node's ranks are dead).
    counts: Vec<u32>,
    /// The job over the node servers, once created.
    job: Option<JobIdx>,
    /// The exchange thread waits in an outer fence.
    in_round: Arc<AtomicBool>,
    /// Node servers that ended without their ranks finishing.
    lost: std::collections::BTreeSet<u32>,
    exchange: Option<std::thread::JoinHandle<()>>,
}

/// The outer job's answer to one get.
type OuterGot = (u64, Result<Option<Vec<u8>>, OuterGetFailed>);

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
    #[error(transparent)]
    Door(#[from] door::DoorError),
    #[error("{0}")]
    Card(std::io::Error),
    #[error(
        "node server {node} of job {jobid} {}: every node server needs the same mode",
        if *tolerant { "is fault tolerant and this one is not" } else { "is not fault tolerant" }
    )]
    ModesDiffer {
        jobid: String,
        node: u32,
        tolerant: bool,
    },
    #[error("node server {node} of job {jobid} put a card that cannot be read: {card:?}")]
    BadCard {
        jobid: String,
        node: u32,
        card: String,
    },
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
        let door = match cfg.fault_tolerant {
            true => Some(Door::open(cfg.pmi_port_bind)?),
            false => None,
        };
        let card = door
            .as_ref()
            .map(Door::card)
            .transpose()
            .map_err(NestError::Card)?;
        let (counts, cards) =
            t.counts(cfg.world_size(), card.as_deref())
                .map_err(|why| NestError::Trade {
                    jobid: jobid.clone(),
                    why,
                })?;
        let mut parsed = Vec::new();
        for (n, c) in cards.into_iter().enumerate() {
            let node = n as u32;
            match (c, cfg.fault_tolerant) {
                (Some(c), true) => parsed.push(Card::parse(&c).ok_or(NestError::BadCard {
                    jobid: jobid.clone(),
                    node,
                    card: c,
                })?),
                (None, false) => {}
                (c, _) => {
                    return Err(NestError::ModesDiffer {
                        jobid,
                        node,
                        tolerant: c.is_some(),
                    })
                }
            }
        }
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
            door,
            cards: parsed,
            mesh: None,
            counts,
            job: None,
            in_round: Default::default(),
            lost: Default::default(),
            exchange: None,
        }))
    }

    /// Start the exchange thread of the job on `seg` (its barrier already
    /// has the server party), and the thread that asks the outer job for
    /// keys that miss here.
    pub(super) fn start(&mut self, job: JobIdx, seg: Arc<JobSegment>, waker: Arc<mio::Waker>) {
        self.job = Some(job);
        if let Some(door) = self.door.take() {
            let cards = std::mem::take(&mut self.cards);
            match Mesh::start(door, self.node, cards, waker.clone()) {
                Ok(m) => self.mesh = Some(m),
                Err(e) => self
                    .failures
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(format!(
                        "cannot start the thread that hears other node servers: {e}"
                    )),
            }
        }
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
            ends: self
                .mesh
                .as_ref()
                .map(|m| (m.teller.clone(), m.agreement.clone())),
            in_round: self.in_round.clone(),
        };
        let spawned = std::thread::Builder::new()
            .name("fastpmi-nest".into())
            .spawn(move || ex.run());
        match spawned {
            Ok(h) => self.exchange = Some(h),
            Err(e) => self
                .failures
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(format!("cannot start the node exchange thread: {e}")),
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
    pub(super) fn finish(&mut self, interrupted: bool) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.exchange.take() {
            // After a death the node servers trade up to an agreed last
            // round (`Exchange::end`): this one takes its part before it
            // says bye, which ends the others' trading.
            let by = std::time::Instant::now() + LAST_ROUNDS;
            while !h.is_finished() && std::time::Instant::now() < by {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        if let Some(m) = &self.mesh {
            m.teller.bye();
        }
        // A trade that waits for a dead node server never ends: the outer
        // server would wait for its reply before answering a finalize.
        let stuck = self.in_round.load(Ordering::Acquire);
        if stuck {
            tracing::debug!("leaving the outer job without finalize: a trade waits for the dead");
        }
        if !self.reported && !interrupted && !stuck {
            if let Err(e) = self.outer.finalize() {
                tracing::debug!("finalize with the outer PMI server: {e}");
            }
        }
    }
}

impl Nest {
    /// The loop's hook: what the other node servers said (their dead are
    /// this job's dead), then what the exchange thread could not do, which
    /// the launcher fails the job with.
    pub(super) fn tick(&mut self, server: &mut Server, events: &mut Vec<Event>) -> Vec<String> {
        self.heard(server, events);
        self.failures()
    }

    /// Whether a failure of the job is still to be reported to the outer
    /// server (see [`Nest::report_failure`]).
    pub(super) fn wants_report(&self) -> bool {
        !self.reported
    }

    /// Rank `rank` of `job` died here (a fault-tolerant job): the other
    /// node servers hear of it.
    pub(super) fn tell_death(&self, job: JobIdx, rank: u32, cause: DeathCause) {
        if self.job != Some(job) {
            return;
        }
        if let Some(m) = &self.mesh {
            m.teller.died(self.place.first + rank, cause);
        }
    }

    fn heard(&mut self, server: &mut Server, events: &mut Vec<Event>) {
        let (Some(m), Some(job)) = (&self.mesh, self.job) else {
            return;
        };
        for h in m.heard() {
            match h {
                Heard::Died { rank, cause } => {
                    let how = format!("{} on another node server", super::deaths::death_text(cause));
                    server.rank_died_elsewhere(job, rank, cause, &how, events);
                }
                Heard::Lost { node } => {
                    let first: u32 = self.counts[..node as usize].iter().sum();
                    let last = first + self.counts[node as usize];
                    self.lost.insert(node);
                    // Said once, by the first node server still there.
                    let sayer = (0..self.nodes).find(|k| !self.lost.contains(k));
                    if sayer == Some(self.node) && last > first {
                        crate::errln!(
                            "fastpmi: node server {node} (ranks {first}-{}) ended before its ranks finished; the job goes on without them (fault tolerant)",
                            last - 1
                        );
                    }
                    let how = format!("was lost with node server {node}");
                    for r in first..last {
                        server.rank_died_elsewhere(job, r, DeathCause::NodeLost, &how, events);
                    }
                }
                Heard::Unreachable { node, why } => self
                    .failures
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(format!(
                        "fault-tolerant node servers hear of each other's deaths, but node server {node} cannot be reached: {why}"
                    )),
            }
        }
    }

    /// A get that missed here goes to the outer job.
    pub(super) fn outer_get(
        &self,
        id: u64,
        key: Vec<u8>,
        server: &mut Server,
        events: &mut Vec<Event>,
    ) {
        if let Err(why) = self.ask_outer(id, key) {
            server.outer_get_reply(id, Err(why), events);
        }
    }

    /// The outer job's answers to gets, handed to the waiting ranks.
    pub(super) fn outer_replies(&self, server: &mut Server, events: &mut Vec<Event>) {
        for (id, r) in self.outer_gets_done() {
            server.outer_get_reply(id, r, events);
        }
    }

    /// How soon the loop must look again (`failing`: the job failed here),
    /// at a failure not yet reported.
    pub(super) fn wait(&self, failing: bool) -> Option<Duration> {
        (!self.reported && failing).then_some(REPORT_CHECK)
    }
}
