//! Process placement: which CPUs each rank is bound to, from Hydra's
//! `-bind-to`/`-map-by` (and Open MPI's `--bind-to`/`--map-by`) over the
//! objects hwloc found on the node ([`Objects`]).
//!
//! The launcher computes one CPU list per rank slot here; the OS glue
//! applies it in the rank's child before exec (`sched_setaffinity`).
//! Ranks past the last slot wrap around (rank `r` gets slot
//! `r % slots`), as Hydra does when there are more ranks than objects.

use super::topology::Objects;
use crate::config::placement::{default_bind, BindTo, ObjKind, PlacementOpts};

/// A binding the node cannot give, or options that do not fit it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error(
        "-bind-to {0}: the node's topology is unknown (hwloc, Debian package libhwloc15, \
         is not installed)"
    )]
    NoTopology(ObjKind),
    #[error("-bind-to {0}: this node's topology has no such object")]
    NoBindObject(ObjKind),
    #[error("-map-by {0}: this node's topology has no such object")]
    NoMapObject(ObjKind),
    #[error("-bind-to {kind}:{per_rank}: this node has only {have} {kind} object(s)")]
    TooFewObjects {
        kind: ObjKind,
        per_rank: usize,
        have: usize,
    },
}

/// CPU lists per rank slot; rank `r` of the first job gets
/// `slots[r % slots.len()]`, later jobs' ranks what [`SlotLoad`] gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub slots: Vec<Vec<u32>>,
}

impl Plan {
    pub fn cpus(&self, rank: u32) -> &[u32] {
        &self.slots[rank as usize % self.slots.len()]
    }
}

/// How many ranks of the launcher's live jobs each slot holds. A new job's
/// ranks go, one after the other, to the slot holding the fewest (the
/// lowest on ties): the first job wraps (rank r on slot r mod slots), and a
/// spawned job fills the slots its parents left free before it doubles up
/// on theirs, instead of starting again at the first core. On ties a
/// spawned job leaves the spawning rank's slot for last: that rank
/// busy-polls in `MPI_Comm_accept` (MPICH, Intel MPI) until its children
/// connect, and a child beside it waits a time slice for every message of
/// the handshake (one child of a 2-rank MPICH 5 job on 2 cores: 130 ms on
/// the spawner's core, against Hydra's 90 ms unbound). A job's slots are
/// given back when the whole job has ended.
#[derive(Debug, Clone, Default)]
pub struct SlotLoad {
    load: Vec<u32>,
}

impl SlotLoad {
    pub fn new(slots: usize) -> SlotLoad {
        SlotLoad {
            load: vec![0; slots],
        }
    }

    /// The slot of each of a new job's `size` ranks (empty without slots);
    /// `last` (the spawning rank's slot) loses every tie.
    pub fn assign(&mut self, size: u32, last: Option<u32>) -> Vec<u32> {
        if self.load.is_empty() {
            return Vec::new();
        }
        (0..size)
            .map(|_| {
                match self
                    .load
                    .iter_mut()
                    .enumerate()
                    .min_by_key(|(i, n)| (**n, Some(*i as u32) == last, *i))
                {
                    Some((i, n)) => {
                        *n += 1;
                        i as u32
                    }
                    None => 0,
                }
            })
            .collect()
    }

    /// The job whose ranks had `slots` has ended.
    pub fn release(&mut self, slots: &[u32]) {
        for &i in slots {
            if let Some(n) = self.load.get_mut(i as usize) {
                *n = n.saturating_sub(1);
            }
        }
    }
}

/// The fence cohorts of a job whose rank `r` is bound to slot
/// `slots[r]`: ranks on the same slot form a cohort (numbered densely in
/// order of first rank), which its fence wakes with one wake on that slot's
/// CPUs (`shm_layout::cohort`). `None` when the cohorts would hold fewer
/// than [`shm_layout::cohort::COHORT_MIN_MEMBERS`] ranks on average (one
/// rank per core gains nothing, a few per core lose to the central wake)
/// or the ranks are unbound.
pub fn fence_cohorts(slots: &[u32]) -> Option<Vec<u32>> {
    let mut dense: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
    let of_rank: Vec<u32> = slots
        .iter()
        .map(|&s| {
            let next = dense.len() as u32;
            *dense.entry(s).or_insert(next)
        })
        .collect();
    let enough = dense.len() as u64 * u64::from(shm_layout::cohort::COHORT_MIN_MEMBERS);
    (!slots.is_empty() && slots.len() as u64 >= enough).then_some(of_rank)
}

fn covers(outer: &[u32], inner: &[u32]) -> bool {
    inner.iter().all(|c| outer.binary_search(c).is_ok())
}

/// Compute the slots. `Ok(None)`: no binding. An explicit binding the node
/// cannot give (no such object, fewer objects than `:N`) is an error; the
/// default policy never is.
pub fn plan(
    opts: &PlacementOpts,
    objects: Option<&Objects>,
) -> Result<Option<Plan>, PlacementError> {
    let explicit = opts.bind_to.is_some();
    let Some(objects) = objects else {
        return match opts.bind_to {
            Some(BindTo::Obj(k, _)) => Err(PlacementError::NoTopology(k)),
            _ => Ok(None),
        };
    };
    let bind = match opts.bind_to {
        Some(b) => b,
        None => default_bind(),
    };
    let BindTo::Obj(bk, per_rank) = bind else {
        return Ok(None);
    };
    let bind_objs = objects.of(bk);
    if bind_objs.is_empty() {
        return if explicit {
            Err(PlacementError::NoBindObject(bk))
        } else {
            Ok(None)
        };
    }
    let mk = opts.map_by.unwrap_or(bk);
    let map_objs = objects.of(mk);
    if map_objs.is_empty() {
        return Err(PlacementError::NoMapObject(mk));
    }
    let per_rank = per_rank as usize;
    if per_rank > bind_objs.len() {
        return Err(PlacementError::TooFewObjects {
            kind: bk,
            per_rank,
            have: bind_objs.len(),
        });
    }
    // Order the binding objects round-robin over the mapping objects: the
    // first one inside each mapping object, then the second, ... A binding
    // object larger than the mapping object (bind socket, map core) goes
    // with each mapping object it contains, in the mapping's order.
    let inside: Vec<Vec<usize>> = map_objs
        .iter()
        .map(|m| {
            (0..bind_objs.len())
                .filter(|&b| covers(m, &bind_objs[b]))
                .collect()
        })
        .collect();
    let mut order: Vec<usize> = Vec::new();
    if inside.iter().any(|v| !v.is_empty()) {
        let depth = inside.iter().map(Vec::len).max().unwrap_or(0);
        for j in 0..depth {
            for v in &inside {
                if let Some(&b) = v.get(j) {
                    order.push(b);
                }
            }
        }
    } else {
        for m in map_objs {
            if let Some(b) = (0..bind_objs.len()).find(|&b| covers(&bind_objs[b], m)) {
                order.push(b);
            }
        }
    }
    if order.is_empty() {
        order = (0..bind_objs.len()).collect();
    }
    let slots = if per_rank == 1 {
        order.iter().map(|&b| bind_objs[b].clone()).collect()
    } else {
        // `:N`: N consecutive objects (hwloc's logical order) per rank.
        let groups = bind_objs.len() / per_rank;
        (0..groups)
            .map(|g| {
                let mut cpus: Vec<u32> = bind_objs[g * per_rank..(g + 1) * per_rank]
                    .iter()
                    .flatten()
                    .copied()
                    .collect();
                cpus.sort_unstable();
                cpus.dedup();
                cpus
            })
            .collect()
    };
    Ok(Some(Plan { slots }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::placement::{parse_bind, parse_map};
    use crate::ranges::ranges;

    #[test]
    fn fence_cohorts_group_ranks_sharing_a_slot_and_only_then() {
        let min = shm_layout::cohort::COHORT_MIN_MEMBERS;
        // Ranks wrapped over 2 slots, enough of them.
        let wrapped: Vec<u32> = (0..2 * min).map(|r| r % 2).collect();
        assert_eq!(fence_cohorts(&wrapped), Some(wrapped.clone()));
        // Spawned-job style slots 3 and 1 are renumbered densely.
        let spawned: Vec<u32> = (0..2 * min)
            .map(|r| if r % 2 == 0 { 3 } else { 1 })
            .collect();
        assert_eq!(fence_cohorts(&spawned), Some(wrapped.clone()));
        // Too few per slot, one rank per slot, or unbound: no cohorts.
        assert_eq!(fence_cohorts(&wrapped[..2 * min as usize - 1]), None);
        assert_eq!(fence_cohorts(&[0, 1, 2, 3]), None);
        assert_eq!(fence_cohorts(&[]), None);
    }

    #[test]
    fn later_jobs_fill_the_slots_earlier_ones_left_free() {
        let mut l = SlotLoad::new(4);
        // The first job wraps.
        assert_eq!(l.assign(6, None), vec![0, 1, 2, 3, 0, 1]);
        // A job spawned beside it starts on the slots holding one rank.
        let spawned = l.assign(3, Some(1));
        assert_eq!(spawned, vec![2, 3, 0]);
        // Once it has ended, its slots are free again.
        l.release(&spawned);
        assert_eq!(l.assign(2, None), vec![2, 3]);
        // One rank of two slots: its child goes to the other core.
        let mut l = SlotLoad::new(2);
        assert_eq!(l.assign(1, None), vec![0]);
        assert_eq!(l.assign(1, Some(0)), vec![1]);
        // No binding: no slots.
        assert!(SlotLoad::new(0).assign(5, None).is_empty());
    }

    #[test]
    fn a_spawned_job_leaves_the_spawners_slot_for_last() {
        // Two parents on two cores; rank 0 (slot 0) spawns.
        let mut l = SlotLoad::new(2);
        assert_eq!(l.assign(2, None), vec![0, 1]);
        assert_eq!(l.assign(1, Some(0)), vec![1]);
        let mut l = SlotLoad::new(2);
        l.assign(2, None);
        // More children than slots: alternating, the spawner's slot second.
        assert_eq!(l.assign(4, Some(0)), vec![1, 0, 1, 0]);
        // Rank 1 spawns: slot 0 first.
        let mut l = SlotLoad::new(2);
        l.assign(2, None);
        assert_eq!(l.assign(1, Some(1)), vec![0]);
        // A free slot still wins over a tie elsewhere.
        let mut l = SlotLoad::new(3);
        l.assign(2, None);
        assert_eq!(l.assign(2, Some(0)), vec![2, 1]);
    }

    /// 2 sockets x 2 cores x 2 hwthreads (PUs numbered socket-major).
    fn node() -> Objects {
        let pus: Vec<Vec<u32>> = (0..8).map(|p| vec![p]).collect();
        let cores: Vec<Vec<u32>> = (0..4).map(|c| vec![2 * c, 2 * c + 1]).collect();
        let sockets = vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]];
        Objects {
            sets: vec![
                (ObjKind::HwThread, pus),
                (ObjKind::Core, cores),
                (ObjKind::Socket, sockets.clone()),
                (ObjKind::Numa, sockets),
            ],
            cache_sizes: Vec::new(),
        }
    }

    fn opts(bind: &str, map: Option<&str>) -> PlacementOpts {
        PlacementOpts {
            bind_to: Some(parse_bind(bind).unwrap()),
            map_by: map.map(|m| parse_map(m).unwrap()),
            ..Default::default()
        }
    }

    fn lists(p: &Plan, n: u32) -> Vec<String> {
        (0..n).map(|r| ranges(p.cpus(r))).collect()
    }

    #[test]
    fn core_binding_wraps_past_the_last_core() {
        let p = plan(&opts("core", None), Some(&node())).unwrap().unwrap();
        assert_eq!(lists(&p, 6), ["0-1", "2-3", "4-5", "6-7", "0-1", "2-3"]);
    }

    #[test]
    fn map_by_socket_alternates_sockets() {
        let p = plan(&opts("core", Some("socket")), Some(&node()))
            .unwrap()
            .unwrap();
        assert_eq!(lists(&p, 4), ["0-1", "4-5", "2-3", "6-7"]);
        let p = plan(&opts("socket", Some("core")), Some(&node()))
            .unwrap()
            .unwrap();
        assert_eq!(lists(&p, 4), ["0-3", "0-3", "4-7", "4-7"]);
    }

    #[test]
    fn counts_and_errors() {
        let p = plan(&opts("core:2", None), Some(&node())).unwrap().unwrap();
        assert_eq!(lists(&p, 3), ["0-3", "4-7", "0-3"]);
        assert!(plan(&opts("socket:3", None), Some(&node())).is_err());
        assert!(plan(&opts("l3cache", None), Some(&node())).is_err());
        assert!(plan(&opts("core", None), None).is_err());
        assert_eq!(plan(&opts("none", None), Some(&node())), Ok(None));
        for bad in ["bogus", "socket:0", "core:", "core:x", "core:-1"] {
            assert!(parse_bind(bad).is_err(), "{bad}");
        }
        assert!(parse_map("none").is_err());
    }

    #[test]
    fn default_binds_one_core_per_rank_wrapping() {
        let d = PlacementOpts::default();
        // One plan for any job size: ranks past the cores wrap around.
        let p = plan(&d, Some(&node())).unwrap().unwrap();
        assert_eq!(lists(&p, 4), ["0-1", "2-3", "4-5", "6-7"]);
        assert_eq!(lists(&p, 6), ["0-1", "2-3", "4-5", "6-7", "0-1", "2-3"]);
        assert_eq!(plan(&d, None), Ok(None));
    }
}
