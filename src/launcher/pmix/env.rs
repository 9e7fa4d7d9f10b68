//! The environment the launcher gives PMIx ranks beside the library's.

use std::ffi::OsString;
use std::time::Duration;

/// Whether a job of `size` ranks has more ranks than the launcher has
/// CPUs: PMIx clients are then told so (`pmix.ndosub`, what `prterun
/// --oversubscribe` says) and wait with a coarser timer.
pub(in crate::launcher) fn oversubscribed(size: u32) -> bool {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    size > cpus
}

/// The timer slack of an oversubscribed job's PMIx ranks, unless
/// `FASTPMI_PMIX_TIMER_SLACK_US` says otherwise (0: the kernel's 50 µs).
///
/// Open MPI waits in `MPI_Init` (its modex fence) and at other runtime
/// events in a loop of `opal_progress()` (a `sched_yield` when the node is
/// oversubscribed) and `usleep(100)`. With the default slack each waiting
/// rank is runnable again every 150 µs or so: at 256 ranks on 2 CPUs about
/// 240 of them are always runnable, and the ranks still starting and the
/// launcher's PMIx server thread, on which the fence waits, get 1/240th
/// of the machine each: `MPI_Init` took 38–113 s (median 51 s) in ten
/// runs, 2026-12-02. With 1 ms of slack a waiting rank sleeps about 1 ms,
/// some 30 are runnable, and eight runs took 39–40.5 s
/// (docs/pmix.md, "Start-up stalls at 256 ranks").
pub(in crate::launcher) const WAIT_TIMER_SLACK: Duration = Duration::from_millis(1);

/// The timer slack (ns) for the PMIx ranks of a job of `size` ranks: 0
/// (leave it) unless the job is oversubscribed.
pub(in crate::launcher) fn wait_timer_slack(size: u32, knobs: &crate::config::Knobs) -> u64 {
    if !oversubscribed(size) {
        return 0;
    }
    knobs
        .pmix_timer_slack
        .unwrap_or(WAIT_TIMER_SLACK)
        .as_nanos()
        .try_into()
        .unwrap_or(u64::MAX)
}

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
/// - In a fault-tolerant job, `OMPI_MCA_mpi_ft_enable=1`, as `prterun
///   --with-ft ulfm` sets it: Open MPI 5's ULFM (its ranks keep going
///   after a peer's death and take the launcher's event for it).
/// - `OMPI_MCA_btl=^ofi` on a node without a fabric device, where Open
///   MPI 5's OFI BTL finds nothing and then sleeps a second in every
///   rank's `MPI_Init` ([`crate::launcher::fabric`]); not where an MCA
///   parameter file Open MPI reads chooses BTLs.
pub(in crate::launcher) fn app_env_defaults(fault_tolerant: bool) -> Vec<(OsString, OsString)> {
    let mut all = vec![("OMPI_MCA_schizo", "^orte"), ("OMPI_MCA_ess", "pmi")];
    if fault_tolerant {
        all.push(("OMPI_MCA_mpi_ft_enable", "1"));
    }
    if crate::launcher::fabric::verbs_finds_nothing() {
        all.push(("FI_PROVIDER", "^verbs"));
    }
    // The files only where the launcher's environment does not decide.
    if crate::launcher::fabric::ofi_btl_finds_nothing()
        && std::env::var_os("OMPI_MCA_btl").is_none()
        && !mca_files_set("btl")
    {
        all.push(("OMPI_MCA_btl", "^ofi"));
    }
    all.into_iter()
        .filter(|(k, _)| std::env::var_os(k).is_none())
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
}

/// Whether an MCA parameter file Open MPI reads sets `key` (a line
/// `key = value`): the files `OMPI_MCA_mca_base_param_files` names, or
/// else the user's `~/.openmpi/mca-params.conf` and the installation's
/// `$OPAL_PREFIX/etc/openmpi-mca-params.conf`. A variable the launcher
/// gave would override the file's choice.
fn mca_files_set(key: &str) -> bool {
    let files: Vec<std::path::PathBuf> = match std::env::var_os("OMPI_MCA_mca_base_param_files") {
        Some(list) => std::env::split_paths(&list).collect(),
        None => [
            std::env::var_os("HOME")
                .map(|h| std::path::Path::new(&h).join(".openmpi/mca-params.conf")),
            std::env::var_os("OPAL_PREFIX")
                .map(|p| std::path::Path::new(&p).join("etc/openmpi-mca-params.conf")),
        ]
        .into_iter()
        .flatten()
        .collect(),
    };
    files
        .iter()
        .any(|f| std::fs::read_to_string(f).is_ok_and(|text| sets_key(&text, key)))
}

/// Whether MCA parameter file text sets `key`.
fn sets_key(text: &str, key: &str) -> bool {
    text.lines().any(|line| {
        let line = line.trim();
        !line.starts_with('#') && line.split_once('=').is_some_and(|(k, _)| k.trim() == key)
    })
}

#[cfg(test)]
mod tests {
    use super::sets_key;

    #[test]
    fn a_parameter_file_sets_a_key_only_on_an_uncommented_line_of_its_name() {
        assert!(sets_key("btl = self,sm\n", "btl"));
        assert!(sets_key("  # BTLs\nbtl=tcp,self\n", "btl"));
        assert!(!sets_key("# btl = self,sm\n", "btl"));
        assert!(!sets_key("btl_tcp_if_include = eth0\n", "btl"));
        assert!(!sets_key("", "btl"));
    }
}
