//! The server core driven like the launcher's event loop drives it: two
//! jobs (one FD-mode, one port-mode) on a MemStore each, five connections
//! (see `fastpmi_fuzz::CONNS`; the port-mode ones local peers, whose
//! claims and out-of-band channels the launcher checks), interleaved reads, closes, rank exits,
//! reconnects, a launcher-side failure, spawned jobs (made as the launcher
//! makes them, up to a few small ones) and the loop's housekeeping, in the
//! order a script (`fastpmi_fuzz::parse_script`) says.
//!
//! Checks: no panic; every reply is well-formed and bounded in size; a
//! connection never gets more replies than messages it sent (so output is
//! bounded by input); nothing is sent to a closed connection; failures
//! name a real job and rank; a connection that belongs to no job gets no
//! job data.

#![no_main]

use fastpmi_codec::command::SpawnRequest;
use fastpmi_codec::{pmi1, pmi2, Deframer, VALLEN_MAX};
use fastpmi_fuzz::{check_reply, parse_script, show, Op, CONNS};
use fastpmi_server::place::NodePlace;
use fastpmi_server::store::MemStore;
use fastpmi_server::{ConnId, Event, JobSpec, NameError, Server, SpawnOutcome};
use libfuzzer_sys::fuzz_target;

/// Connection 4: no job, no rank.
const FOREIGN: usize = 4;
/// Jobs the harness makes for spawns at most, and their largest size.
const SPAWNED_MAX: usize = 3;
const SPAWN_PROCS_MAX: u64 = 8;

struct Conn {
    open: bool,
    /// The same bytes the server got, framed again to count messages.
    mirror: Deframer,
    messages: usize,
    replies: usize,
}

impl Conn {
    fn new() -> Self {
        Conn {
            open: true,
            mirror: Deframer::new(),
            messages: 0,
            replies: 0,
        }
    }
}

struct Harness {
    s: Server,
    conns: Vec<Conn>,
    /// Longest message any client sent (a PMI-2 `thrid` is echoed).
    longest: usize,
    /// Spawns the launcher has not answered yet: (id, parent job, request).
    spawns: Vec<(u64, usize, SpawnRequest)>,
    spawned: Vec<usize>,
}

/// (job, rank) the launcher knows each connection's process as.
fn process_of(conn: usize) -> Option<(usize, u32)> {
    match conn {
        0 | 1 => Some((0, conn as u32)),
        2 | 3 => Some((1, conn as u32 - 2)),
        _ => None,
    }
}

fn connect(s: &mut Server, conn: usize) {
    match conn {
        0 | 1 => s.connect(conn as ConnId, process_of(conn), None),
        2 | 3 => {
            s.connect(conn as ConnId, None, Some(1));
            // Local peers: their claims reach the launcher's check (and
            // out-of-band channels open), answered in `apply`.
            s.set_peer(
                conn as ConnId,
                fastpmi_server::auth::Trust::Local,
                format!("127.0.0.1:{conn}"),
            );
        }
        _ => s.connect(conn as ConnId, None, None),
    }
}

impl Harness {
    fn new() -> Self {
        let mut s = Server::new();
        s.add_job(JobSpec {
            id: "kvs_0".into(),
            apps: vec![2],
            universe_size: 4,
            spawner: None,
            store: Box::new(MemStore::new(2, VALLEN_MAX)),
        });
        // Job 0 is the second node server's part of a job of 4 (nested
        // mode): its ranks 0 and 1 are the job's 2 and 3.
        s.set_place(
            0,
            NodePlace {
                first: 2,
                total: 4,
                mapping: "(vector,(0,2,2))".into(),
            },
        );
        s.add_job(JobSpec {
            id: "kvs_1".into(),
            apps: vec![1, 1],
            universe_size: 2,
            spawner: Some("kvs_0".into()),
            store: Box::new(MemStore::new(2, VALLEN_MAX)),
        });
        for c in 0..CONNS {
            connect(&mut s, c);
        }
        Harness {
            s,
            conns: (0..CONNS).map(|_| Conn::new()).collect(),
            longest: 0,
            spawns: Vec::new(),
            spawned: Vec::new(),
        }
    }

    fn bytes(&mut self, conn: usize, bytes: &[u8]) {
        let c = &mut self.conns[conn];
        if c.open {
            c.mirror.feed(bytes);
            loop {
                match c.mirror.next_frame() {
                    Ok(None) => break,
                    Ok(Some(f)) => {
                        let (fastpmi_codec::Frame::Pmi1(b)
                        | fastpmi_codec::Frame::Pmi1Spawn(b)
                        | fastpmi_codec::Frame::Pmi2(b)) = &f;
                        self.longest = self.longest.max(b.len());
                        c.messages += 1;
                    }
                    Err(_) => c.messages += 1,
                }
            }
        }
        let was_open = c.open;
        let mut out = Vec::new();
        self.s.on_bytes(conn as ConnId, bytes, &mut out);
        if !was_open {
            assert!(
                out.is_empty(),
                "events for bytes on a closed connection: {out:?}"
            );
        }
        self.apply(out);
    }

    /// Carry out events like the launcher: a Close ends the connection
    /// (after its replies), which the server hears about via on_closed.
    fn apply(&mut self, mut out: Vec<Event>) {
        while !out.is_empty() {
            let mut closes = Vec::new();
            let mut more = Vec::new();
            for e in std::mem::take(&mut out) {
                match e {
                    Event::Send { conn, bytes } => {
                        assert!(conn < CONNS, "reply to unknown connection {conn}");
                        let c = &mut self.conns[conn];
                        assert!(
                            c.open,
                            "reply to closed connection {conn}: {}",
                            show(&bytes)
                        );
                        // A getall's count and pairs precede its one
                        // reply (`kvs-getall-response`): bounded by the
                        // job's KVS, not by the messages.
                        // Out-of-band notices answer nothing: one per job
                        // failure (checkpoints are not asked for here).
                        let body = bytes.get(6..).unwrap_or_default();
                        let notice = bytes.starts_with(b"cmd=abort ");
                        if !body.starts_with(b"cmd=kvs-getall-paircount-response;")
                            && !body.starts_with(b"cmd=kvs-getall-pair-response;")
                            && !notice
                        {
                            c.replies += 1;
                        }
                        assert!(
                            c.replies <= c.messages,
                            "connection {conn}: {} replies to {} messages, last {}",
                            c.replies,
                            c.messages,
                            show(&bytes)
                        );
                        if notice {
                            // A notice: well-formed and bounded.
                            assert!(bytes.len() <= fastpmi_codec::oob::MESSAGE_MAX + 256);
                            let line = bytes.strip_suffix(b"\n").expect("a whole line");
                            let m = pmi1::decode(line).expect("a PMI-1 line");
                            fastpmi_codec::oob::Notice::decode(&m).expect("a notice");
                        } else {
                            check_reply(&bytes, self.longest);
                        }
                        if conn == FOREIGN {
                            no_job_data(&bytes);
                        }
                    }
                    Event::Close { conn } => {
                        assert!(conn < CONNS, "close of unknown connection {conn}");
                        closes.push(conn);
                    }
                    Event::JobFailed { job, rank, .. } => {
                        assert!(
                            job < self.s.job_count() && rank < self.s.job_size(job),
                            "failure of job {job} rank {rank}"
                        );
                    }
                    // The launcher's check of an unauthenticated local claim:
                    // answered both ways so both paths are explored.
                    Event::CheckPeer { conn, job, rank } => {
                        assert!(conn < CONNS && job < self.s.job_count());
                        self.s.peer_checked(conn, rank % 2 == 0, &mut more);
                    }
                    Event::Signal {
                        conn,
                        job,
                        rank,
                        signal,
                    } => {
                        assert!(conn < CONNS && self.conns[conn].open);
                        assert!(job < self.s.job_count() && rank < self.s.job_size(job));
                        assert!(fastpmi_codec::oob::SIGNALS.contains(&signal));
                    }
                    Event::NameDone { .. } => {
                        panic!("a name-service answer to the launcher, which asked nothing")
                    }
                    Event::RankDied {
                        job, rank, message, ..
                    } => {
                        // Only fault-tolerant jobs have deaths.
                        assert!(job < self.s.job_count() && rank < self.s.job_size(job));
                        assert!(self.s.is_fault_tolerant(job), "{message}");
                        assert!(!message.is_empty());
                    }
                    Event::Refuse { conn, reason } => {
                        assert!(conn < CONNS, "refusal of unknown connection {conn}");
                        assert!(!reason.is_empty());
                    }
                    Event::Spawn { id, job, rank, req } => {
                        assert!(job < self.s.job_count() && rank < self.s.job_size(job));
                        self.spawns.push((id, job, req));
                    }
                    // A miss of the nested job after a fence: the outer
                    // job answers a value, nothing or an error.
                    Event::OuterGet { id, key } => {
                        assert!(!key.is_empty());
                        let answer = match id % 3 {
                            0 => Ok(Some(b"outer-value".to_vec())),
                            1 => Ok(None),
                            _ => Err(fastpmi_server::place::OuterGetFailed(
                                "outer server gone".into(),
                            )),
                        };
                        self.s.outer_get_reply(id, answer, &mut more);
                    }
                    Event::Names { id, .. } => {
                        // Only with a shared name server; answered as the
                        // launcher answers when it has none.
                        self.s.name_reply(
                            id,
                            Err(NameError::Unavailable("no name server".into())),
                            &mut more,
                        );
                    }
                }
            }
            out = more;
            for conn in closes {
                self.close(conn, &mut out);
            }
        }
    }

    fn close(&mut self, conn: usize, out: &mut Vec<Event>) {
        self.s.on_closed(conn as ConnId, out);
        self.conns[conn].open = false;
    }

    fn run(&mut self, op: Op<'_>) {
        let mut out = Vec::new();
        match op {
            Op::Bytes(conn, bytes) => return self.bytes(conn, bytes),
            Op::Close(conn) => self.close(conn, &mut out),
            Op::Exit { conn, clean } => {
                // The stray connection's "process" is the newest spawned
                // job's rank 0 (spawned ranks never connect here).
                let process = process_of(conn).or(self.spawned.last().map(|&j| (j, 0)));
                if let Some((job, rank)) = process {
                    self.s.rank_exited(job, rank, clean, &mut out);
                }
            }
            Op::Reconnect(conn) => {
                // FD-mode sockets are made once per rank; a port-mode or
                // stray client may connect again.
                if conn >= 2 && !self.conns[conn].open {
                    connect(&mut self.s, conn);
                    self.conns[conn] = Conn::new();
                }
            }
            Op::FailAll => {
                for job in 0..2 {
                    self.s.fail_job(job, None, 130, "interrupted", &mut out);
                }
            }
            Op::FinishSpawns => {
                for (id, parent, req) in std::mem::take(&mut self.spawns) {
                    let outcome = self.spawn(parent, &req, &mut out);
                    self.s.finish_spawn(id, outcome, &mut out);
                }
            }
            Op::Poll => {
                self.s.poll_store(&mut out);
                if self.s.needs_stuck_check() {
                    self.s.check_stuck_all(&mut out);
                }
            }
        }
        self.apply(out);
    }
}

impl Harness {
    /// Make the job as the launcher does (small ones only).
    fn spawn(&mut self, parent: usize, req: &SpawnRequest, out: &mut Vec<Event>) -> SpawnOutcome {
        let total = req.total_procs();
        if self.spawned.len() >= SPAWNED_MAX || total > SPAWN_PROCS_MAX {
            return SpawnOutcome::Failed("over the harness's limits".into());
        }
        let jobid = format!("kvs_{}", self.s.job_count());
        let apps: Vec<u32> = req.cmds.iter().map(|c| c.maxprocs).collect();
        let job = self.s.add_job(JobSpec {
            id: jobid.clone(),
            apps,
            universe_size: 4,
            spawner: Some(self.s.job_id(parent).to_string()),
            store: Box::new(MemStore::new(total as u32, VALLEN_MAX)),
        });
        self.spawned.push(job);
        for (k, v) in &req.preput {
            if let Err(e) = self.s.preput(job, k.as_bytes(), v.as_bytes()) {
                self.s.fail_job(job, None, 1, "spawn abandoned", out);
                return SpawnOutcome::Failed(format!("pre-put {k}: {e}"));
            }
        }
        SpawnOutcome::Started {
            jobid,
            errcodes: vec![0; total as usize],
        }
    }
}

/// A connection that belongs to no job may ask for limits and use the name
/// service; anything about a job must fail.
fn no_job_data(bytes: &[u8]) {
    let m = if bytes.starts_with(b"cmd=") {
        let line = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
        pmi1::decode(line).expect("checked reply")
    } else {
        pmi2::decode(&bytes[6..]).expect("checked reply")
    };
    let ok = m.get_str("rc") == Some("0");
    let harmless = matches!(
        m.cmd.as_str(),
        "response_to_init"
            | "init-response"
            | "maxes"
            | "publish_result"
            | "unpublish_result"
            | "lookup_result"
            | "name-publish-response"
            | "name-unpublish-response"
            | "name-lookup-response"
    );
    assert!(
        !ok || harmless,
        "job data for a connection of no job: {}",
        show(bytes)
    );
}

fuzz_target!(|data: &[u8]| {
    let mut h = Harness::new();
    for op in parse_script(data) {
        h.run(op);
    }
    // The launcher's end: every connection closes.
    for c in 0..CONNS {
        if h.conns[c].open {
            h.run(Op::Close(c));
        }
    }
});
