//! Logging of the C libraries: `FASTPMI_LOG` (an `EnvFilter` spec such as
//! `debug`) selects what goes to stderr, as for the launcher; without it
//! only warnings and errors are shown (a failed init, an unimplemented
//! call). The subscriber is this library's own: a cdylib carries its own
//! copy of `tracing`, so it never meets the host program's.

use std::sync::Once;

/// Install the stderr subscriber (once; later calls do nothing).
pub fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        use tracing_subscriber::EnvFilter;
        let spec = std::env::var("FASTPMI_LOG").unwrap_or_else(|_| "warn".into());
        let filter = EnvFilter::try_new(&spec).unwrap_or_else(|_| EnvFilter::new("warn"));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_target(false)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init();
    });
}
