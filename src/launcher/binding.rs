//! Binding and topology: the node's topology (loaded once with hwloc and
//! handed to the ranks as `PMI_hwloc_xmlfile`), the CPUs of each binding
//! slot, the slots each job's ranks hold, and Intel MPI's hints drawn from
//! both. [`Binding`] owns them.

use super::placement::{self, Plan, SlotLoad};
use super::topology::{self, TopologyXml};
use super::{impi, os};
use crate::config::placement::PlacementOpts;
use fastpmi_server::JobIdx;

pub(super) struct Binding {
    /// CPU lists per slot and their masks; `None`: ranks are not bound.
    plan: Option<(Plan, Vec<os::CpuSet>)>,
    /// Ranks of live jobs per slot.
    load: SlotLoad,
    /// The slot of each rank, per job (index = job; empty: not bound, or
    /// the job has ended).
    job_slots: Vec<Vec<u32>>,
    /// Intel MPI's launcher hints, from the topology.
    impi: Option<impi::Hints>,
    /// The node's topology as XML (open as long as ranks may read it),
    /// once [`Binding::publish`] exported it.
    xml: Option<TopologyXml>,
    /// The topology's XML still to be exported, and its cache.
    unpublished: Option<(topology::Unexported, Option<topology::cache::Cache>)>,
}

/// Why the ranks cannot be bound as asked.
#[derive(Debug, thiserror::Error)]
pub(super) enum BindingError {
    #[error(transparent)]
    Placement(#[from] placement::PlacementError),
    #[error("cannot make the ranks' CPU sets: {0}")]
    Io(#[from] std::io::Error),
}

impl Binding {
    /// Load the topology (through the cache in this user's private
    /// directory when `cached`) and plan the binding `opts` asks for.
    /// Without hwloc ranks are not bound, unless `opts` asks for a binding:
    /// an error.
    pub(super) fn new(opts: &PlacementOpts, cached: bool) -> Result<Binding, BindingError> {
        let cache = cached
            .then(|| topology::cache::Cache::new(crate::private_dir::dir(), topology::Key::read()));
        let (unpublished, objects) = match topology::load(cache.as_ref()) {
            Ok((objects, xml)) => (Some((xml, cache)), Some(objects)),
            Err(why) => {
                tracing::debug!("no PMI_hwloc_xmlfile, no binding: {why}");
                (None, None)
            }
        };
        let impi = objects.as_ref().and_then(impi::Hints::from_topology);
        let plan = placement::plan(opts, objects.as_ref())?
            .map(|plan| {
                let sets = plan
                    .slots
                    .iter()
                    .map(|c| os::CpuSet::new(c))
                    .collect::<std::io::Result<Vec<_>>>()?;
                std::io::Result::Ok((plan, sets))
            })
            .transpose()?;
        Ok(Binding {
            load: SlotLoad::new(plan.as_ref().map_or(0, |(p, _)| p.slots.len())),
            plan,
            job_slots: Vec::new(),
            impi,
            xml: None,
            unpublished,
        })
    }

    /// Export the topology's XML for the ranks, once (the memory figures it
    /// holds checked first: `topology::Unexported::export`); where they
    /// read it.
    /// Called after the first ranks are handed over, so that their start
    /// does not wait for it, and before the event loop serves any request
    /// or a PMIx job is registered with it.
    pub(super) fn publish(&mut self) -> Option<&str> {
        if let Some((xml, cache)) = self.unpublished.take() {
            match xml.export(cache.as_ref()) {
                Ok(t) => {
                    tracing::debug!(path = %t.path, bytes = t.bytes, "node topology exported");
                    self.xml = Some(t);
                }
                Err(why) => tracing::debug!("no PMI_hwloc_xmlfile: {why}"),
            }
        }
        self.xml.as_ref().map(|x| x.path.as_str())
    }

    /// `--print-bindings`: the CPUs of each of the first job's `ranks`, on
    /// stderr.
    pub(super) fn print(&self, ranks: u32) {
        for r in 0..ranks {
            match &self.plan {
                Some((plan, _)) => crate::errln!(
                    "fastpmi: rank {r} bound to cpus {}",
                    crate::ranges::ranges(plan.cpus(r))
                ),
                None => crate::errln!("fastpmi: rank {r} not bound"),
            }
        }
    }

    /// Slots for the `size` ranks of new job `job`; `spawned_by`: the job
    /// and rank that spawned it, whose slot goes last ([`SlotLoad`]).
    pub(super) fn assign(&mut self, job: JobIdx, size: u32, spawned_by: Option<(JobIdx, u32)>) {
        let last = spawned_by.and_then(|(j, r)| self.job_slots.get(j)?.get(r as usize).copied());
        debug_assert_eq!(job, self.job_slots.len());
        let slots = self.load.assign(size, last);
        self.job_slots.push(slots);
    }

    /// `job` has ended: its slots are free.
    pub(super) fn release(&mut self, job: JobIdx) {
        if let Some(slots) = self.job_slots.get_mut(job) {
            self.load.release(&std::mem::take(slots));
        }
    }

    /// The CPUs `rank` of `job` is bound to, if it is.
    pub(super) fn rank_cpus(&self, job: JobIdx, rank: u32) -> Option<(&[u32], &os::CpuSet)> {
        let (plan, sets) = self.plan.as_ref()?;
        let i = *self.job_slots.get(job)?.get(rank as usize)? as usize;
        Some((plan.slots.get(i)?, sets.get(i)?))
    }

    /// The fence cohorts of `job` ([`placement::fence_cohorts`]).
    pub(super) fn fence_cohorts(&self, job: JobIdx) -> Option<Vec<u32>> {
        placement::fence_cohorts(self.job_slots.get(job)?)
    }

    /// Intel MPI's hints, when the topology gives them.
    pub(super) fn impi(&self) -> Option<&impi::Hints> {
        self.impi.as_ref()
    }
}
