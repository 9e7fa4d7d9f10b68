//! Client start: the transport chosen at init (segment, socket or
//! singleton), and mapping the job segment and a spawned job's parent's.

use std::sync::{Arc, Mutex};

use super::conn::{handshake, Deferred, Mux};
use super::transport::{Link, Local, ParentSegment, Shm, ShmCfg};
use super::*;
use fastpmi_codec::names::{self, attr, parent_segment, pool};
use fastpmi_segment::AttachFailure;

impl Pmi {
    /// Connect to the launcher (or become a singleton), identify, and map
    /// the job segment when the launcher advertises one this client knows.
    pub fn init() -> Result<Pmi, PmiError> {
        let env = PmiEnv::from_process()?;
        let stream = match &env.endpoint {
            Some(Endpoint::Fd(fd)) => Stream::Unix(os::adopt_pmi_fd(*fd)?),
            Some(Endpoint::Port(port)) => {
                let s = std::net::TcpStream::connect(port)
                    .map_err(|e| PmiError::Env(format!("PMI_PORT={port}: {e}")))?;
                s.set_nodelay(true)?;
                Stream::Tcp(s)
            }
            None => return Ok(Pmi::singleton()),
        };
        let mut conn = WireConn {
            stream,
            deframer: Deframer::new(),
        };
        if let Some(direct) = &env.direct {
            match init_direct(&env, direct) {
                Ok((rank, seg, parent)) => {
                    let jobid = env.jobid.clone().unwrap_or_default();
                    let cfg = ShmCfg::new(&seg, rank, env.fence_yields);
                    let link = Link::Deferred(Box::new(Deferred {
                        conn,
                        env: env.clone(),
                        rank,
                        size: direct.size,
                    }));
                    return Ok(Pmi {
                        rank,
                        size: direct.size,
                        appnum: direct.appnum,
                        spawned: env.spawned || direct.spawner.is_some(),
                        jobid: jobid.clone(),
                        transport: Transport::Shm(Box::new(Shm {
                            seg,
                            parent,
                            cfg,
                            link: Mutex::new(link),
                        })),
                        server: env.server,
                        large_values: env.fastpmi,
                        finalized: AtomicBool::new(false),
                        groups: Default::default(),
                    });
                }
                Err(why) => tracing::debug!("not attaching from the environment: {why}"),
            }
        }
        let m = handshake(&mut conn, &env)?;
        let num = |k: &str| {
            m.get_int(k)
                .ok_or_else(|| PmiError::Protocol(format!("fullinit-response lacks {k}")))
        };
        let (r, size, appnum) = (num("rank")?, num("size")?, num("appnum").unwrap_or(0));
        // fastpmi's launcher sends the job id and the segment description
        // with fullinit; other servers are asked.
        let told = m
            .get_str(fastpmi_codec::names::fullinit::JOBID)
            .is_some()
            .then_some(&m);
        let jobid = match told.and_then(|m| m.get_str(fastpmi_codec::names::fullinit::JOBID)) {
            Some(j) => j.to_string(),
            None => {
                let jm = conn.call(
                    Protocol::Pmi2,
                    &Request::GetJobId,
                    Request::GetJobId.response(),
                )?;
                jm.get_str("jobid").unwrap_or_default().to_string()
            }
        };
        let mut attr = |k: &str| -> Result<Option<String>, NoSegment> {
            if let Some(m) = told {
                let k = k
                    .strip_prefix(fastpmi_codec::names::fullinit::PREFIX)
                    .unwrap_or(k);
                return Ok(m
                    .get(&format!("{}{k}", fastpmi_codec::names::fullinit::PREFIX))
                    .map(|v| String::from_utf8_lossy(v).into_owned()));
            }
            node_attr(&mut conn, k)
        };
        // Slurm sets PMI_SPAWNED and names the spawner in fullinit-response.
        let spawned = env.spawned || m.get("spawner-jobid").is_some();
        let shm = match attach_segment(&mut attr, env.server, &jobid, size as u32, r as u32) {
            Ok(seg) => {
                register(&seg, r as u32);
                let parent = match m.get_str("spawner-jobid") {
                    Some(pj) => match attach_parent(&mut attr, pj) {
                        Ok(p) => p.map(|seg| (pj.to_string(), seg)),
                        Err(why) => {
                            tracing::debug!("rank {r}: parent's KVS over the socket: {why}");
                            None
                        }
                    },
                    None => None,
                };
                Ok((seg, parent))
            }
            Err(why) => {
                tracing::debug!("rank {r}: not using shared memory: {why}");
                Err(why)
            }
        };
        let mux = Mux::new(conn)?;
        let transport = match shm {
            Ok((seg, parent)) => Transport::Shm(Box::new(Shm {
                cfg: ShmCfg::new(&seg, r as u32, env.fence_yields),
                seg,
                parent,
                link: Mutex::new(Link::Open(Arc::new(mux))),
            })),
            Err(why) => Transport::Socket {
                mux,
                fallback: why.to_string(),
            },
        };
        Ok(Pmi {
            rank: r as u32,
            size: size as u32,
            appnum: appnum as i32,
            spawned,
            jobid,
            transport,
            server: env.server,
            finalized: AtomicBool::new(false),
            groups: Default::default(),
            large_values: env.fastpmi,
        })
    }

    fn singleton() -> Pmi {
        Pmi {
            rank: 0,
            size: 1,
            appnum: 0,
            spawned: false,
            jobid: format!("singleton_{}", std::process::id()),
            transport: Transport::Singleton(Mutex::new(Local::default())),
            server: ServerKind::Generic,
            finalized: AtomicBool::new(false),
            groups: Default::default(),
            // Its own store.
            large_values: true,
        }
    }
}

/// Why init does not use a job segment: logged, and for a rank on the
/// socket its [`Pmi::fallback_reason`].
#[derive(Debug, thiserror::Error)]
pub(super) enum NoSegment {
    #[error("{var}=socket", var = names::env::TRANSPORT)]
    Forced,
    #[error("slurmstepd has no job segment")]
    SlurmStepd,
    #[error("the launcher advertises no segment ({})", attr::MEM_POOL_TYPE)]
    NotAdvertised,
    #[error("{0} missing")]
    Missing(&'static str),
    #[error("{key}={value}")]
    BadValue { key: &'static str, value: String },
    #[error("unknown {key} {0}", key = attr::MEM_POOL_TYPE)]
    UnknownPool(String),
    #[error(transparent)]
    Attach(#[from] AttachFailure),
    #[error("segment belongs to job {job} of {ranks} ranks, not {jobid} of {size}")]
    OtherJob {
        job: String,
        ranks: u32,
        jobid: String,
        size: u32,
    },
    #[error("the parent segment belongs to job {job}, not {parent}")]
    OtherParent { job: String, parent: String },
    #[error("{var}={rank:?} outside a job of {size}", var = names::env::PMI_RANK)]
    RankOutside { rank: Option<i64>, size: u32 },
    /// Asking the server for a node attribute failed.
    #[error(transparent)]
    Ask(#[from] PmiError),
}

/// Attach to the job segment (and a spawned job's parent's) as the
/// environment describes it: no word on the socket.
fn init_direct(
    env: &PmiEnv,
    d: &Direct,
) -> Result<(u32, JobSegment, Option<ParentSegment>), NoSegment> {
    let rank = env
        .rank
        .and_then(|r| u32::try_from(r).ok())
        .filter(|r| *r < d.size)
        .ok_or(NoSegment::RankOutside {
            rank: env.rank,
            size: d.size,
        })?;
    let jobid = env.jobid.as_deref().unwrap_or_default();
    let (pool, v) = d
        .segment
        .split_once(':')
        .ok_or_else(|| NoSegment::BadValue {
            key: names::env::SEGMENT,
            value: d.segment.clone(),
        })?;
    let mut attr = |k: &str| -> Result<Option<String>, NoSegment> {
        Ok(match k {
            attr::MEM_POOL_TYPE => Some(pool.to_string()),
            attr::MEM_ANON_MMAP_FD | attr::MEM_SYSV_ID => Some(v.to_string()),
            attr::PARENT_SEGMENT => d.parent_segment.clone(),
            _ => None,
        })
    };
    let seg = attach_segment(&mut attr, env.server, jobid, d.size, rank)?;
    register(&seg, rank);
    let parent = match &d.spawner {
        Some(pj) => match attach_parent(&mut attr, pj) {
            Ok(p) => p.map(|seg| (pj.clone(), seg)),
            Err(why) => {
                tracing::debug!("rank {rank}: parent's KVS over the socket: {why}");
                None
            }
        },
        None => None,
    };
    Ok((rank, seg, parent))
}

/// The rank registers in its state slot: attached and running.
fn register(seg: &JobSegment, rank: u32) {
    let slot = seg.seg().slot_of(rank);
    if let Some(st) = slot.and_then(|i| seg.seg().rank(i)) {
        st.set_last_op(RankOp::Init);
        let tsc = seg.seg().job().stamp_clock().is_tsc();
        st.set_phase_at(RankPhase::Running, fastpmi_segment::phase_stamp(tsc));
    }
}

/// A node attribute from the server, `None` if it has none.
fn node_attr(conn: &mut WireConn, k: &str) -> Result<Option<String>, NoSegment> {
    let req = Request::GetNodeAttr {
        key: k.as_bytes().to_vec(),
        wait: false,
    };
    let m = conn.call(Protocol::Pmi2, &req, req.response())?;
    Ok(found_value(&m).map(|v| String::from_utf8_lossy(&v).into_owned()))
}

/// What init needs of the node attributes (from fullinit or asked).
type AttrFn<'a> = dyn FnMut(&str) -> Result<Option<String>, NoSegment> + 'a;

/// A descriptor or SysV id, as a node attribute or variable `key` gives it.
fn number(key: &'static str, value: &str) -> Result<i32, NoSegment> {
    value.trim().parse().map_err(|_| NoSegment::BadValue {
        key,
        value: value.to_string(),
    })
}

fn attach_segment(
    attr: &mut AttrFn<'_>,
    server: ServerKind,
    jobid: &str,
    size: u32,
    rank: u32,
) -> Result<JobSegment, NoSegment> {
    if std::env::var(names::env::TRANSPORT).is_ok_and(|v| v == "socket") {
        return Err(NoSegment::Forced);
    }
    if server == ServerKind::SlurmStepd {
        return Err(NoSegment::SlurmStepd);
    }
    let seg = match attr(attr::MEM_POOL_TYPE)?.as_deref() {
        None => return Err(NoSegment::NotAdvertised),
        Some(pool::ANON_MMAP) => {
            let key = attr::MEM_ANON_MMAP_FD;
            let fd = attr(key)?.ok_or(NoSegment::Missing(key))?;
            JobSegment::attach_fd(number(key, &fd)?)?
        }
        Some(pool::SYSV) => {
            let key = attr::MEM_SYSV_ID;
            let id = attr(key)?.ok_or(NoSegment::Missing(key))?;
            JobSegment::attach_sysv(number(key, &id)?)?
        }
        Some(other) => return Err(NoSegment::UnknownPool(other.to_string())),
    };
    // A node server's segment holds a part of the job: this rank's too.
    let s = seg.seg();
    if s.job_id() != jobid || s.job_size() != size || s.slot_of(rank).is_none() {
        return Err(NoSegment::OtherJob {
            job: seg.seg().job_id().to_string(),
            ranks: seg.seg().job_size(),
            jobid: jobid.to_string(),
            size,
        });
    }
    Ok(seg)
}

/// Map the parent's segment, when the launcher passed one.
fn attach_parent(attr: &mut AttrFn<'_>, parent: &str) -> Result<Option<JobSegment>, NoSegment> {
    let key = attr::PARENT_SEGMENT;
    let Some(v) = attr(key)? else {
        return Ok(None);
    };
    // The whole value is reported, not just its number.
    let num = |n: &str| {
        n.trim().parse::<i32>().map_err(|_| NoSegment::BadValue {
            key,
            value: v.clone(),
        })
    };
    let seg = match v.split_once(':') {
        Some((parent_segment::FD, n)) => JobSegment::attach_fd(num(n)?)?,
        Some((parent_segment::SYSV, n)) => JobSegment::attach_sysv(num(n)?)?,
        _ => {
            return Err(NoSegment::BadValue {
                key,
                value: v.clone(),
            })
        }
    };
    if seg.seg().job_id() != parent {
        return Err(NoSegment::OtherParent {
            job: seg.seg().job_id().to_string(),
            parent: parent.to_string(),
        });
    }
    Ok(Some(seg))
}

#[cfg(test)]
mod tests {
    use super::ShmCfg;

    #[test]
    fn the_first_fence_never_yields_later_ones_yield_as_configured() {
        let cfg = ShmCfg {
            yields: 3,
            ..ShmCfg::default()
        };
        assert_eq!(cfg.yields_in(0), 0);
        assert_eq!(cfg.yields_in(1), 3);
        assert_eq!(cfg.yields_in(1 << 30), 3);
        let none = ShmCfg::default();
        assert_eq!(none.yields_in(1), 0);
    }
}
