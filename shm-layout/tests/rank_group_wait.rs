//! The group fence a rank records before it arrives at a segment barrier:
//! read back only while its phase says it is in one, slot and generation
//! whole (a slot past 16 bits and a generation past 31 bits included).
#![cfg(not(loom))]

use shm_layout::{GroupWait, RankPhase, RankState};

#[test]
fn group_wait_is_read_back_only_in_a_group_fence() {
    let st = RankState::default();
    assert_eq!(st.group_wait(), None, "never in a group fence");
    st.enter_group_fence(70_000, 0x8000_0001, 42);
    assert_eq!(st.phase(), Ok(RankPhase::InGroupFence));
    assert_eq!(st.since_stamp(), 42);
    assert_eq!(
        st.group_wait(),
        Some(GroupWait {
            slot: 70_000,
            generation: 0x8000_0001
        })
    );
    st.set_phase_at(RankPhase::Running, 43);
    assert_eq!(st.group_wait(), None, "left the fence");
    st.set_phase_at(RankPhase::InFence, 44);
    assert_eq!(st.group_wait(), None, "a job fence is not a group fence");
    st.enter_group_fence(3, 7, 45);
    assert_eq!(
        st.group_wait(),
        Some(GroupWait {
            slot: 3,
            generation: 7
        })
    );
}
