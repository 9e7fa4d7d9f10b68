//! The only way the algorithms touch the OS: sleeping on and waking a 32-bit
//! word. The launcher and the clients implement [`Futex`] with a *shared*
//! `FUTEX_WAIT`/`FUTEX_WAKE` (without the private-futex flag: a private futex does
//! not wake another process). This module only has implementations for tests
//! ([`SpinFutex`], [`CondvarFutex`]) and, under `cfg(loom)`, `LoomFutex`.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use shm_layout::futex::{CondvarFutex, Futex, WAKE_ALL};
//! use shm_layout::sync::{AtomicU32, Ordering};
//!
//! let word = Arc::new(AtomicU32::new(0));
//! let futex = Arc::new(CondvarFutex::new());
//! let waker = {
//!     let (word, futex) = (word.clone(), futex.clone());
//!     std::thread::spawn(move || {
//!         // Change the word first, then wake: a sleeper cannot miss it.
//!         word.store(1, Ordering::Release);
//!         futex.wake(&word, WAKE_ALL);
//!     })
//! };
//! // Callers always loop: wakeups may be spurious and sleeps time out.
//! while word.load(Ordering::Acquire) == 0 {
//!     futex.wait(&word, 0, Some(Duration::from_millis(100)));
//! }
//! waker.join().unwrap();
//! ```

use std::time::Duration;

use crate::sync::AtomicU32;

/// Pass as `n` to [`Futex::wake`] to wake every sleeper. It is `i32::MAX` so a
/// real implementation can hand it to `FUTEX_WAKE` (an `int`) unchanged.
pub const WAKE_ALL: u32 = i32::MAX as u32;

/// Sleep on / wake a word in the shared segment.
pub trait Futex {
    /// Sleep while `*word == expected`, at most `timeout` (None = forever).
    /// Spurious wakeups allowed.
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>);
    /// Wake up to `n` waiters sleeping on `word`; returns how many were woken
    /// (best effort).
    fn wake(&self, word: &AtomicU32, n: u32) -> usize;
    /// Give the CPU to another runnable thread, if there is one
    /// (`sched_yield`); a hint, so the default does nothing.
    fn yield_cpu(&self) {}
}

impl<F: Futex + ?Sized> Futex for &F {
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        (**self).wait(word, expected, timeout)
    }

    fn wake(&self, word: &AtomicU32, n: u32) -> usize {
        (**self).wake(word, n)
    }

    fn yield_cpu(&self) {
        (**self).yield_cpu()
    }
}

#[cfg(not(loom))]
pub use self::std_impls::{CondvarFutex, SpinFutex};

#[cfg(not(loom))]
mod std_impls {
    use std::sync::{Condvar, Mutex, PoisonError};
    use std::time::{Duration, Instant};

    use super::Futex;
    use crate::sync::{AtomicU32, Ordering};

    /// Test futex that never sleeps: `wait` yields the CPU until the word
    /// changes or the timeout passes; `wake` does nothing. Works across
    /// threads of one process only.
    #[derive(Debug, Default, Clone, Copy)]
    pub struct SpinFutex;

    impl Futex for SpinFutex {
        fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
            let start = Instant::now();
            while word.load(Ordering::Acquire) == expected {
                if timeout.is_some_and(|t| start.elapsed() >= t) {
                    return;
                }
                std::thread::yield_now();
            }
        }

        fn wake(&self, _word: &AtomicU32, _n: u32) -> usize {
            0
        }
    }

    /// Test futex that really sleeps, on one condition variable shared by all
    /// words (a wake wakes every sleeper, which may then see a spurious
    /// wakeup, as the trait allows). Threads of one process only.
    ///
    /// No lost wakeups: callers change the word before they call `wake`, and
    /// `wait` compares the word under the same mutex that `wake` takes.
    #[derive(Debug, Default)]
    pub struct CondvarFutex {
        sleepers: Mutex<usize>,
        cv: Condvar,
    }

    impl CondvarFutex {
        /// A futex with nobody sleeping on it.
        pub fn new() -> Self {
            Self::default()
        }
    }

    impl Futex for CondvarFutex {
        fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
            let mut sleepers = self.sleepers.lock().unwrap_or_else(PoisonError::into_inner);
            if word.load(Ordering::SeqCst) != expected {
                return;
            }
            *sleepers += 1;
            sleepers = match timeout {
                Some(t) => {
                    self.cv
                        .wait_timeout(sleepers, t)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
                None => self
                    .cv
                    .wait(sleepers)
                    .unwrap_or_else(PoisonError::into_inner),
            };
            *sleepers -= 1;
        }

        fn wake(&self, _word: &AtomicU32, n: u32) -> usize {
            let sleepers = self.sleepers.lock().unwrap_or_else(PoisonError::into_inner);
            self.cv.notify_all();
            (*sleepers).min(n as usize)
        }
    }
}

#[cfg(loom)]
pub use self::loom_impl::LoomFutex;

#[cfg(loom)]
mod loom_impl {
    use std::time::Duration;

    use loom::sync::{Condvar, Mutex};

    use super::Futex;
    use crate::sync::{AtomicU32, Ordering};

    /// Futex for loom models, built on loom's mutex and condition variable.
    ///
    /// **Timeouts are ignored**: a sleeper only returns when woken. That is the
    /// worst case of a real timeout that never fires, so a model that finishes
    /// proves no wake-up is ever lost (a lost one shows up as a loom deadlock)
    /// instead of being papered over by a 100 ms re-check.
    ///
    /// **Wakes are per word and counted**, as with a real futex: a sleeper
    /// returns only after a `wake` of its own word gave it a turn, `wake(w, n)`
    /// releases at most `n` of the sleepers present (the longest asleep
    /// first) and returns how many. So an algorithm that wakes the wrong word
    /// (say, a tree parent's instead of the child's), or wakes one sleeper
    /// where it needed all, deadlocks the model instead of being rescued by
    /// a wake meant for someone else.
    #[derive(Debug)]
    pub struct LoomFutex {
        /// Per word ever slept on or woken: `(address, tickets handed to
        /// sleepers, tickets released)`; sleeper `t` returns once
        /// `released > t`.
        words: Mutex<Vec<(usize, u64, u64)>>,
        cv: Condvar,
    }

    fn entry(table: &mut Vec<(usize, u64, u64)>, addr: usize) -> usize {
        match table.iter().position(|(a, _, _)| *a == addr) {
            Some(i) => i,
            None => {
                table.push((addr, 0, 0));
                table.len() - 1
            }
        }
    }

    impl LoomFutex {
        /// A futex with nobody sleeping on it (create it inside `loom::model`).
        pub fn new() -> Self {
            Self {
                words: Mutex::new(Vec::new()),
                cv: Condvar::new(),
            }
        }
    }

    impl Default for LoomFutex {
        fn default() -> Self {
            Self::new()
        }
    }

    impl Futex for LoomFutex {
        fn wait(&self, word: &AtomicU32, expected: u32, _timeout: Option<Duration>) {
            let addr = word as *const AtomicU32 as usize;
            let mut table = self.words.lock().unwrap();
            // Compared under the lock `wake` takes: a waker that changed the
            // word before calling `wake` is either seen here or wakes us.
            if word.load(Ordering::SeqCst) != expected {
                return;
            }
            let i = entry(&mut table, addr);
            let ticket = table[i].1;
            table[i].1 += 1;
            while table[i].2 <= ticket {
                table = self.cv.wait(table).unwrap();
            }
        }

        fn wake(&self, word: &AtomicU32, n: u32) -> usize {
            let addr = word as *const AtomicU32 as usize;
            let mut table = self.words.lock().unwrap();
            let i = entry(&mut table, addr);
            let (handed, released) = (table[i].1, table[i].2);
            let woken = (handed - released).min(u64::from(n));
            table[i].2 += woken;
            if woken > 0 {
                self.cv.notify_all();
            }
            woken as usize
        }

        fn yield_cpu(&self) {
            loom::thread::yield_now();
        }
    }
}
