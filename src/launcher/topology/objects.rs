//! What hwloc found that the launcher binds ranks with: every kind's
//! objects as CPU sets, and the cache sizes.

use crate::config::placement::ObjKind;

/// For every kind, its objects in hwloc's logical order, each as the
/// sorted OS numbers of its processing units.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Objects {
    pub sets: Vec<(ObjKind, Vec<Vec<u32>>)>,
    /// Size in bytes of each cache level's first object (L1 = data cache).
    pub cache_sizes: Vec<(ObjKind, u64)>,
}

impl Objects {
    /// The objects of `kind` (empty when the node has none).
    pub fn of(&self, kind: ObjKind) -> &[Vec<u32>] {
        self.sets
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(&[], |(_, v)| v.as_slice())
    }

    /// The size of a cache level, when hwloc knows it.
    pub fn cache_size(&self, kind: ObjKind) -> Option<u64> {
        self.cache_sizes
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, s)| *s)
    }
}
