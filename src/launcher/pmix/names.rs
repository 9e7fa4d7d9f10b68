//! PMIx clients' publish, unpublish and lookup, served from fastpmi's one
//! name service (the launcher's table or a shared `fastpmi nameserver`):
//! one operation per key, answered once all are; a lookup with
//! `PMIX_WAIT` waits for its names to be published.

use base64::Engine as _;
use fastpmi_server::{Event, NameOp, NameResult, Server};
use pmix_host::{LookupDone, ModexDone, NameValue, NamesUpcall, OpDone};

/// How a byte object is kept in the name service, whose values are text
/// (PMI clients read them): this prefix, then its base64.
const BYTES_MARK: &str = "fastpmi:bytes:";
/// A PMIx string that itself starts with `fastpmi:` is kept behind this
/// prefix, so that it never reads back as a byte object.
const TEXT_MARK: &str = "fastpmi:text:";

/// A PMIx value as the name service keeps it.
pub(super) fn encode(v: NameValue) -> String {
    match v {
        NameValue::Text(t) if t.starts_with("fastpmi:") => format!("{TEXT_MARK}{t}"),
        NameValue::Text(t) => t,
        NameValue::Bytes(b) => format!(
            "{BYTES_MARK}{}",
            base64::engine::general_purpose::STANDARD.encode(b)
        ),
    }
}

/// A name-service value as PMIx clients get it back.
fn decode(s: String) -> NameValue {
    if let Some(t) = s.strip_prefix(TEXT_MARK) {
        return NameValue::Text(t.to_string());
    }
    if let Some(b) = s.strip_prefix(BYTES_MARK) {
        if let Ok(b) = base64::engine::general_purpose::STANDARD.decode(b) {
            return NameValue::Bytes(b);
        }
    }
    NameValue::Text(s)
}

/// A PMIx client's publish, unpublish or lookup: one name-service
/// operation per key, answered once all are.
struct NameRequest {
    results: Vec<Option<NameResult>>,
    keys: Vec<String>,
    done: Completion,
}

pub(super) enum Completion {
    Op(OpDone),
    /// A lookup of the namespace's, that waits for missing names until
    /// the deadline when `Some` (`PMIX_WAIT`; `Some(None)`: no deadline).
    Lookup(LookupSink, String, Option<Option<std::time::Instant>>),
    /// The launcher's own operation (what it offers other launchers):
    /// nobody waits; a failure is logged.
    Quiet,
}

/// Who waits for a lookup's answer.
pub(super) enum LookupSink {
    /// A client's `PMIx_Lookup`.
    Pmix(LookupDone),
    /// The library's direct-modex request for another launcher's process:
    /// the one key's byte object.
    Modex(ModexDone),
}

impl LookupSink {
    fn complete(self, found: Option<Vec<(String, NameValue, String, u32)>>) {
        match self {
            LookupSink::Pmix(done) => done.complete(found),
            LookupSink::Modex(done) => {
                let blob =
                    found
                        .and_then(|v| v.into_iter().next())
                        .and_then(|(_, v, _, _)| match v {
                            NameValue::Bytes(b) => Some(b),
                            NameValue::Text(_) => None,
                        });
                tracing::debug!(
                    bytes = blob.as_ref().map(Vec::len),
                    "direct modex answered from another launcher's offer"
                );
                done.complete(blob)
            }
        }
    }
}

#[derive(Default)]
pub(super) struct NameOps {
    next: u64,
    requests: std::collections::HashMap<u64, NameRequest>,
    /// Operation token -> (request, index of its key).
    tokens: std::collections::HashMap<u64, (u64, usize)>,
    /// Lookups waiting for names to be published (`PMIX_WAIT`).
    parked: Vec<ParkedLookup>,
    /// When the parked lookups were last asked again.
    retried: Option<std::time::Instant>,
}

/// A lookup waiting for names to be published, asked again every
/// [`LOOKUP_RETRY`] until they are or its deadline passes.
struct ParkedLookup {
    nspace: String,
    keys: Vec<String>,
    deadline: Option<std::time::Instant>,
    done: LookupSink,
}

/// How often waiting lookups are asked again.
const LOOKUP_RETRY: std::time::Duration = std::time::Duration::from_millis(20);

impl Completion {
    /// The request cannot be served (its namespace is no job of ours).
    fn fail(self) {
        match self {
            Completion::Op(done) => done.complete(false),
            Completion::Lookup(done, ..) => done.complete(None),
            Completion::Quiet => tracing::debug!("a name operation of the launcher's failed"),
        }
    }
}

impl NameRequest {
    /// Answer the client once every key has its result; a waiting lookup
    /// that misses a key comes back to be asked again (`parked`).
    fn finish(self, parked: &mut Vec<ParkedLookup>) {
        let ok = self.results.iter().all(|r| matches!(r, Some(Ok(_))));
        let missing = self
            .results
            .iter()
            .any(|r| matches!(r, Some(Ok(None)) | None));
        match self.done {
            Completion::Op(done) => done.complete(ok),
            Completion::Quiet => {
                if !ok {
                    tracing::warn!(
                        "publishing {:?} for other launchers failed: {:?}",
                        self.keys,
                        self.results
                    );
                }
            }
            Completion::Lookup(done, nspace, Some(deadline))
                if missing && deadline.is_none_or(|d| std::time::Instant::now() < d) =>
            {
                parked.push(ParkedLookup {
                    nspace,
                    keys: self.keys,
                    deadline,
                    done,
                });
            }
            Completion::Lookup(done, nspace, _) => {
                let found: Option<Vec<_>> = self
                    .keys
                    .iter()
                    .zip(self.results)
                    .map(|(k, r)| match r {
                        Some(Ok(Some(port))) => {
                            Some((k.clone(), decode(port), nspace.clone(), WILDCARD))
                        }
                        _ => None,
                    })
                    .collect();
                done.complete(found);
            }
        }
    }
}

/// `PMIX_RANK_WILDCARD`: the publisher's rank is not kept, only its job.
const WILDCARD: u32 = u32::MAX - 1;

impl NameOps {
    /// Serve a PMIx client's name-service request from fastpmi's one name
    /// service (PMI clients of every job share it; `--nameserver` shares it
    /// between launchers).
    pub(super) fn request(
        &mut self,
        server: &mut Server,
        events: &mut Vec<Event>,
        nspace: &str,
        keys: Vec<String>,
        ops: Vec<NameOp>,
        done: Completion,
    ) {
        tracing::debug!(?ops, "PMIx name operations of {nspace}");
        let Some(job) = server.job_index(nspace) else {
            return done.fail();
        };
        let id = self.next;
        self.next += 1;
        let mut req = NameRequest {
            results: vec![None; ops.len()],
            keys,
            done,
        };
        for (i, op) in ops.into_iter().enumerate() {
            let token = self.next;
            self.next += 1;
            match server.host_name_op(job, op, token, events) {
                Some(r) => req.results[i] = Some(r),
                None => {
                    self.tokens.insert(token, (id, i));
                }
            }
        }
        if req.results.iter().all(Option::is_some) {
            req.finish(&mut self.parked);
        } else {
            self.requests.insert(id, req);
        }
    }

    /// The shared name server answered operation `token` of a PMIx client.
    pub(super) fn done(&mut self, token: u64, result: NameResult) {
        let Some((id, i)) = self.tokens.remove(&token) else {
            return;
        };
        let Some(req) = self.requests.get_mut(&id) else {
            return;
        };
        req.results[i] = Some(result);
        if req.results.iter().all(Option::is_some) {
            if let Some(req) = self.requests.remove(&id) {
                req.finish(&mut self.parked);
            }
        }
    }
}

impl NameOps {
    pub(super) fn lookup(
        &mut self,
        server: &mut Server,
        events: &mut Vec<Event>,
        nspace: String,
        keys: Vec<String>,
        deadline: Option<Option<std::time::Instant>>,
        done: LookupSink,
    ) {
        let ops = keys
            .iter()
            .map(|k| NameOp::Lookup { service: k.clone() })
            .collect();
        let c = Completion::Lookup(done, nspace.clone(), deadline);
        self.request(server, events, &nspace, keys, ops, c);
    }

    /// How soon lookups waiting for names must be asked again.
    pub(super) fn tick(&self) -> Option<std::time::Duration> {
        (!self.parked.is_empty()).then(|| {
            self.retried.map_or(std::time::Duration::ZERO, |t| {
                LOOKUP_RETRY.saturating_sub(t.elapsed())
            })
        })
    }

    /// Ask the waiting lookups again (every [`LOOKUP_RETRY`]); those past
    /// their deadline are answered "not found". Whether they were asked
    /// (their operations may be `events` to send at once).
    pub(super) fn retry(&mut self, server: &mut Server, events: &mut Vec<Event>) -> bool {
        if self.parked.is_empty() || self.retried.is_some_and(|t| t.elapsed() < LOOKUP_RETRY) {
            return false;
        }
        self.retried = Some(std::time::Instant::now());
        for p in std::mem::take(&mut self.parked) {
            if p.deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                p.done.complete(None);
                continue;
            }
            self.lookup(server, events, p.nspace, p.keys, Some(p.deadline), p.done);
        }
        true
    }
}

impl NameOps {
    /// A PMIx client's publish, unpublish or lookup.
    pub(super) fn upcall(&mut self, u: NamesUpcall, server: &mut Server, events: &mut Vec<Event>) {
        match u {
            NamesUpcall::Publish {
                nspace,
                pairs,
                done,
                ..
            } => {
                let (keys, ops) = pairs
                    .into_iter()
                    .map(|(service, v)| {
                        let port = encode(v);
                        (service.clone(), NameOp::Publish { service, port })
                    })
                    .unzip();
                self.request(server, events, &nspace, keys, ops, Completion::Op(done));
            }
            NamesUpcall::Unpublish {
                nspace, keys, done, ..
            } => {
                let ops = keys
                    .iter()
                    .map(|k| NameOp::Unpublish { service: k.clone() })
                    .collect();
                self.request(server, events, &nspace, keys, ops, Completion::Op(done));
            }
            NamesUpcall::Lookup {
                nspace,
                keys,
                wait,
                timeout,
                done,
                ..
            } => {
                let deadline = wait.then(|| {
                    timeout.map(|t| {
                        std::time::Instant::now() + std::time::Duration::from_secs(t.into())
                    })
                });
                self.lookup(
                    server,
                    events,
                    nspace,
                    keys,
                    deadline,
                    LookupSink::Pmix(done),
                );
            }
        }
    }
}
