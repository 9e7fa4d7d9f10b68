//! Process sets named on the command line (`--pset NAME` per MPMD section),
//! served as job attributes: `psetNames` (comma list), `pset:NAME` (member
//! ranks as ranges, e.g. `0-3,8`) and `mypsets` (the calling rank's sets).
//! A rank in no set, or a job without sets, gets a miss (`found=FALSE`),
//! never an empty value.

use std::collections::HashMap;

use super::{JobIdx, Server};
use fastpmi_codec::group::{format_members, MemberSpec};

/// The sets of each job: (name, member ranks ascending), in command-line order.
#[derive(Default)]
pub(crate) struct Psets(HashMap<JobIdx, Vec<(String, Vec<u32>)>>);

impl Psets {
    fn attr(&self, job: JobIdx, rank: u32, key: &[u8]) -> Option<Vec<u8>> {
        let sets = self.0.get(&job).filter(|s| !s.is_empty())?;
        let key = std::str::from_utf8(key).ok()?;
        if key == fastpmi_codec::names::attr::PSET_NAMES {
            let names: Vec<&str> = sets.iter().map(|(n, _)| n.as_str()).collect();
            return Some(names.join(",").into_bytes());
        }
        if key == fastpmi_codec::names::attr::MY_PSETS {
            let mine: Vec<&str> = sets
                .iter()
                .filter(|(_, r)| r.binary_search(&rank).is_ok())
                .map(|(n, _)| n.as_str())
                .collect();
            return (!mine.is_empty()).then(|| mine.join(",").into_bytes());
        }
        let name = key.strip_prefix(fastpmi_codec::names::attr::PSET_PREFIX)?;
        let (_, ranks) = sets.iter().find(|(n, _)| n == name)?;
        let specs: Vec<MemberSpec> = ranks.iter().map(|&r| MemberSpec::local(r)).collect();
        Some(format_members(&specs).into_bytes())
    }
}

impl Server {
    /// The process sets of `job`: (name, member ranks), any order of ranks.
    pub fn set_psets(&mut self, job: JobIdx, sets: Vec<(String, Vec<u32>)>) {
        let sets = sets
            .into_iter()
            .map(|(n, mut r)| {
                r.sort_unstable();
                r.dedup();
                (n, r)
            })
            .collect();
        self.groups.psets.0.insert(job, sets);
    }

    /// The process sets of `job`: (name, member ranks ascending), in
    /// command-line order.
    pub fn psets_of(&self, job: JobIdx) -> Vec<(String, Vec<u32>)> {
        self.groups.psets.0.get(&job).cloned().unwrap_or_default()
    }

    /// Job attributes of the group extension: process sets and the
    /// extension's own marker.
    pub(super) fn group_job_attr(&self, job: JobIdx, rank: u32, key: &[u8]) -> Option<Vec<u8>> {
        if key == fastpmi_codec::group::SUPPORT_ATTR.as_bytes() {
            return Some(fastpmi_codec::group::SUPPORT_VALUE.as_bytes().to_vec());
        }
        self.groups.psets.attr(job, rank, key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes() {
        let mut p = Psets::default();
        assert_eq!(p.attr(0, 0, b"psetNames"), None);
        p.0.insert(
            0,
            vec![
                ("ocean".into(), vec![0, 1, 2, 3]),
                ("ice".into(), vec![3, 4, 6]),
            ],
        );
        assert_eq!(p.attr(0, 0, b"psetNames").unwrap(), b"ocean,ice");
        assert_eq!(p.attr(0, 0, b"pset:ocean").unwrap(), b"0-3");
        assert_eq!(p.attr(0, 0, b"pset:ice").unwrap(), b"3-4,6");
        assert_eq!(p.attr(0, 3, b"mypsets").unwrap(), b"ocean,ice");
        assert_eq!(p.attr(0, 5, b"mypsets"), None);
        assert_eq!(p.attr(0, 0, b"pset:nope"), None);
        assert_eq!(p.attr(1, 0, b"psetNames"), None);
    }
}
