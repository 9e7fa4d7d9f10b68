//! The last trade round the node servers of a fault-tolerant job agree on
//! once a rank died (see `Exchange::end`): the rounds each proposed, heard
//! by the mesh thread ([`super::mesh`]), and the node servers gone.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// The last trade rounds the node servers proposed once a rank died, and
/// those gone (lost, or done with `bye`) that will propose none.
#[derive(Default)]
pub(super) struct Agreement {
    ends: Mutex<Ends>,
    cv: Condvar,
}

#[derive(Default)]
struct Ends {
    proposals: BTreeMap<u32, u64>,
    gone: BTreeSet<u32>,
}

impl Agreement {
    pub(super) fn propose(&self, node: u32, round: u64) {
        let mut e = self.ends.lock().unwrap_or_else(|p| p.into_inner());
        e.proposals.insert(node, round);
        self.cv.notify_all();
    }

    pub(super) fn gone(&self, node: u32) {
        let mut e = self.ends.lock().unwrap_or_else(|p| p.into_inner());
        e.gone.insert(node);
        self.cv.notify_all();
    }

    /// Whether a node server is gone (lost, unreachable, or done).
    pub(super) fn any_gone(&self) -> bool {
        !self
            .ends
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .gone
            .is_empty()
    }

    /// Waits until every node server but `me` (of `nodes`) proposed its
    /// last round: the highest of theirs and `mine`. `None` when one is
    /// gone: no outer fence can complete without it.
    pub(super) fn last_round(&self, me: u32, nodes: u32, mine: u64) -> Option<u64> {
        let mut e = self.ends.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if !e.gone.is_empty() {
                return None;
            }
            let heard = (0..nodes)
                .filter(|&n| n != me)
                .all(|n| e.proposals.contains_key(&n));
            if heard {
                return Some(e.proposals.values().copied().fold(mine, u64::max));
            }
            e = self
                .cv
                .wait_timeout(e, Duration::from_millis(200))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_round_is_the_highest_proposed() {
        let a = Agreement::default();
        a.propose(1, 5);
        a.propose(2, 4);
        assert_eq!(a.last_round(0, 3, 4), Some(5));
        a.gone(2);
        assert_eq!(a.last_round(0, 3, 4), None);
    }
}
