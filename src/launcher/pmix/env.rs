//! The environment the launcher gives PMIx ranks beside the library's.

use std::ffi::OsString;

/// What the launcher sets for every rank of a PMIx application unless the
/// user does: placed before the application's own variables (`-env`,
/// `-genv`, which win) and left out where the launcher's environment has
/// the name (the ranks inherit that).
///
/// - Open MPI 4.1's ORTE takes a process nobody claims for a singleton
///   (its `schizo/orte` sets ess=singleton) unless a resource manager's
///   variables are present: its own MCA parameters switch that off, no
///   resource manager impersonated. Open MPI 5 has neither framework in
///   the application and ignores both.
/// - `FI_PROVIDER=^verbs` on a node without an RDMA device
///   ([`crate::launcher::fabric`]).
pub(in crate::launcher) fn app_env_defaults() -> Vec<(OsString, OsString)> {
    let mut all = vec![("OMPI_MCA_schizo", "^orte"), ("OMPI_MCA_ess", "pmi")];
    if crate::launcher::fabric::verbs_finds_nothing() {
        all.push(("FI_PROVIDER", "^verbs"));
    }
    all.into_iter()
        .filter(|(k, _)| std::env::var_os(k).is_none())
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
}
