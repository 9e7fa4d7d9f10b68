//! fastpmi's server core: the PMI wire server's protocol (connections,
//! jobs, handlers) and the job store it serves from ([`store`]), on the
//! codec and the segment glue.
//!
//! No sockets here. The event loop hands in bytes ([`Server::on_bytes`]),
//! connection ends and rank exits, and carries out the [`Event`]s the server
//! produces (bytes to send, connections to close, jobs that failed). Handlers
//! live in [`handlers`], one function per request, over typed requests.
//!
//! This file holds the server's state (jobs, ranks, connections), its
//! setup, and the intake: deframing, decoding and dispatch to a handler.
//! How ranks go and jobs fail is in [`failure`]; fence and node-attribute
//! waits are released in [`waits`].

pub mod auth;
mod connect;
mod continued;
pub mod deaths;
mod failure;
mod groups;
mod handlers;
mod hold;
mod kvscopy;
pub mod nameserv;
pub mod oob;
pub mod place;
pub mod psets;
pub mod spawn;
pub mod status;
pub mod store;
pub use kvscopy::{PUTALL_BYTES_MAX, PUTALL_PAIRS_MAX};
mod waits;

use std::collections::{BTreeSet, HashMap};

use crate::store::Store;
use fastpmi_codec::command::{decode_frame, encode_response, encode_response_body, Decoded};
use fastpmi_codec::spawn::SpawnRequest;
use fastpmi_codec::{self, Deframer, Protocol, Response};
pub use nameserv::{NameError, NameOp, NameResult, NameTable};
pub use spawn::SpawnOutcome;

/// Identifies a connection (the event loop's token).
pub type ConnId = usize;
/// Index of a job in the server's job table.
pub type JobIdx = usize;

/// What the event loop must do after a call into the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Queue bytes on a connection.
    Send { conn: ConnId, bytes: Vec<u8> },
    /// Close the connection once its queued bytes are written.
    Close { conn: ConnId },
    /// A rank did something that ends its job (abort, lost connection,
    /// exit before finalize). The launcher tears the job down.
    JobFailed {
        job: JobIdx,
        rank: u32,
        cause: FailCause,
        message: String,
    },
    /// A rank asked for a new job. The launcher creates it and answers with
    /// [`Server::finish_spawn`]`(id, ..)`.
    Spawn {
        id: u64,
        job: JobIdx,
        rank: u32,
        req: SpawnRequest,
    },
    /// A name-service operation for the launcher's shared name server; the
    /// answer comes back through [`Server::name_reply`]`(id, ..)`.
    Names { id: u64, owner: String, op: NameOp },
    /// A local port-mode connection claims `rank` without authenticating:
    /// the launcher checks that its socket is that rank's process and
    /// answers with [`Server::peer_checked`].
    CheckPeer {
        conn: ConnId,
        job: JobIdx,
        rank: u32,
    },
    /// The shared name server answered the launcher's own operation
    /// `token` ([`Server::host_name_op`]).
    NameDone { token: u64, result: NameResult },
    /// Nested mode: a get of `key` missed in this node's store after a
    /// fence; the launcher asks the outer job and answers with
    /// [`Server::outer_get_reply`]`(id, ..)`.
    OuterGet { id: u64, key: Vec<u8> },
    /// Send `signal` to rank `rank` of `job` once the bytes queued on its
    /// out-of-band channel `conn` are written (the notice before it).
    Signal {
        conn: ConnId,
        job: JobIdx,
        rank: u32,
        signal: &'static str,
    },
    /// The server refused a connection (it also asks to close it): the
    /// launcher logs `reason` (which names the peer).
    Refuse { conn: ConnId, reason: String },
    /// A rank of a fault-tolerant job died ([`Server::rank_died`]); the job
    /// goes on. The launcher says so once, ends the rank's process if it
    /// still runs, and tells PMIx clients.
    RankDied {
        job: JobIdx,
        rank: u32,
        cause: deaths::DeathCause,
        message: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailCause {
    /// The rank called abort with this exit code.
    Abort { code: i32 },
    /// The rank's PMI connection ended before finalize.
    ConnectionLost,
    /// The server closed the rank's connection: its byte stream could not
    /// be framed any more.
    ProtocolError,
    /// The rank exited cleanly but the job cannot go on without it.
    ExitedEarly,
}

/// One job as the launcher describes it to the server.
pub struct JobSpec {
    pub id: String,
    /// Ranks per application (MPMD section); appnum = index.
    pub apps: Vec<u32>,
    pub universe_size: u32,
    pub spawner: Option<String>,
    pub store: Box<dyn Store>,
}

/// Counters of socket-served operations (for `--stats`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SocketStats {
    pub puts: u64,
    pub gets: u64,
    pub fences: u64,
    pub node_attr_ops: u64,
    pub other: u64,
    pub errors: u64,
}

/// Where a (possibly delayed) reply goes, and how it is addressed.
#[derive(Debug, Clone)]
pub(crate) struct ReplyTo {
    conn: ConnId,
    proto: Protocol,
    cmd: String,
    thrid: Option<Vec<u8>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No PMI traffic yet (non-PMI programs stay here).
    Idle,
    Initialized,
    Finalized,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Activity {
    Running,
    InFence(u64),
    WaitingAttr(Vec<u8>),
}

#[derive(Debug)]
pub(crate) struct RankSlot {
    phase: Phase,
    activity: Activity,
    conn: Option<ConnId>,
    exited: bool,
    fences: u64,
    /// When phase or activity last changed (for `fastpmi ps`).
    since: std::time::Instant,
    /// The last request the rank sent (its wire command).
    last_op: String,
    /// Its out-of-band channel, when open.
    oob: Option<OobChannel>,
    /// A PMIx client, served by the launcher's PMIx server: the server
    /// core knows of it only what the launcher tells ([`Server::pmix_rank`]).
    pmix: bool,
}

/// A rank's open out-of-band channel ([`oob`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OobChannel {
    conn: ConnId,
    /// The signal that follows each notice (None: `signal=NONE`).
    signal: Option<&'static str>,
}

pub(crate) struct Job {
    id: String,
    size: u32,
    appnum: Vec<i32>,
    universe_size: u32,
    spawner: Option<String>,
    store: Box<dyn Store>,
    ranks: Vec<RankSlot>,
    fence_waiters: Vec<(u32, crate::store::FenceTicket, ReplyTo)>,
    attr_waiters: Vec<(u32, Vec<u8>, ReplyTo)>,
    failed: Option<String>,
    /// Jobs whose KVS this one may read, and that fail with it.
    connected: BTreeSet<JobIdx>,
    /// Port mode: the secret its ranks authenticate with.
    secret: Option<String>,
    /// What each rank was doing when the job failed (for reports).
    at_failure: Option<Vec<Activity>>,
    /// Checkpoint requests sent so far (`fastpmi checkpoint`).
    checkpoints: u64,
    /// Nested mode: where this node's ranks sit in the whole job.
    place: Option<place::NodePlace>,
    /// Fault-tolerant mode and the dead ranks ([`deaths`]).
    deaths: deaths::JobDeaths,
}

struct Conn {
    deframer: Deframer,
    /// (job, rank) once known: at connect (FD mode) or from initack/fullinit.
    bound: Option<(JobIdx, u32)>,
    /// Port-mode connections of this job identify themselves.
    port_job: Option<JobIdx>,
    saw_traffic: bool,
    /// `init` was received: other commands are served from then on.
    inited: bool,
    /// Port mode: what the launcher knows of the peer.
    trust: auth::Trust,
    peer: Option<String>,
    /// An identification waiting for its next step.
    pending: Option<auth::Pending>,
    /// A `kvs-putall` waiting for its pairs.
    putall: Option<kvscopy::PutAll>,
    /// An out-of-band channel ([`oob`]): FD mode from the start, port mode
    /// from its `init_oob`. `bound` is its rank once open.
    oob: bool,
    /// Continued commands in progress ([`continued`]).
    cont: fastpmi_codec::continued::Reassembly,
    /// The client reads continued replies and may use large values.
    continued: bool,
}

/// The protocol state of every job and connection of one launcher.
pub struct Server {
    jobs: Vec<Job>,
    conns: HashMap<ConnId, Conn>,
    names: nameserv::Names,
    spawns: spawn::Spawns,
    /// Path of the node topology's XML (`PMI_hwloc_xmlfile`), if any.
    hwloc_xmlfile: Option<String>,
    groups: groups::Groups,
    /// `--stop-in-init`: init replies held until release.
    held: hold::Held,
    /// Connections with a continued command in progress.
    continuing: BTreeSet<ConnId>,
    /// PMIx ranks that exited cleanly before their finalize was heard, and
    /// until when it may be ([`Server::check_pmix_exits`]).
    pmix_exits: Vec<(JobIdx, u32, std::time::Instant)>,
    /// Gets waiting for the outer job (nested mode).
    outer_gets: place::OuterGets,
    pub stats: SocketStats,
}

impl Default for Server {
    fn default() -> Self {
        Self::new()
    }
}

impl Server {
    /// A rank's connection is bound and it said init: it leaves `Idle`.
    /// Here, not in a handler module, because both the init handlers and
    /// port-mode authentication bind ranks.
    pub(crate) fn mark_initialized(&mut self, job: JobIdx, rank: u32, conn: ConnId) {
        let slot = &mut self.jobs[job].ranks[rank as usize];
        if slot.phase == Phase::Idle {
            slot.set_phase(Phase::Initialized);
        }
        slot.conn = Some(conn);
    }

    pub fn new() -> Self {
        Server {
            jobs: Vec::new(),
            conns: HashMap::new(),
            names: Default::default(),
            spawns: Default::default(),
            hwloc_xmlfile: None,
            groups: Default::default(),
            held: Default::default(),
            continuing: BTreeSet::new(),
            pmix_exits: Vec::new(),
            outer_gets: Default::default(),
            stats: SocketStats::default(),
        }
    }

    /// Register a job; its ranks connect later.
    pub fn add_job(&mut self, spec: JobSpec) -> JobIdx {
        let size: u32 = spec.apps.iter().sum();
        let mut appnum = Vec::with_capacity(size as usize);
        for (a, &n) in spec.apps.iter().enumerate() {
            appnum.extend(std::iter::repeat_n(a as i32, n as usize));
        }
        let ranks = (0..size)
            .map(|_| RankSlot {
                phase: Phase::Idle,
                activity: Activity::Running,
                conn: None,
                exited: false,
                fences: 0,
                since: std::time::Instant::now(),
                last_op: String::new(),
                oob: None,
                pmix: false,
            })
            .collect();
        self.jobs.push(Job {
            id: spec.id,
            size,
            appnum,
            universe_size: spec.universe_size,
            spawner: spec.spawner,
            store: spec.store,
            ranks,
            fence_waiters: Vec::new(),
            attr_waiters: Vec::new(),
            failed: None,
            connected: BTreeSet::new(),
            secret: None,
            at_failure: None,
            checkpoints: 0,
            place: None,
            deaths: Default::default(),
        });
        let job = self.jobs.len() - 1;
        // A spawned job can read its parent's KVS and fails with it; it is
        // as fault tolerant as its parent.
        if let Some(parent) = self.jobs[job]
            .spawner
            .as_deref()
            .and_then(|p| self.job_index(p))
        {
            self.connect_jobs(job, parent);
            let tolerant = self.is_fault_tolerant(parent);
            self.set_fault_tolerant(job, tolerant);
        }
        job
    }

    /// A new connection. `bound` is the rank on the other end when known
    /// (FD mode); port-mode connections pass `None` and `port_job`.
    pub fn connect(
        &mut self,
        conn: ConnId,
        bound: Option<(JobIdx, u32)>,
        port_job: Option<JobIdx>,
    ) {
        self.conns.insert(
            conn,
            Conn {
                deframer: Deframer::new(),
                bound,
                port_job,
                saw_traffic: false,
                inited: false,
                trust: auth::Trust::Remote,
                peer: None,
                pending: None,
                putall: None,
                oob: false,
                cont: Default::default(),
                continued: false,
            },
        );
    }

    /// Answer `PMI_hwloc_xmlfile` with `path` (the node topology as XML).
    pub fn set_hwloc_xmlfile(&mut self, path: String) {
        self.hwloc_xmlfile = Some(path);
    }

    /// Whether `conn` is bound to a rank (identified).
    pub fn is_bound(&self, conn: ConnId) -> bool {
        self.conns.get(&conn).is_some_and(|c| c.bound.is_some())
    }

    /// Bytes arrived on `conn`.
    pub fn on_bytes(&mut self, conn: ConnId, bytes: &[u8], out: &mut Vec<Event>) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.deframer.feed(bytes);
        c.saw_traffic = true;
        loop {
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            let frame = match c.deframer.next_frame() {
                Ok(Some(fastpmi_codec::Frame::Pmi2(b)))
                    if b.starts_with(fastpmi_codec::continued::PART_PREFIX) =>
                {
                    match self.on_part(conn, &b, out) {
                        Some(whole) => whole,
                        None => continue,
                    }
                }
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    self.stats.errors += 1;
                    let who = self.who(conn);
                    tracing::warn!("{who}: {e}");
                    // PMI-1 framing error: the stream resynchronises.
                    let reply = encode_response(
                        Protocol::Pmi1,
                        "error",
                        None,
                        &Response::error(e.to_string()),
                    );
                    out.push(Event::Send { conn, bytes: reply });
                    if self
                        .conns
                        .get(&conn)
                        .is_some_and(|c| c.deframer.is_broken())
                    {
                        out.push(Event::Close { conn });
                        self.closed(conn, Some(&e.to_string()), out);
                        return;
                    }
                    continue;
                }
            };
            if tracing::enabled!(tracing::Level::DEBUG) {
                let text = fastpmi_codec::show(frame_bytes(&frame));
                tracing::debug!("{} -> {text}", self.who(conn));
            }
            match decode_frame(&frame) {
                Ok(d) => self.dispatch(conn, d, out),
                Err(e) => {
                    self.stats.errors += 1;
                    let proto = if matches!(frame, fastpmi_codec::Frame::Pmi2(_)) {
                        Protocol::Pmi2
                    } else {
                        Protocol::Pmi1
                    };
                    tracing::warn!(
                        "{}: malformed {proto} message {:?}: {e}",
                        self.who(conn),
                        fastpmi_codec::show(frame_bytes(&frame))
                    );
                    let reply =
                        encode_response(proto, "error", None, &Response::error(e.to_string()));
                    out.push(Event::Send { conn, bytes: reply });
                }
            }
        }
    }

    fn who(&self, conn: ConnId) -> String {
        let Some(c) = self.conns.get(&conn) else {
            return format!("connection {conn}");
        };
        match (c.bound, c.oob) {
            (Some((job, rank)), false) => self.jobs[job].rank_label(job, rank),
            (Some((job, rank)), true) => {
                format!("{} (out of band)", self.jobs[job].rank_label(job, rank))
            }
            (None, _) => format!("connection {conn}"),
        }
    }

    fn dispatch(&mut self, conn: ConnId, d: Decoded, out: &mut Vec<Event>) {
        let who = self.who(conn);
        let to = ReplyTo {
            conn,
            proto: d.proto,
            cmd: d.cmd.clone(),
            thrid: d.thrid.clone(),
        };
        self.note_op(conn, &d.cmd);
        let request = match d.request {
            Ok(r) => r,
            Err(e) => {
                self.stats.errors += 1;
                tracing::warn!("{who}: {e}");
                reply(out, &to, &Response::error(e.to_string()), Some(&who));
                return;
            }
        };
        if let Some(resp) = handlers::handle(self, conn, &to, request, out) {
            // --stop-in-init may hold the reply that completes init.
            let Some(resp) = self.deliver_init(conn, &to, resp) else {
                return;
            };
            if matches!(resp, Response::Error { .. }) {
                self.stats.errors += 1;
            }
            let who = self.who(conn);
            reply(out, &to, &resp, Some(&who));
        }
    }
}

fn frame_bytes(f: &fastpmi_codec::Frame) -> &[u8] {
    match f {
        fastpmi_codec::Frame::Pmi1(b)
        | fastpmi_codec::Frame::Pmi1Spawn(b)
        | fastpmi_codec::Frame::Pmi2(b) => b,
    }
}

pub(crate) fn reply(out: &mut Vec<Event>, to: &ReplyTo, resp: &Response, who: Option<&str>) {
    let bytes = match to.proto {
        // Longer than a frame (a large value, only ever served to a client
        // that reads continued replies): in parts.
        Protocol::Pmi2 => {
            static IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
            let body = encode_response_body(&to.cmd, to.thrid.as_deref(), resp);
            let id = if body.len() > fastpmi_codec::PMI2_BODY_MAX {
                format!(
                    "r{}",
                    IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                )
            } else {
                String::new()
            };
            let mut frames = fastpmi_codec::continued::frames(body, &id, None);
            match frames.len() {
                1 => frames.pop().unwrap_or_default(),
                _ => frames.concat(),
            }
        }
        Protocol::Pmi1 => encode_response(to.proto, &to.cmd, to.thrid.as_deref(), resp),
    };
    if tracing::enabled!(tracing::Level::DEBUG) {
        let text = fastpmi_codec::show(&bytes);
        match who {
            Some(w) => tracing::debug!("{w} <- {}", text.trim_end_matches("\\n")),
            None => tracing::debug!("conn {} <- {}", to.conn, text.trim_end_matches("\\n")),
        }
    }
    out.push(Event::Send {
        conn: to.conn,
        bytes,
    });
}

#[cfg(test)]
mod groups_tests;
#[cfg(test)]
mod tests;
