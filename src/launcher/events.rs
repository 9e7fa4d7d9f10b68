//! The launcher's reactions that span its parts: carrying out what the
//! server core asked for ([`Launcher::apply_events`]), and the hooks that
//! hand one part's news to the others. With `mod.rs` (set-up and the event
//! loop), the only file with methods of [`Launcher`]: every other part
//! owns its state and is reached through its own methods.

use fastpmi_server::{Event, FailCause, JobIdx};
use mio::Token;

use super::{nest, peer, Launcher};

impl Launcher {
    /// The nested mode's hook (docs/nested.md): what its exchange thread
    /// could not do, or heard, fails the job; a failed job is reported to
    /// the outer server, which ends it on every node.
    pub(super) fn nest_tick(&mut self) {
        let Some(n) = &mut self.nest else { return };
        for why in n.tick(&mut self.server, &mut self.events) {
            if !self.procs.has_failure() {
                self.record_failure(0, 0, why.clone(), 1, String::new(), false);
                self.server.fail_job(0, None, 1, &why, &mut self.events);
                self.fail_group(0, 1, &why);
            }
        }
        if self.procs.interrupted().is_some() {
            return;
        }
        let Some(n) = self.nest.as_mut().filter(|n| n.wants_report()) else {
            return;
        };
        if let Some((msg, code)) = self.procs.settled_failure(nest::SETTLE) {
            // The outer launcher may end this one at once.
            self.procs.announce_failure();
            n.report_failure(code, &msg);
        }
    }

    /// Point each job's fence watcher at the fence its socket ranks wait
    /// in, starting a job's watchers when its socket ranks first wait for a
    /// fence or a node attribute.
    pub(super) fn update_watchers(&mut self) {
        for job in 0..self.jobs.len() {
            let gen = self.server.fence_wait_generation(job);
            if gen.is_some() || self.server.waits_for_attr(job) {
                if let Some(w) = self.jobs.watch(job, &self.waker) {
                    w.point_at(gen);
                }
            }
        }
        for (job, w) in self.jobs.fence_watchers() {
            if self.server.fence_wait_generation(job).is_none() {
                w.point_at(None);
            }
        }
    }

    /// Whether the socket of port-mode connection `tok` belongs to the
    /// process started as `rank` of `job` (or one of its descendants).
    pub(super) fn peer_is_rank(&self, tok: Token, job: JobIdx, rank: u32) -> bool {
        let Some(inode) = self.conns.peer_inode(tok) else {
            return false;
        };
        self.procs
            .running_rank(job, rank)
            .is_some_and(|p| peer::tree_holds_socket(p.pid, inode))
    }

    /// Answers of the shared name server, handed to the waiting ranks.
    pub(super) fn name_replies(&mut self) {
        let Some(n) = &self.names else { return };
        for (id, result) in n.replies() {
            self.server.name_reply(id, result, &mut self.events);
        }
    }

    /// Carry out what the server asked for.
    pub(super) fn apply_events(&mut self) {
        while !self.events.is_empty() {
            let batch = std::mem::take(&mut self.events);
            for ev in batch {
                match ev {
                    Event::Send { conn, bytes } => self.send(conn, &bytes),
                    Event::Close { conn } => {
                        if self.conns.close_when_flushed(Token(conn)) {
                            self.flush(Token(conn));
                        }
                    }
                    Event::JobFailed {
                        job,
                        rank,
                        cause,
                        message,
                    } => {
                        if self.procs.interrupted().is_some() {
                            continue;
                        }
                        let activity = self.server.rank_activity(job, rank);
                        let (code, prefer) = match cause {
                            FailCause::Abort { code } => (code, false),
                            FailCause::ConnectionLost | FailCause::ExitedEarly => (1, true),
                            FailCause::ProtocolError => (1, false),
                        };
                        self.record_failure(job, rank, message.clone(), code, activity, prefer);
                        self.fail_group(job, code, &message);
                    }
                    Event::Spawn { id, job, rank, req } => self.spawn_job(id, job, rank, req),
                    Event::CheckPeer { conn, job, rank } => {
                        // Its forker has not reported the pid yet: check
                        // once it has (`started`, `not_started`).
                        if self.starter.is_starting(job, rank) {
                            self.starter.check_when_started(conn, job, rank);
                            continue;
                        }
                        let ok = self.peer_is_rank(Token(conn), job, rank);
                        self.server.peer_checked(conn, ok, &mut self.events);
                        self.note_identified(Token(conn));
                    }
                    Event::Signal {
                        conn,
                        job,
                        rank,
                        signal,
                    } => self.oob_signal(conn, job, rank, signal),
                    Event::NameDone { token, result } => self.pmix_name_done(token, result),
                    Event::OuterGet { id, key } => match &self.nest {
                        Some(n) => n.outer_get(id, key, &mut self.server, &mut self.events),
                        None => self.server.outer_get_reply(
                            id,
                            Err(fastpmi_server::place::OuterGetFailed(
                                "not a node server".into(),
                            )),
                            &mut self.events,
                        ),
                    },
                    Event::RankDied {
                        job,
                        rank,
                        cause,
                        message,
                    } => self.on_rank_died(job, rank, cause, &message),
                    Event::Refuse { conn, reason } => {
                        crate::errln!("fastpmi: refused PMI connection {conn} from {reason}");
                    }
                    Event::Names { id, owner, op } => match &self.names {
                        Some(n) => n.send(id, owner, op),
                        None => self.server.name_reply(
                            id,
                            Err(fastpmi_server::NameError::Unavailable(
                                "no name server".into(),
                            )),
                            &mut self.events,
                        ),
                    },
                }
            }
        }
    }
}
