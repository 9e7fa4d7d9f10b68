//! The command line of one run of the core configurations ([`Tools::spec`];
//! the families build their own), the per-run knobs and Hydra's arguments.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use super::{Config, Tools};
use crate::proc::{MemProbe, Spec};
use crate::rank::FENCE_LOOP_ENV;
use fastpmi_codec::names::env::FENCE_YIELDS;

/// Environment of the spawn runs, for both launchers: MPICH 5's default
/// UCX netmod fails spawns of 64 children on this kind of machine under
/// its own launcher too (shared-memory segments of exited peers); the ofi
/// netmod does not.
const SPAWN_ENV: &[(&str, &str)] = &[("MPIR_CVAR_CH4_NETMOD", "ofi"), ("FI_PROVIDER", "tcp")];
/// Parent ranks of the spawn runs.
pub const SPAWN_PARENTS: u32 = 2;

impl Tools {
    /// The command of one run of `c` with `n` ranks. Only called when
    /// [`Tools::missing`] is None.
    pub fn spec(&self, c: Config, n: u32, p: &RunParams) -> Spec {
        let path = |r: &Result<PathBuf, String>| r.clone().unwrap_or_default();
        let os = |s: &str| OsString::from(s);
        // Keep a FASTPMI_TRANSPORT from the caller's shell from leaking into
        // the configurations that must pick their own transport.
        let mut env_remove = vec![
            os("FASTPMI_TRANSPORT"),
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
        let rank = self.rank_exe.clone().into_os_string();
        let (program, args, mem) = match c {
            Config::FastpmiShm => (
                path(&self.fastpmi),
                fastpmi_args(rank, &["__rank"]),
                MemProbe::Launcher,
            ),
            Config::FastpmiShmNoYield => {
                env_remove.retain(|k| k != FENCE_YIELDS);
                env_set.push((os(FENCE_YIELDS), os("0")));
                (
                    path(&self.fastpmi),
                    fastpmi_args(rank, &["__rank"]),
                    MemProbe::Launcher,
                )
            }
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
            | Config::LaunchHydraPmi => return crate::launch::spec(self, c, n, p),
            Config::GroupFence => return crate::groups::spec(self, n, p),
            Config::PsQuiet | Config::PsPolled | Config::PsSitting => {
                return crate::ps::spec(self, c, n, p)
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
    /// Steady-state fences per Rust-client run (0: none), see [`crate::rank`].
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
}
