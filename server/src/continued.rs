//! Continued commands (docs/continued.md): parts of a PMI-2 message too
//! long for one frame are reassembled per connection
//! ([`fastpmi_codec::continued::Reassembly`]) and the whole is served as if
//! it had come in one; a reply too long for one frame goes out in parts.
//!
//! A connection that sends a continued command, or says
//! `fastpmi-continued=TRUE` in its `fullinit`, is a client of fastpmi's
//! that reads continued replies: it may put and get values up to
//! [`fastpmi_codec::LARGE_VALUE_MAX`]. Every other client is held to
//! [`fastpmi_codec::VALLEN_MAX`], as before.

use std::time::Instant;

use super::{ConnId, Event, Server};
use fastpmi_codec::command::encode_response;
use fastpmi_codec::continued::{ContError, CONTINUED, HELD_MAX};
use fastpmi_codec::{pmi2, Frame, Protocol, Response};

/// Continued bytes all connections together may hold (each holds at most
/// [`HELD_MAX`]): past it a new part is refused.
pub const ALL_HELD_MAX: usize = 4 * HELD_MAX;

impl Server {
    /// Whether `conn` reads continued replies and may use large values.
    pub(super) fn speaks_continued(&self, conn: ConnId) -> bool {
        self.conns.get(&conn).is_some_and(|c| c.continued)
    }

    /// Whether a continued command is in progress on some connection (the
    /// event loop then calls [`Server::expire_continuations`] now and then).
    pub fn has_continuations(&self) -> bool {
        !self.continuing.is_empty()
    }

    /// Note whether `conn` has a continuation in progress.
    fn note_continuing(&mut self, conn: ConnId) {
        if self.conns.get(&conn).is_some_and(|c| !c.cont.is_empty()) {
            self.continuing.insert(conn);
        } else {
            self.continuing.remove(&conn);
        }
    }

    /// Drop continued commands idle for longer than
    /// [`fastpmi_codec::continued::IDLE_MAX`], each answered with an error.
    pub fn expire_continuations(&mut self, now: Instant, out: &mut Vec<Event>) {
        let conns: Vec<ConnId> = self.continuing.iter().copied().collect();
        for conn in conns {
            let Some(c) = self.conns.get_mut(&conn) else {
                continue;
            };
            for (e, thrid) in c.cont.expire(now) {
                self.stats.errors += 1;
                tracing::warn!("{}: {e}", self.who(conn));
                part_error(conn, thrid.as_deref(), &e, out);
            }
            self.note_continuing(conn);
        }
    }

    /// A `cmd=continued` part on `conn`: the whole message once its last
    /// part came, as a frame to serve.
    pub(super) fn on_part(
        &mut self,
        conn: ConnId,
        body: &[u8],
        out: &mut Vec<Event>,
    ) -> Option<Frame> {
        let m = match pmi2::decode(body) {
            Ok(m) => m,
            Err(e) => {
                part_error(conn, None, &e, out);
                return None;
            }
        };
        let held: usize = self
            .continuing
            .iter()
            .filter_map(|c| self.conns.get(c))
            .map(|c| c.cont.held())
            .sum();
        let c = self.conns.get_mut(&conn)?;
        c.continued = true;
        let r = if held + m.get("contdata").map_or(0, <[u8]>::len) > ALL_HELD_MAX {
            Err(ContError::HeldTooMuch)
        } else {
            c.cont.feed(&m, Instant::now())
        };
        self.note_continuing(conn);
        match r {
            Ok(None) => None,
            Ok(Some(whole)) if whole.starts_with(b"cmd=continued;") => {
                let e = "a continued command may not hold another";
                part_error(conn, m.thrid.as_deref(), &e, out);
                None
            }
            Ok(Some(whole)) => Some(Frame::Pmi2(whole)),
            Err(e) => {
                self.stats.errors += 1;
                tracing::warn!("{}: {e}", self.who(conn));
                part_error(conn, m.thrid.as_deref(), &e, out);
                None
            }
        }
    }
}

/// The error reply to a bad part (`continued-response`, with its thrid).
fn part_error(conn: ConnId, thrid: Option<&[u8]>, e: &dyn std::fmt::Display, out: &mut Vec<Event>) {
    out.push(Event::Send {
        conn,
        bytes: encode_response(
            Protocol::Pmi2,
            CONTINUED,
            thrid,
            &Response::error(e.to_string()),
        ),
    });
}
