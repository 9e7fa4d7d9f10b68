//! One function per request. Handlers read and change server state and
//! return the reply, or `None` when the reply is held (fence, node-attribute
//! wait) or there is none (abort).

use super::nameserv::{self, NameOp};
use super::{Activity, ConnId, Event, FailCause, JobIdx, Phase, ReplyTo, Server};
use crate::deaths::DeathCause;
use crate::store::StoreError;
use fastpmi_codec::names::attr;
use fastpmi_codec::{Request, Response, KEYLEN_MAX, KVSNAME_MAX, VALLEN_MAX};

/// Pending `info-getnodeattr wait=TRUE` requests one rank may hold (one per
/// thread in practice): past it the request is refused, so a rank cannot
/// grow the server's waiter list without bound.
pub const ATTR_WAITS_PER_RANK_MAX: usize = 64;

pub(super) fn handle(
    s: &mut Server,
    conn: ConnId,
    to: &ReplyTo,
    req: Request,
    out: &mut Vec<Event>,
) -> Option<Response> {
    if super::oob::routes_here(s, conn, &req) {
        return super::oob::handle(s, conn, to, req, out);
    }
    match req {
        Request::Init {
            version,
            subversion,
        } => Some(init(s, conn, version, subversion)),
        Request::InitAck { pmiid } => super::auth::initack(s, conn, to, pmiid, out),
        // Every session starts with `init` (port mode: `initack` first).
        other if !s.conns.get(&conn).is_some_and(|c| c.inited) => Some(Response::error(format!(
            "{} before init (send cmd=init pmi_version=... first)",
            fastpmi_codec::command::request_name(&other)
        ))),
        Request::FullInit {
            rank,
            auth,
            continued,
            ..
        } => {
            if continued {
                if let Some(c) = s.conns.get_mut(&conn) {
                    c.continued = true;
                }
            }
            super::auth::fullinit(s, conn, to, rank, auth, out)
        }
        Request::AuthComplete { authinfo } => super::auth::complete(s, conn, to, &authinfo, out),
        Request::GetMaxes => Some(Response::Maxes {
            kvsname_max: KVSNAME_MAX,
            keylen_max: KEYLEN_MAX,
            vallen_max: VALLEN_MAX,
        }),
        other => {
            let Some((job, rank)) = s.conns.get(&conn).and_then(|c| c.bound) else {
                let msg = format!(
                    "{} before the rank identified itself (initack or fullinit)",
                    fastpmi_codec::command::request_name(&other)
                );
                // A port-mode peer that asks for job data before proving
                // it is a rank is not one: close and log it like any other
                // refused claim (it would otherwise hold an unidentified
                // slot and probe at will).
                if s.conns.get(&conn).is_some_and(|c| c.port_job.is_some()) {
                    super::auth::refuse(s, conn, Some(to), msg, out);
                    return None;
                }
                return Some(Response::error(msg));
            };
            if let Some(why) = &s.jobs[job].failed {
                if !matches!(other, Request::Finalize | Request::Abort { .. }) {
                    return Some(Response::error(format!("job aborted: {why}")));
                }
            }
            if !matches!(other, Request::PutAllPair { .. }) {
                super::kvscopy::interrupt_putall(s, to, &other, out);
            }
            bound(s, job, rank, to, other, out)
        }
    }
}

fn bound(
    s: &mut Server,
    job: JobIdx,
    rank: u32,
    to: &ReplyTo,
    req: Request,
    out: &mut Vec<Event>,
) -> Option<Response> {
    let j = &mut s.jobs[job];
    match req {
        Request::GetAppnum => Some(Response::Appnum(j.appnum[rank as usize])),
        Request::GetJobId => Some(Response::JobId(j.id.clone())),
        Request::GetUniverseSize => Some(Response::UniverseSize(j.universe_size)),
        Request::Put { key, value } => {
            s.stats.puts += 1;
            // Longer than the store's own values: for a client of
            // fastpmi's that speaks continued commands (docs/continued.md).
            let large = value.len() > j.store.max_value() && s.speaks_continued(to.conn);
            let j = &mut s.jobs[job];
            Some(store_result(if large {
                j.store.put_large(rank, &key, &value)
            } else {
                j.store.put(rank, &key, &value)
            }))
        }
        Request::Get { jobid, key, .. } => {
            s.stats.gets += 1;
            get(s, job, to, jobid, key, out)
        }
        Request::Barrier => {
            s.stats.fences += 1;
            fence(s, job, rank, to, out)
        }
        Request::PutNodeAttr { key, value } => {
            s.stats.node_attr_ops += 1;
            let r = j.store.put_node_attr(rank, &key, &value);
            if r.is_ok() {
                s.release_attrs(job, Some(&key), out);
            }
            Some(store_result(r))
        }
        Request::GetNodeAttr { key, wait } => {
            s.stats.node_attr_ops += 1;
            match j.store.get_node_attr(&key) {
                Some(v) => Some(Response::Value {
                    key,
                    value: Some(v),
                }),
                None if wait
                    && j.attr_waiters.iter().filter(|w| w.0 == rank).count()
                        >= ATTR_WAITS_PER_RANK_MAX =>
                {
                    Some(Response::error(format!(
                            "{ATTR_WAITS_PER_RANK_MAX} node-attribute waits already pending for this rank"
                        )))
                }
                None if wait => {
                    j.ranks[rank as usize].set_activity(Activity::WaitingAttr(key.clone()));
                    j.attr_waiters.push((rank, key, to.clone()));
                    None
                }
                None => Some(Response::Value { key, value: None }),
            }
        }
        Request::GetJobAttr { key } => {
            s.stats.other += 1;
            let value = job_attr(s.hwloc_xmlfile.as_deref(), &s.jobs[job], &key)
                .or_else(|| s.group_job_attr(job, rank, &key));
            Some(Response::Value { key, value })
        }
        Request::Finalize => {
            let slot = &mut j.ranks[rank as usize];
            slot.set_phase(Phase::Finalized);
            slot.set_activity(Activity::Running);
            s.groups_member_finalized(job, rank, out);
            // Reply first, then close once it is written.
            super::reply(out, to, &Response::Ok, Some(&format!("rank {rank}")));
            out.push(Event::Close { conn: to.conn });
            None
        }
        Request::Abort {
            exitcode,
            message,
            isworld,
        } => {
            let asked = exitcode.unwrap_or(1);
            let code = abort_status(asked);
            let shown = if code as i64 == asked {
                format!("code {asked}")
            } else {
                format!("code {asked} (exit status {code})")
            };
            // PMI2_Abort(0, ...): only the caller aborts, which a
            // fault-tolerant job survives.
            let what = if isworld {
                "called abort"
            } else {
                "aborted itself (abort isworld=FALSE)"
            };
            let how = if message.is_empty() {
                format!("{what} with {shown}")
            } else {
                format!("{what} with {shown}: {message}")
            };
            if !isworld && s.rank_died(job, rank, DeathCause::Aborted(code), &how, out) {
                return None;
            }
            let message = format!("{} {how}", s.jobs[job].rank_label(job, rank));
            tracing::debug!("{message}");
            out.push(Event::JobFailed {
                job,
                rank,
                cause: FailCause::Abort { code },
                message: message.clone(),
            });
            s.fail_job(job, Some(rank), code, &message, out);
            None
        }
        Request::JobConnect { jobid } => Some(super::connect::job_connect(s, job, &jobid)),
        Request::GetAll { jobid } => Some(super::kvscopy::getall(s, job, to, jobid, out)),
        Request::PutAll { paircount } => super::kvscopy::putall(s, to.conn, paircount),
        Request::PutAllPair { key, value } => {
            super::kvscopy::putall_pair(s, job, rank, to.conn, key, value)
        }
        Request::JobDisconnect { jobid } => Some(super::connect::job_disconnect(s, job, &jobid)),
        Request::Spawn(req) => super::spawn::request(s, job, rank, to, req, out),
        // Groups fence in one segment: a job over node servers has several.
        Request::Group(_) if s.jobs[job].place.is_some() => Some(Response::error(
            "process groups are not available in a job over several node servers (docs/nested.md)",
        )),
        Request::Group(req) => {
            s.stats.other += 1;
            super::groups::handle(s, job, rank, to, req, out)
        }
        Request::Publish { service, port } => {
            nameserv::handle(s, job, to, NameOp::Publish { service, port }, out)
        }
        Request::Unpublish { service } => {
            nameserv::handle(s, job, to, NameOp::Unpublish { service }, out)
        }
        Request::Lookup { service } => {
            nameserv::handle(s, job, to, NameOp::Lookup { service }, out)
        }
        // Handled before binding (init_oob by `oob::handle`).
        Request::Init { .. }
        | Request::InitOob { .. }
        | Request::InitAck { .. }
        | Request::FullInit { .. }
        | Request::AuthComplete { .. }
        | Request::GetMaxes => None,
    }
}

fn init(s: &mut Server, conn: ConnId, version: u32, subversion: u32) -> Response {
    if let Some(c) = s.conns.get_mut(&conn) {
        c.inited = true;
    }
    if let Some((job, rank)) = s.conns.get(&conn).and_then(|c| c.bound) {
        s.mark_initialized(job, rank, conn);
    }
    match version {
        // 1.2 turns on MPICH's group barriers: answer 1.1 until they exist.
        1 => Response::Init {
            version: 1,
            subversion: 1,
        },
        2 => Response::Init {
            version: 2,
            subversion: 0,
        },
        v => Response::error(format!(
            "PMI version {v}.{subversion} not supported (1.1 and 2.0 are)"
        )),
    }
}

fn store_result(r: Result<(), StoreError>) -> Response {
    match r {
        Ok(()) => Response::Ok,
        Err(e) => Response::error(e.to_string()),
    }
}

fn get(
    s: &mut Server,
    job: JobIdx,
    to: &ReplyTo,
    jobid: Option<String>,
    key: Vec<u8>,
    out: &mut Vec<Event>,
) -> Option<Response> {
    let target = match super::connect::target(s, job, jobid.as_deref()) {
        Ok(t) => t,
        Err(e) => return Some(e),
    };
    let j = &s.jobs[target];
    // PMI-1 clients read job attributes with plain gets; MPICH reads the
    // dead set with a PMI-2 get too (`PMI2_ID_NULL`), as Hydra answers.
    let value = match to.proto {
        fastpmi_codec::Protocol::Pmi1
            if key.starts_with(b"PMI_") || key == attr::UNIVERSE_SIZE.as_bytes() =>
        {
            job_attr(s.hwloc_xmlfile.as_deref(), j, &key)
        }
        _ if key == attr::DEAD_PROCESSES.as_bytes() => j.deaths.dead_processes(j.global_rank(0)),
        _ => None,
    }
    .or_else(|| j.store.get(&key));
    if value.is_none() && s.ask_outer(target, to, &key, out) {
        return None;
    }
    if let Some(v) = value.as_ref().filter(|v| v.len() > VALLEN_MAX) {
        if !s.speaks_continued(to.conn) {
            return Some(Response::error(format!(
                "value of key {} is {} bytes, longer than this client reads ({VALLEN_MAX}): a client of fastpmi's reads it",
                fastpmi_codec::show(&key),
                v.len()
            )));
        }
    }
    Some(Response::Value { key, value })
}

fn job_attr(hwloc_xmlfile: Option<&str>, j: &super::Job, key: &[u8]) -> Option<Vec<u8>> {
    // Every name is text: other keys are a miss.
    match std::str::from_utf8(key).ok()? {
        attr::PROCESS_MAPPING => Some(j.process_mapping().into_bytes()),
        attr::UNIVERSE_SIZE => Some(j.universe_size.to_string().into_bytes()),
        // Publish, unpublish and lookup work across every job.
        attr::HAS_NAME_SERV => Some(b"TRUE".to_vec()),
        // The node topology the launcher exported once (MPICH then need not
        // discover it in every rank).
        attr::HWLOC_XMLFILE => hwloc_xmlfile.map(|p| p.as_bytes().to_vec()),
        // Fault-tolerant jobs; a miss while none died.
        attr::DEAD_PROCESSES => j.deaths.dead_processes(j.global_rank(0)),
        _ => None,
    }
}

fn fence(
    s: &mut Server,
    job: JobIdx,
    rank: u32,
    to: &ReplyTo,
    out: &mut Vec<Event>,
) -> Option<Response> {
    let j = &mut s.jobs[job];
    if j.fence_waiters.iter().any(|(r, _, _)| *r == rank) {
        return Some(Response::error(format!(
            "rank {rank} is already in a fence"
        )));
    }
    // Fault-tolerant job with dead ranks: no fence can complete any more.
    if let Some(e) = s.fence_after_deaths(job) {
        return Some(e);
    }
    let j = &mut s.jobs[job];
    let ticket = match j.store.fence_arrive(rank) {
        Ok(t) => t,
        Err(e) => return Some(Response::error(e.to_string())),
    };
    let slot = &mut j.ranks[rank as usize];
    slot.fences += 1;
    slot.set_activity(Activity::InFence(j.store.fences_completed() + 1));
    j.fence_waiters.push((rank, ticket, to.clone()));
    s.release_fence(job, out);
    // A fence that a finalized or PMI-less exited rank can never join fails
    // the job, the same way for socket and shared-memory arrivals.
    s.check_stuck(job, out);
    None
}

/// The exit status an abort code becomes: itself when it is one (0 to 255),
/// else 255 (the message keeps the code as sent).
pub(super) fn abort_status(code: i64) -> i32 {
    if (0..=255).contains(&code) {
        code as i32
    } else {
        255
    }
}
