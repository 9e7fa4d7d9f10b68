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
//!
//! Open MPI 5's OFI BTL, once opened, finds no provider on a node without
//! a fabric device (its default excludes tcp, udp, shm and the like), and
//! its component close then sleeps one second (`sleep(1)` after
//! `opal_common_ofi_close`, in `MPI_Init` of every rank): 1.0 s of a
//! 64-rank job's 2.45 s was that sleep. On such a node the
//! launcher leaves the component out (`OMPI_MCA_btl=^ofi`) unless the user
//! chose BTLs (docs/pmix.md, "The OFI BTL's sleep").

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

/// Where the kernel lists HPE Slingshot NICs (libfabric's cxi provider),
/// which are not RDMA-class devices.
const CXI_CLASS: &str = "/sys/class/cxi";

/// Whether Open MPI's OFI BTL can find no provider on this node: no RDMA
/// device (verbs, EFA, Omni-Path and usNIC devices are all listed there)
/// and no Slingshot NIC. Looked up once.
pub(super) fn ofi_btl_finds_nothing() -> bool {
    static NOTHING: OnceLock<bool> = OnceLock::new();
    *NOTHING.get_or_init(|| {
        let nothing = verbs_finds_nothing() && !has_entries(CXI_CLASS);
        if nothing {
            tracing::debug!("no fabric device on this node: OMPI_MCA_btl=^ofi for Open MPI ranks");
        }
        nothing
    })
}

/// Whether directory `dir` exists and lists anything.
fn has_entries(dir: &str) -> bool {
    std::fs::read_dir(Path::new(dir)).is_ok_and(|mut d| d.next().is_some())
}
