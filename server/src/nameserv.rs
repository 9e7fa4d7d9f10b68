//! Name service: publish, unpublish and lookup of service names (the PMI
//! side of `MPI_Publish_name`/`MPI_Lookup_name`), shared by every job of a
//! launcher, or forwarded to a `fastpmi nameserver` shared by launchers.

use std::collections::HashMap;

use super::{ConnId, Event, JobIdx, ReplyTo, Server};
use fastpmi_codec::Response;

/// Longest service name and port string kept.
pub const NAME_MAX: usize = 256;
pub const PORT_MAX: usize = 1024;
/// Most names one table holds.
pub const NAMES_MAX: usize = 65536;

/// One name-service operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameOp {
    Publish { service: String, port: String },
    Unpublish { service: String },
    Lookup { service: String },
}

/// Result of a name-service operation: the port a lookup found (`None`
/// for a miss or for publish/unpublish), or why it failed.
pub type NameResult = Result<Option<String>, NameError>;

/// Why a name-service operation failed; its text goes to the client in
/// the reply's `msg`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("service name of {0} bytes (1 to {max})", max = NAME_MAX)]
    BadServiceName(usize),
    #[error("port of {0} bytes (at most {max})", max = PORT_MAX)]
    PortTooLong(usize),
    #[error("service {0} is already published")]
    AlreadyPublished(String),
    #[error("name table full ({max} names)", max = NAMES_MAX)]
    TableFull,
    #[error("service {0} is not published")]
    NotPublished(String),
    #[error("service {service} was published by another job ({owner})")]
    NotOwner { service: String, owner: String },
    /// A shared name server (`--nameserver`) refused, in its own words.
    #[error("{0}")]
    Remote(String),
    /// A request to the shared name server that it cannot read.
    #[error("{0}")]
    BadRequest(String),
    /// The shared name server could not be reached or answered nonsense.
    #[error("{0}")]
    Unavailable(String),
}

/// Published names and who published them (the owner is a job id).
#[derive(Debug, Default)]
pub struct NameTable {
    map: HashMap<String, (String, String)>,
}

impl NameTable {
    pub fn apply(&mut self, owner: &str, op: &NameOp) -> NameResult {
        match op {
            NameOp::Publish { service, port } => {
                if service.is_empty() || service.len() > NAME_MAX {
                    return Err(NameError::BadServiceName(service.len()));
                }
                if port.len() > PORT_MAX {
                    return Err(NameError::PortTooLong(port.len()));
                }
                if self.map.contains_key(service) {
                    return Err(NameError::AlreadyPublished(service.clone()));
                }
                if self.map.len() >= NAMES_MAX {
                    return Err(NameError::TableFull);
                }
                self.map
                    .insert(service.clone(), (owner.to_string(), port.clone()));
                Ok(None)
            }
            NameOp::Unpublish { service } => match self.map.get(service) {
                None => Err(NameError::NotPublished(service.clone())),
                Some((o, _)) if o != owner => Err(NameError::NotOwner {
                    service: service.clone(),
                    owner: o.clone(),
                }),
                Some(_) => {
                    self.map.remove(service);
                    Ok(None)
                }
            },
            NameOp::Lookup { service } => Ok(self.map.get(service).map(|(_, p)| p.clone())),
        }
    }

    /// Forget every name whose owner matches `pred` (its launcher went away).
    pub fn remove_owned(&mut self, pred: impl Fn(&str) -> bool) {
        self.map.retain(|_, (o, _)| !pred(o));
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// The name service as the wire server uses it: a local table, or a remote
/// one reached by the launcher (replies come back through
/// [`Server::name_reply`]).
#[derive(Debug, Default)]
pub(crate) struct Names {
    table: NameTable,
    remote: bool,
    pending: HashMap<u64, Waiter>,
    next: u64,
}

/// Who waits for a shared name server's answer.
#[derive(Debug)]
enum Waiter {
    /// A rank's request on its connection (and whether it is a lookup).
    Wire(ReplyTo, bool),
    /// The launcher's own request, for a PMIx client: answered by
    /// [`Event::NameDone`] with its token.
    Host(u64),
}

/// The reply a name-service result becomes.
fn response(lookup: bool, r: NameResult) -> Response {
    match (lookup, r) {
        (true, Ok(port)) => Response::Lookup(port),
        (false, Ok(_)) => Response::Ok,
        (_, Err(e)) => Response::error_rc(1, e.to_string()),
    }
}

impl Server {
    /// Send name-service operations to the launcher (`Event::Names`) instead
    /// of the local table: the launcher uses a shared name server.
    pub fn use_remote_names(&mut self) {
        self.names.remote = true;
    }

    /// The shared name server answered operation `id`.
    pub fn name_reply(&mut self, id: u64, result: NameResult, out: &mut Vec<Event>) {
        match self.names.pending.remove(&id) {
            Some(Waiter::Wire(to, lookup)) => {
                super::reply(out, &to, &response(lookup, result), None)
            }
            Some(Waiter::Host(token)) => out.push(Event::NameDone { token, result }),
            None => {}
        }
    }

    /// Drop pending operations of a closed connection.
    pub(super) fn forget_names_of(&mut self, conn: ConnId) {
        self.names
            .pending
            .retain(|_, w| !matches!(w, Waiter::Wire(to, _) if to.conn == conn));
    }

    /// A name-service operation of the launcher's own, for a PMIx client
    /// of job `job` (names are shared by PMI and PMIx clients): the result
    /// at once, or `None` when it went to the shared name server and comes
    /// back as [`Event::NameDone`] with `token`.
    pub fn host_name_op(
        &mut self,
        job: JobIdx,
        op: NameOp,
        token: u64,
        out: &mut Vec<Event>,
    ) -> Option<NameResult> {
        self.stats.other += 1;
        let owner = self.jobs[job].id.clone();
        if self.names.remote {
            let id = self.names.next;
            self.names.next += 1;
            self.names.pending.insert(id, Waiter::Host(token));
            out.push(Event::Names { id, owner, op });
            return None;
        }
        Some(self.names.table.apply(&owner, &op))
    }
}

/// A name-service request of a rank of `job`.
pub(super) fn handle(
    s: &mut Server,
    job: JobIdx,
    to: &ReplyTo,
    op: NameOp,
    out: &mut Vec<Event>,
) -> Option<Response> {
    s.stats.other += 1;
    let lookup = matches!(op, NameOp::Lookup { .. });
    let owner = s.jobs[job].id.clone();
    if s.names.remote {
        let id = s.names.next;
        s.names.next += 1;
        s.names.pending.insert(id, Waiter::Wire(to.clone(), lookup));
        out.push(Event::Names { id, owner, op });
        return None;
    }
    Some(response(lookup, s.names.table.apply(&owner, &op)))
}
