//! Ranks created by several threads at once.
//!
//! A vfork-style spawn suspends its caller until the child execs, and the
//! child must first be scheduled: while earlier ranks are busy starting
//! (loading libraries, PMI init) it waits its turn behind them, and one
//! thread creating 1024 ranks spends most of the launch waiting. Hydra's
//! proxies fork in parallel; so do these threads: each owns a [`Spawner`]
//! and takes the next rank from a shared queue, so while one waits for its
//! child to exec the others create theirs. Results go back to the event
//! loop, which a [`mio::Waker`] wakes.
//!
//! How many threads: a thread costs about 0.1 ms of CPU to start on a
//! 2-vCPU VM, and a child waiting to exec needs a CPU. So up to twice the
//! CPUs the launcher may use start as soon as ranks wait (`eager`), and
//! more, up to `threads`, only while more than [`BACKLOG_PER_THREAD`]
//! ranks wait per thread: a 16-rank job on 2 CPUs starts 4 threads (16
//! cost it 1.5 ms of CPU, 0.5 ms of its 7.5), a 1024-rank one all 16 (the
//! more children wait for a CPU at once, the larger the share of the CPUs
//! rank creation gets against the ranks already running).
//! The queue holds up to [`QUEUE_DEPTH`] ranks whatever the thread count:
//! when it held one per thread, the event loop handed a rank over only
//! when a thread reported the one before, and one thread created a
//! 16-rank job 1.5x slower than `posix_spawn` in a loop.
//!
//! The threads live as long as the launcher: `PR_SET_PDEATHSIG` fires when
//! the *thread* that created a rank exits, so a thread that ended would
//! kill its ranks.

use std::ffi::OsString;
use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};

use super::spawn::{CpuSet, ExecImage, RankCommand, Spawned, Spawner};

/// Ranks handed to the forkers and not reported back, at most (more when
/// `threads` is larger): enough that the threads never wait for the event
/// loop, few enough that the loop serves the first ranks between handing
/// over the next.
const QUEUE_DEPTH: usize = 64;

/// Beyond the eager threads, another starts while more than this many
/// ranks wait per running thread.
const BACKLOG_PER_THREAD: usize = 4;

/// Forker threads (each with its descriptor slots, made at start-up) for
/// a launcher whose first job has `ranks` ranks: `eager` when its backlog
/// never starts more (see the module docs), else up to `max`. A spawned
/// job's ranks use the ones there are.
pub fn forkers_for(ranks: u32, eager: usize, max: usize) -> usize {
    if ranks as usize <= BACKLOG_PER_THREAD * eager {
        eager.min(max)
    } else {
        max
    }
}

/// `/dev/null`, read-only and close-on-exec: the forkers' placeholder and
/// ranks' stdin, and the descriptor `reserve_descriptors` duplicates.
pub fn devnull() -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        "/dev/null",
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?)
}

/// What a forker needs to start one rank, owned: the image is shared, the
/// descriptors are the rank's own copies, closed once it has exec'd.
pub struct ForkJob {
    /// The caller's name for this rank; comes back with the result.
    pub id: u64,
    pub image: Arc<ExecImage>,
    pub env: Vec<(OsString, OsString)>,
    /// `(descriptor, number in the rank)`.
    pub pass_fds: Vec<(RawFd, RawFd)>,
    /// Descriptors of `pass_fds` that are the rank's alone (closed once it
    /// has its copies).
    pub owned: Vec<OwnedFd>,
    /// Owners of the other descriptors of `pass_fds` (job segments), kept
    /// alive until the rank has its copies.
    pub keep: Vec<Arc<dyn Send + Sync>>,
    pub stdin_inherit: bool,
    pub new_session: bool,
    /// `RankCommand::timer_slack_ns`.
    pub timer_slack_ns: u64,
    pub cpus: Option<CpuSet>,
}

/// A rank started (or not).
pub struct ForkDone {
    pub id: u64,
    pub result: io::Result<Spawned>,
}

/// The pool: a queue of jobs, up to `threads` forkers, a queue of results.
pub struct Forkers {
    jobs: Sender<ForkJob>,
    done: Receiver<ForkDone>,
    /// Jobs handed over and not reported back, at most.
    depth: usize,
    busy: usize,
    /// What the threads share, and what a thread started later needs.
    pool: Arc<Pool>,
    /// Starts made on the caller's thread, not reported yet.
    inline_done: Vec<ForkDone>,
}

/// The forker threads' side of the pool.
///
/// Threads start as ranks need them, and not on the caller's thread: the
/// caller starts the first, and a thread that takes a rank while more wait
/// and no other thread is free starts the next before it creates its own.
/// So the event loop hands a whole job's ranks over at once and goes on
/// (starting 16 threads itself, it was descheduled for 2 ms of a 7.7 ms
/// 16-rank job while the first ranks ran), a 1-rank job starts no thread
/// (see [`Forkers::submit`]) and a 2-rank job one or two.
struct Pool {
    /// Spawners whose thread has not started yet (the next takes the last).
    unstarted: Mutex<Vec<Spawner>>,
    /// Jobs sent and not taken by a thread yet.
    queued: AtomicUsize,
    /// Threads waiting for a job.
    idle: AtomicUsize,
    /// Threads started so far.
    started: AtomicUsize,
    /// Threads started whenever ranks wait and none is idle; beyond them,
    /// only under a backlog (see the module docs).
    eager: usize,
    job_rx: Mutex<Receiver<ForkJob>>,
    done_tx: Sender<ForkDone>,
    waker: Arc<mio::Waker>,
}

impl Forkers {
    /// Up to `threads` forkers (at least one), `eager` of them started as
    /// soon as ranks wait (see the module docs); each result wakes `waker`.
    /// Every spawner's descriptor slots are made now, before any thread
    /// runs (see `Spawner` for why they take the lowest numbers); the
    /// threads start as ranks need them.
    pub fn new(threads: usize, eager: usize, waker: Arc<mio::Waker>) -> io::Result<Forkers> {
        let threads = threads.max(1);
        let (jobs, job_rx) = mpsc::channel::<ForkJob>();
        let (done_tx, done) = mpsc::channel();
        let devnull = Arc::new(devnull()?);
        let mut unstarted = (0..threads)
            .map(|_| Spawner::new(devnull.clone()))
            .collect::<io::Result<Vec<_>>>()?;
        // Started in the order made: the first thread gets the lowest slots.
        unstarted.reverse();
        let pool = Arc::new(Pool {
            unstarted: Mutex::new(unstarted),
            queued: AtomicUsize::new(0),
            idle: AtomicUsize::new(0),
            started: AtomicUsize::new(0),
            eager: eager.clamp(1, threads),
            job_rx: Mutex::new(job_rx),
            done_tx,
            waker,
        });
        Ok(Forkers {
            jobs,
            done,
            depth: threads.max(QUEUE_DEPTH),
            busy: 0,
            pool,
            inline_done: Vec::new(),
        })
    }

    /// Forker threads started so far.
    pub fn started(&self) -> usize {
        self.pool.started.load(Ordering::Acquire)
    }

    /// Whether the queue takes another rank.
    pub fn has_room(&self) -> bool {
        self.busy < self.depth
    }

    /// Hand a rank to the forkers. A rank that is `alone` (no other waits
    /// to be started) while no thread has started yet is started on the
    /// caller's thread, with the first thread's spawner: a one-rank job (or
    /// spawn) then starts no thread at all, about 0.1 ms of a 2.6 ms
    /// `fastpmi -n 1`. The caller is the event loop, which lives as long as
    /// the launcher, as `PR_SET_PDEATHSIG` needs (see the module docs); it
    /// then steps off the rank's CPUs ([`super::spawn::step_off`]). The
    /// result is reported like a thread's, and `waker` is woken for it.
    pub fn submit(&mut self, job: ForkJob, alone: bool) -> io::Result<()> {
        if alone && self.busy == 0 && self.started() == 0 {
            let mut unstarted = self
                .pool
                .unstarted
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if let Some(spawner) = unstarted.last_mut() {
                let result = start(spawner, &job);
                drop(unstarted);
                // The event loop sets up the rest (the topology's XML, the
                // tools' socket) while the rank runs: not on its CPU, where
                // it held the rank back.
                if let (Ok(_), Some(cpus)) = (&result, &job.cpus) {
                    super::spawn::step_off(cpus);
                }
                let id = job.id;
                // The rank has its copies (or failed): close ours.
                drop(job);
                self.inline_done.push(ForkDone { id, result });
                self.busy += 1;
                let _ = self.pool.waker.wake();
                return Ok(());
            }
        }
        // Counted before it can be taken (see `Pool::run`).
        self.pool.queued.fetch_add(1, Ordering::AcqRel);
        if self.jobs.send(job).is_err() {
            self.pool.queued.fetch_sub(1, Ordering::AcqRel);
            return Err(io::Error::other("the rank-starting threads are gone"));
        }
        self.busy += 1;
        if self.started() == 0 {
            if let Err(e) = Pool::start_thread(&self.pool) {
                // No thread to take it: take it back (closing its
                // descriptors) and report it failed.
                let rx = self.pool.job_rx.lock().unwrap_or_else(|e| e.into_inner());
                if rx.try_recv().is_ok() {
                    self.pool.queued.fetch_sub(1, Ordering::AcqRel);
                }
                self.busy -= 1;
                return Err(e);
            }
        }
        Ok(())
    }

    /// A finished start, if any.
    pub fn try_done(&mut self) -> Option<ForkDone> {
        let d = match self.inline_done.pop() {
            Some(d) => d,
            None => self.done.try_recv().ok()?,
        };
        self.busy = self.busy.saturating_sub(1);
        Some(d)
    }
}

impl Pool {
    /// Start one more forker thread, with the next unstarted spawner (none
    /// left: nothing to do).
    fn start_thread(pool: &Arc<Pool>) -> io::Result<()> {
        let Some(spawner) = pool
            .unstarted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
        else {
            return Ok(());
        };
        let i = pool.started.fetch_add(1, Ordering::AcqRel);
        let p = pool.clone();
        std::thread::Builder::new()
            .name(format!("fastpmi-fork-{i}"))
            .spawn(move || p.run(spawner))
            .map(drop)
            .inspect_err(|_| {
                pool.started.fetch_sub(1, Ordering::AcqRel);
            })
    }

    /// A forker thread: take the next rank, start the next thread if more
    /// wait, no thread is free and [`wants_thread`] says so, create the rank,
    /// report it.
    fn run(self: Arc<Pool>, mut spawner: Spawner) {
        block_signals();
        let tx = self.done_tx.clone();
        loop {
            self.idle.fetch_add(1, Ordering::AcqRel);
            // One thread at a time waits for the next job.
            let job = match self.job_rx.lock().map(|r| r.recv()) {
                Ok(Ok(job)) => job,
                // The launcher is going away: park (never exit, see the
                // module docs).
                _ => loop {
                    std::thread::park();
                },
            };
            self.idle.fetch_sub(1, Ordering::AcqRel);
            let waiting = self.queued.fetch_sub(1, Ordering::AcqRel) - 1;
            if waiting > 0
                && self.idle.load(Ordering::Acquire) == 0
                && wants_thread(self.started.load(Ordering::Acquire), self.eager, waiting)
            {
                if let Err(e) = Pool::start_thread(&self) {
                    // The started ones take the waiting ranks in turn.
                    tracing::warn!("cannot start another rank-starting thread: {e}");
                }
            }
            let result = start(&mut spawner, &job);
            let id = job.id;
            // The rank has its copies (or failed): close ours.
            drop(job);
            if tx.send(ForkDone { id, result }).is_err() {
                continue;
            }
            let _ = self.waker.wake();
        }
    }
}

/// Whether another thread should start while `waiting` ranks wait, none
/// is idle and `started` run: up to `eager` always, beyond under a backlog
/// (see the module docs).
fn wants_thread(started: usize, eager: usize, waiting: usize) -> bool {
    started < eager || waiting > BACKLOG_PER_THREAD * started
}

fn start(spawner: &mut Spawner, job: &ForkJob) -> io::Result<Spawned> {
    spawner.spawn(&RankCommand {
        image: &job.image,
        env: &job.env,
        pass_fds: &job.pass_fds,
        stdin_inherit: job.stdin_inherit,
        new_session: job.new_session,
        timer_slack_ns: job.timer_slack_ns,
        cpus: job.cpus.as_ref(),
    })
}

/// The launcher's signal handlers run on its event-loop thread, not here.
fn block_signals() {
    // SAFETY: sigset_t is plain data; sigfillset and pthread_sigmask get
    // valid pointers to a local and change only this thread's mask.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, std::ptr::null_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_beyond_the_eager_ones_start_for_a_backlog_only() {
        // 2 CPUs: 4 eager threads start for any wait.
        assert!(wants_thread(0, 4, 1));
        assert!(wants_thread(3, 4, 1));
        // A 16-rank job: at most 15 wait, never more than 4 per thread.
        assert!(!wants_thread(4, 4, 15));
        // A large job's backlog (the queue holds 64) starts the rest.
        assert!(wants_thread(4, 4, 17));
        assert!(wants_thread(15, 4, 61));
        assert!(!wants_thread(16, 4, 64));
    }

    #[test]
    fn small_first_jobs_get_only_the_eager_forkers() {
        assert_eq!(forkers_for(1, 4, 16), 4);
        assert_eq!(forkers_for(16, 4, 16), 4);
        assert_eq!(forkers_for(17, 4, 16), 16);
        // 16 CPUs: all eager.
        assert_eq!(forkers_for(1024, 16, 16), 16);
        assert_eq!(forkers_for(16, 16, 16), 16);
        // FASTPMI_FORKERS below the eager count caps it.
        assert_eq!(forkers_for(1, 2, 2), 2);
    }
}
