//! Python ranks exchanging addresses (docs/python.md): the whole-job wall
//! time of N Python processes (default 256) that each publish one address
//! and read every rank's, under the wheel's launcher with the wheel's
//! module against the `mpich` wheel's launcher with mpi4py:
//!
//! * `python-pmi@fastpmi`: `<venv>/bin/fastpmi -n N <venv>/bin/python
//!   bench/python/pmi_exchange.py`: `fastpmi.Pmi()`, a put of the rank's
//!   address under its own key, a fence, a get of every rank's (shared
//!   memory: rank 0 must report `transport=shm`);
//! * `python-mpi4py@mpiexec`: `<venv>/bin/mpiexec -n N <venv>/bin/python
//!   bench/python/mpi4py_allgather.py`: mpi4py (MPI initialised on import),
//!   `COMM_WORLD.allgather(address)`, MPI finalised at exit; `mpiexec` is
//!   the wheel's Hydra 5 with one proxy, as a user on one node runs it.
//!
//! Every rank checks every address and exits 1 on a wrong one; rank 0
//! prints `python-exchange ok size=N` (and its transport under fastpmi). A
//! run counts only if the launcher exits 0 and that line names N.
//!
//! Both run from one venv, `--out/.build/python-venv`, that the harness
//! makes ([`PythonTools::prepare`]) as a Python user would: `python3 -m
//! venv`, then `pip install --no-deps` of the pins of
//! `scripts/install-mpi-stacks` ([`MPI_PINS`]) and of the wheel's build
//! requirements (maturin, from pyproject.toml), then the wheel built from
//! this checkout by `pip wheel --no-build-isolation` (cargo reuses the
//! harness's target directory) and installed. A venv whose recorded pins
//! match is reused; the wheel is rebuilt every run (seconds when nothing
//! changed) and reinstalled when its files differ from the installed ones
//! (the RECORD of its files, not the wheel's bytes, which change with
//! every build). PyPI is needed only to make the venv.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::cells::{cell, median, num, runs_cell, why_absent, Context};
use crate::configs::{is_shm_transport, Config, RunParams};
use crate::proc::{MemProbe, Outcome, Spec};
use crate::record::{summarize, Record, Status};
use crate::tools::which;

/// The programs, shipped inside the binary so that the harness measures
/// this checkout's.
const PMI_EXCHANGE_PY: &str = include_str!("../python/pmi_exchange.py");
const MPI4PY_ALLGATHER_PY: &str = include_str!("../python/mpi4py_allgather.py");

/// The MPI side, pinned as `scripts/install-mpi-stacks` pins the `mpich5`
/// venv.
pub const MPI_PINS: [&str; 2] = ["mpich==5.0.2", "mpi4py==4.1.2"];
/// The job size the target is defined at.
pub const TARGET_N: u32 = 256;
/// The target: fastpmi's median at most this fraction of `mpiexec`'s.
pub const TARGET_RATIO: f64 = 0.1;
/// A run's limit is never less than this (`mpiexec` takes about 40 s at
/// 256 ranks on 2 CPUs).
pub const MIN_TIMEOUT: Duration = Duration::from_secs(300);

/// The line rank 0 prints when every address was right.
const TAG: &str = "python-exchange ok";
/// The venv, under the build directory.
const VENV: &str = "python-venv";
/// Files of the venv that record what it holds.
const PINS_MARK: &str = ".fastpmi-bench-pins";
const WHEEL_MARK: &str = ".fastpmi-bench-wheel";

/// The venv with the wheel and the MPI side, and the programs.
#[derive(Debug, Clone)]
pub struct PythonTools {
    venv: Result<PathBuf, String>,
    progs: Result<(PathBuf, PathBuf), String>,
    /// How the venv and the wheel came to be, for the report.
    notes: Vec<String>,
}

/// The checkout the harness was built from (the workspace root, one level
/// above this crate).
fn checkout() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).to_path_buf()
}

/// The requirements of `[build-system] requires` in pyproject.toml's text.
fn build_requires(pyproject: &str) -> Option<Vec<String>> {
    let line = pyproject
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("requires = ["))?;
    let inner = line.strip_prefix("requires = [")?.strip_suffix(']')?;
    // The quoted strings (a requirement may hold a comma: `maturin>=1.9,<2`).
    let reqs: Vec<String> = inner
        .split('"')
        .skip(1)
        .step_by(2)
        .filter(|r| !r.is_empty())
        .map(str::to_string)
        .collect();
    (!reqs.is_empty()).then_some(reqs)
}

fn last_lines(s: &[u8], n: usize) -> String {
    let s = String::from_utf8_lossy(s);
    let lines: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" / ")
}

/// Run `cmd`, its stdout or why it failed.
fn run(what: &str, cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{what}: cannot run {:?}: {e}", cmd.get_program()))?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed ({}): {}",
            out.status,
            last_lines(&[out.stdout, out.stderr].concat(), 4)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `<venv>/bin/python -m pip VERB --quiet ... ARGS...`.
fn pip(venv: &Path, verb: &str, args: &[&str]) -> Command {
    let mut c = Command::new(venv.join("bin/python"));
    c.args(["-m", "pip", verb, "--quiet", "--disable-pip-version-check"])
        .args(args);
    c
}

/// The venv at `dir` holding `pins`: reused when its record says so and
/// its tools are there, else made afresh. Returns a note for the report.
fn ensure_venv(dir: &Path, pins: &[String]) -> Result<String, String> {
    let want = pins.join(" ");
    let tools = ["bin/python", "bin/mpiexec", "bin/maturin"];
    let recorded = std::fs::read_to_string(dir.join(PINS_MARK)).unwrap_or_default();
    if recorded.trim() == want && tools.iter().all(|t| dir.join(t).is_file()) {
        return Ok(format!("venv reused ({want})"));
    }
    let python3 = which("python3").ok_or("python3 not found on PATH")?;
    let _ = std::fs::remove_dir_all(dir);
    eprintln!("fastpmi-bench: making {} ({want})", dir.display());
    run(
        "python3 -m venv",
        Command::new(python3).args(["-m", "venv"]).arg(dir),
    )
    .map_err(|e| format!("{e} (Debian: apt-get install python3-venv)"))?;
    let mut args = vec!["--no-deps"];
    args.extend(pins.iter().map(String::as_str));
    run(
        &format!("pip install {want}"),
        &mut pip(dir, "install", &args),
    )
    .map_err(|e| format!("{e} (PyPI is needed to make the venv)"))?;
    if let Some(t) = tools.iter().find(|t| !dir.join(t).is_file()) {
        return Err(format!(
            "{} missing after pip install {want}",
            dir.join(t).display()
        ));
    }
    std::fs::write(dir.join(PINS_MARK), format!("{want}\n"))
        .map_err(|e| format!("write {}: {e}", dir.join(PINS_MARK).display()))?;
    Ok(format!("venv made ({want})"))
}

/// What the wheel at `whl` installs: its RECORD's lines but the
/// dist-info's (their hashes change with every build).
fn wheel_files(venv: &Path, whl: &Path) -> Result<String, String> {
    const SCRIPT: &str = "import sys, zipfile\n\
        z = zipfile.ZipFile(sys.argv[1])\n\
        rec = [n for n in z.namelist() if n.endswith('.dist-info/RECORD')][0]\n\
        lines = z.read(rec).decode().splitlines()\n\
        print('\\n'.join(l for l in lines if '.dist-info/' not in l.split(',')[0]))\n";
    run(
        "reading the wheel's RECORD",
        Command::new(venv.join("bin/python"))
            .args(["-c", SCRIPT])
            .arg(whl),
    )
}

/// Build the wheel from this checkout into `dist` with the venv's maturin,
/// and install it into the venv unless the same files are there already.
fn ensure_wheel(venv: &Path, dist: &Path, exe_dir: &Path) -> Result<String, String> {
    let root = checkout();
    if !root.join("pyproject.toml").is_file() {
        return Err(format!("no {}", root.join("pyproject.toml").display()));
    }
    let _ = std::fs::remove_dir_all(dist);
    std::fs::create_dir_all(dist).map_err(|e| format!("create {}: {e}", dist.display()))?;
    let mut cmd = pip(venv, "wheel", &["--no-deps", "--no-build-isolation", "-w"]);
    cmd.arg(dist).arg(&root).current_dir(&root);
    // maturin's Python hooks run the `maturin` of PATH.
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![venv.join("bin")];
    dirs.extend(std::env::split_paths(&path));
    cmd.env(
        "PATH",
        std::env::join_paths(dirs).map_err(|e| format!("PATH: {e}"))?,
    );
    // The wheel's cargo builds reuse the harness's release build.
    if exe_dir.file_name().is_some_and(|n| n == "release") {
        if let Some(target) = exe_dir.parent() {
            cmd.env("CARGO_TARGET_DIR", target);
        }
    }
    eprintln!(
        "fastpmi-bench: building the wheel: pip wheel --no-build-isolation {}",
        root.display()
    );
    run("pip wheel (pyproject.toml: maturin)", &mut cmd)?;
    let wheels: Vec<PathBuf> = std::fs::read_dir(dist)
        .map_err(|e| format!("read {}: {e}", dist.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    let [whl] = &wheels[..] else {
        return Err(format!(
            "pip wheel left {} wheels in {}",
            wheels.len(),
            dist.display()
        ));
    };
    let name = whl
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let files = wheel_files(venv, whl)?;
    let mark = venv.join(WHEEL_MARK);
    if std::fs::read_to_string(&mark).is_ok_and(|m| m == files)
        && venv.join("bin/fastpmi").is_file()
    {
        return Ok(format!(
            "{name} built from this checkout, the same files as installed"
        ));
    }
    let _ = std::fs::remove_file(&mark);
    run(
        "pip install (the wheel)",
        pip(venv, "install", &["--no-deps", "--force-reinstall"]).arg(whl),
    )?;
    std::fs::write(&mark, &files).map_err(|e| format!("write {}: {e}", mark.display()))?;
    Ok(format!("{name} built from this checkout and installed"))
}

impl PythonTools {
    /// Make or reuse the venv, build and install the wheel, write the
    /// programs into `build_dir` (nothing unless `wanted`).
    pub fn prepare(build_dir: &Path, exe_dir: &Path, wanted: bool) -> PythonTools {
        if !wanted {
            let no = "not selected".to_string();
            return PythonTools {
                venv: Err(no.clone()),
                progs: Err(no),
                notes: Vec::new(),
            };
        }
        let mut notes = Vec::new();
        // The wheel is built from the checkout's folder: every path absolute.
        let build_dir = &std::path::absolute(build_dir).unwrap_or_else(|_| build_dir.into());
        let venv = build_dir.join(VENV);
        let pyproject = checkout().join("pyproject.toml");
        let venv = std::fs::read_to_string(&pyproject)
            .map_err(|e| format!("{}: {e}", pyproject.display()))
            .and_then(|text| {
                build_requires(&text).ok_or_else(|| {
                    format!("no [build-system] requires line in {}", pyproject.display())
                })
            })
            .and_then(|build| {
                let mut pins: Vec<String> = MPI_PINS.iter().map(|p| p.to_string()).collect();
                pins.extend(build);
                notes.push(ensure_venv(&venv, &pins)?);
                notes.push(ensure_wheel(
                    &venv,
                    &build_dir.join("python-dist"),
                    exe_dir,
                )?);
                if let Ok(v) = run(
                    "python --version",
                    Command::new(venv.join("bin/python")).arg("--version"),
                ) {
                    notes.push(v.trim().to_string());
                }
                Ok(venv)
            });
        let dir = build_dir.join("python");
        let progs = std::fs::create_dir_all(&dir)
            .and_then(|()| {
                let a = dir.join("pmi_exchange.py");
                let b = dir.join("mpi4py_allgather.py");
                std::fs::write(&a, PMI_EXCHANGE_PY)?;
                std::fs::write(&b, MPI4PY_ALLGATHER_PY)?;
                Ok((a, b))
            })
            .map_err(|e| format!("write the programs into {}: {e}", dir.display()));
        PythonTools { venv, progs, notes }
    }

    /// Why the configurations cannot run, or None.
    pub fn missing(&self) -> Option<String> {
        match (&self.venv, &self.progs) {
            (Err(e), _) | (_, Err(e)) => Some(e.clone()),
            _ => None,
        }
    }
}

/// `<venv>/bin/fastpmi -n N <venv>/bin/python pmi_exchange.py`, or
/// `<venv>/bin/mpiexec -n N <venv>/bin/python mpi4py_allgather.py`.
pub fn spec(t: &PythonTools, c: Config, n: u32, p: &RunParams) -> Spec {
    let venv = t.venv.clone().unwrap_or_default();
    let (a, b) = t.progs.clone().unwrap_or_default();
    let (launcher, prog) = if c == Config::PythonMpiexec {
        ("bin/mpiexec", b)
    } else {
        ("bin/fastpmi", a)
    };
    Spec {
        program: venv.join(launcher),
        args: vec![
            OsString::from("-n"),
            OsString::from(n.to_string()),
            venv.join("bin/python").into_os_string(),
            prog.into_os_string(),
        ],
        env_set: vec![],
        env_remove: vec![
            OsString::from(fastpmi_codec::names::env::TRANSPORT),
            OsString::from("PYTHONPATH"),
        ],
        cwd: None,
        timeout: p.timeout.max(MIN_TIMEOUT),
        mem: MemProbe::None,
        poll: None,
    }
}

/// Rank 0's line: its `size=` and `transport=` (`transport` under fastpmi
/// only).
fn result_line(stdout: &str) -> Option<(Option<u32>, Option<String>)> {
    let l = stdout.lines().map(str::trim).find(|l| l.starts_with(TAG))?;
    let field = |k: &str| {
        l.split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .map(str::to_string)
    };
    Some((
        field("size=").and_then(|s| s.parse().ok()),
        field("transport="),
    ))
}

/// Whether rank 0 said every address of the N was right, and (under
/// fastpmi) on shared memory. The exit status is judged before; a run on
/// another transport becomes [`Status::WrongTransport`] here.
pub fn judge(c: Config, n: u32, o: &Outcome, r: &mut Record) -> Result<(), String> {
    let Some((size, transport)) = result_line(&o.stdout) else {
        return Err(format!(
            "exit 0 but rank 0 printed no \"{TAG} size={n}\" line"
        ));
    };
    if size != Some(n) {
        return Err(format!("rank 0 says size={size:?}, expected {n}"));
    }
    r.transport = transport.clone();
    if c == Config::PythonFastpmi {
        let got = transport.unwrap_or_else(|| "unreported".into());
        if !is_shm_transport(&got) {
            r.status = Status::WrongTransport;
            r.error = format!("rank 0 reported transport={got}, this configuration needs shm");
        }
    }
    Ok(())
}

/// The Python target, when the family ran.
pub fn target_lines(ctx: &Context) -> Vec<String> {
    let Some((n, caveat)) = crate::cells::judged_at(&ctx.opts.python_sizes, TARGET_N) else {
        return Vec::new();
    };
    let what = format!(
        "N={n} Python ranks exchanging one address each, whole job: the wheel's `fastpmi` with `fastpmi.Pmi` vs the `mpich` wheel's `mpiexec` with mpi4py `allgather` (target ≤ {TARGET_RATIO}x)"
    );
    let wall = |c: Config| median(ctx, c, n, |r| r.wall_s);
    let (f, m) = (wall(Config::PythonFastpmi), wall(Config::PythonMpiexec));
    vec![match (f, m) {
        (Some(f), Some(m)) if m > 0.0 => format!(
            "{what}: {} s vs {} s: {:.3}x: {}{caveat}",
            num(f),
            num(m),
            f / m,
            if f / m <= TARGET_RATIO {
                "met"
            } else {
                "missed"
            }
        ),
        _ => {
            let why: Vec<String> = [(Config::PythonFastpmi, f), (Config::PythonMpiexec, m)]
                .iter()
                .filter(|(_, v)| v.is_none())
                .map(|(c, _)| why_absent(ctx, *c, n))
                .collect();
            format!("{what}: missed (not measured: {}){caveat}", why.join("; "))
        }
    }]
}

/// The report's Python section.
pub fn section(ctx: &Context, t: &PythonTools, w: &mut String) {
    let _ = writeln!(w, "\n## Python: ranks exchange addresses\n");
    let _ = writeln!(
        w,
        "Whole-job wall time (launch to the launcher's exit) of N Python ranks that each publish one address and read every rank's: the wheel's `fastpmi -n N python bench/python/pmi_exchange.py` (`fastpmi.Pmi()`, put under the rank's own key, fence, get of each rank's; shared memory) against the `mpich` wheel's `mpiexec -n N python bench/python/mpi4py_allgather.py` (mpi4py: MPI initialised on import, `COMM_WORLD.allgather`, finalised at exit; Hydra 5, one proxy). Every rank checks every address. Both from one venv the harness makes with pip: the wheel built from this checkout, {}, the interpreter the same; seconds: median (min–max).\n",
        MPI_PINS.join(", ")
    );
    if ctx.opts.python_sizes.is_empty() {
        let _ = writeln!(w, "Not run (`--python-sizes none`).");
        return;
    }
    if !t.notes.is_empty() {
        let _ = writeln!(w, "Venv: {}.\n", t.notes.join("; "));
    }
    let _ = writeln!(
        w,
        "| N | configuration | runs | wall s | fastpmi / mpiexec |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|");
    let wall = |r: &Record| r.wall_s;
    for &n in &ctx.opts.python_sizes {
        let f = median(ctx, Config::PythonFastpmi, n, wall);
        let m = median(ctx, Config::PythonMpiexec, n, wall);
        for c in [Config::PythonFastpmi, Config::PythonMpiexec] {
            let ratio = match (c, f, m) {
                (Config::PythonFastpmi, Some(f), Some(m)) if m > 0.0 => format!("{:.3}x", f / m),
                _ => "—".into(),
            };
            let _ = writeln!(
                w,
                "| {n} | {c} | {} | {} | {ratio} |",
                runs_cell(ctx, c, n),
                cell(summarize(ctx.records, c, n, wall), 1.0)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::End;

    fn outcome(stdout: &str) -> Outcome {
        Outcome {
            end: End::Exited(0),
            wall: Duration::from_millis(5),
            stdout: stdout.into(),
            stderr: String::new(),
            mem: None,
            polls: Vec::new(),
        }
    }

    fn judged(c: Config, n: u32, stdout: &str) -> (Result<(), String>, Record) {
        let mut r = Record::skipped(c, n, 0, "");
        r.status = Status::Ok;
        let res = judge(c, n, &outcome(stdout), &mut r);
        (res, r)
    }

    #[test]
    fn rank_zero_names_the_size_and_fastpmi_shared_memory() {
        let (res, r) = judged(
            Config::PythonFastpmi,
            256,
            "noise\npython-exchange ok size=256 transport=shm\n",
        );
        res.unwrap();
        assert_eq!(
            (r.status, r.transport.as_deref()),
            (Status::Ok, Some("shm"))
        );
        let (res, r) = judged(
            Config::PythonFastpmi,
            4,
            "python-exchange ok size=4 transport=socket\n",
        );
        res.unwrap();
        assert_eq!(r.status, Status::WrongTransport);
        assert!(r.error.contains("transport=socket"), "{}", r.error);
        let (res, r) = judged(Config::PythonMpiexec, 4, "python-exchange ok size=4\n");
        res.unwrap();
        assert_eq!((r.status, r.transport), (Status::Ok, None));
        // Another size, no line.
        let (res, _) = judged(Config::PythonMpiexec, 8, "python-exchange ok size=4\n");
        assert!(res.unwrap_err().contains("expected 8"));
        assert!(
            judged(Config::PythonMpiexec, 4, "rank 3: address 0 is ''\n")
                .0
                .unwrap_err()
                .contains("no \"python-exchange ok size=4\"")
        );
    }

    #[test]
    fn the_build_requirements_come_from_pyproject() {
        let text =
            "[build-system]\nrequires = [\"maturin>=1.9,<2\", \"x\"]\nbuild-backend = \"x\"\n";
        assert_eq!(build_requires(text).unwrap(), ["maturin>=1.9,<2", "x"]);
        let ours = std::fs::read_to_string(checkout().join("pyproject.toml")).unwrap();
        assert!(build_requires(&ours).unwrap()[0].starts_with("maturin"));
        assert_eq!(build_requires("[project]\n"), None);
        assert_eq!(build_requires("requires = []\n"), None);
    }

    #[test]
    fn the_programs_print_what_judge_reads() {
        for prog in [PMI_EXCHANGE_PY, MPI4PY_ALLGATHER_PY] {
            assert!(
                prog.contains(&format!("print(f\"{TAG} size={{size}}")),
                "{prog}"
            );
        }
        assert!(PMI_EXCHANGE_PY.contains("transport={pmi.transport}"));
    }
}
