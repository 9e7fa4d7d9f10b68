//! The group fences in progress in one job (rows of its table, and what
//! `--fence-timeout` checks): who arrived, who is missing, since when.
//!
//! A group fences either on the server's barrier (the server records each
//! member's arrival) or on a barrier slot in the job segment, which only
//! counts arrivals: there each member records in its own rank record that
//! it arrives at that slot in that generation ([`RankState::group_wait`]),
//! before it arrives, so a member the slot counts has always said so.
//!
//! [`RankState::group_wait`]: shm_layout::RankState::group_wait

use super::proto::{GroupFenceRow, RankRow};
use super::{instant_ns, mono_ns, secs};
use fastpmi_server::status::GroupFence;

/// The group fences in progress (one row each) of the job whose segment is
/// `seg`. With `rows` (the job's rank rows), a member that arrived and
/// otherwise runs becomes "in fence of group G" (kind `in_group_fence`)
/// since its arrival.
pub fn group_fences(
    groups: &[GroupFence],
    seg: Option<shm_layout::SegmentRef<'_>>,
    mut rows: Option<&mut [RankRow]>,
) -> Vec<GroupFenceRow> {
    let mut out = Vec::new();
    for g in groups.iter().filter(|g| g.failed.is_none()) {
        let members = g.members.iter().filter(|m| !m.left);
        let size = members.clone().count() as u32;
        // Each arrived member (its rank when it is of this job) and when it
        // arrived (mono ns).
        let mut came: Vec<(Option<u32>, u64)> = Vec::new();
        let mut missing = Vec::new();
        let barrier = if g.in_segment {
            let Some((slot, seg)) = g.slot.zip(seg) else {
                continue;
            };
            let Some(b) = seg.group(slot) else {
                continue;
            };
            if b.arrived() == 0 {
                continue;
            }
            let generation = b.generation();
            let clock = seg.job().stamp_clock();
            for m in members {
                let rec = seg.rank(m.rank);
                let here = rec
                    .and_then(|r| r.group_wait())
                    .is_some_and(|w| w.slot == slot && w.generation == generation);
                match rec.filter(|_| here) {
                    Some(r) => {
                        let tsc_now = fastpmi_segment::read_tsc().unwrap_or(0);
                        let at = clock.to_mono_ns(r.since_stamp(), tsc_now, mono_ns());
                        came.push((Some(m.rank), at));
                    }
                    None => missing.push(format!("rank {}", m.rank)),
                }
            }
            "segment"
        } else {
            if g.members.iter().all(|m| m.arrived.is_none()) {
                continue;
            }
            for m in members {
                match (m.arrived, m.here) {
                    (Some(at), true) => came.push((Some(m.rank), instant_ns(at))),
                    // Of another job: counted, not a row of this one.
                    (Some(at), false) => came.push((None, instant_ns(at))),
                    (None, true) => missing.push(format!("rank {}", m.rank)),
                    (None, false) => missing.push(format!("rank {} of job {}", m.rank, m.job)),
                }
            }
            "server"
        };
        let now = mono_ns();
        if let Some(rows) = rows.as_deref_mut() {
            for &(rank, at) in &came {
                if let Some(r) = rank.and_then(|rank| rows.get_mut(rank as usize)) {
                    if r.kind == "running" {
                        r.kind = "in_group_fence".into();
                        r.state = format!("in fence of group {}", g.id);
                        r.seconds = secs(now, at);
                    }
                }
            }
        }
        let first = came.iter().map(|&(_, at)| at).min().unwrap_or(now);
        out.push(GroupFenceRow {
            group: g.id.clone(),
            barrier: barrier.into(),
            arrived: came.len() as u32,
            size,
            missing,
            seconds: secs(now, first),
        });
    }
    out
}
