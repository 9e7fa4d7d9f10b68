//! Helpers of the spawn tests (`tests/spawn_*.rs`): reading the launcher's
//! output and sending a spawn from a rank.

use fastpmi_client::{Pmi, PmiError, SpawnCmd, SpawnRequest};

/// The lines of `out` containing `needle`.
pub fn lines_with<'a>(out: &'a str, needle: &str) -> Vec<&'a str> {
    out.lines().filter(|l| l.contains(needle)).collect()
}

/// The job id a rank printed as `<tag> jobid=<id>`.
pub fn printed_jobid(out: &str, tag: &str) -> String {
    out.lines()
        .find_map(|l| {
            l.split_once(&format!("{tag} jobid="))?
                .1
                .split_whitespace()
                .next()
        })
        .unwrap_or_else(|| panic!("no `{tag} jobid=` line in\n{out}"))
        .to_string()
}

/// Spawns `cmds` with no preput.
pub fn role_spawn_request(
    pmi: &Pmi,
    cmds: Vec<SpawnCmd>,
) -> Result<fastpmi_client::Spawned, PmiError> {
    pmi.spawn(&SpawnRequest {
        cmds,
        preput: Vec::new(),
    })
}
