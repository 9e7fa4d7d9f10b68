//! Spawn: turn a rank's spawn request into a new job. Each command is
//! checked (program, `wdir`, `path`, `host`, `env` info keys); commands that
//! cannot run get error codes and a line on stderr, the others form one job
//! (appnum = command index) whose pre-put pairs are in its KVS before any of
//! its ranks starts. The ranks are then started like the first job's (by the
//! forker threads, handed out by the event loop), and the spawn is answered
//! once the last of them is started. The launcher creates the job between
//! [`plan_job`] and [`fill_job`].

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::jobs::create::SpawnedBy;
use super::jobs::Jobs;
use super::os;
use super::starting::{AppPlan, Starter};
use super::supervise::Procs;
use crate::config::LaunchConfig;
use fastpmi_codec::spawn::{SpawnCmd, SpawnRequest};
use fastpmi_server::spawn::ERRCODE_SPAWN;
use fastpmi_server::{JobIdx, Server, SpawnOutcome};
use pmix_host::SpawnApp;

/// Most ranks alive at once over all jobs of a launcher.
const LIVE_RANKS_MAX: usize = 65536;

/// Why one command of a spawn cannot run.
#[derive(Debug, thiserror::Error)]
enum CommandError {
    #[error("wdir {0}: not a directory")]
    Wdir(String),
    #[error("hostfile {0}: {1}")]
    Hostfile(String, std::io::Error),
    #[error(
        "host {host} is not this node ({node}); fastpmi starts processes on its own node only"
    )]
    NotThisNode { host: String, node: String },
    #[error("env entry {0:?} is not NAME=value")]
    EnvEntry(String),
    #[error(transparent)]
    Program(#[from] os::ProgramError),
}

/// What a spawn reads of the launcher's parts.
pub(super) struct SpawnCtx<'a> {
    pub server: &'a Server,
    pub cfg: &'a LaunchConfig,
    pub procs: &'a Procs,
    pub jobs: &'a Jobs,
    pub starter: &'a Starter,
    /// A PMIx server runs already.
    pub pmix_serves: bool,
}

/// A spawn request checked and planned: the job to create.
pub(super) struct NewJob {
    pub jobid: String,
    pub plans: Vec<AppPlan>,
    pub universe: u32,
    pub by: SpawnedBy,
    /// Per process: 0, or the error code of a command that cannot run.
    pub errcodes: Vec<i32>,
}

/// Why a spawn starts no job.
#[derive(Debug, thiserror::Error)]
pub(super) enum SpawnRefused {
    #[error("the launcher is shutting down")]
    ShuttingDown,
    #[error("{total} more processes would exceed {LIVE_RANKS_MAX} live ranks ({live} now)")]
    TooManyRanks { total: usize, live: usize },
    /// Every command failed (each said in `errors`).
    #[error("{}", .0.join("; "))]
    NoCommandRuns(Vec<String>),
    #[error("pre-put {key}: {source}")]
    Preput {
        key: String,
        source: fastpmi_server::store::StoreError,
    },
}

/// Check spawn request `req` by `rank` of `parent` and plan its job
/// (`pmix`: of PMIx ranks). A command that cannot run gets a line in
/// `errors` and error codes; when nothing can start, why.
pub(super) fn plan_job(
    at: &SpawnCtx,
    parent: JobIdx,
    rank: u32,
    req: &SpawnRequest,
    pmix: bool,
    errors: &mut Vec<String>,
) -> Result<NewJob, SpawnRefused> {
    if at.procs.interrupted().is_some() || at.jobs.torn_down(parent) {
        return Err(SpawnRefused::ShuttingDown);
    }
    let live = at.procs.running() + at.starter.queued();
    let total = req.total_procs() as usize;
    if live + total > LIVE_RANKS_MAX {
        return Err(SpawnRefused::TooManyRanks { total, live });
    }
    let mut plans = Vec::with_capacity(req.cmds.len());
    let mut errcodes = Vec::with_capacity(total);
    for (i, cmd) in req.cmds.iter().enumerate() {
        match plan(cmd, &at.cfg.genv) {
            Ok(mut p) => {
                p.pmix = pmix;
                p.fault_tolerant = at.cfg.fault_tolerant;
                // The running server serves it whatever it links: known
                // only for the debug line, or for a first server.
                if pmix
                    && at.cfg.pmix_lib.is_none()
                    && (!at.pmix_serves || tracing::enabled!(tracing::Level::DEBUG))
                {
                    let v =
                        super::pmix::detect::probe(&p.program, &p.args, p.wdir.as_deref(), &p.env);
                    p.pmix_lib = v
                        .links
                        .and_then(|f| super::pmix::detect::linked_pmix(&f, &p.env));
                }
                errcodes.extend(std::iter::repeat_n(0, cmd.maxprocs as usize));
                plans.push(p);
            }
            Err(e) => {
                errors.push(format!("command {i}: {e}"));
                errcodes.extend(std::iter::repeat_n(ERRCODE_SPAWN, cmd.maxprocs as usize));
                // Keeps the appnum of the commands after it.
                plans.push(AppPlan {
                    nranks: 0,
                    program: PathBuf::new(),
                    shown: OsString::new(),
                    args: Vec::new(),
                    env: Vec::new(),
                    wdir: None,
                    image: Default::default(),
                    pmix: false,
                    pmix_lib: None,
                    fault_tolerant: false,
                });
            }
        }
    }
    if errors.len() == req.cmds.len() {
        return Err(SpawnRefused::NoCommandRuns(errors.clone()));
    }
    let n = at.server.job_count();
    Ok(NewJob {
        jobid: format!("fastpmi_{}_{n}", std::process::id()),
        plans,
        universe: at.cfg.world_size(),
        by: SpawnedBy { job: parent, rank },
        errcodes,
    })
}

/// `job`, created for `req` as `new` planned it (its plans taken), gets
/// the request's pre-put pairs in its KVS before any of its ranks starts:
/// the spawn's outcome, or why the job cannot go on.
pub(super) fn fill_job(
    server: &mut Server,
    job: JobIdx,
    req: &SpawnRequest,
    new: NewJob,
) -> Result<SpawnOutcome, SpawnRefused> {
    for (k, v) in &req.preput {
        server
            .preput(job, k.as_bytes(), v.as_bytes())
            .map_err(|source| SpawnRefused::Preput {
                key: k.clone(),
                source,
            })?;
    }
    let NewJob {
        jobid,
        by,
        errcodes,
        ..
    } = new;
    tracing::debug!(
        job = %jobid,
        ranks = req.total_procs() as usize,
        by = %server.rank_name(by.job, by.rank),
        "spawned"
    );
    Ok(SpawnOutcome::Started { jobid, errcodes })
}
/// Say on stderr why the spawn by `by` failed, or which of its commands
/// cannot run.
pub(super) fn say_errors(by: &str, outcome: &SpawnOutcome, errors: &[String]) {
    // One line per command that cannot run, or why nothing could start.
    match (outcome, errors.is_empty()) {
        (SpawnOutcome::Failed(msg), true) => {
            crate::errln!("fastpmi: spawn by {by} failed: {msg}")
        }
        _ => {
            for e in errors {
                crate::errln!("fastpmi: spawn by {by}: {e}");
            }
        }
    }
}

/// `PMIx_Spawn` by `rank` of namespace `nspace` (Open MPI's
/// `MPI_Comm_spawn`) as a PMI spawn: the spawning job, the request (the
/// same checks and job as a PMI spawn's, its ranks PMIx ones) and who
/// spawns. None when it cannot be one (said on stderr).
pub(super) fn pmix_request(
    server: &Server,
    nspace: &str,
    rank: u32,
    apps: Vec<SpawnApp>,
) -> Option<(JobIdx, SpawnRequest, String)> {
    let Some(parent) = server.job_index(nspace) else {
        crate::errln!("fastpmi: PMIx spawn by an unknown namespace {nspace}");
        return None;
    };
    let cmds = apps
        .into_iter()
        .map(|a| {
            let mut info = Vec::new();
            if let Some(d) = a.cwd.filter(|d| !d.is_empty()) {
                info.push(("wdir".to_string(), d));
            }
            if !a.env.is_empty() {
                info.push(("env".to_string(), a.env.join("\n")));
            }
            SpawnCmd {
                exe: a.cmd,
                maxprocs: a.maxprocs.max(0) as u32,
                // PMIx's argv starts with the program.
                args: a.argv.into_iter().skip(1).collect(),
                info,
            }
        })
        .collect();
    let req = SpawnRequest {
        cmds,
        preput: Vec::new(),
    };
    let by = server.rank_name(parent, rank);
    if let Err(e) = req.validate() {
        crate::errln!("fastpmi: PMIx spawn by {by}: {e}");
        return None;
    }
    Some((parent, req, by))
}

/// How a `PMIx_Spawn` is answered.
pub(super) enum PmixAnswer {
    /// With the new namespace: its ranks then connect to their parent.
    Started(String),
    /// Some applications of the job could not run: PMIx has no
    /// per-process error codes, so the spawn fails; the rest is ended.
    Abandon(String),
    Failed,
}

/// How to answer the `PMIx_Spawn` by `by` that had `outcome` (`errors`:
/// its commands that cannot run, said on stderr).
pub(super) fn pmix_answer(by: &str, outcome: SpawnOutcome, errors: &[String]) -> PmixAnswer {
    for e in errors {
        crate::errln!("fastpmi: PMIx spawn by {by}: {e}");
    }
    match outcome {
        SpawnOutcome::Started { jobid, .. } if errors.is_empty() => PmixAnswer::Started(jobid),
        SpawnOutcome::Started { jobid, .. } => PmixAnswer::Abandon(jobid),
        SpawnOutcome::Failed(msg) => {
            crate::errln!("fastpmi: PMIx spawn by {by} failed: {msg}");
            PmixAnswer::Failed
        }
    }
}

/// Check one command and build its plan: program, arguments, working
/// directory and environment (`genv`, then the info keys').
fn plan(cmd: &SpawnCmd, genv: &[(OsString, OsString)]) -> Result<AppPlan, CommandError> {
    let mut wdir: Option<PathBuf> = None;
    let mut path: Option<String> = None;
    let mut env = genv.to_vec();
    for (k, v) in &cmd.info {
        match k.as_str() {
            "wdir" => {
                let d = PathBuf::from(v);
                if !d.is_dir() {
                    return Err(CommandError::Wdir(v.clone()));
                }
                wdir = Some(d);
            }
            "path" => path = Some(v.clone()),
            "host" | "hosts" => check_hosts(v.split([',', ' ']))?,
            "hostfile" => {
                let text =
                    std::fs::read_to_string(v).map_err(|e| CommandError::Hostfile(v.clone(), e))?;
                check_hosts(
                    text.lines()
                        .map(|l| l.split('#').next().unwrap_or("").trim())
                        .map(|l| l.split(':').next().unwrap_or("")),
                )?;
            }
            "env" => env.extend(parse_env(v)?),
            other => tracing::debug!(key = other, value = %v, "spawn info key ignored"),
        }
    }
    let program = resolve(&cmd.exe, path.as_deref(), wdir.as_deref())?;
    Ok(AppPlan {
        nranks: cmd.maxprocs,
        program,
        shown: cmd.exe.clone().into(),
        args: cmd.args.iter().map(OsString::from).collect(),
        env,
        wdir,
        image: Default::default(),
        // Spawned by a PMI client: PMI (PMIx spawn is the PMIx server's).
        pmix: false,
        pmix_lib: None,
        fault_tolerant: false,
    })
}

/// The program of a command: in the `path` info key's directories first,
/// then as the launcher would find it.
fn resolve(
    exe: &str,
    path: Option<&str>,
    wdir: Option<&Path>,
) -> Result<PathBuf, os::ProgramError> {
    if let Some(dirs) = path.filter(|_| !exe.contains('/')) {
        for d in dirs.split(':').filter(|d| !d.is_empty()) {
            let cand = Path::new(d).join(exe);
            if let Ok(p) = os::resolve_program(&cand.clone().into_os_string(), wdir) {
                return Ok(p);
            }
        }
    }
    os::resolve_program(&OsString::from(exe), wdir)
}

/// `host`/`hosts`/`hostfile` may only name this node.
fn check_hosts<'a>(hosts: impl Iterator<Item = &'a str>) -> Result<(), CommandError> {
    let me = rustix::system::uname();
    let full = me.nodename().to_string_lossy().into_owned();
    let short = full.split('.').next().unwrap_or("").to_string();
    for h in hosts.map(str::trim).filter(|h| !h.is_empty()) {
        let h = h.split(':').next().unwrap_or(h);
        let local = matches!(h, "localhost" | "127.0.0.1" | "::1") || h == full || h == short;
        if !local {
            return Err(CommandError::NotThisNode {
                host: h.to_string(),
                node: full,
            });
        }
    }
    Ok(())
}

/// The `env` info key: `NAME=value` entries, one per line (or separated by
/// blanks when the value is one line).
fn parse_env(v: &str) -> Result<Vec<(OsString, OsString)>, CommandError> {
    let items: Vec<&str> = if v.contains('\n') {
        v.lines().collect()
    } else {
        v.split_whitespace().collect()
    };
    items
        .into_iter()
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .map(|i| match i.split_once('=') {
            Some((k, val)) if !k.is_empty() => Ok((k.into(), val.into())),
            _ => Err(CommandError::EnvEntry(i.to_string())),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_info_key_forms() {
        let e = parse_env("A=1 B=x=y").unwrap();
        assert_eq!(e[1], ("B".into(), "x=y".into()));
        assert_eq!(
            parse_env("=1\nC=3").unwrap_err().to_string(),
            "env entry \"=1\" is not NAME=value"
        );
        assert_eq!(parse_env("A=1\nC=3\n").unwrap().len(), 2);
    }

    #[test]
    fn only_this_node() {
        assert!(check_hosts(["localhost", "127.0.0.1:4"].into_iter()).is_ok());
        let e = check_hosts(["localhost", "node-that-is-elsewhere"].into_iter())
            .unwrap_err()
            .to_string();
        assert!(e.contains("node-that-is-elsewhere"), "{e}");
    }
}
