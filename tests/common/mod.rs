//! Shared helpers for the real-peer interop tests.
//!
//! * [`prog`] compiles one of the C test programs in `tests/c/` once per test
//!   binary (MPICH programs with `mpicc.mpich`, Slurm libpmi2 programs with
//!   `gcc ... -lpmi2`) into `$CARGO_TARGET_TMPDIR/interop-c/`. A missing
//!   compiler, header or library is a test failure that names the Debian
//!   package to install; nothing is ever skipped.
//! * [`launch`] builds a launcher command line; [`Cmd::run`] runs it with a
//!   timeout (on timeout the launcher and every descendant are SIGKILLed and
//!   the test fails with the output collected so far); [`Cmd::spawn`] gives a
//!   [`Job`] for tests that act while the job runs.
//! * [`heavy`] is a per-test-binary lock: every test that starts a
//!   multi-rank PMI/MPI job holds it, so one test binary never runs two such
//!   jobs at once on the 2-core CI machine (cargo runs test binaries one
//!   after another, so this bounds the whole run).
//! * [`capi_lib_dir`] builds fastpmi's C libraries (`capi/pmi2`,
//!   `capi/pmi1`) with the test binary's own profile and returns a directory
//!   where they are found under their SONAMEs (`libpmi2.so.0`,
//!   `libpmi.so.0`) and link names, for `LD_LIBRARY_PATH` and `-L`.
//! * [`processes_with_exe`] / [`assert_no_process_left`] find rank processes
//!   that survived their job (by the exact executable path, so tests copy
//!   the program to a unique path first with [`unique_copy`]).
//!
//! The launcher is `fastpmi` (`env!("CARGO_BIN_EXE_fastpmi")`). For
//! validating these tests themselves against an independent server, set
//! `FASTPMI_TEST_LAUNCHER=mpiexec.hydra` (or a path to it): the helper then
//! translates the few flags that differ (`--label` -> `-l`, `--pmi-port` ->
//! `-pmi-port`) and adds `-ppn <total ranks>` so Hydra reports a one-node
//! process mapping. Hydra is known to fail several of these tests (see the
//! notes next to each test); that knob exists only to check the tests.
#![allow(dead_code)]

pub mod nameserver;
pub mod port;
pub mod stacks;

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------
// Serialising heavy tests
// ---------------------------------------------------------------------------

static HEAVY: Mutex<()> = Mutex::new(());

/// Hold this for the whole of any test that starts a multi-rank PMI/MPI job.
/// A test that failed while holding it does not poison the others.
pub fn heavy() -> MutexGuard<'static, ()> {
    HEAVY.lock().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------------------
// Building the C programs
// ---------------------------------------------------------------------------

/// The C programs under `tests/c/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prog {
    /// `mpi_allreduce.c` (MPICH): `allreduce ok size=N sum=S`.
    MpiAllreduce,
    /// `mpi_abort.c` (MPICH): rank N-1 calls `MPI_Abort(.., 7)`.
    MpiAbort,
    /// `mpmd_appnum.c` (MPICH): `rank R size S appnum A` per rank.
    MpmdAppnum,
    /// `pmi2_slurm.c` (Slurm libpmi2): `pmi2 ok size=N`.
    Pmi2Slurm,
    /// `pmi2_fence_sleep.c` (Slurm libpmi2): one rank sleeps before the fence.
    Pmi2FenceSleep,
    /// `segment_stamp.c` (Slurm libpmi2): maps the advertised job segment
    /// and prints the stamp at offset 0.
    SegmentStamp,
    /// `pmi1_kvs.c` (fastpmi's `include/pmi.h`, linked to fastpmi's
    /// `libpmi.so`): `pmi1 ok size=N`.
    Pmi1Kvs,
    /// `pmi2_capi.c` (fastpmi's `include/pmi2.h`, linked to fastpmi's
    /// `libpmi2.so`): error codes and edge cases of the PMI-2 C ABI;
    /// `pmi2 capi ok size=N`.
    Pmi2Capi,
    /// `pmi2_slurm.c` compiled against fastpmi's `include/pmi2.h` and linked
    /// to fastpmi's `libpmi2.so` (source compatibility of the header).
    Pmi2SlurmOwnHeader,
    /// `pmi2_slurm_calls.c` (fastpmi's `include/pmi2.h` and `libpmi2.so`):
    /// the rest of the PMI-2 C API under Slurm's slurmstepd;
    /// `pmi2 slurm calls ok size=N`.
    Pmi2SlurmCalls,
    /// `pmi2_spawn.c` (Slurm libpmi2): `PMI2_Job_Spawn`; `pmi2 spawn ok
    /// children=K` and the children's `pmi2 spawn child ok ...`.
    Pmi2Spawn,
    /// `pmi1_spawn.c` (fastpmi's `include/pmi.h`, `-lpmi`):
    /// `PMI_Spawn_multiple`; `pmi1 spawn ok children=N` and the children's
    /// lines.
    Pmi1Spawn,
    /// `fpmi_groups.c` (fastpmi's `include/fastpmi.h` and `libpmi2.so`):
    /// groups and process sets through the FPMI extension.
    FpmiGroups,
    /// `pset_slurm.c` (Slurm libpmi2): process-set job attributes.
    PsetSlurm,
    /// `pmi2_trivial.c` (Slurm libpmi2): init, put, fence, one get,
    /// finalize; `pmi2 trivial ok size=N`.
    Pmi2Trivial,
    /// `pmi2_late.c` (Slurm libpmi2): one rank late to init while the others
    /// fence; `late ok rank R size N`.
    Pmi2LateSlurm,
    /// `pmi2_late.c` (fastpmi's `include/pmi2.h` and `libpmi2.so`).
    Pmi2LateFastpmi,
    /// `mpi_init_mark.c` (MPICH): a file per rank once `MPI_Init` returned.
    MpiInitMark,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Toolchain {
    Mpich,
    SlurmPmi2,
    /// gcc with fastpmi's `include/` and `-lpmi` from [`capi_lib_dir`].
    FastpmiPmi1,
    /// gcc with fastpmi's `include/` and `-lpmi2` from [`capi_lib_dir`].
    FastpmiPmi2,
}

impl Prog {
    pub fn name(self) -> &'static str {
        match self {
            Prog::MpiAllreduce => "mpi_allreduce",
            Prog::MpiAbort => "mpi_abort",
            Prog::MpmdAppnum => "mpmd_appnum",
            Prog::Pmi2Slurm => "pmi2_slurm",
            Prog::Pmi2FenceSleep => "pmi2_fence_sleep",
            Prog::SegmentStamp => "segment_stamp",
            Prog::Pmi1Kvs => "pmi1_kvs",
            Prog::Pmi2Capi => "pmi2_capi",
            Prog::Pmi2SlurmOwnHeader => "pmi2_slurm_fastpmi_header",
            Prog::Pmi2SlurmCalls => "pmi2_slurm_calls",
            Prog::Pmi2Spawn => "pmi2_spawn",
            Prog::Pmi1Spawn => "pmi1_spawn",
            Prog::FpmiGroups => "fpmi_groups",
            Prog::PsetSlurm => "pset_slurm",
            Prog::Pmi2Trivial => "pmi2_trivial",
            Prog::Pmi2LateSlurm => "pmi2_late_slurm",
            Prog::Pmi2LateFastpmi => "pmi2_late_fastpmi",
            Prog::MpiInitMark => "mpi_init_mark",
        }
    }

    /// Base name of the source file in `tests/c/` (usually [`Prog::name`]).
    pub fn source(self) -> &'static str {
        match self {
            Prog::Pmi2SlurmOwnHeader => "pmi2_slurm",
            Prog::Pmi2LateSlurm | Prog::Pmi2LateFastpmi => "pmi2_late",
            p => p.name(),
        }
    }

    fn toolchain(self) -> Toolchain {
        match self {
            Prog::MpiAllreduce | Prog::MpiAbort | Prog::MpmdAppnum | Prog::MpiInitMark => {
                Toolchain::Mpich
            }
            Prog::Pmi2Slurm
            | Prog::Pmi2FenceSleep
            | Prog::SegmentStamp
            | Prog::Pmi2Spawn
            | Prog::PsetSlurm
            | Prog::Pmi2Trivial
            | Prog::Pmi2LateSlurm => Toolchain::SlurmPmi2,
            Prog::Pmi1Kvs | Prog::Pmi1Spawn => Toolchain::FastpmiPmi1,
            Prog::Pmi2Capi
            | Prog::Pmi2SlurmOwnHeader
            | Prog::Pmi2SlurmCalls
            | Prog::FpmiGroups
            | Prog::Pmi2LateFastpmi => Toolchain::FastpmiPmi2,
        }
    }

    fn cell(self) -> &'static OnceLock<PathBuf> {
        static CELLS: [OnceLock<PathBuf>; 18] = [const { OnceLock::new() }; 18];
        &CELLS[self as usize]
    }
}

const SLURM_PMI2_HEADER: &str = "/usr/include/slurm/pmi2.h";

/// Path of the compiled program, compiling it on first use in this test
/// binary. Panics (never skips) when the toolchain is missing.
pub fn prog(p: Prog) -> &'static Path {
    p.cell().get_or_init(|| compile(p))
}

fn build_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("interop-c");
    fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create build dir {}: {e}", dir.display()));
    dir
}

fn compile(p: Prog) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(format!("{}.c", p.source()));
    assert!(src.is_file(), "test source {} is missing", src.display());
    let dir = build_dir();
    let out = dir.join(p.name());
    // Compile to a private name, then rename: another test binary may be
    // running the previous build of the same program.
    let tmp = dir.join(format!(".{}.{}.tmp", p.name(), std::process::id()));

    let (compiler, packages, mut cmd) = match p.toolchain() {
        Toolchain::Mpich => {
            let mut c = Command::new("mpicc.mpich");
            c.arg("-O2").arg("-Wall").arg("-o").arg(&tmp).arg(&src);
            ("mpicc.mpich", "mpich libmpich-dev", c)
        }
        Toolchain::SlurmPmi2 => {
            if !Path::new(SLURM_PMI2_HEADER).is_file() {
                panic!(
                    "{SLURM_PMI2_HEADER} not found: Slurm's PMI-2 client library is needed to \
                     build tests/c/{}.c; install the Debian package `libpmi2-0-dev` \
                     (apt-get install libpmi2-0-dev)",
                    p.name()
                );
            }
            let mut c = Command::new("gcc");
            c.arg("-O2")
                .arg("-Wall")
                .arg("-I/usr/include/slurm")
                .arg("-o")
                .arg(&tmp)
                .arg(&src)
                .arg("-lpmi2");
            ("gcc", "gcc libpmi2-0-dev", c)
        }
        Toolchain::FastpmiPmi1 | Toolchain::FastpmiPmi2 => {
            let lib = if p.toolchain() == Toolchain::FastpmiPmi1 {
                "-lpmi"
            } else {
                "-lpmi2"
            };
            let mut c = Command::new("gcc");
            c.arg("-O2")
                .arg("-Wall")
                .arg("-Wextra")
                .arg("-Werror")
                .arg("-I")
                .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("include"))
                .arg("-o")
                .arg(&tmp)
                .arg(&src)
                .arg("-L")
                .arg(capi_lib_dir())
                .arg(lib);
            ("gcc", "gcc", c)
        }
    };
    let output = match cmd.stdin(Stdio::null()).output() {
        Ok(o) => o,
        Err(e) if e.kind() == io::ErrorKind::NotFound => panic!(
            "`{compiler}` not found in PATH, needed to build tests/c/{}.c: install the Debian \
             package(s) `{packages}` (apt-get install {packages})",
            p.name()
        ),
        Err(e) => panic!("cannot run `{compiler}`: {e}"),
    };
    if !output.status.success() {
        let _ = fs::remove_file(&tmp);
        panic!(
            "compiling tests/c/{}.c with `{compiler}` failed ({}); are the Debian packages \
             `{packages}` installed?\ncommand: {:?}\n{}{}",
            p.name(),
            output.status,
            cmd,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    fs::rename(&tmp, &out)
        .unwrap_or_else(|e| panic!("cannot move {} to {}: {e}", tmp.display(), out.display()));
    out
}

/// A scratch directory under `$CARGO_TARGET_TMPDIR`, removed on drop.
pub fn scratch_dir(tag: &str) -> tempfile::TempDir {
    let base = build_dir().join("scratch");
    fs::create_dir_all(&base).unwrap();
    tempfile::Builder::new()
        .prefix(&format!("{tag}-"))
        .tempdir_in(&base)
        .unwrap_or_else(|e| panic!("cannot create scratch dir in {}: {e}", base.display()))
}

/// Copy `src` into `dir` under a name unique to this test
/// (`<name>-<tag>`), executable, so that leftover processes of exactly this
/// job can be found by their executable path.
pub fn unique_copy(src: &Path, dir: &Path, tag: &str) -> PathBuf {
    let name = format!(
        "{}-{tag}",
        src.file_name()
            .unwrap()
            .to_str()
            .expect("utf-8 program name")
    );
    let dst = dir.join(name);
    fs::copy(src, &dst)
        .unwrap_or_else(|e| panic!("copy {} -> {}: {e}", src.display(), dst.display()));
    dst
}

// ---------------------------------------------------------------------------
// fastpmi's C libraries
// ---------------------------------------------------------------------------

/// A directory holding fastpmi's C libraries as `libpmi2.so.0`,
/// `libpmi2.so`, `libpmi.so.0` and `libpmi.so` (symlinks into the cargo
/// target directory), for `LD_LIBRARY_PATH` and `-L`.
///
/// Integration tests of the root crate do not build other workspace
/// members, so the first call in a test binary runs `cargo build -p
/// fastpmi-pmi2 -p fastpmi-pmi1` with this binary's profile (and target
/// triple, if any) into the same target directory; under `cargo test
/// --workspace` they are already built and this is a no-op check.
pub fn capi_lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(build_capi)
}

/// `(profile directory, target dir, cargo profile flags)` of this test
/// binary, from its own path: `<target>/[<triple>/]<profile>/deps/<exe>`.
fn own_profile() -> (PathBuf, PathBuf, Vec<OsString>) {
    let target_dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR has a parent")
        .to_path_buf();
    let exe = std::env::current_exe().expect("path of the test binary");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| panic!("unexpected test binary path {}", exe.display()))
        .to_path_buf();
    let profile = profile_dir
        .file_name()
        .and_then(|n| n.to_str())
        .expect("profile directory name")
        .to_string();
    let mut flags: Vec<OsString> = match profile.as_str() {
        "debug" => vec![],
        "release" => vec!["--release".into()],
        other => vec!["--profile".into(), other.into()],
    };
    let parent = profile_dir.parent().map(Path::to_path_buf);
    if parent.as_deref() != Some(target_dir.as_path()) {
        if let Some(triple) = parent.as_deref().and_then(Path::file_name) {
            flags.push("--target".into());
            flags.push(triple.to_owned());
        }
    }
    (profile_dir, target_dir, flags)
}

fn build_capi() -> PathBuf {
    let (profile_dir, target_dir, flags) = own_profile();
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "build",
            "--quiet",
            "-p",
            "fastpmi-pmi2",
            "-p",
            "fastpmi-pmi1",
        ])
        .args(&flags)
        .arg("--target-dir")
        .arg(&target_dir)
        .env_remove("CARGO_TARGET_DIR")
        .stdin(Stdio::null());
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", cmd));
    assert!(
        out.status.success(),
        "building fastpmi's C libraries failed ({})\ncommand: {:?}\n{}{}",
        out.status,
        cmd,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let profile = profile_dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let dir = build_dir().join(format!("capi-lib-{profile}"));
    fs::create_dir_all(&dir).unwrap();
    for (built, names) in [
        ("libpmi2.so", ["libpmi2.so.0", "libpmi2.so"]),
        ("libpmi.so", ["libpmi.so.0", "libpmi.so"]),
    ] {
        let so = profile_dir.join(built);
        assert!(
            so.is_file(),
            "{} missing after building the C libraries",
            so.display()
        );
        for name in names {
            // Symlink under a private name, then rename over the old one.
            let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
            let _ = fs::remove_file(&tmp);
            std::os::unix::fs::symlink(&so, &tmp)
                .unwrap_or_else(|e| panic!("symlink {}: {e}", tmp.display()));
            fs::rename(&tmp, dir.join(name)).unwrap();
        }
    }
    dir
}

/// One row of the launcher's `--stats` report (on stderr):
/// `[puts, gets, fences, node-attr]` of `transport` (`socket` or
/// `shared-memory`).
pub fn stats_row(stderr: &str, transport: &str) -> Option<[u64; 4]> {
    fastpmi::launcher::stats_row(stderr, transport)
}

// ---------------------------------------------------------------------------
// Running the launcher
// ---------------------------------------------------------------------------

/// The launcher under test: fastpmi, or `FASTPMI_TEST_LAUNCHER` (see the
/// module docs; only for validating the tests against Hydra).
pub fn launcher() -> PathBuf {
    match std::env::var_os("FASTPMI_TEST_LAUNCHER") {
        Some(l) if !l.is_empty() => PathBuf::from(l),
        _ => PathBuf::from(env!("CARGO_BIN_EXE_fastpmi")),
    }
}

fn launcher_is_hydra(l: &Path) -> bool {
    l.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.contains("mpiexec") || n.contains("hydra"))
}

/// True when the tests run against Hydra instead of fastpmi.
pub fn under_hydra() -> bool {
    launcher_is_hydra(&launcher())
}

/// Translate fastpmi flags to Hydra's (validation mode only).
fn hydra_args(args: &[OsString]) -> Vec<OsString> {
    let mut total: u64 = 0;
    let mut saw_n = false;
    let mut it = args.iter().peekable();
    while let Some(a) = it.next() {
        if a == "-n" || a == "-np" {
            if let Some(n) = it
                .peek()
                .and_then(|v| v.to_str())
                .and_then(|v| v.parse::<u64>().ok())
            {
                total += n;
                saw_n = true;
            }
        }
    }
    let mut out: Vec<OsString> = vec![
        "-ppn".into(),
        (if saw_n { total } else { 1 }).to_string().into(),
    ];
    out.extend(args.iter().map(|a| {
        if a == "--label" {
            "-l".into()
        } else if a == "--pmi-port" {
            "-pmi-port".into()
        } else {
            a.clone()
        }
    }));
    out
}

/// A launcher invocation being built.
pub struct Cmd {
    launcher: Option<PathBuf>,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    env_removed: Vec<OsString>,
    cwd: Option<PathBuf>,
    timeout: Duration,
}

/// `fastpmi ARGS...` (default timeout 60 s).
pub fn launch<I, S>(args: I) -> Cmd
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    Cmd {
        launcher: None,
        args: args.into_iter().map(|a| a.as_ref().to_owned()).collect(),
        envs: Vec::new(),
        env_removed: Vec::new(),
        cwd: None,
        timeout: Duration::from_secs(60),
    }
}

impl Cmd {
    /// Run `program` with exactly these arguments instead of the launcher
    /// under test (for example `mpiexec.hydra`, or a program run without any
    /// launcher): no flag translation; same timeout, capture and cleanup.
    pub fn program(mut self, program: impl Into<PathBuf>) -> Self {
        self.launcher = Some(program.into());
        self
    }

    /// Set an environment variable in the launcher's own environment (ranks
    /// inherit the launcher's environment).
    pub fn env(mut self, k: impl AsRef<OsStr>, v: impl AsRef<OsStr>) -> Self {
        self.envs
            .push((k.as_ref().to_owned(), v.as_ref().to_owned()));
        self
    }

    /// Remove a variable from the launcher's environment.
    pub fn env_remove(mut self, k: impl AsRef<OsStr>) -> Self {
        self.env_removed.push(k.as_ref().to_owned());
        self
    }

    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Limit for [`Cmd::run`]: past it the job is killed and the test fails.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }

    fn describe(launcher: &Path, args: &[OsString]) -> String {
        let mut s = launcher.display().to_string();
        for a in args {
            s.push(' ');
            s.push_str(&a.to_string_lossy());
        }
        s
    }

    /// Start the launcher in its own process group with stdin closed and
    /// stdout/stderr captured.
    pub fn spawn(self) -> Job {
        let fixed = self.launcher.is_some();
        let launcher = self.launcher.clone().unwrap_or_else(launcher);
        let args = if !fixed && launcher_is_hydra(&launcher) {
            hydra_args(&self.args)
        } else {
            self.args.clone()
        };
        let mut cmd = Command::new(&launcher);
        cmd.args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        for k in &self.env_removed {
            cmd.env_remove(k);
        }
        for (k, v) in &self.envs {
            cmd.env(k, v);
        }
        if let Some(d) = &self.cwd {
            cmd.current_dir(d);
        }
        let what = Self::describe(&launcher, &args);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start `{what}`: {e}"));
        let stdout = reader(child.stdout.take().unwrap());
        let stderr = reader(child.stderr.take().unwrap());
        Job {
            child,
            stdout: Some(stdout),
            stderr: Some(stderr),
            started: Instant::now(),
            what,
            timeout: self.timeout,
        }
    }

    /// Run to completion within the timeout.
    pub fn run(self) -> Outcome {
        let t = self.timeout;
        let job = self.spawn();
        job.wait_or_kill(t)
    }
}

fn reader(mut r: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        buf
    })
}

/// A running launcher.
pub struct Job {
    child: Child,
    stdout: Option<JoinHandle<Vec<u8>>>,
    stderr: Option<JoinHandle<Vec<u8>>>,
    started: Instant,
    what: String,
    timeout: Duration,
}

/// How a launcher run ended.
#[derive(Debug)]
pub struct Outcome {
    pub what: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Outcome {
    /// Exit code, or `None` if the launcher itself died of a signal.
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Non-empty stdout lines, in order.
    pub fn stdout_lines(&self) -> Vec<&str> {
        self.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect()
    }

    /// Non-empty stderr lines, in order.
    pub fn stderr_lines(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect()
    }

    /// A report of the run for assertion messages (output tails only).
    pub fn report(&self) -> String {
        format!(
            "command: {}\nstatus: {}\nelapsed: {:.2?}\n--- stdout (tail) ---\n{}\n--- stderr (tail) ---\n{}",
            self.what,
            describe_status(self.status),
            self.elapsed,
            tail(&self.stdout, 4000),
            tail(&self.stderr, 4000)
        )
    }

    /// Panic unless the launcher exited 0.
    pub fn assert_success(&self) {
        assert!(
            self.status.success(),
            "launcher did not exit 0\n{}",
            self.report()
        );
    }

    /// Panic unless the launcher exited with exactly `code`.
    pub fn assert_code(&self, code: i32) {
        assert_eq!(
            self.code(),
            Some(code),
            "launcher exit status should be {code}\n{}",
            self.report()
        );
    }

    /// Panic unless some stderr line names rank `r` (`rank R` not followed
    /// by another digit).
    pub fn assert_stderr_names_rank(&self, r: usize) {
        assert!(
            mentions_rank(&self.stderr, r),
            "stderr should name the failing rank as `rank {r}`\n{}",
            self.report()
        );
    }
}

pub fn describe_status(s: ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => format!("{s}"),
    }
}

fn tail(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut cut = s.len() - max;
    while !s.is_char_boundary(cut) {
        cut += 1;
    }
    format!("[... {cut} bytes cut ...]\n{}", &s[cut..])
}

/// True when `text` contains `rank R` with R not followed by another digit
/// (so `rank 1` does not match `rank 10`).
pub fn mentions_rank(text: &str, r: usize) -> bool {
    let needle = format!("rank {r}");
    text.match_indices(&needle).any(|(i, _)| {
        let after = text[i + needle.len()..].chars().next();
        !after.is_some_and(|c| c.is_ascii_digit())
    })
}

impl Job {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn started(&self) -> Instant {
        self.started
    }

    /// Non-blocking: has the launcher exited?
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("waitpid on the launcher")
    }

    /// Wait up to `limit`; `Err(self)` if the launcher is still running.
    #[allow(clippy::result_large_err)] // the Err is the job itself, handed back
    pub fn wait_timeout(mut self, limit: Duration) -> Result<Outcome, Job> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.try_wait() {
                return Ok(self.collect(status));
            }
            if Instant::now() >= deadline {
                return Err(self);
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Wait up to `limit`; past it, kill the launcher and all its
    /// descendants and fail the test with whatever output there was.
    pub fn wait_or_kill(self, limit: Duration) -> Outcome {
        match self.wait_timeout(limit) {
            Ok(o) => o,
            Err(job) => {
                let out = job.kill_all();
                panic!(
                    "launcher still running after {limit:.0?}: killed it and its ranks\n{}",
                    out.report()
                );
            }
        }
    }

    /// SIGKILL the launcher and every descendant, then collect the output.
    pub fn kill_all(mut self) -> Outcome {
        let root = self.child.id();
        kill_tree(root);
        let status = self.child.wait().expect("wait for killed launcher");
        self.collect(status)
    }

    /// Wait up to the timeout given to the [`Cmd`].
    pub fn wait(self) -> Outcome {
        let t = self.timeout;
        self.wait_or_kill(t)
    }

    fn collect(&mut self, status: ExitStatus) -> Outcome {
        let elapsed = self.started.elapsed();
        // The pipes reach EOF once every process holding them is gone. A rank
        // that outlived the launcher would keep them open: do not wait for it
        // forever, the caller's leftover-process checks report it.
        let stdout = join_reader(self.stdout.take().unwrap(), Duration::from_secs(10));
        let stderr = join_reader(self.stderr.take().unwrap(), Duration::from_secs(10));
        Outcome {
            what: self.what.clone(),
            status,
            stdout,
            stderr,
            elapsed,
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        // A test that panics while its job runs must not leave the job behind.
        if let Ok(None) = self.child.try_wait() {
            kill_tree(self.child.id());
            let _ = self.child.wait();
        }
    }
}

fn join_reader(h: JoinHandle<Vec<u8>>, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    while !h.is_finished() {
        if Instant::now() >= deadline {
            return "[output pipe still open: some process outlived the launcher]".into();
        }
        thread::sleep(Duration::from_millis(10));
    }
    String::from_utf8_lossy(&h.join().unwrap_or_default()).into_owned()
}

// ---------------------------------------------------------------------------
// /proc helpers
// ---------------------------------------------------------------------------

/// (pid, ppid, state, pgid) of every process, from /proc/<pid>/stat.
fn proc_table() -> Vec<(u32, u32, char, u32)> {
    let mut v = Vec::new();
    let Ok(rd) = fs::read_dir("/proc") else {
        return v;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Some((state, ppid, pgid)) = stat_fields(pid) {
            v.push((pid, ppid, state, pgid));
        }
    }
    v
}

/// (state, ppid, pgid) of one process.
fn stat_fields(pid: u32) -> Option<(char, u32, u32)> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain anything.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgid = f.next()?.parse().ok()?;
    Some((state, ppid, pgid))
}

/// Is `pid` alive (exists and is not a zombie)?
pub fn pid_alive(pid: u32) -> bool {
    matches!(stat_fields(pid), Some((s, _, _)) if s != 'Z' && s != 'X')
}

/// Every descendant of `root` (children, grandchildren, ...).
pub fn descendants(root: u32) -> Vec<u32> {
    let table = proc_table();
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for &(pid, ppid, _, _) in &table {
        children.entry(ppid).or_default().push(pid);
    }
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut stack = vec![root];
    while let Some(p) = stack.pop() {
        for &c in children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
            if seen.insert(c) {
                out.push(c);
                stack.push(c);
            }
        }
    }
    out
}

/// SIGKILL `root`'s whole tree: stop the root first so it cannot start more
/// ranks, kill its descendants (and its process group), then the root.
pub fn kill_tree(root: u32) {
    use rustix::process::{kill_process, kill_process_group, Pid, Signal};
    let Some(r) = Pid::from_raw(root as i32) else {
        return;
    };
    let _ = kill_process(r, Signal::STOP);
    for _ in 0..3 {
        for p in descendants(root)
            .into_iter()
            .filter_map(|p| Pid::from_raw(p as i32))
        {
            let _ = kill_process(p, Signal::KILL);
        }
        thread::sleep(Duration::from_millis(20));
    }
    // The launcher was started as the leader of its own process group.
    let _ = kill_process_group(r, Signal::KILL);
    let _ = kill_process(r, Signal::KILL);
}

/// Send `sig` to one process.
pub fn signal(pid: u32, sig: libc::c_int) {
    use rustix::process::{kill_process, Pid, Signal};
    let p = Pid::from_raw(pid as i32).expect("pid > 0");
    let s = Signal::from_named_raw(sig).expect("a named signal");
    if let Err(e) = kill_process(p, s) {
        panic!("kill({pid}, {sig}) failed: {e}");
    }
}

/// SIGKILL one process, ignoring a process that is already gone.
fn kill9(pid: u32) {
    if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
    }
}

/// Live (non-zombie) processes whose executable is exactly `exe`, with
/// their state and command line.
pub fn processes_with_exe(exe: &Path) -> Vec<(u32, char, String)> {
    let exe = fs::canonicalize(exe).unwrap_or_else(|_| exe.to_path_buf());
    let mut v = Vec::new();
    for (pid, _, state, _) in proc_table() {
        if state == 'Z' || state == 'X' {
            continue;
        }
        let Ok(target) = fs::read_link(format!("/proc/{pid}/exe")) else {
            continue;
        };
        if target == exe {
            let cmdline = fs::read(format!("/proc/{pid}/cmdline"))
                .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
                .unwrap_or_default();
            v.push((pid, state, cmdline));
        }
    }
    v
}

/// Once the launcher has exited, no process of `exe` may remain. Allows
/// `grace` for processes that are already dying (SIGKILL delivery, parent
/// death signal); SIGKILLs and reports whatever is still there after it.
pub fn assert_no_process_left(exe: &Path, grace: Duration) {
    let deadline = Instant::now() + grace;
    loop {
        let left = processes_with_exe(exe);
        if left.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            for (pid, _, _) in &left {
                kill9(*pid);
            }
            panic!(
                "{} process(es) of {} still running {grace:.1?} after the launcher exited \
                 (now killed): {left:?}",
                left.len(),
                exe.display()
            );
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Like [`assert_no_process_left`] for a list of pids.
pub fn assert_pids_gone(pids: &[u32], grace: Duration) {
    let deadline = Instant::now() + grace;
    loop {
        let left: Vec<u32> = pids.iter().copied().filter(|&p| pid_alive(p)).collect();
        if left.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            for p in &left {
                kill9(*p);
            }
            panic!(
                "rank process(es) {left:?} still running {grace:.1?} after the launcher exited \
                 (now killed)"
            );
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Wait until `dir` holds files `pid.0` .. `pid.<n-1>` written by the test
/// programs (`pid <rank> <pid>`), failing the test if the launcher exits
/// first or `limit` passes. Returns the job and the pids indexed by rank.
pub fn wait_for_pid_files(mut job: Job, dir: &Path, n: usize, limit: Duration) -> (Job, Vec<u32>) {
    let deadline = Instant::now() + limit;
    loop {
        let mut pids = vec![0u32; n];
        let mut have = 0;
        for (r, slot) in pids.iter_mut().enumerate() {
            if let Ok(s) = fs::read_to_string(dir.join(format!("pid.{r}"))) {
                let f: Vec<&str> = s.split_whitespace().collect();
                if f.len() == 3 && f[0] == "pid" && f[1] == r.to_string() {
                    if let Ok(p) = f[2].parse() {
                        *slot = p;
                        have += 1;
                    }
                }
            }
        }
        if have == n {
            return (job, pids);
        }
        if job.try_wait().is_some() {
            let out = job.wait_or_kill(Duration::from_secs(5));
            panic!(
                "launcher exited while only {have} of {n} ranks had written their pid file\n{}",
                out.report()
            );
        }
        if Instant::now() >= deadline {
            let out = job.kill_all();
            panic!(
                "only {have} of {n} ranks wrote their pid file within {limit:.0?}; killed the \
                 job\n{}",
                out.report()
            );
        }
        thread::sleep(Duration::from_millis(20));
    }
}
