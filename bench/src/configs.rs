//! The configurations the harness compares, the tools each needs, and the
//! command line of one run of each.
//!
//! A configuration whose tool is missing is never dropped: [`Tools::missing`]
//! gives the reason the report prints in its place.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::launch::LaunchTools;
use super::placement;
use super::proc::{MemProbe, Spec};
use super::rank::FENCE_LOOP_ENV;

/// Sources shipped inside the binary, so the harness works from any
/// directory and always measures the programs of this checkout.
const PMI2_EXCHANGE_C: &str = include_str!("../c/pmi2_exchange.c");
const FUTEX_FLOOR_C: &str = include_str!("../c/futex_barrier_floor.c");
const MPI_HELLO_C: &str = include_str!("../c/mpi_hello.c");
const MPI_SPAWN_C: &str = include_str!("../c/mpi_spawn.c");

/// Environment of the spawn runs, for both launchers: MPICH 5's default
/// UCX netmod fails spawns of 64 children on this kind of machine under
/// its own launcher too (shared-memory segments of exited peers); the ofi
/// netmod does not.
const SPAWN_ENV: &[(&str, &str)] = &[("MPIR_CVAR_CH4_NETMOD", "ofi"), ("FI_PROVIDER", "tcp")];
/// Parent ranks of the spawn runs.
pub const SPAWN_PARENTS: u32 = 2;

/// Where the MPI venvs are: `$FASTPMI_VENVS`, else the `target/venvs`
/// that `scripts/install-mpi-stacks` makes in this checkout (the workspace
/// root, one level above this crate).
fn venvs_dir() -> PathBuf {
    std::env::var_os("FASTPMI_VENVS")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let here = Path::new(env!("CARGO_MANIFEST_DIR"));
            here.parent().unwrap_or(here).join("target/venvs")
        })
}

/// The venv `name` if it has every file of `need`.
pub fn venv(name: &str, need: &[&str]) -> Result<PathBuf, String> {
    let v = venvs_dir().join(name);
    match need.iter().find(|f| !v.join(f).is_file()) {
        None => Ok(v),
        Some(f) => Err(format!(
            "no {} (run scripts/install-mpi-stacks)",
            v.join(f).display()
        )),
    }
}

/// The MPICH 5 wheel's venv.
fn mpich5_venv() -> Result<PathBuf, String> {
    venv("mpich5", &["bin/mpicc", "bin/mpiexec"])
}

/// Where Slurm's PMI-2 header lives on Debian (package libpmi2-0-dev).
pub const SLURM_INCLUDE: &str = "/usr/include/slurm";

/// What a configuration measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The business-card exchange; rank 0 prints a key=value line.
    Exchange,
    /// The futex barrier floor (per-fence time only).
    Floor,
    /// MPICH startup: whole-job wall time only.
    Startup,
    /// `MPI_Comm_spawn` latency (N = children), MPICH 5 wheel.
    Spawn,
    /// Job start-up against the posix_spawn floor: whole-run wall time.
    Launch,
    /// A 64-member group fence inside a larger job (N = job size).
    Group,
    /// `fastpmi ps`: the steady fence loop with and without it polling, and
    /// its answers while a job sits in a fence.
    Ps,
    /// Whole MPI jobs, fastpmi vs each stack's own launcher (wall time).
    Placement,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Config {
    FastpmiShm,
    FastpmiSocket,
    Hydra,
    SlurmPmi2,
    FutexFloor,
    MpichFastpmi,
    MpichHydra,
    SpawnFastpmi,
    SpawnHydra5,
    LaunchFloor,
    LaunchFastpmi,
    LaunchShm,
    LaunchSocket,
    LaunchHydra,
    LaunchHydraPmi,
    GroupFence,
    PsQuiet,
    PsPolled,
    PsSitting,
    /// A row of [`placement::CASES`] (index).
    Placement(u8),
}

/// The configurations outside the families that keep their own list: the
/// PMI exchange, MPICH start-up and spawn rows.
const CORE: [Config; 9] = [
    Config::FastpmiShm,
    Config::FastpmiSocket,
    Config::Hydra,
    Config::SlurmPmi2,
    Config::FutexFloor,
    Config::MpichFastpmi,
    Config::MpichHydra,
    Config::SpawnFastpmi,
    Config::SpawnHydra5,
];

/// The families' own lists, in the report's order after [`CORE`].
const FAMILIES: [&[Config]; 3] = [
    &super::launch::CONFIGS,
    &super::groups::CONFIGS,
    &super::ps::CONFIGS,
];

const fn families_len() -> usize {
    let mut n = 0;
    let mut f = 0;
    while f < FAMILIES.len() {
        n += FAMILIES[f].len();
        f += 1;
    }
    n
}

const COUNT: usize = CORE.len() + families_len() + placement::COUNT;

impl Config {
    pub const ALL: [Config; COUNT] = {
        let mut all = [Config::FastpmiShm; COUNT];
        let mut i = 0;
        while i < CORE.len() {
            all[i] = CORE[i];
            i += 1;
        }
        let mut f = 0;
        while f < FAMILIES.len() {
            let mut j = 0;
            while j < FAMILIES[f].len() {
                all[i] = FAMILIES[f][j];
                i += 1;
                j += 1;
            }
            f += 1;
        }
        let mut p = 0;
        while i < COUNT {
            all[i] = Config::Placement(p);
            i += 1;
            p += 1;
        }
        all
    };

    pub fn name(self) -> &'static str {
        match self {
            Config::FastpmiShm => "fastpmi-shm",
            Config::FastpmiSocket => "fastpmi-socket",
            Config::Hydra => "hydra",
            Config::SlurmPmi2 => "slurm-pmi2@fastpmi",
            Config::FutexFloor => "futex-floor",
            Config::MpichFastpmi => "mpich@fastpmi",
            Config::MpichHydra => "mpich@hydra",
            Config::SpawnFastpmi => "spawn@fastpmi",
            Config::SpawnHydra5 => "spawn@hydra5",
            Config::LaunchFloor => "launch-floor",
            Config::LaunchFastpmi => "launch@fastpmi",
            Config::LaunchShm => "pmi2-min@fastpmi-shm",
            Config::LaunchSocket => "pmi2-min@fastpmi-socket",
            Config::LaunchHydra => "launch@hydra",
            Config::LaunchHydraPmi => "pmi2-min@hydra",
            Config::GroupFence => "group64@fastpmi-shm",
            Config::PsQuiet => "fence-loop@fastpmi-shm",
            Config::PsPolled => "fence-loop+ps@fastpmi-shm",
            Config::PsSitting => "fence-sitting+ps@fastpmi-shm",
            Config::Placement(i) => placement::CASES[i as usize].name,
        }
    }

    pub fn kind(self) -> Kind {
        match self {
            Config::FutexFloor => Kind::Floor,
            Config::MpichFastpmi | Config::MpichHydra => Kind::Startup,
            Config::SpawnFastpmi | Config::SpawnHydra5 => Kind::Spawn,
            Config::LaunchFloor
            | Config::LaunchFastpmi
            | Config::LaunchShm
            | Config::LaunchSocket
            | Config::LaunchHydra
            | Config::LaunchHydraPmi => Kind::Launch,
            Config::GroupFence => Kind::Group,
            Config::PsQuiet | Config::PsPolled | Config::PsSitting => Kind::Ps,
            Config::Placement(_) => Kind::Placement,
            _ => Kind::Exchange,
        }
    }

    /// The transport rank 0 must report for the run to count (the Rust
    /// client's configurations only).
    pub fn expected_transport(self) -> Option<&'static str> {
        match self {
            Config::FastpmiShm | Config::PsQuiet | Config::PsPolled | Config::PsSitting => {
                Some("shm")
            }
            Config::FastpmiSocket | Config::Hydra => Some("socket"),
            _ => None,
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Config::FastpmiShm => {
                "fastpmi launcher, Rust client, shared-memory path (must report transport=shm)"
            }
            Config::FastpmiSocket => {
                "fastpmi launcher, Rust client forced onto the socket (FASTPMI_TRANSPORT=socket)"
            }
            Config::Hydra => {
                "MPICH's Hydra launcher, the same Rust rank program over PMI-2 on PMI_FD"
            }
            Config::SlurmPmi2 => {
                "fastpmi launcher, bench/c/pmi2_exchange.c linked against Slurm's libpmi2 (socket)"
            }
            Config::FutexFloor => {
                "bench/c/futex_barrier_floor.c: N forked processes, futex barrier, per-fence time"
            }
            Config::MpichFastpmi => "bench/c/mpi_hello.c (MPICH) under fastpmi",
            Config::MpichHydra => "bench/c/mpi_hello.c (MPICH) under Hydra",
            Config::SpawnFastpmi => "bench/c/mpi_spawn.c (MPICH 5 wheel) under fastpmi",
            Config::SpawnHydra5 => "bench/c/mpi_spawn.c (MPICH 5 wheel) under its Hydra 5",
            Config::LaunchFloor => {
                "(a) bench/c/spawn_floor.c: posix_spawn and reap N trivial processes"
            }
            Config::LaunchFastpmi => "(b) fastpmi -n N of a trivial C program (no PMI)",
            Config::LaunchShm => {
                "(c) bench/c/pmi2_minimal.c on fastpmi's installed libpmi2.so.0 (shared memory)"
            }
            Config::LaunchSocket => {
                "(d) bench/c/pmi2_minimal.c on Slurm's libpmi2 under fastpmi (socket)"
            }
            Config::LaunchHydra => "(e) Hydra (mpiexec.hydra) of the trivial program",
            Config::LaunchHydraPmi => "(e) Hydra of bench/c/pmi2_minimal.c on Slurm's libpmi2",
            Config::GroupFence => {
                "fastpmi, Rust client, shared memory: a 64-member group fence in an N-rank job"
            }
            Config::PsQuiet => {
                "fastpmi, Rust client, shared memory: exchange and 1000 steady fences"
            }
            Config::PsPolled => "the same with `fastpmi ps PID --json` every 100 ms during the job",
            Config::PsSitting => {
                "the exchange with the last rank 4 s late (N-1 ranks sit in fence 1), `fastpmi ps PID --json` every 100 ms"
            }
            Config::Placement(_) => {
                "bench/c/mpi_hello.c or mpi_allreduce.c (Intel MPI, MPICH 4, MPICH 5): whole job"
            }
        }
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether the rank program reported the shared-memory transport. The
/// variant name is not settled yet (`Shm`, `SharedMemory`, ...).
pub fn is_shm_transport(t: &str) -> bool {
    t == "shm" || t.contains("shm") || t.contains("shared")
}

/// Everything found or built before the first run.
#[derive(Debug, Clone)]
pub struct Tools {
    pub rank_exe: PathBuf,
    pub fastpmi: Result<PathBuf, String>,
    pub hydra: Result<PathBuf, String>,
    pub pmi2_exchange: Result<PathBuf, String>,
    pub floor: Result<PathBuf, String>,
    pub mpi_hello: Result<PathBuf, String>,
    /// `mpi_spawn` built with the MPICH 5 wheel, and that wheel's mpiexec.
    pub mpi_spawn: Result<PathBuf, String>,
    pub hydra5: Result<PathBuf, String>,
    /// The job start-up configurations' programs.
    pub launch: LaunchTools,
    /// Programs and launchers of the placement rows.
    pub placement: placement::Tools,
    /// One-line versions of the peers, for the report.
    pub versions: Vec<String>,
}

/// `name` on `PATH`, as an executable file.
pub fn which(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| {
            p.metadata()
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

fn last_lines(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" / ")
}

/// Write `source` as `dir/name.c` and compile it to `dir/name`.
pub fn compile(
    compiler: &str,
    dir: &Path,
    name: &str,
    source: &str,
    extra: &[&str],
) -> Result<PathBuf, String> {
    let cc = which(compiler).ok_or_else(|| format!("{compiler} not found on PATH"))?;
    let src = dir.join(format!("{name}.c"));
    let exe = dir.join(name);
    std::fs::write(&src, source).map_err(|e| format!("write {}: {e}", src.display()))?;
    let mut cmd = Command::new(&cc);
    // Libraries (-l) must follow the source that uses them.
    cmd.arg("-O2").arg("-o").arg(&exe).arg(&src).args(extra);
    let out = cmd.output().map_err(|e| format!("{}: {e}", cc.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{compiler} failed on {name}.c ({}): {}",
            out.status,
            last_lines(&String::from_utf8_lossy(&out.stderr), 3)
        ));
    }
    Ok(exe)
}

fn first_line_of(cmd: &Path, args: &[&str], pick: impl Fn(&str) -> bool) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    text.lines()
        .find(|l| pick(l))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Under `cargo run` (which builds only the binary it runs), bring the
/// `fastpmi` binary next to us up to date with the same profile, so the
/// harness never measures a launcher older than the checkout. Returns a note
/// for the report, or None when not run by cargo.
fn build_launcher(exe_dir: &Path) -> Option<Result<String, String>> {
    let cargo = std::env::var_os("CARGO")?;
    // The launcher is the workspace root's package; this crate sits in bench/.
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR")?).join("../Cargo.toml");
    if !manifest.is_file() {
        return None;
    }
    let mut cmd = Command::new(&cargo);
    cmd.arg("build").arg("--manifest-path").arg(&manifest);
    // The profile is the name of the directory we were built into.
    match exe_dir.file_name().and_then(|n| n.to_str()) {
        Some("release") => {
            cmd.arg("--release");
        }
        Some("debug") | None => {}
        Some(other) => {
            cmd.args(["--profile", other]);
        }
    }
    cmd.args(["--bin", "fastpmi"]);
    eprintln!("fastpmi-bench: building the launcher: {cmd:?}");
    Some(match cmd.output() {
        Ok(o) if o.status.success() => {
            Ok("fastpmi built by the harness (cargo build --bin fastpmi) before the runs".into())
        }
        Ok(o) => Err(format!(
            "cargo build --bin fastpmi failed ({}): {}",
            o.status,
            last_lines(&String::from_utf8_lossy(&o.stderr), 3)
        )),
        Err(e) => Err(format!("cannot run cargo: {e}")),
    })
}

/// A note when the launcher binary is clearly older than this one (built
/// separately, e.g. only `cargo build -p fastpmi-bench`).
fn staleness(fastpmi: &Path, me: &Path) -> Option<String> {
    let age = |p: &Path| p.metadata().and_then(|m| m.modified()).ok();
    let gap = age(me)?.duration_since(age(fastpmi)?).ok()?;
    (gap > Duration::from_secs(60)).then(|| {
        format!(
            "warning: the fastpmi binary is {} s older than fastpmi-bench; if the launcher changed since, rebuild it (cargo build --release --workspace)",
            gap.as_secs()
        )
    })
}

impl Tools {
    /// Locate the launchers and compile the C programs into `build_dir`.
    /// `want` says which configurations will run (nothing else is built).
    pub fn prepare(build_dir: &Path, want: &[Config]) -> Result<Tools, String> {
        let rank_exe =
            std::env::current_exe().map_err(|e| format!("cannot find my own binary: {e}"))?;
        // `cargo build --release --workspace` builds fastpmi next to fastpmi-bench.
        let exe_dir = rank_exe.parent().unwrap_or(Path::new(".")).to_path_buf();
        let mut notes = Vec::new();
        let built = build_launcher(&exe_dir);
        let fastpmi = match built {
            Some(Err(ref e)) => Err(e.clone()),
            _ => Some(exe_dir.join("fastpmi"))
                .filter(|p| p.is_file())
                .ok_or_else(|| {
                    format!(
                        "no fastpmi binary next to {} (build it: cargo build --release --workspace)",
                        rank_exe.display()
                    )
                }),
        };
        match (&built, &fastpmi) {
            (Some(Ok(note)), _) => notes.push(note.clone()),
            (None, Ok(f)) => notes.extend(staleness(f, &rank_exe)),
            _ => {}
        }
        let hydra = which("mpiexec.hydra")
            .ok_or_else(|| "mpiexec.hydra not found on PATH (Debian package mpich)".to_string());
        std::fs::create_dir_all(build_dir)
            .map_err(|e| format!("create {}: {e}", build_dir.display()))?;
        let wants = |c: Config| want.contains(&c);
        let skipped = || Err("not selected".to_string());

        let pmi2_exchange = if wants(Config::SlurmPmi2) {
            if !Path::new(SLURM_INCLUDE).join("pmi2.h").is_file() {
                Err(format!(
                    "no {SLURM_INCLUDE}/pmi2.h (Debian package libpmi2-0-dev)"
                ))
            } else {
                let inc = format!("-I{SLURM_INCLUDE}");
                compile(
                    "gcc",
                    build_dir,
                    "pmi2_exchange",
                    PMI2_EXCHANGE_C,
                    &[&inc, "-lpmi2"],
                )
            }
        } else {
            skipped()
        };
        let floor = if wants(Config::FutexFloor) {
            compile("gcc", build_dir, "futex_barrier_floor", FUTEX_FLOOR_C, &[])
        } else {
            skipped()
        };
        let mpi_hello = if wants(Config::MpichFastpmi) || wants(Config::MpichHydra) {
            compile("mpicc.mpich", build_dir, "mpi_hello", MPI_HELLO_C, &[])
                .map_err(|e| format!("{e} (Debian packages mpich, libmpich-dev)"))
        } else {
            skipped()
        };

        let venv = mpich5_venv();
        let hydra5 = venv
            .as_ref()
            .map(|v| v.join("bin/mpiexec"))
            .map_err(Clone::clone);
        let mpi_spawn = if wants(Config::SpawnFastpmi) || wants(Config::SpawnHydra5) {
            venv.clone().and_then(|v| {
                let mpicc = v.join("bin/mpicc");
                let rpath = format!("-Wl,-rpath,{}", v.join("lib").display());
                compile(
                    &mpicc.to_string_lossy(),
                    build_dir,
                    "mpi_spawn",
                    MPI_SPAWN_C,
                    &[&rpath],
                )
            })
        } else {
            skipped()
        };
        let launch = LaunchTools::prepare(
            build_dir,
            &exe_dir,
            want.iter().any(|c| c.kind() == Kind::Launch),
        );
        let placement = placement::Tools::prepare(
            build_dir,
            &exe_dir,
            want.iter().any(|c| c.kind() == Kind::Placement),
        );
        let mut versions = notes;
        versions.push(format!(
            "fastpmi {} ({} build of fastpmi-bench)",
            env!("CARGO_PKG_VERSION"),
            if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            }
        ));
        if let Ok(h) = &hydra {
            if let Some(v) = first_line_of(h, &["--version"], |l| {
                l.trim_start().starts_with("Version:")
            }) {
                versions.push(format!("Hydra {}", v.trim_start_matches("Version: ")));
            }
        }
        if let Some(g) = which("gcc") {
            if let Some(v) = first_line_of(&g, &["--version"], |_| true) {
                versions.push(v);
            }
        }
        Ok(Tools {
            rank_exe,
            fastpmi,
            hydra,
            pmi2_exchange,
            floor,
            mpi_hello,
            mpi_spawn,
            hydra5,
            launch,
            placement,
            versions,
        })
    }

    /// Why `c` cannot run, or None when everything it needs is there.
    pub fn missing(&self, c: Config) -> Option<String> {
        let need: Vec<&Result<PathBuf, String>> = match c {
            Config::FastpmiShm | Config::FastpmiSocket => vec![&self.fastpmi],
            Config::Hydra => vec![&self.hydra],
            Config::SlurmPmi2 => vec![&self.fastpmi, &self.pmi2_exchange],
            Config::FutexFloor => vec![&self.floor],
            Config::MpichFastpmi => vec![&self.fastpmi, &self.mpi_hello],
            Config::MpichHydra => vec![&self.hydra, &self.mpi_hello],
            Config::SpawnFastpmi => vec![&self.fastpmi, &self.mpi_spawn],
            Config::SpawnHydra5 => vec![&self.hydra5, &self.mpi_spawn],
            Config::Placement(i) => {
                return match (&self.fastpmi, self.placement.missing(i as usize)) {
                    (Err(e), _) => Some(e.clone()),
                    (_, why) => why,
                };
            }
            Config::GroupFence => super::groups::needs(self, c),
            Config::PsQuiet | Config::PsPolled | Config::PsSitting => super::ps::needs(self, c),
            _ => super::launch::needs(self, c),
        };
        let reasons: Vec<&str> = need
            .iter()
            .filter_map(|r| r.as_ref().err().map(String::as_str))
            .collect();
        (!reasons.is_empty()).then(|| reasons.join("; "))
    }

    /// The command of one run of `c` with `n` ranks. Only called when
    /// [`Tools::missing`] is None.
    pub fn spec(&self, c: Config, n: u32, p: &RunParams) -> Spec {
        let path = |r: &Result<PathBuf, String>| r.clone().unwrap_or_default();
        let os = |s: &str| OsString::from(s);
        // Keep a FASTPMI_TRANSPORT from the caller's shell from leaking into
        // the configurations that must pick their own transport.
        let mut env_remove = vec![os("FASTPMI_TRANSPORT"), os(FENCE_LOOP_ENV)];
        let mut env_set = vec![];
        if p.fence_loop > 0 && c.expected_transport().is_some() {
            env_remove.retain(|k| k != FENCE_LOOP_ENV);
            env_set.push((os(FENCE_LOOP_ENV), OsString::from(p.fence_loop.to_string())));
        }
        let fastpmi_args = |prog: OsString, args: &[&str]| {
            let mut v = vec![os("-n"), OsString::from(n.to_string()), prog];
            v.extend(args.iter().map(|a| os(a)));
            v
        };
        let rank = self.rank_exe.clone().into_os_string();
        let (program, args, mem) = match c {
            Config::FastpmiShm => (
                path(&self.fastpmi),
                fastpmi_args(rank, &["__rank"]),
                MemProbe::Launcher,
            ),
            Config::FastpmiSocket => {
                env_remove.retain(|k| k != "FASTPMI_TRANSPORT");
                env_set.push((os("FASTPMI_TRANSPORT"), os("socket")));
                (
                    path(&self.fastpmi),
                    fastpmi_args(rank, &["__rank"]),
                    MemProbe::Launcher,
                )
            }
            Config::SlurmPmi2 => (
                path(&self.fastpmi),
                fastpmi_args(path(&self.pmi2_exchange).into_os_string(), &[]),
                MemProbe::Launcher,
            ),
            Config::MpichFastpmi => (
                path(&self.fastpmi),
                fastpmi_args(path(&self.mpi_hello).into_os_string(), &[]),
                MemProbe::Launcher,
            ),
            Config::Hydra | Config::MpichHydra => {
                let prog = if c == Config::Hydra {
                    (rank, vec![os("__rank")])
                } else {
                    (path(&self.mpi_hello).into_os_string(), vec![])
                };
                let (args, proxies) = hydra_args(n, p.hydra_ppn, prog.0, prog.1);
                (path(&self.hydra), args, MemProbe::HydraTree { proxies })
            }
            Config::SpawnFastpmi | Config::SpawnHydra5 => {
                for (k, v) in SPAWN_ENV {
                    env_set.push((os(k), os(v)));
                }
                let launcher = if c == Config::SpawnFastpmi {
                    path(&self.fastpmi)
                } else {
                    path(&self.hydra5)
                };
                let args = vec![
                    os("-n"),
                    OsString::from(SPAWN_PARENTS.to_string()),
                    path(&self.mpi_spawn).into_os_string(),
                    OsString::from(n.to_string()),
                ];
                (launcher, args, MemProbe::None)
            }
            Config::LaunchFloor
            | Config::LaunchFastpmi
            | Config::LaunchShm
            | Config::LaunchSocket
            | Config::LaunchHydra
            | Config::LaunchHydraPmi => return super::launch::spec(self, c, n, p),
            Config::GroupFence => return super::groups::spec(self, n, p),
            Config::PsQuiet | Config::PsPolled | Config::PsSitting => {
                return super::ps::spec(self, c, n, p)
            }
            Config::Placement(i) => {
                let mut spec =
                    self.placement
                        .spec(i as usize, n, &path(&self.fastpmi), p.hydra_ppn);
                spec.timeout = p.timeout;
                return spec;
            }
            Config::FutexFloor => (
                path(&self.floor),
                vec![
                    OsString::from(n.to_string()),
                    OsString::from(p.floor_iters.to_string()),
                ],
                MemProbe::None,
            ),
        };
        Spec {
            program,
            args,
            env_set,
            env_remove,
            cwd: None,
            timeout: p.timeout,
            mem,
            poll: None,
        }
    }
}

/// Per-run knobs from the command line.
#[derive(Debug, Clone, Copy)]
pub struct RunParams {
    pub timeout: Duration,
    pub floor_iters: u32,
    /// Steady-state fences per Rust-client run (0: none), see [`super::rank`].
    pub fence_loop: u32,
    pub hydra_ppn: u32,
}

/// Hydra's arguments for `n` ranks with at most `ppn` ranks per proxy.
///
/// Hydra 4.0.2 deadlocks past ~224 ranks behind one proxy (a full socket
/// buffer between proxy and ranks), so larger jobs get several proxies. One
/// proxy is started per distinct host name and repeated names are merged
/// (`localhost:4,localhost:4` is one proxy of 8), so each proxy gets its own
/// loopback address, and `-launcher fork` starts every proxy locally without
/// ssh. Returns the arguments and the number of proxies.
pub fn hydra_args(n: u32, ppn: u32, prog: OsString, args: Vec<OsString>) -> (Vec<OsString>, usize) {
    let ppn = ppn.max(1);
    let proxies = n.div_ceil(ppn).max(1);
    let (base, extra) = (n / proxies, n % proxies);
    let hosts: Vec<String> = (0..proxies)
        .map(|i| format!("127.0.0.{}:{}", i + 1, base + u32::from(i < extra)))
        .collect();
    let mut v: Vec<OsString> = ["-launcher", "fork", "-hosts"]
        .iter()
        .map(OsString::from)
        .collect();
    v.push(hosts.join(",").into());
    v.push("-n".into());
    v.push(n.to_string().into());
    v.push(prog);
    v.extend(args);
    (v, proxies as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hydra_hosts_split_evenly() {
        let (a, k) = hydra_args(256, 128, "p".into(), vec![]);
        assert_eq!(k, 2);
        assert_eq!(a[3], "127.0.0.1:128,127.0.0.2:128");
        let (a, k) = hydra_args(300, 128, "p".into(), vec![]);
        assert_eq!(k, 3);
        assert_eq!(a[3], "127.0.0.1:100,127.0.0.2:100,127.0.0.3:100");
        let (a, k) = hydra_args(2, 128, "p".into(), vec!["x".into()]);
        assert_eq!(k, 1);
        assert_eq!(a[3], "127.0.0.1:2");
        assert_eq!(a.last().unwrap(), "x");
    }

    #[test]
    fn shm_names() {
        assert!(is_shm_transport("shm"));
        assert!(is_shm_transport("sharedmemory"));
        assert!(!is_shm_transport("socket"));
        assert!(!is_shm_transport("singleton"));
    }
}
