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
//! anything: see `pmix::app_env_defaults`). Where an RDMA device exists
//! nothing changes.

use std::path::Path;
use std::sync::OnceLock;

/// Where the kernel lists RDMA devices (InfiniBand, RoCE, iWARP, soft-RoCE,
/// usNIC): libibverbs enumerates `infiniband_verbs`.
const RDMA_CLASSES: &[&str] = &["/sys/class/infiniband", "/sys/class/infiniband_verbs"];

/// Whether libfabric's verbs provider can find nothing on this node (no
/// RDMA device), looked up once.
pub(super) fn verbs_finds_nothing() -> bool {
    static NOTHING: OnceLock<bool> = OnceLock::new();
    *NOTHING.get_or_init(|| {
        let nothing = !RDMA_CLASSES.iter().any(|c| has_entries(c));
        if nothing {
            tracing::debug!("no RDMA device on this node: FI_PROVIDER=^verbs for Open MPI ranks");
        }
        nothing
    })
}

/// Whether directory `dir` exists and lists anything.
fn has_entries(dir: &str) -> bool {
    std::fs::read_dir(Path::new(dir)).is_ok_and(|mut d| d.next().is_some())
}
