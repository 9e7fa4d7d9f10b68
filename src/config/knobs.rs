//! Tuning knobs: environment variables for measurements and tests, read
//! once when the command line is parsed ([`Knobs::from_env`]) and carried
//! in the [`super::LaunchConfig`], so the launcher reads no environment in
//! the middle of a job. A value that does not parse is ignored (the
//! default holds), as it always was: these are not user options.

use std::ffi::OsString;

/// Rank-creating threads when `FASTPMI_FORKERS` does not say.
pub const DEFAULT_FORKERS: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Knobs {
    /// How many threads create ranks at once, at most: `FASTPMI_FORKERS`
    /// (1 to 64), else 16. A thread waits for each child it creates to be
    /// scheduled and exec; while a large job's early ranks are busy
    /// starting, that wait dominates, and several threads overlap it (as
    /// Hydra's proxies do). Up to twice the usable CPUs start whenever
    /// ranks wait, the rest only for a large job's backlog
    /// (launcher::os::Forkers): each costs about 0.1 ms of CPU to start.
    /// See docs/launch.md.
    pub forkers: usize,
    /// Ranks start sessions of their own, `FASTPMI_RANK_SESSIONS=1` (off by
    /// default: measured trade-off in docs/launch.md).
    pub rank_sessions: bool,
    /// Ranks bound to the same CPUs wake each other from the fence;
    /// `FASTPMI_FENCE_COHORTS=0` turns that off, for measurements.
    pub fence_cohorts: bool,
    /// Force the fence's release (0 central, k >= 2 a k-ary tree) instead
    /// of the rank-count default: `FASTPMI_FENCE_FANOUT=k`, for measurements.
    pub fence_fanout: Option<u32>,
    /// Testing aid, `FASTPMI_ADVERTISE_FOREIGN_SEGMENT=1`: ranks are handed
    /// a segment stamped by "another version".
    pub advertise_foreign_segment: bool,
    /// The node's topology is kept across launches in this user's private
    /// directory (launcher::topology::cache); `FASTPMI_TOPOLOGY_CACHE=0`
    /// loads it with hwloc every time.
    pub topology_cache: bool,
    /// The timer slack of an oversubscribed job's PMIx ranks:
    /// `FASTPMI_PMIX_TIMER_SLACK_US` (microseconds; 0 leaves the kernel's
    /// default), else 1 ms (launcher::pmix::env::WAIT_TIMER_SLACK).
    pub pmix_timer_slack: Option<std::time::Duration>,
}

impl Default for Knobs {
    fn default() -> Knobs {
        Knobs {
            forkers: DEFAULT_FORKERS,
            rank_sessions: false,
            fence_cohorts: true,
            fence_fanout: None,
            advertise_foreign_segment: false,
            topology_cache: true,
            pmix_timer_slack: None,
        }
    }
}

impl Knobs {
    /// The knobs of this process's environment.
    pub fn from_env() -> Knobs {
        Knobs::from_lookup(|name| std::env::var_os(name))
    }

    /// The knobs `var` gives (the environment, or a test's table).
    pub fn from_lookup(var: impl Fn(&str) -> Option<OsString>) -> Knobs {
        // Values that must be text are read as `std::env::var` reads them:
        // not Unicode is the same as unset.
        let text = |name: &str| var(name).and_then(|v| v.into_string().ok());
        Knobs {
            forkers: text("FASTPMI_FORKERS")
                .and_then(|v| v.parse().ok())
                .filter(|n: &usize| (1..=64).contains(n))
                .unwrap_or(DEFAULT_FORKERS),
            rank_sessions: text("FASTPMI_RANK_SESSIONS").is_some_and(|v| v == "1"),
            fence_cohorts: var("FASTPMI_FENCE_COHORTS").is_none_or(|v| v != "0"),
            fence_fanout: text("FASTPMI_FENCE_FANOUT").and_then(|v| v.parse::<u32>().ok()),
            advertise_foreign_segment: var("FASTPMI_ADVERTISE_FOREIGN_SEGMENT")
                .is_some_and(|v| v == "1"),
            topology_cache: var("FASTPMI_TOPOLOGY_CACHE").is_none_or(|v| v != "0"),
            pmix_timer_slack: text("FASTPMI_PMIX_TIMER_SLACK_US")
                .and_then(|v| v.parse::<u64>().ok())
                .map(std::time::Duration::from_micros),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knobs(vars: &[(&str, &str)]) -> Knobs {
        Knobs::from_lookup(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        })
    }

    #[test]
    fn knobs_parse_as_before_and_ignore_bad_values() {
        assert_eq!(knobs(&[]), Knobs::default());
        let k = knobs(&[
            ("FASTPMI_FORKERS", "4"),
            ("FASTPMI_RANK_SESSIONS", "1"),
            ("FASTPMI_FENCE_COHORTS", "0"),
            ("FASTPMI_FENCE_FANOUT", "0"),
            ("FASTPMI_ADVERTISE_FOREIGN_SEGMENT", "1"),
            ("FASTPMI_TOPOLOGY_CACHE", "0"),
            ("FASTPMI_PMIX_TIMER_SLACK_US", "0"),
        ]);
        assert_eq!(
            k,
            Knobs {
                forkers: 4,
                rank_sessions: true,
                fence_cohorts: false,
                fence_fanout: Some(0),
                advertise_foreign_segment: true,
                topology_cache: false,
                pmix_timer_slack: Some(std::time::Duration::ZERO),
            }
        );
        assert_eq!(
            knobs(&[("FASTPMI_PMIX_TIMER_SLACK_US", "2500")]).pmix_timer_slack,
            Some(std::time::Duration::from_micros(2500))
        );
        assert_eq!(
            knobs(&[("FASTPMI_PMIX_TIMER_SLACK_US", "-1")]).pmix_timer_slack,
            None
        );
        for bad in ["0", "65", "x", ""] {
            assert_eq!(knobs(&[("FASTPMI_FORKERS", bad)]).forkers, DEFAULT_FORKERS);
        }
        assert!(!knobs(&[("FASTPMI_RANK_SESSIONS", "yes")]).rank_sessions);
        assert!(knobs(&[("FASTPMI_FENCE_COHORTS", "1")]).fence_cohorts);
        assert_eq!(knobs(&[("FASTPMI_FENCE_FANOUT", "-1")]).fence_fanout, None);
    }
}
