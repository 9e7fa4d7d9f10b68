//! The one logging set-up of the launcher and the C libraries:
//! `FASTPMI_LOG` (a level such as `debug`, or `target=level` directives,
//! tracing-subscriber's `Targets` syntax; not `EnvFilter`, whose regular
//! expression engine would be a fifth of a C library and made the
//! launcher's start-up relocate 5 pages more, docs/launch.md) selects what
//! goes to stderr; a spec that does not parse shows warnings and errors.
//! `FASTPMI_LOG=debug` shows every PMI command and reply. Without it, the
//! caller chooses ([`Unset`]): the C libraries show warnings and errors (a
//! failed init, an unimplemented call), the launcher nothing (it says what
//! matters on stderr itself). A cdylib's subscriber is its own: it carries
//! its own copy of `tracing`, so it never meets the host program's.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::Once;

use fastpmi_codec::names;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::filter::LevelFilter;

/// What is logged without `FASTPMI_LOG`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unset {
    /// Nothing.
    Silent,
    /// Warnings and errors, one line each ([`WarnToStderr`]).
    Warnings,
}

/// Install the stderr subscriber (once; later calls do nothing). With
/// `FASTPMI_LOG`, tracing-subscriber's formatter and filter. Without it,
/// as `unset` says; the warnings are [`WarnToStderr`]: setting up
/// tracing-subscriber's registry (its span slab) and formatter was
/// measured at about 90 us of every rank's `PMI2_Init`, a third of it, for
/// a log that is empty unless something fails.
pub fn init(unset: Unset) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| match std::env::var(names::env::LOG) {
        Err(_) if unset == Unset::Silent => {}
        Err(_) => {
            let _ = tracing::subscriber::set_global_default(WarnToStderr);
        }
        Ok(spec) => {
            use tracing_subscriber::filter::Targets;
            use tracing_subscriber::layer::SubscriberExt;
            let filter = spec
                .parse::<Targets>()
                .unwrap_or_else(|_| Targets::new().with_default(LevelFilter::WARN));
            let fmt = tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_target(false)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
            let _ = tracing::subscriber::set_global_default(
                tracing_subscriber::registry().with(fmt).with(filter),
            );
        }
    });
}

/// Warnings and errors, one line each on stderr (`fastpmi: WARN message
/// key=value`); everything else is disabled at the callsite. Spans are not
/// recorded (the libraries' warnings carry their context in the message).
struct WarnToStderr;

impl WarnToStderr {
    fn wanted(level: &Level) -> bool {
        *level <= Level::WARN
    }
}

impl Subscriber for WarnToStderr {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if Self::wanted(meta.level()) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        Self::wanted(meta.level())
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::WARN)
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        // Never called for a disabled span; a warn-level span gets a
        // placeholder id (ids only need to be non-zero).
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut line = line_of(event);
        line.push('\n');
        // One write, so that lines of concurrent ranks do not interleave.
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// `fastpmi: LEVEL: message key=value ...`
fn line_of(event: &Event<'_>) -> String {
    let mut line = Line(format!("fastpmi: {}:", event.metadata().level()));
    event.record(&mut line);
    line.0
}

/// Collects an event's message and fields into one line.
struct Line(String);

impl Visit for Line {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            let _ = write!(self.0, " {value}");
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, " {value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line a warning with a message and a field becomes, and that
    /// levels below WARN are off.
    #[test]
    fn warn_line_format_and_levels() {
        let sub = WarnToStderr;
        assert!(sub.max_level_hint() == Some(LevelFilter::WARN));
        assert!(WarnToStderr::wanted(&Level::ERROR) && WarnToStderr::wanted(&Level::WARN));
        assert!(!WarnToStderr::wanted(&Level::INFO) && !WarnToStderr::wanted(&Level::DEBUG));
        // An event through a scoped dispatcher that keeps the line
        // instead of writing it to stderr.
        struct Capture(std::sync::Mutex<Vec<String>>);
        impl Subscriber for Capture {
            fn enabled(&self, _: &Metadata<'_>) -> bool {
                true
            }
            fn new_span(&self, _: &Attributes<'_>) -> Id {
                Id::from_u64(1)
            }
            fn record(&self, _: &Id, _: &Record<'_>) {}
            fn record_follows_from(&self, _: &Id, _: &Id) {}
            fn event(&self, event: &Event<'_>) {
                self.0.lock().unwrap().push(line_of(event));
            }
            fn enter(&self, _: &Id) {}
            fn exit(&self, _: &Id) {}
        }
        let cap = std::sync::Arc::new(Capture(Default::default()));
        tracing::subscriber::with_default(cap.clone(), || {
            tracing::warn!(rank = 3, "PMI2_Init failed: {}", "no server");
        });
        assert_eq!(
            cap.0.lock().unwrap().as_slice(),
            ["fastpmi: WARN: PMI2_Init failed: no server rank=3"]
        );
    }
}
