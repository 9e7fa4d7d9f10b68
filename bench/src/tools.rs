//! Finding the launchers and MPI venvs and compiling the C programs of the
//! core configurations before the first run ([`Tools::prepare`]), and the
//! helpers the families find and build theirs with ([`which`], [`venv`],
//! [`compile`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::configs::Config;

/// Sources shipped inside the binary, so the harness works from any
/// directory and always measures the programs of this checkout.
const PMI2_EXCHANGE_C: &str = include_str!("../c/pmi2_exchange.c");
const FUTEX_FLOOR_C: &str = include_str!("../c/futex_barrier_floor.c");
const MPI_HELLO_C: &str = include_str!("../c/mpi_hello.c");
const MPI_SPAWN_C: &str = include_str!("../c/mpi_spawn.c");

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

/// What the core configurations run and the launchers every family uses,
/// found or built before the first run (the families' own programs are in
/// [`crate::suite::Suite`] beside it).
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
    compile_env(compiler, dir, name, source, extra, &[])
}

/// [`compile`] with `env` set for the compiler (the Open MPI wheel's
/// `mpicc` finds its files by `OPAL_PREFIX`).
pub fn compile_env(
    compiler: &str,
    dir: &Path,
    name: &str,
    source: &str,
    extra: &[&str],
    env: &[(&str, &Path)],
) -> Result<PathBuf, String> {
    let cc = which(compiler).ok_or_else(|| format!("{compiler} not found on PATH"))?;
    let src = dir.join(format!("{name}.c"));
    let exe = dir.join(name);
    std::fs::write(&src, source).map_err(|e| format!("write {}: {e}", src.display()))?;
    let mut cmd = Command::new(&cc);
    // Libraries (-l) must follow the source that uses them.
    cmd.arg("-O2").arg("-o").arg(&exe).arg(&src).args(extra);
    for (k, v) in env {
        cmd.env(k, v);
    }
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

/// The launcher as users run it: a copy, as `cargo install` or a package
/// leaves it. The linker writes its output piecemeal, and the page cache
/// then holds the binary in small pieces: a one-rank launch of that very
/// file took 2.32 ms where a copy of it took 2.09 (2026-11-27, this VM;
/// the same once the file was evicted and read back in order).
fn install_launcher(built: &Path, build_dir: &Path) -> Result<PathBuf, String> {
    let dir = build_dir.join("bin");
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let to = dir.join("fastpmi");
    // Replaced, not overwritten: a launcher of an earlier run may still
    // have the old file open.
    let tmp = dir.join(".fastpmi.tmp");
    std::fs::copy(built, &tmp)
        .and_then(|_| std::fs::rename(&tmp, &to))
        .map_err(|e| format!("install {} into {}: {e}", built.display(), dir.display()))?;
    Ok(to)
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
        std::fs::create_dir_all(build_dir)
            .map_err(|e| format!("create {}: {e}", build_dir.display()))?;
        let fastpmi = fastpmi.and_then(|f| install_launcher(&f, build_dir));
        let hydra = which("mpiexec.hydra")
            .ok_or_else(|| "mpiexec.hydra not found on PATH (Debian package mpich)".to_string());
        std::fs::create_dir_all(build_dir)
            .map_err(|e| format!("create {}: {e}", build_dir.display()))?;
        let wants = |c: Config| want.contains(&c);
        let skipped = || Err("not selected".to_string());

        let pmi2_exchange =
            if wants(Config::SlurmPmi2) || wants(Config::NestSrun) || wants(Config::NestNodes) {
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
            versions,
        })
    }

    /// The directory of this binary, where `cargo build` puts fastpmi and
    /// its libraries too.
    pub fn exe_dir(&self) -> &Path {
        self.rank_exe.parent().unwrap_or(Path::new("."))
    }
}
