//! PMIx groups (`PMIx_Group_construct`, `_destruct`): the library collects
//! the local members (every member is local: one node); the launcher
//! gives a constructed group a context id from the same launcher-unique
//! counter fastpmi's PMI-2 groups take theirs from, so no two groups of
//! any job or personality share one.

use fastpmi_server::Server;
use pmix_host::{proc_of, GroupUpcall, InfoList, PMIX_SUCCESS};

use super::host::PmixHost;

/// `PMIX_GROUP_CONTEXT_ID` (`size_t`).
const GROUP_CONTEXT_ID: &str = pmix_host::keys::PMIX_GROUP_CONTEXT_ID;
/// `PMIX_GROUP_MEMBERSHIP` (array of procs).
const GROUP_MEMBERSHIP: &str = pmix_host::keys::PMIX_GROUP_MEMBERSHIP;
/// `PMIX_GROUP_ENDPT_DATA` (byte object).
const GROUP_ENDPT_DATA: &str = pmix_host::keys::PMIX_GROUP_ENDPT_DATA;

impl PmixHost {
    /// A group constructed or destructed (`server` gives the context id).
    pub(super) fn group(&mut self, u: GroupUpcall, server: &mut Server) {
        let GroupUpcall {
            construct,
            name,
            members,
            ctxid,
            notify_termination,
            endpoints,
            done,
        } = u;
        let (name, members) = (name.as_str(), members.as_slice());
        let mut answer = InfoList::default();
        // OpenPMIx 5 sends each member the final membership from this
        // answer alone; without it a 5.0 client fails to unpack the reply
        // (pmix_client_group.c, a NULL array of 0 members).
        if construct {
            let procs = members.iter().map(|(ns, r)| proc_of(ns, *r)).collect();
            answer.procs(GROUP_MEMBERSHIP, procs);
        }
        // One node: what the library collected is every member's data.
        if let Some(e) = endpoints.filter(|e| construct && !e.is_empty()) {
            if let Err(err) = answer.bytes_given(GROUP_ENDPT_DATA, &e) {
                tracing::warn!("PMIx group {name}: endpoint data not returned: {err}");
            }
        }
        if construct && ctxid {
            let id = server.alloc_ctxid();
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
        // Kept for the group queries (`PMIX_QUERY_GROUP_NAMES`, ...).
        if construct {
            self.groups.insert(name.to_string(), members.to_vec());
            if notify_termination {
                self.notify_termination.insert(name.to_string());
            }
        } else {
            self.groups.remove(name);
            self.notify_termination.remove(name);
        }
        done.finish(PMIX_SUCCESS, answer);
    }

    /// `rank` of `nspace` died (fault-tolerant jobs): it leaves the PMIx
    /// groups it was in, and the other members of those built with
    /// `PMIX_GROUP_NOTIFY_TERMINATION` hear of it (RFC0033).
    pub(super) fn group_member_died(&mut self, nspace: &str, rank: u32) {
        let dead = (nspace.to_string(), rank);
        for (name, members) in self.groups.iter_mut() {
            if !members.contains(&dead) {
                continue;
            }
            members.retain(|m| *m != dead);
            if self.notify_termination.contains(name) && !members.is_empty() {
                if let Err(e) =
                    self.server
                        .notify_group_member_failed(name, (nspace, rank), members)
                {
                    tracing::debug!("PMIx group {name}: member-failed event: {e}");
                }
            }
        }
    }
}
