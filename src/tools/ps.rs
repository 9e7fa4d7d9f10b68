//! `fastpmi ps` and `fastpmi release`: the client side of the rendezvous.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::proto::{JobTable, LauncherInfo, Op, RankRow, Reply, Request, VERSION};
use super::rendezvous::{self, socket_path};

const TIMEOUT: Duration = Duration::from_secs(5);

/// Why `ps` or `release` has no answer (printed after `fastpmi: `).
#[derive(Debug, thiserror::Error)]
enum PsError {
    /// The rendezvous directory cannot be read.
    #[error("{}: {source}", dir.display())]
    Dir { dir: PathBuf, source: io::Error },
    /// No answer on a launcher's socket.
    #[error("{}: {source}", path.display())]
    Query { path: PathBuf, source: io::Error },
    /// The launcher answered with an error.
    #[error("{}: {message}", path.display())]
    Refused { path: PathBuf, message: String },
    #[error("unreadable reply from {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("no fastpmi launcher with pid {pid} (no {})", path.display())]
    NoLauncher { pid: u32, path: PathBuf },
    #[error("no running fastpmi job {0}")]
    NoJob(String),
}

impl PsError {
    fn refused(path: &Path, error: Option<String>) -> PsError {
        PsError::Refused {
            path: path.to_path_buf(),
            message: error.unwrap_or_else(|| "error".into()),
        }
    }
}

/// A launcher found in the rendezvous directory.
struct Found {
    pid: u32,
    path: PathBuf,
}

fn request(op: Op, job: Option<String>) -> Request {
    Request {
        version: VERSION,
        op,
        job,
    }
}

/// Whether a process `pid` exists (a zombie counts).
fn pid_alive(pid: u32) -> bool {
    let Some(p) = rustix::process::Pid::from_raw(pid as i32) else {
        return false;
    };
    match rustix::process::test_kill_process(p) {
        Ok(()) => true,
        Err(e) => e == rustix::io::Errno::PERM,
    }
}

/// Every launcher socket in the directory; sockets whose launcher is gone
/// (killed with SIGKILL) are removed on the way.
fn launchers(dir: &Path) -> io::Result<Vec<Found>> {
    match rendezvous::check_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    }
    let mut out = Vec::new();
    for ent in std::fs::read_dir(dir)? {
        let ent = ent?;
        let Some(pid) = rendezvous::socket_pid(&ent.file_name()) else {
            continue;
        };
        let path = ent.path();
        if is_stale(&path, pid) {
            match std::fs::remove_file(&path) {
                Ok(()) => crate::errln!(
                    "fastpmi: removed the stale rendezvous {} (launcher {pid} is gone)",
                    path.display()
                ),
                Err(e) => crate::errln!(
                    "fastpmi: cannot remove the stale rendezvous {}: {e}",
                    path.display()
                ),
            }
            continue;
        }
        out.push(Found { pid, path });
    }
    out.sort_by_key(|f| f.pid);
    Ok(out)
}

/// [`launchers`], its error naming the directory.
fn launchers_in(dir: &Path) -> Result<Vec<Found>, PsError> {
    launchers(dir).map_err(|source| PsError::Dir {
        dir: dir.to_path_buf(),
        source,
    })
}

/// Nobody listens on the socket and its launcher is gone. A live launcher
/// listens from the moment the file exists, so a refused connection with
/// the pid still alive means the pid was reused: also stale.
fn is_stale(path: &Path, pid: u32) -> bool {
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => false,
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            if !pid_alive(pid) {
                return true;
            }
            // Maybe between bind and listen: look once more.
            std::thread::sleep(Duration::from_millis(50));
            std::os::unix::net::UnixStream::connect(path)
                .is_err_and(|e| e.kind() == io::ErrorKind::ConnectionRefused)
        }
        Err(_) => false,
    }
}

fn ask(path: &Path, req: &Request) -> Result<Reply, PsError> {
    let r = rendezvous::query(path, req, TIMEOUT).map_err(|source| PsError::Query {
        path: path.to_path_buf(),
        source,
    })?;
    if !r.ok {
        return Err(PsError::refused(path, r.error));
    }
    Ok(r)
}

/// Which launcher (and job) `target` names: a launcher pid or a job id
/// (the first launcher holding it).
fn resolve(dir: &Path, target: &str) -> Result<(PathBuf, Option<String>), PsError> {
    resolve_all(dir, target).map(|mut v| v.remove(0))
}

/// Every launcher `target` names: the launcher of a pid, or each launcher
/// holding a part of job `target` (a job over several node servers on
/// this machine, and the outer launcher whose job it is: they share its
/// id, docs/nested.md). Never empty.
fn resolve_all(dir: &Path, target: &str) -> Result<Vec<(PathBuf, Option<String>)>, PsError> {
    if let Ok(pid) = target.parse::<u32>() {
        let path = socket_path(dir, pid);
        if !path.exists() {
            return Err(PsError::NoLauncher { pid, path });
        }
        return Ok(vec![(path, None)]);
    }
    let mut found: Vec<Found> = launchers_in(dir)?;
    found.sort_by_key(|f| f.pid);
    let holding: Vec<_> = found
        .into_iter()
        .filter(|f| {
            ask(&f.path, &request(Op::Info, None)).is_ok_and(|r| {
                r.launcher
                    .is_some_and(|l| l.jobs.iter().any(|j| j.id == target))
            })
        })
        .map(|f| (f.path, Some(target.to_string())))
        .collect();
    if holding.is_empty() {
        return Err(PsError::NoJob(target.to_string()));
    }
    Ok(holding)
}

/// `fastpmi ps [PID|JOBID] [--json]`; returns the exit status.
pub fn ps(target: Option<&str>, json: bool, socket: Option<&Path>) -> i32 {
    super::ahead_of_ranks();
    let dir = rendezvous::dir();
    let r = match (target, socket) {
        (_, Some(path)) => table(
            path,
            target
                .filter(|t| t.parse::<u32>().is_err())
                .map(String::from),
            json,
        ),
        (Some(t), None) => resolve_all(&dir, t).and_then(|all| tables(&all, json)),
        (None, None) => list(&dir, json),
    };
    match r {
        Ok(()) => 0,
        Err(e) => {
            crate::errln!("fastpmi: {e}");
            1
        }
    }
}

fn list(dir: &Path, json: bool) -> Result<(), PsError> {
    let found = launchers_in(dir)?;
    let mut infos: Vec<LauncherInfo> = Vec::new();
    for f in &found {
        match ask(&f.path, &request(Op::Info, None)) {
            Ok(r) => infos.extend(r.launcher),
            Err(e) => crate::errln!("fastpmi: launcher {}: {e}", f.pid),
        }
    }
    if json {
        crate::outln!(
            "{}",
            serde_json::to_string_pretty(&infos).unwrap_or_default()
        );
        return Ok(());
    }
    crate::outln!(
        "{:>8} {:>9}  {:<24} {:>6}  COMMAND",
        "PID",
        "AGE",
        "JOBS",
        "RANKS"
    );
    for l in infos {
        let jobs: Vec<String> = l
            .jobs
            .iter()
            .map(|j| {
                if j.held {
                    format!("{} (held)", j.id)
                } else {
                    j.id.clone()
                }
            })
            .collect();
        let ranks: u32 = l.jobs.iter().map(|j| j.size).sum();
        crate::outln!(
            "{:>8} {:>8.1}s  {:<24} {:>6}  {}",
            l.pid,
            l.age_seconds,
            jobs.join(","),
            ranks,
            l.command
        );
    }
    Ok(())
}

/// A `ps` reply whose `jobs` array is kept as the launcher wrote it.
#[derive(serde::Deserialize)]
struct RawPs<'a> {
    ok: bool,
    #[serde(default)]
    error: Option<String>,
    #[serde(borrow)]
    jobs: Option<&'a serde_json::value::RawValue>,
}

/// The tables of every launcher of `all`: printed one after the other,
/// or as one JSON array.
fn tables(all: &[(PathBuf, Option<String>)], json: bool) -> Result<(), PsError> {
    if let [(path, job)] = all {
        return table(path, job.clone(), json);
    }
    if !json {
        for (path, job) in all {
            table(path, job.clone(), false)?;
        }
        return Ok(());
    }
    let mut parts = Vec::new();
    for (path, job) in all {
        let jobs: Vec<JobTable> = ask(path, &request(Op::Ps, job.clone()))?
            .jobs
            .unwrap_or_default();
        parts.extend(jobs);
    }
    crate::outln!(
        "{}",
        serde_json::to_string_pretty(&parts).unwrap_or_default()
    );
    Ok(())
}

fn table(path: &Path, job: Option<String>, json: bool) -> Result<(), PsError> {
    if json {
        // Printed as the launcher sent it: no parse into rows and no
        // re-encoding (most of the command's CPU time for 1024 ranks).
        let buf =
            rendezvous::query_raw(path, &request(Op::Ps, job), TIMEOUT).map_err(|source| {
                PsError::Query {
                    path: path.to_path_buf(),
                    source,
                }
            })?;
        let r: RawPs =
            serde_json::from_slice(buf.trim_ascii()).map_err(|source| PsError::Unreadable {
                path: path.to_path_buf(),
                source,
            })?;
        if !r.ok {
            return Err(PsError::refused(path, r.error));
        }
        crate::outln!("{}", r.jobs.map_or("[]", |j| j.get()));
        return Ok(());
    }
    let r = ask(path, &request(Op::Ps, job))?;
    let jobs = r.jobs.unwrap_or_default();
    for t in &jobs {
        print_table(t);
    }
    Ok(())
}

fn print_table(t: &JobTable) {
    let mut out = format!("job {} ({} ranks", t.id, t.size);
    if let Some(s) = &t.spawner {
        out += &format!(", spawned by {s}");
    }
    out += ")\n";
    for line in &t.summary {
        out += &format!("  {line}\n");
    }
    out += &format!(
        "{:>6} {:>8} {:>6} {:<6} {:<34} {:>8} {:<20} {:>6} {:<18} EXECUTABLE\n",
        "RANK", "PID", "APPNUM", "PMI", "STATE", "FOR", "PROCESS", "FENCES", "LAST-OP"
    );
    for r in &t.ranks {
        out += &format!(
            "{:>6} {:>8} {:>6} {:<6} {:<34} {:>7.1}s {:<20} {:>6} {:<18} {}\n",
            r.rank,
            r.pid.map_or("-".into(), |p| p.to_string()),
            r.appnum,
            r.transport,
            r.state,
            r.seconds,
            process_cell(r),
            r.fences,
            r.last_op.as_deref().unwrap_or("-"),
            r.executable
        );
    }
    crate::outln!("{}", out.trim_end());
}

/// The PROCESS column: the state word, and for a stopped, traced,
/// uninterruptible or zombie process how long ago it last ran ("stopped
/// 12.3s ago"); `-` without a live process.
fn process_cell(r: &RankRow) -> String {
    let Some(p) = &r.process else {
        return "-".into();
    };
    match r.process_last_ran {
        Some(t) => format!("{p} {t:.1}s ago"),
        None => p.clone(),
    }
}

/// `fastpmi release PID|JOBID`: let ranks held in init go on.
pub fn release(target: &str, socket: Option<&Path>) -> i32 {
    match ask_target(target, socket, Op::Release) {
        Ok(r) => {
            crate::outln!("fastpmi: released {} ranks", r.released.unwrap_or(0));
            0
        }
        Err(e) => {
            crate::errln!("fastpmi: {e}");
            1
        }
    }
}

/// `fastpmi checkpoint PID|JOBID`: ask the ranks of a job (or of every
/// running job of a launcher) for an application checkpoint, on their
/// out-of-band channels. Exit status 0 when the request was sent, even to
/// no rank (the line says how many have a channel).
pub fn checkpoint(target: &str, socket: Option<&Path>) -> i32 {
    match ask_target(target, socket, Op::Checkpoint) {
        Ok(r) => {
            for c in r.checkpoints.unwrap_or_default() {
                crate::outln!(
                    "fastpmi: checkpoint {} of job {} sent to {} of {} ranks{}",
                    c.seq,
                    c.job,
                    c.ranks,
                    c.size,
                    if c.ranks < c.size {
                        " (the others have no out-of-band channel open)"
                    } else {
                        ""
                    }
                );
            }
            0
        }
        Err(e) => {
            crate::errln!("fastpmi: {e}");
            1
        }
    }
}

/// Send `op` for `target` (a launcher pid or a job id) and wait for the
/// answer.
fn ask_target(target: &str, socket: Option<&Path>, op: Op) -> Result<Reply, PsError> {
    let dir = rendezvous::dir();
    match socket {
        Some(p) => Ok((
            p.to_path_buf(),
            target.parse::<u32>().is_err().then(|| target.to_string()),
        )),
        None => resolve(&dir, target),
    }
    .and_then(|(path, job)| ask(&path, &request(op, job)))
}
