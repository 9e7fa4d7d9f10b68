//! PMIx groups (`PMIx_Group_construct`, `_destruct`): the library collects
//! the local members (every member is local: one node); the launcher
//! gives a constructed group a context id from the same launcher-unique
//! counter fastpmi's PMI-2 groups take theirs from, so no two groups of
//! any job or personality share one.

use super::super::os::pmix::{InfoList, QueryDone, PMIX_SUCCESS};
use crate::launcher::Launcher;

/// `PMIX_GROUP_CONTEXT_ID` (`size_t`).
const GROUP_CONTEXT_ID: &str = "pmix.grp.ctxid";

impl Launcher {
    pub(super) fn pmix_group(
        &mut self,
        construct: bool,
        name: &str,
        members: &[(String, u32)],
        ctxid: bool,
        done: QueryDone,
    ) {
        let mut answer = InfoList::default();
        if construct && ctxid {
            let id = self.server.alloc_ctxid();
            answer.size(GROUP_CONTEXT_ID, id as usize);
            tracing::debug!(
                members = members.len(),
                "PMIx group {name}: context id {id}"
            );
        } else {
            tracing::debug!(
                members = members.len(),
                "PMIx group {name}: {}",
                if construct {
                    "constructed"
                } else {
                    "destructed"
                }
            );
        }
        done.finish(PMIX_SUCCESS, answer);
    }
}
