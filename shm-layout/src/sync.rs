//! The one place that picks the atomics and cells: `core`'s normally, loom's
//! under `cfg(loom)`, so that the algorithms model-checked by `loom-tests`
//! are the very code the launcher and the clients run.
//!
//! [`crate::futex::Futex`] takes `&sync::AtomicU32`; implementors outside the
//! crate (the main crate's real futex) get `core::sync::atomic::AtomicU32`.

#[cfg(not(loom))]
pub use core::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// How many times a waiter spins on a word before it sleeps (or, for a KVS
/// reader, gives up on a slot being written). Zero under loom: every spin is
/// a scheduling point there and the model's size grows with it, while the
/// algorithms' correctness does not depend on the number; with no spins the
/// models go straight to the sleeping and skipping paths, the ones worth
/// checking.
pub(crate) const SPIN_LIMIT: u32 = if cfg!(loom) { 0 } else { 100 };

/// `0..SPIN_LIMIT`, for spin loops (one place to allow the lint that the
/// range is empty under loom).
#[cfg_attr(loom, allow(clippy::reversed_empty_ranges))]
#[inline]
pub(crate) fn spins() -> core::ops::Range<u32> {
    0..SPIN_LIMIT
}

/// `n` spins capped at [`SPIN_LIMIT`] (one place to allow the lint that the
/// cap of 0 makes the `min` constant under loom).
#[cfg_attr(loom, allow(clippy::unnecessary_min_or_max))]
#[inline]
pub(crate) fn cap_spins(n: u32) -> u32 {
    n.min(SPIN_LIMIT)
}

/// A busy-wait hint. Under loom this yields to the model's scheduler, which
/// is what lets loom explore spin loops at all.
#[inline]
pub(crate) fn spin_loop() {
    #[cfg(not(loom))]
    core::hint::spin_loop();
    #[cfg(loom)]
    loom::hint::spin_loop();
}

/// `core::cell::UnsafeCell` with loom's closure API (`with`/`with_mut`), so
/// loom can check every access to the bytes it guards.
#[cfg(not(loom))]
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        Self(core::cell::UnsafeCell::new(value))
    }

    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;
