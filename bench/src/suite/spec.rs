//! The command line of one run ([`Suite::spec`]): built here for the core
//! configurations, by the families for theirs.

use std::ffi::OsString;
use std::path::PathBuf;

use super::Suite;
use crate::configs::{hydra_args, Config, RunParams, SPAWN_PARENTS};
use crate::proc::{MemProbe, Spec};
use crate::rank::FENCE_LOOP_ENV;
use crate::{deaths, groups, launch, nested, ps, python, ulfm};
use fastpmi_codec::names::env::FENCE_YIELDS;

/// Environment of the spawn runs, for both launchers: MPICH 5's default
/// UCX netmod fails spawns of 64 children on this kind of machine under
/// its own launcher too (shared-memory segments of exited peers); the ofi
/// netmod does not.
const SPAWN_ENV: &[(&str, &str)] = &[("MPIR_CVAR_CH4_NETMOD", "ofi"), ("FI_PROVIDER", "tcp")];

impl Suite {
    /// The command of one run of `c` with `n` ranks. Only called when
    /// [`Suite::missing`] is None.
    pub fn spec(&self, c: Config, n: u32, p: &RunParams) -> Spec {
        let t = &self.tools;
        let path = |r: &Result<PathBuf, String>| r.clone().unwrap_or_default();
        let os = |s: &str| OsString::from(s);
        // Keep a FASTPMI_TRANSPORT from the caller's shell from leaking into
        // the configurations that must pick their own transport.
        let mut env_remove = vec![
            os(fastpmi_codec::names::env::TRANSPORT),
            os(FENCE_LOOP_ENV),
            os(FENCE_YIELDS),
        ];
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
        let rank = t.rank_exe.clone().into_os_string();
        let (program, args, mem) = match c {
            Config::FastpmiShm => (
                path(&t.fastpmi),
                fastpmi_args(rank, &["__rank"]),
                MemProbe::Launcher,
            ),
            Config::FastpmiShmNoYield => {
                env_remove.retain(|k| k != FENCE_YIELDS);
                env_set.push((os(FENCE_YIELDS), os("0")));
                (
                    path(&t.fastpmi),
                    fastpmi_args(rank, &["__rank"]),
                    MemProbe::Launcher,
                )
            }
            Config::FastpmiSocket => {
                env_remove.retain(|k| k != fastpmi_codec::names::env::TRANSPORT);
                env_set.push((os(fastpmi_codec::names::env::TRANSPORT), os("socket")));
                (
                    path(&t.fastpmi),
                    fastpmi_args(rank, &["__rank"]),
                    MemProbe::Launcher,
                )
            }
            Config::SlurmPmi2 => (
                path(&t.fastpmi),
                fastpmi_args(path(&t.pmi2_exchange).into_os_string(), &[]),
                MemProbe::Launcher,
            ),
            Config::MpichFastpmi => (
                path(&t.fastpmi),
                fastpmi_args(path(&t.mpi_hello).into_os_string(), &[]),
                MemProbe::Launcher,
            ),
            Config::Hydra | Config::MpichHydra => {
                let prog = if c == Config::Hydra {
                    (rank, vec![os("__rank")])
                } else {
                    (path(&t.mpi_hello).into_os_string(), vec![])
                };
                let (args, proxies) = hydra_args(n, p.hydra_ppn, prog.0, prog.1);
                (path(&t.hydra), args, MemProbe::HydraTree { proxies })
            }
            Config::SpawnFastpmi | Config::SpawnHydra5 => {
                for (k, v) in SPAWN_ENV {
                    env_set.push((os(k), os(v)));
                }
                let launcher = if c == Config::SpawnFastpmi {
                    path(&t.fastpmi)
                } else {
                    path(&t.hydra5)
                };
                let args = vec![
                    os("-n"),
                    OsString::from(SPAWN_PARENTS.to_string()),
                    path(&t.mpi_spawn).into_os_string(),
                    OsString::from(n.to_string()),
                ];
                (launcher, args, MemProbe::None)
            }
            Config::LaunchFloor
            | Config::LaunchFastpmi
            | Config::LaunchShm
            | Config::LaunchSocket
            | Config::LaunchHydra
            | Config::LaunchHydraPmi => return launch::spec(t, &self.launch, c, n, p),
            Config::GroupFence => return groups::spec(t, n, p),
            Config::DeathDetect => return deaths::spec(t, n, p),
            Config::UlfmFastpmi | Config::UlfmMpirun => {
                return ulfm::spec(&self.ulfm, &path(&t.fastpmi), c, n, p)
            }
            Config::PythonFastpmi | Config::PythonMpiexec => {
                return python::spec(&self.python, c, n, p)
            }
            Config::NestSrun | Config::NestNodes => return nested::spec(t, &self.nest, c, n, p),
            Config::PsQuiet | Config::PsPolled | Config::PsSitting => return ps::spec(t, c, n, p),
            Config::Placement(i) => {
                let mut spec = self
                    .placement
                    .spec(i as usize, n, &path(&t.fastpmi), p.hydra_ppn);
                spec.timeout = p.timeout;
                return spec;
            }
            Config::FutexFloor => (
                path(&t.floor),
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
