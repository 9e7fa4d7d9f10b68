//! The launcher's side of each job ([`Jobs`]): its segment, watchers,
//! liveness and teardown; creating one is [`create`], its ranks are
//! started by [`super::starting`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::launcher::starting::JobView;
use crate::launcher::watch::{self, FenceWatcher};
use fastpmi_segment::JobSegment;
use fastpmi_server::store::Store;
use fastpmi_server::{JobIdx, Server};

pub(in crate::launcher) mod create;

/// A new job's store and, when it has one, its segment.
type JobStore = (Box<dyn Store>, Option<Arc<JobSegment>>);

/// What the launcher keeps of each job besides the server's protocol state
/// (same index as the server's job table).
struct JobRt {
    /// The job segment (None: socket-only job, or the job has ended).
    segment: Option<Arc<JobSegment>>,
    /// A spawned job's parent's segment, handed to its ranks.
    parent_segment: Option<Arc<JobSegment>>,
    /// The fence watcher (stopped with the job).
    fence_watcher: Option<FenceWatcher>,
    /// The watcher threads were started (see [`Jobs::watch`]).
    watched: bool,
    /// Tells this job's watcher threads to exit.
    stop: Arc<AtomicBool>,
    /// Ranks not reaped yet (started or pending).
    live: u32,
    /// Its ranks were sent SIGTERM because the job failed.
    torn_down: bool,
}

/// The launcher's side of its jobs (first and spawned): their segments and
/// watcher threads, how many of their ranks live, whether they were torn
/// down, and the shared-memory counts of those that have ended.
pub(super) struct Jobs {
    jobs: Vec<JobRt>,
    /// Shared-memory operation counts of jobs whose segment is gone.
    shm_stats_done: shm_layout::RankStats,
    /// Decoy segment with an unknown stamp (`Knobs::advertise_foreign_segment`).
    foreign: Option<fastpmi_segment::Mapping>,
}

impl Jobs {
    pub(super) fn new() -> Jobs {
        Jobs {
            jobs: Vec::new(),
            shm_stats_done: Default::default(),
            foreign: None,
        }
    }

    /// Jobs created so far (job indexes are `0..len`).
    pub(super) fn len(&self) -> usize {
        self.jobs.len()
    }

    /// A new job of `size` ranks with its segments; returns its index.
    fn add(
        &mut self,
        segment: Option<Arc<JobSegment>>,
        parent_segment: Option<Arc<JobSegment>>,
        size: u32,
    ) -> JobIdx {
        self.jobs.push(JobRt {
            segment,
            parent_segment,
            fence_watcher: None,
            watched: false,
            stop: Arc::new(AtomicBool::new(false)),
            live: size,
            torn_down: false,
        });
        self.jobs.len() - 1
    }

    pub(super) fn segment(&self, job: JobIdx) -> Option<&Arc<JobSegment>> {
        self.jobs.get(job)?.segment.as_ref()
    }

    pub(super) fn parent_segment(&self, job: JobIdx) -> Option<&Arc<JobSegment>> {
        self.jobs.get(job)?.parent_segment.as_ref()
    }

    /// The descriptor of the decoy segment handed to ranks instead of
    /// their job's, when there is one.
    pub(super) fn foreign_fd(&self) -> Option<std::os::fd::RawFd> {
        self.foreign.as_ref().and_then(|m| m.fd())
    }

    /// Ranks of `job` not reaped yet (0: the job has ended).
    pub(super) fn live(&self, job: JobIdx) -> u32 {
        self.jobs[job].live
    }

    pub(super) fn torn_down(&self, job: JobIdx) -> bool {
        self.jobs[job].torn_down
    }

    /// What starting a rank of `job` reads of it.
    pub(super) fn view(&self, job: JobIdx) -> JobView<'_> {
        JobView {
            segment: self.segment(job),
            parent_segment: self.parent_segment(job),
            foreign_fd: self.foreign_fd(),
            torn_down: self.torn_down(job),
        }
    }

    pub(super) fn tear_down(&mut self, job: JobIdx) {
        self.jobs[job].torn_down = true;
    }

    pub(super) fn tear_down_all(&mut self) {
        for j in &mut self.jobs {
            j.torn_down = true;
        }
    }

    /// A rank of `job` was reaped or will never start; true when it was
    /// the last: then the job's watchers stop and its segments go.
    pub(super) fn rank_gone(&mut self, job: JobIdx) -> bool {
        let j = &mut self.jobs[job];
        j.live = j.live.saturating_sub(1);
        if j.live > 0 {
            return false;
        }
        j.stop.store(true, Ordering::Relaxed);
        j.fence_watcher = None;
        j.parent_segment = None;
        if let Some(seg) = j.segment.take() {
            add_stats(&mut self.shm_stats_done, &seg);
        }
        true
    }

    /// The launcher is exiting: every watcher thread stops.
    pub(super) fn stop_all(&self) {
        for j in &self.jobs {
            j.stop.store(true, Ordering::Relaxed);
        }
    }

    /// Shared-memory operation counts of every job, ended or not.
    pub(super) fn shm_stats(&self) -> shm_layout::RankStats {
        let mut shm = self.shm_stats_done;
        for seg in self.jobs.iter().filter_map(|j| j.segment.as_ref()) {
            add_stats(&mut shm, seg);
        }
        shm
    }

    /// The fence watcher of `job`, its watcher threads started now if they
    /// were not ([`watch::start`]; only a job with a segment has them).
    /// They are started when a socket rank first waits: until then nothing
    /// needs the loop woken, and a job that never has one (every job of
    /// fastpmi's own libraries) runs two threads fewer.
    pub(super) fn watch(&mut self, job: JobIdx, waker: &Arc<mio::Waker>) -> Option<&FenceWatcher> {
        let j = self.jobs.get_mut(job)?;
        if !j.watched && j.live > 0 {
            j.watched = true;
            j.fence_watcher = j
                .segment
                .as_ref()
                .and_then(|s| watch::start(s, &j.stop, waker));
        }
        j.fence_watcher.as_ref()
    }

    /// The fence watcher of each job that has one.
    pub(super) fn fence_watchers(&self) -> impl Iterator<Item = (JobIdx, &FenceWatcher)> {
        self.jobs
            .iter()
            .enumerate()
            .filter_map(|(job, j)| Some((job, j.fence_watcher.as_ref()?)))
    }
}

fn add_stats(sum: &mut shm_layout::RankStats, seg: &JobSegment) {
    for r in seg.seg().ranks() {
        let st = r.stats();
        sum.puts += st.puts;
        sum.gets += st.gets;
        sum.fences += st.fences;
        sum.node_attr_ops += st.node_attr_ops;
    }
}

impl Jobs {
    /// Point each job's fence watcher at the fence its socket ranks wait
    /// in, starting a job's watchers when its socket ranks first wait for a
    /// fence or a node attribute.
    pub(in crate::launcher) fn update_watchers(
        &mut self,
        server: &Server,
        waker: &Arc<mio::Waker>,
    ) {
        for job in 0..self.len() {
            let gen = server.fence_wait_generation(job);
            if gen.is_some() || server.waits_for_attr(job) {
                if let Some(w) = self.watch(job, waker) {
                    w.point_at(gen);
                }
            }
        }
        for (job, w) in self.fence_watchers() {
            if server.fence_wait_generation(job).is_none() {
                w.point_at(None);
            }
        }
    }
}
