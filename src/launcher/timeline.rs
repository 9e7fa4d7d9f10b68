//! The launcher's start-up and exit, step by step, on the log target
//! `fastpmi::startup` (`FASTPMI_LOG=fastpmi::startup=debug`): each step
//! with the microseconds since [`begin`]. docs/launch.md accounts for a
//! launch with it. Without a log subscriber a step costs a load and a
//! compare.

use std::sync::OnceLock;
use std::time::Instant;

static T0: OnceLock<Instant> = OnceLock::new();

/// The launcher starts: steps count from now.
pub(super) fn begin() {
    T0.get_or_init(Instant::now);
}

/// `what` is done.
pub(super) fn step(what: &str) {
    tracing::debug!(
        target: "fastpmi::startup",
        us = T0.get().map_or(0, |t| t.elapsed().as_micros() as u64),
        "{what}"
    );
}
