//! PMIx processes of other launchers (Open MPI's `MPI_Comm_connect` and
//! `MPI_Comm_accept` between jobs started apart, sharing a `fastpmi
//! nameserver`). After `PMIx_Connect` each side's ranks ask their own
//! server for the other side's data (`btl.tcp` addresses and the like);
//! a server that does not host a process asks its host (the direct-modex
//! upcall). So a launcher that sees a connect with a namespace not its
//! own offers its participants' data in the shared name service, one
//! name per process (`fastpmi-dmodex:<namespace>:<rank>`, the blob the
//! library gives for it, as a byte object), and a launcher asked for a
//! process it does not host looks the name up, waiting for it to be
//! offered. Without a shared name server there is no other launcher to
//! ask, and such a request is answered "not found" at once.

use super::host::PmixHost;
use super::names::{encode, Completion, LookupSink};
use fastpmi_server::{Event, NameOp, Server};
use pmix_host::NameValue;
use pmix_host::{InfoList, ModexDone, OpDone, RemoteUpcall};

/// `PMIX_RANK_WILDCARD`: every rank of a namespace.
const WILDCARD: u32 = u32::MAX - 1;

/// How long a request for another launcher's process waits for that
/// launcher to offer it (its side of the connect may run later).
const OFFER_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The name under which process `rank` of `nspace` is offered.
fn offer_name(nspace: &str, rank: u32) -> String {
    format!("fastpmi-dmodex:{nspace}:{rank}")
}

impl PmixHost {
    /// A connect of `procs`: when some belong to another launcher,
    /// register their namespaces (without local processes, so that the
    /// library asks this launcher for their data instead of waiting for
    /// them to start here) and offer this launcher's participants' data
    /// (once each); then answer. Without a shared name server
    /// (`shared_names`) such a connect is refused: no other launcher could
    /// be reached.
    fn connect(
        &mut self,
        server: &Server,
        shared_names: bool,
        procs: &[(String, u32)],
        done: OpDone,
    ) {
        let foreign = procs.iter().find(|(ns, _)| server.job_index(ns).is_none());
        let Some((stranger, _)) = foreign else {
            done.complete(true);
            return;
        };
        if !shared_names {
            // Nothing could ever be had of such a process: fail the connect
            // now rather than every later get of its data.
            tracing::warn!(
                "PMIx_Connect with processes of {stranger}, which this launcher does not run \
                 and no shared name server (--nameserver) can reach: refused"
            );
            done.complete(false);
            return;
        }
        let mut ours = Vec::new();
        let mut theirs: Vec<&str> = Vec::new();
        for (ns, r) in procs {
            let Some(job) = server.job_index(ns) else {
                if !theirs.contains(&ns.as_str()) {
                    theirs.push(ns);
                }
                continue;
            };
            if *r == WILDCARD {
                ours.extend((0..server.job_size(job)).map(|r| (ns.clone(), r)));
            } else {
                ours.push((ns.clone(), *r));
            }
        }
        for ns in theirs {
            if self.foreign.insert(ns.to_string()) {
                if let Err(e) = self.server.register_nspace(ns, 0, InfoList::default()) {
                    tracing::warn!("cannot register another launcher's namespace {ns}: {e}");
                }
            }
        }
        for (ns, r) in ours {
            if !self.offered.insert((ns.clone(), r)) {
                continue;
            }
            if let Err(e) = self.server.request_modex(&ns, r) {
                tracing::warn!("cannot offer the data of rank {r} of {ns} to other launchers: {e}");
            }
        }
        done.complete(true);
    }

    /// The library gave the data of a participant: offer it.
    fn offer_modex(
        &mut self,
        server: &mut Server,
        events: &mut Vec<Event>,
        nspace: &str,
        rank: u32,
        data: Option<Vec<u8>>,
    ) {
        let Some(data) = data else {
            tracing::debug!("no data of rank {rank} of {nspace} to offer");
            return;
        };
        let service = offer_name(nspace, rank);
        tracing::debug!(bytes = data.len(), "offering {service}");
        let port = encode(NameValue::Bytes(data));
        let op = NameOp::Publish {
            service: service.clone(),
            port,
        };
        self.names.request(
            server,
            events,
            nspace,
            vec![service],
            vec![op],
            Completion::Quiet,
        );
    }

    /// The library asks for the data of `rank` of `nspace`, which this
    /// launcher does not host: look for another launcher's offer (in the
    /// shared name server, when there is one: `shared_names`).
    fn dmodex(
        &mut self,
        server: &mut Server,
        events: &mut Vec<Event>,
        shared_names: bool,
        nspace: &str,
        rank: u32,
        done: ModexDone,
    ) {
        // Job-level data of another launcher's namespace is not offered.
        if rank == WILDCARD
            || !shared_names
            || server.job_index(nspace).is_some()
            || server.job_count() == 0
        {
            tracing::debug!("PMIx direct modex for {nspace}:{rank}: not found");
            done.complete(None);
            return;
        }
        // A lookup needs a job of ours to ask in the name of; any will do.
        let asker = server.job_id(0).to_string();
        let deadline = Some(Some(std::time::Instant::now() + OFFER_WAIT));
        self.names.lookup(
            server,
            events,
            asker,
            vec![offer_name(nspace, rank)],
            deadline,
            LookupSink::Modex(done),
        );
    }
}

impl PmixHost {
    /// A connect, or data of a process another server hosts or asked for.
    pub(super) fn remote(
        &mut self,
        u: RemoteUpcall,
        server: &mut Server,
        events: &mut Vec<Event>,
        shared_names: bool,
    ) {
        match u {
            RemoteUpcall::Connect { procs, done } => {
                self.connect(server, shared_names, &procs, done)
            }
            RemoteUpcall::Dmodex { nspace, rank, done } => {
                self.dmodex(server, events, shared_names, &nspace, rank, done)
            }
            RemoteUpcall::LocalModex { nspace, rank, data } => {
                self.offer_modex(server, events, &nspace, rank, data)
            }
        }
    }
}
