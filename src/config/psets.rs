//! `--pset NAME[,NAME...]` of each MPMD section: the process sets of the
//! first job, handed to the server as job attributes.

use super::LaunchConfig;

/// Longest set name: `pset:NAME` must fit a PMI-2 key (64 bytes).
pub const PSET_NAME_MAX: usize =
    fastpmi_codec::KEYLEN_MAX - fastpmi_codec::names::attr::PSET_PREFIX.len();

/// Why a name cannot name a process set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PsetNameError {
    #[error("empty process set name")]
    Empty,
    #[error("process set name {0:?} is longer than {PSET_NAME_MAX} bytes")]
    TooLong(String),
    #[error("process set name {0:?}: use letters, digits and _ . - + @")]
    BadCharacter(String),
}

/// Why `name` cannot name a process set, if it cannot.
pub fn check_name(name: &str) -> Result<(), PsetNameError> {
    if name.is_empty() {
        return Err(PsetNameError::Empty);
    }
    if name.len() > PSET_NAME_MAX {
        return Err(PsetNameError::TooLong(name.to_string()));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"_.-+@".contains(&b))
    {
        return Err(PsetNameError::BadCharacter(name.to_string()));
    }
    Ok(())
}

/// The sets of the first job: (name, ranks), names in order of appearance.
pub fn of_config(cfg: &LaunchConfig) -> Vec<(String, Vec<u32>)> {
    let mut sets: Vec<(String, Vec<u32>)> = Vec::new();
    let mut first = 0u32;
    for app in &cfg.apps {
        for name in &app.psets {
            let ranks = first..first + app.nranks;
            match sets.iter_mut().find(|(n, _)| n == name) {
                Some((_, r)) => r.extend(ranks),
                None => sets.push((name.clone(), ranks.collect())),
            }
        }
        first += app.nranks;
    }
    sets
}
