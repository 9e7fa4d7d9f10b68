//! Command line of the launcher, mpiexec-style.
//!
//! `fastpmi [global options] [-n N] [-env K V] [-wdir D] PROG ARGS... [: -n M PROG2 ARGS...]`
//! Parsed by hand: clap cannot express MPMD `:` sections with per-section
//! options and two-value flags such as `-genv K V`.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::launcher::placement::{self, PlacementOpts};
use crate::shm::MemPool;

pub const USAGE: &str = "\
usage: fastpmi [options] [-n N] PROG [ARGS...] [: [-n M] PROG2 [ARGS...]]...
       fastpmi demo [-n N] [options]
       fastpmi nameserver [--port P] [--bind ADDR]
       fastpmi ps [PID|JOBID] [--json]
       fastpmi release PID|JOBID

Launch N ranks of PROG on this node with a PMI-1/PMI-2 server (MPICH,
Intel MPI and Slurm's libpmi2 clients run unmodified). Each `:` section is
one application of an MPMD job (appnum 0, 1, ...); all sections form one job.

Options (global, before the first program):
  -genv K V         set K=V in every rank's environment (repeatable)
  -l, --label       prefix every output line with [rank]
  --pmi-port        serve PMI on a TCP port on 127.0.0.1 (PMI_PORT/PMI_ID)
                    instead of an inherited socket (PMI_FD). Each job gets a
                    random secret (FASTPMI_AUTH_SECRET); a connection must
                    authenticate with it, or come from loopback, from this
                    user, and from the process started as the rank it claims
  --pmi-port-bind ADDR
                    port mode listening on ADDR (e.g. an address other nodes
                    reach); connections from elsewhere must authenticate
  --mem-pool P      memory of the job segment that fastpmi clients use for
                    put/get/fence: anonmmap (memfd, default), sysv, or none
                    (no segment: everything over the socket)
  --kvs-mb MB       size the segment's key-value store to MB MiB (default:
                    from the rank count)
  --stats           print, at job end, how many puts, gets, fences and
                    node-attribute operations each transport served
  --tolerate-group-failures
                    a rank that dies while a member of a process group
                    fails its groups (the other members get an error naming
                    it) instead of its whole job
  --stop-in-init    hold every rank inside PMI init until `fastpmi release`
                    (or a debugger continues from MPIR_Breakpoint)
  --fence-timeout SECS
                    fail the job, with a report of the missing ranks, when a
                    fence or node-attribute wait stays incomplete that long
                    (also FASTPMI_FENCE_TIMEOUT)
  -bind-to OBJ[:N]  bind each rank to N (default 1) objects of OBJ: none,
                    hwthread, core, l1cache, l2cache, l3cache, numa, socket.
                    More ranks than objects wrap around (rank r gets
                    object r mod count). Default: core when there are no
                    more ranks than cores, else none (docs/placement.md).
                    Also --bind-to
  -map-by OBJ       place consecutive ranks round-robin over OBJ objects
                    (default: the -bind-to object). Also --map-by
  -ppn N            ranks per node (one node: accepted, no effect)
  --print-bindings  print each rank's CPU list on stderr at start
                    (also --report-bindings)
  -v, --verbose     on failure, also print every rank's state, last PMI
                    operation and fence count
  --nameserver HOST:PORT
                    publish and look up names (MPI_Publish_name,
                    MPI_Lookup_name) in a `fastpmi nameserver` shared with
                    other launchers, instead of this launcher's own table
  -h, --help        this help
  -V, --version     print the version

Options (per section, before its program):
  -n, -np N         number of ranks of this section (default 1)
  -env K V          set K=V for the ranks of this section (repeatable)
  -wdir DIR         working directory of this section's ranks
  --pset NAME[,NAME...]
                    put this section's ranks in the named process sets (job
                    attributes psetNames, pset:NAME, mypsets; repeatable)

Environment:
  FASTPMI_LOG=debug log every PMI command and reply with its rank (stderr)
  FASTPMI_FENCE_TIMEOUT=SECS  as --fence-timeout

`fastpmi ps` lists this user's running launchers; `fastpmi ps PID|JOBID`
prints one row per rank (pid, PMI transport, state and for how long, last
PMI operation, fences) and what each job waits for; --json for tools.
SIGUSR1 to a launcher prints the same report on its stderr.
`fastpmi release PID|JOBID` lets ranks held by --stop-in-init go on.

Ranks may spawn new jobs (MPI_Comm_spawn); the launcher exits when every
job has ended. A failing rank ends its job and every job connected to it.

`fastpmi nameserver` serves names to launchers started with --nameserver
(default port 6392, address 127.0.0.1) and prints the address it listens on.

Exit status: 0 when every rank exits 0; otherwise the first failing rank's
exit code (128+signal when a signal killed it), with one line on stderr
naming the rank. SIGINT/SIGTERM are forwarded to the ranks.";

/// One MPMD section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct App {
    pub nranks: u32,
    pub program: OsString,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub wdir: Option<PathBuf>,
    /// Process sets this section's ranks belong to (`--pset`).
    pub psets: Vec<String>,
}

/// Everything the launcher needs to run a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchConfig {
    pub apps: Vec<App>,
    pub genv: Vec<(OsString, OsString)>,
    pub label: bool,
    pub pmi_port: bool,
    /// Port mode: address to listen on (default 127.0.0.1); clients from
    /// elsewhere must authenticate.
    pub pmi_port_bind: Option<std::net::IpAddr>,
    /// Memory behind the job segment; `None`: no segment, socket only.
    pub mem_pool: Option<MemPool>,
    /// Override of the segment's KVS size in MiB.
    pub kvs_mb: Option<u64>,
    /// Print per-transport operation counts at job end.
    pub stats: bool,
    /// Address of a shared `fastpmi nameserver`.
    pub nameserver: Option<String>,
    /// A group member's death fails its groups, not its job.
    pub tolerate_group_failures: bool,
    /// Hold every rank inside PMI init until released.
    pub stop_in_init: bool,
    /// Fail a job whose fence stays incomplete this long.
    pub fence_timeout: Option<std::time::Duration>,
    /// Failure details: every rank's state, last operation, fences.
    pub verbose: bool,
    /// `-bind-to`, `-map-by`, `-ppn`, `--print-bindings`.
    pub placement: PlacementOpts,
}

impl Default for LaunchConfig {
    fn default() -> Self {
        LaunchConfig {
            apps: Vec::new(),
            genv: Vec::new(),
            label: false,
            pmi_port: false,
            pmi_port_bind: None,
            mem_pool: Some(MemPool::AnonMmap),
            kvs_mb: None,
            stats: false,
            nameserver: None,
            tolerate_group_failures: false,
            stop_in_init: false,
            fence_timeout: None,
            verbose: false,
            placement: PlacementOpts::default(),
        }
    }
}

impl LaunchConfig {
    pub fn world_size(&self) -> u32 {
        self.apps.iter().map(|a| a.nranks).sum()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Run(LaunchConfig),
    Demo {
        nranks: u32,
        cfg: LaunchConfig,
    },
    /// Internal: a rank of `fastpmi demo`.
    DemoRank,
    /// A name server shared by launchers.
    NameServer {
        bind: String,
        port: u16,
    },
    /// `fastpmi ps [PID|JOBID] [--json] [--socket PATH]`.
    Ps {
        target: Option<String>,
        json: bool,
        socket: Option<PathBuf>,
    },
    /// `fastpmi release PID|JOBID [--socket PATH]`.
    Release {
        target: String,
        socket: Option<PathBuf>,
    },
    Help,
    Version,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CliError(pub String);

/// Largest job a single launcher accepts (fds and memory grow with it).
pub const MAX_RANKS: u32 = 65536;

fn parse_count(flag: &str, v: Option<OsString>) -> Result<u32, CliError> {
    let v = v.ok_or_else(|| CliError(format!("{flag} needs a number of ranks")))?;
    let s = v.to_string_lossy();
    match s.parse::<u32>() {
        Ok(0) => Err(CliError(format!("{flag} {s}: need at least 1 rank"))),
        Ok(n) if n > MAX_RANKS => Err(CliError(format!("{flag} {s}: at most {MAX_RANKS} ranks"))),
        Ok(n) => Ok(n),
        Err(_) => Err(CliError(format!("{flag} {s}: not a number of ranks"))),
    }
}

fn kv(
    flag: &str,
    it: &mut impl Iterator<Item = OsString>,
) -> Result<(OsString, OsString), CliError> {
    let k = it
        .next()
        .ok_or_else(|| CliError(format!("{flag} needs a name and a value")))?;
    let v = it
        .next()
        .ok_or_else(|| CliError(format!("{flag} {} needs a value", k.to_string_lossy())))?;
    if k.is_empty() || k.to_string_lossy().contains('=') {
        return Err(CliError(format!(
            "{flag}: bad variable name {:?}",
            k.to_string_lossy()
        )));
    }
    Ok((k, v))
}

/// Parse the arguments after the program name.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Command, CliError> {
    let mut it = args.into_iter().peekable();
    match it.peek().and_then(|a| a.to_str()) {
        Some("demo") => {
            it.next();
            return parse_demo(it);
        }
        Some("__demo-rank") => return Ok(Command::DemoRank),
        Some("nameserver") => {
            it.next();
            return parse_nameserver(it);
        }
        Some(cmd @ ("ps" | "release")) => {
            let release = cmd == "release";
            it.next();
            return parse_tool(release, it);
        }
        _ => {}
    }
    let mut cfg = LaunchConfig::default();
    let mut app = App {
        nranks: 1,
        program: OsString::new(),
        args: vec![],
        env: vec![],
        wdir: None,
        psets: vec![],
    };
    let mut nranks_given = false;
    while let Some(arg) = it.next() {
        let s = arg.to_string_lossy().into_owned();
        match s.as_str() {
            "-h" | "--help" | "-help" => return Ok(Command::Help),
            "-V" | "--version" => return Ok(Command::Version),
            "-n" | "-np" | "--np" => {
                app.nranks = parse_count(&s, it.next())?;
                nranks_given = true;
            }
            "-env" => app.env.push(kv(&s, &mut it)?),
            "-wdir" | "-dir" => {
                let d = it
                    .next()
                    .ok_or_else(|| CliError(format!("{s} needs a directory")))?;
                app.wdir = Some(PathBuf::from(d));
            }
            "--pset" | "-pset" => {
                let v = it
                    .next()
                    .ok_or_else(|| CliError(format!("{s} needs a process set name")))?;
                for name in v.to_string_lossy().split(',') {
                    crate::launcher::psets::check_name(name)
                        .map_err(|e| CliError(format!("{s}: {e}")))?;
                    if !app.psets.iter().any(|p| p == name) {
                        app.psets.push(name.to_string());
                    }
                }
            }
            _ if global_option(&mut cfg, &s, &mut it)? => {}
            ":" => return Err(CliError("':' without a program before it".into())),
            _ if s.starts_with('-') && s.len() > 1 => {
                return Err(CliError(format!("unknown option {s} (see fastpmi --help)")));
            }
            _ => {
                app.program = arg;
                // Everything up to the next ':' belongs to the program.
                for a in it.by_ref() {
                    if a == ":" {
                        break;
                    }
                    app.args.push(a);
                }
                let _ = nranks_given;
                cfg.apps.push(std::mem::replace(
                    &mut app,
                    App {
                        nranks: 1,
                        program: OsString::new(),
                        args: vec![],
                        env: vec![],
                        wdir: None,
                        psets: vec![],
                    },
                ));
                nranks_given = false;
            }
        }
    }
    if !app.program.is_empty()
        || nranks_given
        || !app.env.is_empty()
        || app.wdir.is_some()
        || !app.psets.is_empty()
    {
        if cfg.apps.is_empty() {
            return Err(CliError("no program to run (see fastpmi --help)".into()));
        }
        return Err(CliError(
            "options after the last ':' section without a program".into(),
        ));
    }
    if cfg.apps.is_empty() {
        return Err(CliError("no program to run (see fastpmi --help)".into()));
    }
    if cfg.fence_timeout.is_none() {
        if let Some(v) = std::env::var_os("FASTPMI_FENCE_TIMEOUT").filter(|v| !v.is_empty()) {
            cfg.fence_timeout = Some(parse_secs("FASTPMI_FENCE_TIMEOUT", &v.to_string_lossy())?);
        }
    }
    let total: u64 = cfg.apps.iter().map(|a| a.nranks as u64).sum();
    if total > MAX_RANKS as u64 {
        return Err(CliError(format!(
            "{total} ranks in all: at most {MAX_RANKS}"
        )));
    }
    Ok(Command::Run(cfg))
}

/// Options that apply to the whole launch (accepted by `demo` too).
/// Returns false when `s` is not one of them.
fn global_option(
    cfg: &mut LaunchConfig,
    s: &str,
    mut it: &mut impl Iterator<Item = OsString>,
) -> Result<bool, CliError> {
    match s {
        "-genv" => cfg.genv.push(kv(s, &mut it)?),
        "-l" | "--label" | "-prepend-rank" => cfg.label = true,
        "--pmi-port" | "-pmi-port" => cfg.pmi_port = true,
        "--pmi-port-bind" => {
            let v = it
                .next()
                .ok_or_else(|| CliError("--pmi-port-bind needs an address".into()))?;
            let v = v.to_string_lossy();
            cfg.pmi_port_bind = Some(
                v.parse()
                    .map_err(|_| CliError(format!("--pmi-port-bind {v}: not an IP address")))?,
            );
            cfg.pmi_port = true;
        }
        "--stats" => cfg.stats = true,
        "-bind-to" | "--bind-to" | "-binding" => {
            let v = it
                .next()
                .ok_or_else(|| CliError(format!("{s} needs an object (core, none, ...)")))?;
            cfg.placement.bind_to =
                Some(placement::parse_bind(&v.to_string_lossy()).map_err(CliError)?);
        }
        "-map-by" | "--map-by" => {
            let v = it
                .next()
                .ok_or_else(|| CliError(format!("{s} needs an object (core, socket, ...)")))?;
            cfg.placement.map_by =
                Some(placement::parse_map(&v.to_string_lossy()).map_err(CliError)?);
        }
        "-ppn" | "--ppn" | "-perhost" => {
            let v = it.next().map(|v| v.to_string_lossy().into_owned());
            match v.as_deref().map(str::parse::<u32>) {
                Some(Ok(n)) if (1..=MAX_RANKS).contains(&n) => cfg.placement.ppn = Some(n),
                _ => {
                    return Err(CliError(format!(
                        "{s} {}: expected a number of ranks per node",
                        v.unwrap_or_default()
                    )))
                }
            }
        }
        "--print-bindings" | "-print-bindings" | "--report-bindings" => cfg.placement.print = true,
        "--tolerate-group-failures" => cfg.tolerate_group_failures = true,
        "--stop-in-init" => cfg.stop_in_init = true,
        "-v" | "--verbose" => cfg.verbose = true,
        "--fence-timeout" => {
            let v = it
                .next()
                .ok_or_else(|| CliError("--fence-timeout needs a number of seconds".into()))?;
            cfg.fence_timeout = Some(parse_secs(s, &v.to_string_lossy())?);
        }
        "--nameserver" | "-nameserver" => {
            let v = it
                .next()
                .ok_or_else(|| CliError(format!("{s} needs HOST:PORT")))?;
            let v = v.to_string_lossy().into_owned();
            match v.rsplit_once(':') {
                Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0) => {}
                _ => return Err(CliError(format!("{s} {v}: expected HOST:PORT"))),
            }
            cfg.nameserver = Some(v);
        }
        "--mem-pool" => {
            let v = it
                .next()
                .ok_or_else(|| CliError("--mem-pool needs anonmmap, sysv or none".into()))?;
            let v = v.to_string_lossy();
            cfg.mem_pool = match v.as_ref() {
                "none" => None,
                other => Some(MemPool::parse(other).ok_or_else(|| {
                    CliError(format!(
                        "--mem-pool {other}: expected anonmmap, sysv or none"
                    ))
                })?),
            };
        }
        "--kvs-mb" => {
            let v = it
                .next()
                .ok_or_else(|| CliError("--kvs-mb needs a size in MiB".into()))?;
            let v = v.to_string_lossy();
            match v.parse::<u64>() {
                Ok(mb) if (1..=1 << 20).contains(&mb) => cfg.kvs_mb = Some(mb),
                _ => {
                    return Err(CliError(format!(
                        "--kvs-mb {v}: expected a size in MiB (1 to 1048576)"
                    )))
                }
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// A positive number of seconds (fractions allowed), at most a day.
fn parse_secs(what: &str, v: &str) -> Result<std::time::Duration, CliError> {
    match v.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 86400.0 => Ok(std::time::Duration::from_secs_f64(s)),
        _ => Err(CliError(format!(
            "{what} {v}: expected a number of seconds (more than 0, at most 86400)"
        ))),
    }
}

/// `ps [PID|JOBID] [--json] [--socket PATH]`, `release PID|JOBID [--socket PATH]`.
fn parse_tool(release: bool, mut it: impl Iterator<Item = OsString>) -> Result<Command, CliError> {
    let name = if release { "release" } else { "ps" };
    let (mut target, mut json, mut socket) = (None, false, None);
    while let Some(arg) = it.next() {
        let s = arg.to_string_lossy().into_owned();
        match s.as_str() {
            "--json" if !release => json = true,
            "--socket" => {
                socket = Some(PathBuf::from(
                    it.next()
                        .ok_or_else(|| CliError("--socket needs a path".into()))?,
                ))
            }
            "-h" | "--help" => return Ok(Command::Help),
            _ if s.starts_with('-') => {
                return Err(CliError(format!("{name}: unknown option {s}")));
            }
            _ if target.is_none() => target = Some(s),
            _ => return Err(CliError(format!("{name}: unexpected argument {s}"))),
        }
    }
    if release {
        let target =
            target.ok_or_else(|| CliError("release needs a launcher pid or a job id".into()))?;
        return Ok(Command::Release { target, socket });
    }
    Ok(Command::Ps {
        target,
        json,
        socket,
    })
}

/// Default port of `fastpmi nameserver` (Hydra's name server uses the same).
pub const NAMESERVER_PORT: u16 = 6392;

fn parse_nameserver(mut it: impl Iterator<Item = OsString>) -> Result<Command, CliError> {
    let mut port = NAMESERVER_PORT;
    let mut bind = "127.0.0.1".to_string();
    while let Some(arg) = it.next() {
        let s = arg.to_string_lossy().into_owned();
        match s.as_str() {
            "--port" | "-port" => {
                let v = it.next().map(|v| v.to_string_lossy().into_owned());
                port = v.as_deref().and_then(|v| v.parse().ok()).ok_or_else(|| {
                    CliError(format!(
                        "--port {}: expected a port number (0 picks a free one)",
                        v.unwrap_or_default()
                    ))
                })?;
            }
            "--bind" => {
                bind = it
                    .next()
                    .ok_or_else(|| CliError("--bind needs an address".into()))?
                    .to_string_lossy()
                    .into_owned();
            }
            "-h" | "--help" => return Ok(Command::Help),
            _ => {
                return Err(CliError(format!(
                    "nameserver: unknown argument {s} (usage: fastpmi nameserver [--port P] [--bind ADDR])"
                )))
            }
        }
    }
    Ok(Command::NameServer { bind, port })
}

fn parse_demo(mut it: impl Iterator<Item = OsString>) -> Result<Command, CliError> {
    let mut nranks = 16;
    let mut cfg = LaunchConfig::default();
    while let Some(arg) = it.next() {
        let s = arg.to_string_lossy().into_owned();
        match s.as_str() {
            "-n" | "-np" => nranks = parse_count(&s, it.next())?,
            "-h" | "--help" => return Ok(Command::Help),
            _ if global_option(&mut cfg, &s, &mut it)? => {}
            _ => {
                return Err(CliError(format!(
                    "demo: unknown argument {s} (usage: fastpmi demo [-n N] [launcher options])"
                )))
            }
        }
    }
    Ok(Command::Demo { nranks, cfg })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Command, CliError> {
        parse(s.split_whitespace().map(OsString::from))
    }

    #[test]
    fn simple_and_mpmd() {
        let Command::Run(c) =
            p("-n 4 -genv A 1 -l ./a x y : -n 3 -env B 2 -wdir /tmp ./b").unwrap()
        else {
            panic!()
        };
        assert_eq!(c.apps.len(), 2);
        assert_eq!(
            (c.apps[0].nranks, c.apps[0].program.to_str()),
            (4, Some("./a"))
        );
        assert_eq!(
            c.apps[0].args,
            vec![OsString::from("x"), OsString::from("y")]
        );
        assert_eq!(c.apps[1].nranks, 3);
        assert_eq!(
            c.apps[1].env,
            vec![(OsString::from("B"), OsString::from("2"))]
        );
        assert_eq!(c.apps[1].wdir, Some(PathBuf::from("/tmp")));
        assert_eq!(c.genv, vec![(OsString::from("A"), OsString::from("1"))]);
        assert!(c.label);
        assert_eq!(c.world_size(), 7);
    }

    #[test]
    fn program_args_may_look_like_options() {
        let Command::Run(c) = p("-np 2 prog -n 5 --label").unwrap() else {
            panic!()
        };
        assert_eq!(c.apps[0].nranks, 2);
        assert_eq!(c.apps[0].args.len(), 3);
        assert!(!c.label);
    }

    #[test]
    fn errors() {
        for bad in [
            "",
            "-n",
            "-n x ./a",
            "-n 0 ./a",
            "-genv A",
            "--frob ./a",
            "-n 2",
            "./a : -n 2",
            ": ./a",
        ] {
            assert!(p(bad).is_err(), "{bad:?} should fail");
        }
        assert_eq!(
            p("demo -n 8").unwrap(),
            Command::Demo {
                nranks: 8,
                cfg: LaunchConfig::default()
            }
        );
        let Command::Demo { cfg, .. } = p("demo --stats --mem-pool sysv -n 2").unwrap() else {
            panic!()
        };
        assert!(cfg.stats && cfg.mem_pool == Some(MemPool::Sysv));
        assert_eq!(p("--help").unwrap(), Command::Help);
        assert_eq!(
            p("nameserver --port 0").unwrap(),
            Command::NameServer {
                bind: "127.0.0.1".into(),
                port: 0
            }
        );
        assert!(p("nameserver --port x").is_err());
        assert!(p("--nameserver nohostport ./a").is_err());
        let Command::Run(c) = p("--nameserver localhost:7000 ./a").unwrap() else {
            panic!()
        };
        assert_eq!(c.nameserver.as_deref(), Some("localhost:7000"));
    }

    #[test]
    fn psets() {
        let Command::Run(c) = p(
            "--tolerate-group-failures -n 4 --pset ocean,all ./o : -n 3 --pset ice --pset all ./i",
        )
        .unwrap() else {
            panic!()
        };
        assert!(c.tolerate_group_failures);
        assert_eq!(c.apps[0].psets, vec!["ocean", "all"]);
        assert_eq!(c.apps[1].psets, vec!["ice", "all"]);
        let sets = crate::launcher::psets::of_config(&c);
        assert_eq!(
            sets,
            vec![
                ("ocean".to_string(), vec![0, 1, 2, 3]),
                ("all".to_string(), (0..7).collect()),
                ("ice".to_string(), vec![4, 5, 6]),
            ]
        );
        for bad in [
            "--pset ./a",
            "--pset a;b ./a",
            "--pset a,,b ./a",
            "./a : --pset x",
        ] {
            assert!(p(bad).is_err(), "{bad:?} should fail");
        }
        let long = format!("--pset {} ./a", "x".repeat(60));
        assert!(p(&long).is_err());
    }
}
