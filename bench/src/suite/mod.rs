//! What goes over every configuration, the core ones and the families'
//! (start-up, group fence, `fastpmi ps`, death detection, ULFM, Python, placement) alike: the tools they
//! need ([`Suite::prepare`], [`Suite::missing`]), the command of one run
//! ([`Suite::spec`], in `spec.rs`) and how a finished run is judged
//! ([`judge()`]). The families sit below this module; nothing but `main` and
//! the report imports it.

use std::path::{Path, PathBuf};

use crate::configs::{Config, Kind};
use crate::launch::{self, LaunchTools};
use crate::nested::{self, NestTools};
use crate::python::PythonTools;
use crate::tools::Tools;
use crate::ulfm::UlfmTools;
use crate::{deaths, groups, placement, ps};

mod judge;
mod spec;

pub use judge::judge;

/// Everything found or built before the first run.
#[derive(Debug, Clone)]
pub struct Suite {
    /// The core configurations' programs and the launchers.
    pub tools: Tools,
    /// The job start-up configurations' programs.
    pub launch: LaunchTools,
    /// Programs and launchers of the placement rows.
    pub placement: placement::Tools,
    /// The private Slurm and libraries of the nested rows.
    pub nest: NestTools,
    /// The Open MPI wheel and program of the ULFM rows.
    pub ulfm: UlfmTools,
    /// The venv (the wheel, mpich, mpi4py) and programs of the Python rows.
    pub python: PythonTools,
}

impl Suite {
    /// Locate the launchers and compile the C programs into `build_dir`.
    /// `want` says which configurations will run (nothing else is built).
    pub fn prepare(build_dir: &Path, want: &[Config]) -> Result<Suite, String> {
        let tools = Tools::prepare(build_dir, want)?;
        let exe_dir = tools.exe_dir().to_path_buf();
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
        let nest = NestTools::prepare(
            build_dir,
            &exe_dir,
            want.iter().any(|c| c.kind() == Kind::Nested),
        );
        let ulfm = UlfmTools::prepare(build_dir, want.iter().any(|c| c.kind() == Kind::Ulfm));
        let python = PythonTools::prepare(
            build_dir,
            &exe_dir,
            want.iter().any(|c| c.kind() == Kind::Python),
        );
        Ok(Suite {
            tools,
            launch,
            placement,
            nest,
            ulfm,
            python,
        })
    }

    /// Why `c` cannot run, or None when everything it needs is there.
    pub fn missing(&self, c: Config) -> Option<String> {
        let t = &self.tools;
        let need: Vec<&Result<PathBuf, String>> = match c {
            Config::FastpmiShm | Config::FastpmiShmNoYield | Config::FastpmiSocket => {
                vec![&t.fastpmi]
            }
            Config::Hydra => vec![&t.hydra],
            Config::SlurmPmi2 => vec![&t.fastpmi, &t.pmi2_exchange],
            Config::FutexFloor => vec![&t.floor],
            Config::MpichFastpmi => vec![&t.fastpmi, &t.mpi_hello],
            Config::MpichHydra => vec![&t.hydra, &t.mpi_hello],
            Config::SpawnFastpmi => vec![&t.fastpmi, &t.mpi_spawn],
            Config::SpawnHydra5 => vec![&t.hydra5, &t.mpi_spawn],
            Config::Placement(i) => {
                return match (&t.fastpmi, self.placement.missing(i as usize)) {
                    (Err(e), _) => Some(e.clone()),
                    (_, why) => why,
                };
            }
            Config::GroupFence => groups::needs(t, c),
            Config::DeathDetect => deaths::needs(t, c),
            Config::PsQuiet | Config::PsPolled | Config::PsSitting => ps::needs(t, c),
            Config::NestSrun | Config::NestNodes => return nested::missing(t, &self.nest),
            Config::UlfmFastpmi | Config::UlfmMpirun => {
                return match (&t.fastpmi, self.ulfm.missing()) {
                    (Err(e), _) if c == Config::UlfmFastpmi => Some(e.clone()),
                    (_, why) => why,
                };
            }
            Config::PythonFastpmi | Config::PythonMpiexec => return self.python.missing(),
            _ => launch::needs(t, &self.launch, c),
        };
        let reasons: Vec<&str> = need
            .iter()
            .filter_map(|r| r.as_ref().err().map(String::as_str))
            .collect();
        (!reasons.is_empty()).then(|| reasons.join("; "))
    }
}
