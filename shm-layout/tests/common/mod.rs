//! Shared helpers: a heap buffer standing in for the mapping.
#![allow(dead_code)]

use std::time::Duration;

use shm_layout::futex::{CondvarFutex, Futex};
use shm_layout::heap::AlignedBuffer;
use shm_layout::sync::AtomicU32;
use shm_layout::{Segment, SegmentLayout, SegmentParams, SegmentRef};

/// A buffer sized for `params`.
pub fn buffer(params: &SegmentParams) -> AlignedBuffer {
    AlignedBuffer::new(SegmentLayout::plan(*params).unwrap().total_size as usize)
}

/// Initialises a segment in `buf`, borrowed for as long as the handle lives.
pub fn init<'a>(buf: &'a mut AlignedBuffer, params: &SegmentParams) -> SegmentRef<'a> {
    let len = buf.len();
    // SAFETY: `buf` is exclusively borrowed for 'a and only used through the
    // returned handle.
    unsafe { Segment::init(buf.as_mut_ptr(), len, params, "test-job").unwrap() }
}

/// A futex whose wake does nothing: waiters only notice changes when their
/// bounded sleeps end (models an abort set by a process that died before
/// waking anybody).
pub struct NoWakeFutex;

impl Futex for NoWakeFutex {
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        if word.load(std::sync::atomic::Ordering::SeqCst) == expected {
            std::thread::sleep(timeout.unwrap_or(Duration::from_secs(3600)));
        }
    }

    fn wake(&self, _word: &AtomicU32, _n: u32) -> usize {
        0
    }
}

/// A condvar futex that records the timeout of every wait.
#[derive(Default)]
pub struct RecordingFutex {
    inner: CondvarFutex,
    waits: std::sync::Mutex<Vec<Option<Duration>>>,
}

impl RecordingFutex {
    pub fn waits(&self) -> Vec<Option<Duration>> {
        self.waits.lock().unwrap().clone()
    }
}

impl Futex for RecordingFutex {
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        self.waits.lock().unwrap().push(timeout);
        self.inner.wait(word, expected, timeout)
    }

    fn wake(&self, word: &AtomicU32, n: u32) -> usize {
        self.inner.wake(word, n)
    }
}

/// A sleeping futex that stretches every timeout to 10 s, so a waiter that
/// returns sooner was woken, not timed out.
#[derive(Default)]
pub struct WakeOnlyFutex(CondvarFutex);

impl Futex for WakeOnlyFutex {
    fn wait(&self, word: &AtomicU32, expected: u32, _timeout: Option<Duration>) {
        self.0.wait(word, expected, Some(Duration::from_secs(10)))
    }

    fn wake(&self, word: &AtomicU32, n: u32) -> usize {
        self.0.wake(word, n)
    }
}
