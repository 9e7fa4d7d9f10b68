//! The configurations the harness compares: their names, kinds, families
//! and descriptions, the placement rows' cases ([`placement`]) and the
//! per-run knobs ([`RunParams`]). The bottom of the crate: it imports no
//! other module of it. The tools each configuration needs are found or
//! built in [`crate::tools`] and by the families; what goes over every
//! configuration (tools, command, judging) is in [`crate::suite`].
//!
//! A configuration whose tool is missing is never dropped:
//! [`Availability::Missing`] gives the reason the report prints in its
//! place.

use std::fmt;

mod params;
pub mod placement;

pub use params::{hydra_args, RunParams, SPAWN_PARENTS};

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
    /// One job under Slurm: slurmstepd alone vs fastpmi node servers.
    Nested,
    /// A fault-tolerant job: SIGKILL of one rank to the others' error.
    Death,
    /// An Open MPI 5 ULFM job after a rank's death: whole-job wall time,
    /// fastpmi vs `mpirun --with-ft ulfm`.
    Ulfm,
    /// Python ranks exchanging addresses: whole-job wall time, the wheel's
    /// fastpmi and module vs the `mpich` wheel's `mpiexec` and mpi4py.
    Python,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Config {
    FastpmiShm,
    /// [`Config::FastpmiShm`] with `FASTPMI_FENCE_YIELDS=0`.
    FastpmiShmNoYield,
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
    /// `srun --mpi=pmi2 -n N` of the exchange on fastpmi's libpmi2.
    NestSrun,
    /// The same job served by 4 fastpmi node servers under srun.
    NestNodes,
    /// `fastpmi --fault-tolerant`: death detection ([`crate::deaths`]).
    DeathDetect,
    /// `fastpmi --with-ft ulfm` of `ulfm_shrink 3` ([`crate::ulfm`]).
    UlfmFastpmi,
    /// The same under the Open MPI wheel's `mpirun --with-ft ulfm`.
    UlfmMpirun,
    /// `fastpmi -n N python pmi_exchange.py` from the wheel ([`crate::python`]).
    PythonFastpmi,
    /// `mpiexec -n N python mpi4py_allgather.py` from the `mpich` wheel.
    PythonMpiexec,
    /// A row of [`placement::CASES`] (index).
    Placement(u8),
}

/// The configurations outside the families that keep their own list: the
/// PMI exchange, MPICH start-up and spawn rows.
const CORE: [Config; 10] = [
    Config::FastpmiShm,
    Config::FastpmiShmNoYield,
    Config::FastpmiSocket,
    Config::Hydra,
    Config::SlurmPmi2,
    Config::FutexFloor,
    Config::MpichFastpmi,
    Config::MpichHydra,
    Config::SpawnFastpmi,
    Config::SpawnHydra5,
];

/// The job start-up family ([`crate::launch`]), in the report's order.
pub const LAUNCH: [Config; 6] = [
    Config::LaunchFloor,
    Config::LaunchFastpmi,
    Config::LaunchShm,
    Config::LaunchSocket,
    Config::LaunchHydra,
    Config::LaunchHydraPmi,
];

/// The group fence family ([`crate::groups`]).
pub const GROUP: [Config; 1] = [Config::GroupFence];

/// The `fastpmi ps` family ([`crate::ps`]).
pub const PS: [Config; 3] = [Config::PsQuiet, Config::PsPolled, Config::PsSitting];

/// The nested-mode family ([`crate::nested`]).
pub const NEST: [Config; 2] = [Config::NestSrun, Config::NestNodes];

/// The death-detection family ([`crate::deaths`]).
pub const DEATH: [Config; 1] = [Config::DeathDetect];

/// The ULFM family ([`crate::ulfm`]).
pub const ULFM: [Config; 2] = [Config::UlfmFastpmi, Config::UlfmMpirun];

/// The Python family ([`crate::python`]).
pub const PYTHON: [Config; 2] = [Config::PythonFastpmi, Config::PythonMpiexec];

/// The rank the ULFM runs' program SIGKILLs (its argument): their jobs
/// need at least one more rank.
pub const ULFM_VICTIM: u32 = 3;

/// The families' own lists, in the report's order after [`CORE`].
const FAMILIES: [&[Config]; 7] = [&LAUNCH, &GROUP, &PS, &DEATH, &ULFM, &PYTHON, &NEST];

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
            Config::FastpmiShmNoYield => "fastpmi-shm-yields0",
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
            Config::NestSrun => "pmi2-exchange@srun",
            Config::NestNodes => "pmi2-exchange@srun+4-node-servers",
            Config::DeathDetect => "death-detect@fastpmi-shm",
            Config::UlfmFastpmi => "ompi5-ulfm@fastpmi",
            Config::UlfmMpirun => "ompi5-ulfm@mpirun",
            Config::PythonFastpmi => "python-pmi@fastpmi",
            Config::PythonMpiexec => "python-mpi4py@mpiexec",
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
            Config::NestSrun | Config::NestNodes => Kind::Nested,
            Config::DeathDetect => Kind::Death,
            Config::UlfmFastpmi | Config::UlfmMpirun => Kind::Ulfm,
            Config::PythonFastpmi | Config::PythonMpiexec => Kind::Python,
            _ => Kind::Exchange,
        }
    }

    /// The transport rank 0 must report for the run to count (the Rust
    /// client's configurations only).
    pub fn expected_transport(self) -> Option<&'static str> {
        match self {
            Config::FastpmiShm
            | Config::FastpmiShmNoYield
            | Config::PsQuiet
            | Config::PsPolled
            | Config::PsSitting => Some("shm"),
            Config::FastpmiSocket | Config::Hydra => Some("socket"),
            _ => None,
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Config::FastpmiShm => {
                "fastpmi launcher, Rust client, shared-memory path (must report transport=shm)"
            }
            Config::FastpmiShmNoYield => {
                "the same with FASTPMI_FENCE_YIELDS=0: fence waiters sleep at once, without yielding the CPU first"
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
                "bench/c/mpi_hello.c or mpi_allreduce.c (Intel MPI, MPICH 4, MPICH 5, Open MPI 5): whole job"
            }
            Config::NestSrun => {
                "srun --mpi=pmi2 -n N (private Slurm): bench/c/pmi2_exchange.c on fastpmi's libpmi2.so.0 over slurmstepd's socket"
            }
            Config::NestNodes => {
                "srun --mpi=pmi2 -n 4 fastpmi -n N/4: the same program, one job over 4 node servers, each node on its segment"
            }
            Config::DeathDetect => {
                "fastpmi --fault-tolerant, Rust client, shared memory: rank N-1 SIGKILLs itself while the others wait in fence 2; time to their RanksDied error"
            }
            Config::UlfmFastpmi => {
                "tests/c/ulfm_shrink.c 3 (Open MPI 5 wheel) under fastpmi --with-ft ulfm: rank 3 SIGKILLs itself, the others revoke, shrink, allreduce; whole job"
            }
            Config::UlfmMpirun => {
                "the same under the wheel's mpirun --with-ft ulfm (prterun does not take --with-ft)"
            }
            Config::PythonFastpmi => {
                "bench/python/pmi_exchange.py under the wheel's fastpmi: fastpmi.Pmi() put of the rank's address, fence, get of every rank's (shared memory); whole job"
            }
            Config::PythonMpiexec => {
                "bench/python/mpi4py_allgather.py under the mpich wheel's mpiexec (Hydra 5): mpi4py COMM_WORLD.allgather of the address; whole job"
            }
        }
    }
}

/// Whether the configuration was run, and if not why.
#[derive(Debug, Clone)]
pub enum Availability {
    Present,
    Missing(String),
    /// Left out on purpose; the text says by which option.
    NotSelected(&'static str),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shm_names() {
        assert!(is_shm_transport("shm"));
        assert!(is_shm_transport("sharedmemory"));
        assert!(!is_shm_transport("socket"));
        assert!(!is_shm_transport("singleton"));
    }
}
