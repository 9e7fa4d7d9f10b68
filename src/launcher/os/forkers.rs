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
    threads: usize,
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
    job_rx: Mutex<Receiver<ForkJob>>,
    done_tx: Sender<ForkDone>,
    waker: Arc<mio::Waker>,
}

impl Forkers {
    /// Up to `threads` forkers (at least one); each result wakes `waker`.
    /// Every spawner's descriptor slots are made now, before any thread
    /// runs (see `Spawner` for why they take the lowest numbers); the
    /// threads start as ranks need them.
    pub fn new(threads: usize, waker: Arc<mio::Waker>) -> io::Result<Forkers> {
        let threads = threads.max(1);
        let (jobs, job_rx) = mpsc::channel::<ForkJob>();
        let (done_tx, done) = mpsc::channel();
        let devnull = Arc::new(super::devnull()?);
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
            job_rx: Mutex::new(job_rx),
            done_tx,
            waker,
        });
        Ok(Forkers {
            jobs,
            done,
            threads,
            busy: 0,
            pool,
            inline_done: Vec::new(),
        })
    }

    /// Forker threads started so far.
    pub fn started(&self) -> usize {
        self.pool.started.load(Ordering::Acquire)
    }

    /// Whether a forker is free for another rank.
    pub fn has_room(&self) -> bool {
        self.busy < self.threads
    }

    /// Hand a rank to the forkers. A rank that is `alone` (no other waits
    /// to be started) while no thread has started yet is started on the
    /// caller's thread, with the first thread's spawner: a one-rank job (or
    /// spawn) then starts no thread at all, about 0.1 ms of a 2.6 ms
    /// `fastpmi -n 1`. The caller is the event loop, which lives as long as
    /// the launcher, as `PR_SET_PDEATHSIG` needs (see the module docs). The
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
    /// wait and no thread is free, create the rank, report it.
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
            if waiting > 0 && self.idle.load(Ordering::Acquire) == 0 {
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

fn start(spawner: &mut Spawner, job: &ForkJob) -> io::Result<Spawned> {
    spawner.spawn(&RankCommand {
        image: &job.image,
        env: &job.env,
        pass_fds: &job.pass_fds,
        stdin_inherit: job.stdin_inherit,
        new_session: job.new_session,
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
