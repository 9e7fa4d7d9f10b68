//! Cache-line padding for words that different processes write hot.

use core::ops::Deref;

/// Puts `T` alone on a 64-byte cache line (x86-64 and most aarch64 parts), so
/// a hot word written by one process does not slow readers of its neighbour.
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub struct CachePadded<T> {
    value: T,
}

impl<T> CachePadded<T> {
    /// Wraps `value`.
    pub const fn new(value: T) -> Self {
        Self { value }
    }
}

impl<T> Deref for CachePadded<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}
