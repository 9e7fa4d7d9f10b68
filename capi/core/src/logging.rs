//! Logging of the C libraries: `FASTPMI_LOG` (an `EnvFilter` spec such as
//! `debug`) selects what goes to stderr, as for the launcher; without it
//! only warnings and errors are shown (a failed init, an unimplemented
//! call). The subscriber is this library's own: a cdylib carries its own
//! copy of `tracing`, so it never meets the host program's.

use std::sync::Once;

/// Install the stderr subscriber (once; later calls do nothing). Without
/// `FASTPMI_LOG` only a plain warn-level formatter: no filter to parse, no
/// terminal check, so a rank's init pays next to nothing for logging.
pub fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        use tracing_subscriber::filter::LevelFilter;
        use tracing_subscriber::EnvFilter;
        let builder = tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_target(false);
        let _ = match std::env::var("FASTPMI_LOG") {
            Err(_) => builder
                .with_max_level(LevelFilter::WARN)
                .with_ansi(false)
                .try_init(),
            Ok(spec) => builder
                .with_env_filter(
                    EnvFilter::try_new(&spec).unwrap_or_else(|_| EnvFilter::new("warn")),
                )
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .try_init(),
        };
    });
}
