//! What `auto` decided for a program, and the libraries that mean PMIx.

use std::path::PathBuf;

/// What `auto` decided for a program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Its ranks are PMIx clients.
    pub pmix: bool,
    /// The file whose libraries tell which `libpmix` it loads (the program,
    /// a venv's `libmpi.so.40`, an `mpi4py` extension).
    pub links: Option<PathBuf>,
}

impl Verdict {
    pub(super) fn pmi() -> Verdict {
        Verdict {
            pmix: false,
            links: None,
        }
    }

    pub(super) fn pmix(links: PathBuf) -> Verdict {
        Verdict {
            pmix: true,
            links: Some(links),
        }
    }
}

/// Whether a program linking `needed` speaks PMIx.
pub fn speaks_pmix(needed: &[String]) -> bool {
    needed
        .iter()
        .any(|n| n.starts_with("libpmix.so") || n == "libmpi.so.40")
}
