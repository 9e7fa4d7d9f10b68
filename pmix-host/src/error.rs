//! What can go wrong in starting or calling the server library.

/// Why the server is not available.
#[derive(Debug, thiserror::Error)]
pub enum PmixError {
    #[error("no PMIx server library could be loaded ({tried}): install Debian's libpmix2, or name one with --pmix-lib PATH or FASTPMI_PMIX_LIB")]
    NotInstalled { tried: String },
    #[error("{path}: {source}")]
    Symbol {
        path: String,
        source: libloading::Error,
    },
    #[error("{call} failed: {text} ({status})")]
    Failed {
        call: &'static str,
        /// The library's `pmix_status_t`.
        status: i32,
        text: String,
    },
    #[error("a PMIx server is already running in this process")]
    Twice,
    #[error("{0} contains a NUL byte")]
    Nul(String),
}
