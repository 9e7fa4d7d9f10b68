//! What the launcher tells the ranks' fabric library when it knows better
//! than the library's own probing (docs/pmix.md, "Fabric probing").
//!
//! Open MPI's ranks load libfabric (its OFI MTL) at `MPI_Init`, and
//! libfabric's verbs provider then reads all of `/proc/kallsyms` (5 MB,
//! 5,000 reads) in every rank, even on a node without any RDMA device,
//! where it can find nothing to offer: 64 ranks spent about 2.5 s of
//! system time there on a 2-vCPU VM, two thirds of the job. On such a node
//! the launcher excludes the provider (`FI_PROVIDER=^verbs`) for its
//! Open MPI ranks, unless the user chose providers (`FI_PROVIDER` set, to
//! anything). Where an RDMA device exists nothing changes.

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::sync::OnceLock;

const FI_PROVIDER: &str = "FI_PROVIDER";

/// Where the kernel lists RDMA devices (InfiniBand, RoCE, iWARP, soft-RoCE,
/// usNIC): libibverbs enumerates `infiniband_verbs`.
const RDMA_CLASSES: &[&str] = &["/sys/class/infiniband", "/sys/class/infiniband_verbs"];

/// The variables to add to a PMIx application's environment `app_env`
/// (which the user's `-env`/`-genv` made): none when the user chose, or
/// when this node has an RDMA device.
pub(super) fn pmix_defaults(app_env: &[(OsString, OsString)]) -> Vec<(OsString, OsString)> {
    static EXCLUDE_VERBS: OnceLock<bool> = OnceLock::new();
    let chosen = app_env.iter().any(|(k, _)| k == OsStr::new(FI_PROVIDER));
    let exclude = *EXCLUDE_VERBS.get_or_init(|| {
        std::env::var_os(FI_PROVIDER).is_none() && !RDMA_CLASSES.iter().any(|c| has_entries(c))
    });
    if chosen || !exclude {
        return Vec::new();
    }
    tracing::debug!("no RDMA device on this node: FI_PROVIDER=^verbs for Open MPI ranks");
    vec![(FI_PROVIDER.into(), "^verbs".into())]
}

/// Whether directory `dir` exists and lists anything.
fn has_entries(dir: &str) -> bool {
    std::fs::read_dir(Path::new(dir)).is_ok_and(|mut d| d.next().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_choice_is_kept() {
        let mine = vec![(OsString::from(FI_PROVIDER), OsString::from("tcp"))];
        assert!(pmix_defaults(&mine).is_empty());
    }
}
