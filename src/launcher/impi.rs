//! Intel MPI's launcher hints. Intel's `mpiexec.hydra` hands every rank the
//! node's processor identification (`I_MPI_INFO_*`: what its `cpuinfo`
//! prints) and the ranks' placement (`I_MPI_PIN_MAPPING`, and
//! `I_MPI_PIN_INFO` per rank). Given both, Intel MPI's ranks know which of
//! them share a core and a package without working it out themselves; given
//! neither (as under any other launcher) a 64-rank Intel MPI hello spends
//! a fifth of its CPU spinning in `MPIDI_SHMGR_Release` and takes 1.2x to
//! 1.3x as long. fastpmi gives the same hints from hwloc's topology and its
//! own binding (docs/placement.md has the measurements and the format).
//!
//! Only the topology words are given, not the `CPUID` words Intel's
//! launcher adds (flags, signature, brand): the ranks still read those
//! themselves, and the measured gain does not need them. A variable the
//! user set is never replaced.

use std::ffi::OsString;

use super::topology::Objects;
use crate::config::placement::ObjKind;

/// Longest `I_MPI_PIN_MAPPING` handed out: one environment string may not
/// pass 128 KiB (`MAX_ARG_STRLEN`), and exec fails beyond it.
const MAPPING_MAX: usize = 64 * 1024;

/// What the launcher computes once from the topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hints {
    /// `I_MPI_INFO_*` pairs, the same for every rank of every job.
    pub info: Vec<(String, String)>,
    /// Every processing unit, for ranks that are not bound.
    pub all_cpus: Vec<u32>,
}

impl Hints {
    /// The node's processor identification, in Intel's words: per logical
    /// CPU (ascending OS number) its thread number in its core, its core
    /// number in its package, its package, and per cache level the cache
    /// it uses. `None` without processing units or packages.
    pub fn from_topology(o: &Objects) -> Option<Hints> {
        let mut cpus: Vec<u32> = o.of(ObjKind::HwThread).iter().flatten().copied().collect();
        cpus.sort_unstable();
        cpus.dedup();
        let cores = o.of(ObjKind::Core);
        let packages = o.of(ObjKind::Socket);
        if cpus.is_empty() || cores.is_empty() || packages.is_empty() {
            return None;
        }
        let index_of = |sets: &[Vec<u32>], cpu: u32| sets.iter().position(|s| s.contains(&cpu));
        let list = |v: Vec<usize>| v.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
        let mut thread = Vec::with_capacity(cpus.len());
        let mut core = Vec::with_capacity(cpus.len());
        let mut pack = Vec::with_capacity(cpus.len());
        for &c in &cpus {
            let p = index_of(packages, c)?;
            let k = index_of(cores, c)?;
            // Core numbers restart in every package, as cpuinfo shows them.
            let in_pack = cores[..k]
                .iter()
                .filter(|s| s.first().and_then(|&f| index_of(packages, f)) == Some(p))
                .count();
            thread.push(cores[k].iter().position(|&x| x == c)?);
            core.push(in_pack);
            pack.push(p);
        }
        let mut info = vec![
            ("I_MPI_INFO_LCPU".to_string(), cpus.len().to_string()),
            ("I_MPI_INFO_NC".to_string(), cores.len().to_string()),
            ("I_MPI_INFO_NP".to_string(), packages.len().to_string()),
            ("I_MPI_INFO_THREAD".to_string(), list(thread)),
            ("I_MPI_INFO_CORE".to_string(), list(core)),
            ("I_MPI_INFO_PACK".to_string(), list(pack)),
        ];
        let levels: Vec<(ObjKind, u64)> = [ObjKind::L1Cache, ObjKind::L2Cache, ObjKind::L3Cache]
            .into_iter()
            .filter_map(|k| Some((k, o.cache_size(k)?)))
            .take_while(|(k, _)| !o.of(*k).is_empty())
            .collect();
        if !levels.is_empty() {
            let mut sizes = Vec::new();
            let mut share = Vec::new();
            for (i, (k, size)) in levels.iter().enumerate() {
                let sets = o.of(*k);
                let ids: Option<Vec<usize>> = cpus.iter().map(|&c| index_of(sets, c)).collect();
                info.push((format!("I_MPI_INFO_CACHE{}", i + 1), list(ids?)));
                sizes.push(size.to_string());
                share.push(sets[0].len().to_string());
            }
            info.push(("I_MPI_INFO_CACHES".into(), levels.len().to_string()));
            info.push(("I_MPI_INFO_CACHE_SIZE".into(), sizes.join(",")));
            info.push(("I_MPI_INFO_CACHE_SHARE".into(), share.join(",")));
        }
        // One NUMA node is written as Intel's launcher writes it; the map of
        // several is left to the ranks (its format is not documented).
        if o.of(ObjKind::Numa).len() <= 1 {
            info.push(("I_MPI_INFO_NUMA_NODE_NUM".into(), "1".into()));
            info.push(("I_MPI_INFO_NUMA_NODE_MAP".into(), String::new()));
        }
        Some(Hints {
            info,
            all_cpus: cpus,
        })
    }
}

const PIN_INFO: &str = "I_MPI_PIN_INFO";

/// One job's hints: the pairs every rank gets, and each rank's
/// `I_MPI_PIN_INFO`.
pub struct JobHints {
    common: Vec<(String, String)>,
    pin_info: Vec<String>,
    /// The launcher's own environment counts as the user's choice (not
    /// for a node server: its hints came from the outer launcher, about
    /// the node server itself, docs/nested.md).
    inherited: bool,
}

impl Hints {
    /// The hints of a job of `size` ranks on this node; for a node
    /// server's (docs/nested.md), `nested` is the job's rank of the first.
    /// `bound(r)` is local rank r's CPU set when the launcher binds it
    /// (unbound ranks may run on every CPU).
    pub fn for_job<'a>(
        &'a self,
        size: u32,
        nested: Option<u32>,
        bound: impl Fn(u32) -> Option<&'a [u32]>,
    ) -> JobHints {
        let cpus: Vec<&[u32]> = (0..size)
            .map(|r| bound(r).unwrap_or(&self.all_cpus))
            .collect();
        let mut common = self.info.clone();
        let first_cpus = cpus.iter().map(|c| c.first().copied().unwrap_or(0));
        if let Some(m) = pin_mapping(nested.unwrap_or(0), first_cpus) {
            common.push(("I_MPI_PIN_MAPPING".into(), m));
        }
        JobHints {
            common,
            pin_info: cpus.iter().map(|c| pin_info(c)).collect(),
            inherited: nested.is_none(),
        }
    }
}

impl JobHints {
    /// The pairs an application's environment gains: those its user did
    /// not set.
    pub fn app_env(&self, app_env: &[(OsString, OsString)]) -> Vec<(OsString, OsString)> {
        self.common
            .iter()
            .filter(|(k, _)| !user_set(k, app_env, self.inherited))
            .map(|(k, v)| (k.into(), v.into()))
            .collect()
    }

    /// Whether the ranks of an application get `I_MPI_PIN_INFO` (its user
    /// did not set one).
    pub fn sets_pin_info(&self, app_env: &[(OsString, OsString)]) -> bool {
        !user_set(PIN_INFO, app_env, self.inherited)
    }

    /// Rank `rank`'s `I_MPI_PIN_INFO` pair.
    pub fn rank_env(&self, rank: u32) -> (&'static str, String) {
        (PIN_INFO, self.pin_info[rank as usize].clone())
    }
}

/// `I_MPI_PIN_MAPPING` of a node's ranks: `N:R0 c0,R1 c1,...`, each of its
/// N ranks by its rank in the job (from `first` on) with the first CPU it
/// may run on (what Intel's launcher writes, bound or not; Intel MPI's
/// collectives crash when a node's ranks are misnamed). `None` when it
/// would be too long for one environment string.
fn pin_mapping(first: u32, first_cpus: impl ExactSizeIterator<Item = u32>) -> Option<String> {
    let mut s = format!("{}:", first_cpus.len());
    for (r, c) in first_cpus.enumerate() {
        if r > 0 {
            s.push(',');
        }
        s.push_str(&format!("{} {c}", first as usize + r));
        if s.len() > MAPPING_MAX {
            return None;
        }
    }
    Some(s)
}

/// Whether the user chose `name` already (the launcher's environment when
/// `inherited`, or the application's `-genv`/spawn `env` pairs): theirs
/// stays.
fn user_set(name: &str, app_env: &[(OsString, OsString)], inherited: bool) -> bool {
    (inherited && std::env::var_os(name).is_some()) || app_env.iter().any(|(k, _)| k == name)
}

/// `I_MPI_PIN_INFO` of a rank: the CPUs it may run on, comma-separated.
fn pin_info(cpus: &[u32]) -> String {
    cpus.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two packages of two cores of two threads; L1/L2 per core, L3 per
    /// package; OS numbers as Linux gives them (thread siblings apart).
    fn two_sockets() -> Objects {
        let cores = vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]];
        Objects {
            sets: vec![
                (ObjKind::HwThread, (0..8).map(|c| vec![c]).collect()),
                (ObjKind::Core, cores.clone()),
                (ObjKind::L1Cache, cores.clone()),
                (ObjKind::L2Cache, cores),
                (ObjKind::L3Cache, vec![vec![0, 1, 4, 5], vec![2, 3, 6, 7]]),
                (ObjKind::Numa, vec![vec![0, 1, 4, 5], vec![2, 3, 6, 7]]),
                (ObjKind::Socket, vec![vec![0, 1, 4, 5], vec![2, 3, 6, 7]]),
            ],
            cache_sizes: vec![
                (ObjKind::L1Cache, 32768),
                (ObjKind::L2Cache, 1 << 20),
                (ObjKind::L3Cache, 32 << 20),
            ],
        }
    }

    fn get<'a>(h: &'a Hints, k: &str) -> Option<&'a str> {
        h.info.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
    }

    #[test]
    fn two_sockets_of_hyperthreaded_cores() {
        let h = Hints::from_topology(&two_sockets()).unwrap();
        assert_eq!(get(&h, "I_MPI_INFO_LCPU"), Some("8"));
        assert_eq!(get(&h, "I_MPI_INFO_NC"), Some("4"));
        assert_eq!(get(&h, "I_MPI_INFO_NP"), Some("2"));
        assert_eq!(get(&h, "I_MPI_INFO_PACK"), Some("0,0,1,1,0,0,1,1"));
        assert_eq!(get(&h, "I_MPI_INFO_CORE"), Some("0,1,0,1,0,1,0,1"));
        assert_eq!(get(&h, "I_MPI_INFO_THREAD"), Some("0,0,0,0,1,1,1,1"));
        assert_eq!(get(&h, "I_MPI_INFO_CACHES"), Some("3"));
        assert_eq!(get(&h, "I_MPI_INFO_CACHE1"), Some("0,1,2,3,0,1,2,3"));
        assert_eq!(get(&h, "I_MPI_INFO_CACHE3"), Some("0,0,1,1,0,0,1,1"));
        assert_eq!(
            get(&h, "I_MPI_INFO_CACHE_SIZE"),
            Some("32768,1048576,33554432")
        );
        assert_eq!(get(&h, "I_MPI_INFO_CACHE_SHARE"), Some("2,2,4"));
        // Two NUMA nodes: their map is the ranks' own business.
        assert_eq!(get(&h, "I_MPI_INFO_NUMA_NODE_NUM"), None);
        assert_eq!(h.all_cpus, (0..8).collect::<Vec<_>>());
    }

    /// This development machine's shape, as Intel's launcher wrote it.
    #[test]
    fn two_cores_as_intels_launcher_writes_them() {
        let o = Objects {
            sets: vec![
                (ObjKind::HwThread, vec![vec![0], vec![1]]),
                (ObjKind::Core, vec![vec![0], vec![1]]),
                (ObjKind::L1Cache, vec![vec![0], vec![1]]),
                (ObjKind::L2Cache, vec![vec![0], vec![1]]),
                (ObjKind::L3Cache, vec![vec![0, 1]]),
                (ObjKind::Numa, vec![vec![0, 1]]),
                (ObjKind::Socket, vec![vec![0, 1]]),
            ],
            cache_sizes: vec![
                (ObjKind::L1Cache, 32768),
                (ObjKind::L2Cache, 1048576),
                (ObjKind::L3Cache, 33554432),
            ],
        };
        let h = Hints::from_topology(&o).unwrap();
        let want = [
            ("I_MPI_INFO_LCPU", "2"),
            ("I_MPI_INFO_NC", "2"),
            ("I_MPI_INFO_NP", "1"),
            ("I_MPI_INFO_THREAD", "0,0"),
            ("I_MPI_INFO_CORE", "0,1"),
            ("I_MPI_INFO_PACK", "0,0"),
            ("I_MPI_INFO_CACHE1", "0,1"),
            ("I_MPI_INFO_CACHE2", "0,1"),
            ("I_MPI_INFO_CACHE3", "0,0"),
            ("I_MPI_INFO_CACHES", "3"),
            ("I_MPI_INFO_CACHE_SIZE", "32768,1048576,33554432"),
            ("I_MPI_INFO_CACHE_SHARE", "1,1,2"),
            ("I_MPI_INFO_NUMA_NODE_NUM", "1"),
            ("I_MPI_INFO_NUMA_NODE_MAP", ""),
        ];
        for (k, v) in want {
            assert_eq!(get(&h, k), Some(v), "{k}");
        }
        assert_eq!(h.info.len(), want.len());
    }

    #[test]
    fn no_packages_no_hints() {
        let mut o = two_sockets();
        o.sets.retain(|(k, _)| *k != ObjKind::Socket);
        assert_eq!(Hints::from_topology(&o), None);
    }

    #[test]
    fn mapping_and_info_forms() {
        assert_eq!(
            pin_mapping(0, [0, 1, 0, 1].into_iter()).as_deref(),
            Some("4:0 0,1 1,2 0,3 1")
        );
        // A node server's ranks by their ranks in the job, as Intel's
        // launcher writes them on a job's second node.
        assert_eq!(
            pin_mapping(2, [0, 1].into_iter()).as_deref(),
            Some("2:2 0,3 1")
        );
        assert_eq!(pin_info(&[0, 1]), "0,1");
        assert_eq!(pin_info(&[3]), "3");
        // 20 000 ranks would pass 64 KiB: not handed out.
        assert_eq!(pin_mapping(0, std::iter::repeat_n(0, 20_000)), None);
    }
}
