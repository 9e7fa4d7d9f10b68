//! Socket ranks held in a wait: a fence (until the store says it is
//! complete) or a node attribute not put yet (until it is). Released when a
//! socket rank's request changes the store, or on [`Server::poll_store`]
//! when a shared-memory rank changed it behind the server's back.

use super::{reply, Activity, Event, JobIdx, Server};
use fastpmi_codec::Response;

impl Server {
    /// The fence generation socket ranks of `job` wait in (the oldest), if any.
    pub fn fence_wait_generation(&self, job: JobIdx) -> Option<u64> {
        self.jobs[job]
            .fence_waiters
            .iter()
            .map(|(_, t, _)| t.generation)
            .min()
    }

    /// Re-check held requests after the store changed behind the server's
    /// back (a shared-memory rank completed a fence or put a node attribute).
    pub fn poll_store(&mut self, out: &mut Vec<Event>) {
        for job in 0..self.jobs.len() {
            self.release_fence(job, out);
            self.release_attrs(job, None, out);
        }
    }

    /// Release every fence waiter whose fence has completed.
    pub(super) fn release_fence(&mut self, job: JobIdx, out: &mut Vec<Event>) {
        let j = &mut self.jobs[job];
        if !j
            .fence_waiters
            .iter()
            .any(|(_, t, _)| j.store.fence_done(*t))
        {
            return;
        }
        let store = &j.store;
        let (ready, waiting): (Vec<_>, Vec<_>) = j
            .fence_waiters
            .drain(..)
            .partition(|(_, t, _)| store.fence_done(*t));
        j.fence_waiters = waiting;
        for (rank, _, to) in ready {
            j.ranks[rank as usize].set_activity(Activity::Running);
            reply(out, &to, &Response::Ok, None);
        }
    }

    /// Answer node-attribute waiters whose attribute now exists.
    pub(super) fn release_attrs(&mut self, job: JobIdx, key: Option<&[u8]>, out: &mut Vec<Event>) {
        let j = &mut self.jobs[job];
        let mut i = 0;
        while i < j.attr_waiters.len() {
            let (rank, ref k, _) = j.attr_waiters[i];
            if key.is_some_and(|key| key != k.as_slice()) {
                i += 1;
                continue;
            }
            if let Some(v) = j.store.get_node_attr(k) {
                let (_, k, to) = j.attr_waiters.swap_remove(i);
                j.ranks[rank as usize].set_activity(Activity::Running);
                reply(
                    out,
                    &to,
                    &Response::Value {
                        key: k,
                        value: Some(v),
                    },
                    None,
                );
            } else {
                i += 1;
            }
        }
    }
}
