//! The order of a harness run's cases: for each N, for each repetition,
//! every configuration once (interleaved, so that drift on a shared machine
//! hits all of them alike).
//!
//! The configurations whose medians the fence and start-up targets compare
//! (`fastpmi-shm`, `fastpmi-shm-yields0`, `futex-floor` and the start-up
//! table) take seconds a run, and their run-to-run spread on a shared
//! machine is as large as the margins the targets ask for; they get
//! `--target-reps` repetitions (default 11), the others `--reps` (the
//! configurations of a tens-of-seconds socket exchange, Hydra's time-outs).
//! The extra repetitions come after the common ones, still interleaved
//! among the configurations that have them. The ULFM rows' target (fastpmi
//! at most half of `mpirun`) has a wide margin and each run takes seconds
//! to tens of seconds: they get `--reps`.

use crate::cli::Options;
use crate::configs::{Config, Kind};
use crate::record::{Record, Status};

/// One planned run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Case {
    pub config: Config,
    pub n: u32,
    /// 0-based repetition.
    pub rep: u32,
    /// How many repetitions `config` has at `n`.
    pub of: u32,
}

/// The configurations [`is_target_compared`] picks, as the report names them.
pub const TARGET_COMPARED: &str =
    "fastpmi-shm, fastpmi-shm-yields0, futex-floor, the start-up table, death-detect@fastpmi-shm";

/// Whether the targets compare `c`'s median (so it gets `--target-reps`).
pub fn is_target_compared(c: Config) -> bool {
    matches!(
        c,
        Config::FastpmiShm | Config::FastpmiShmNoYield | Config::FutexFloor | Config::DeathDetect
    ) || c.kind() == Kind::Launch
}

/// Repetitions of the configurations the targets compare (never fewer
/// than the others').
pub fn target_reps(opts: &Options) -> u32 {
    opts.reps.max(opts.target_reps)
}

/// Start-ups of at most this many ranks take milliseconds, and their
/// medians need [`SHORT_LAUNCH_FACTOR`] times the target repetitions to
/// hold still (a 3 ms run moves by 10% with the machine's load).
pub const SHORT_LAUNCH: u32 = 64;
pub const SHORT_LAUNCH_FACTOR: u32 = 4;

/// Repetitions of configuration `c` at `n` ranks under `opts`.
pub fn reps_of(opts: &Options, c: Config, n: u32) -> u32 {
    if c.kind() == Kind::Launch && n <= SHORT_LAUNCH {
        target_reps(opts) * SHORT_LAUNCH_FACTOR
    } else if is_target_compared(c) {
        target_reps(opts)
    } else {
        opts.reps
    }
}

/// Every case of the run, in order.
pub fn plan(opts: &Options, present: &[Config]) -> Vec<Case> {
    let mut cases = Vec::new();
    let mut add = |sizes: &[u32], kinds: &[Kind]| {
        let configs: Vec<Config> = present
            .iter()
            .copied()
            .filter(|c| kinds.contains(&c.kind()))
            .collect();
        for &n in sizes {
            let most = configs
                .iter()
                .map(|&c| reps_of(opts, c, n))
                .max()
                .unwrap_or(0);
            for rep in 0..most {
                for &config in &configs {
                    let of = reps_of(opts, config, n);
                    if rep < of {
                        cases.push(Case { config, n, rep, of });
                    }
                }
            }
        }
    };
    add(&opts.sizes, &[Kind::Exchange, Kind::Floor]);
    add(&opts.startup_sizes, &[Kind::Startup]);
    add(&opts.spawn_sizes, &[Kind::Spawn]);
    add(&opts.launch_sizes, &[Kind::Launch]);
    add(&opts.group_sizes, &[Kind::Group]);
    add(&opts.ps_sizes, &[Kind::Ps]);
    add(&opts.death_sizes, &[Kind::Death]);
    add(&opts.ulfm_sizes, &[Kind::Ulfm]);
    add(&opts.python_sizes, &[Kind::Python]);
    add(&opts.placement_sizes, &[Kind::Placement]);
    add(&opts.nest_sizes, &[Kind::Nested]);
    cases
}

/// Why `case` is not run, given the runs so far: `(reason for raw.csv,
/// short note for the progress line)`.
///
/// * Once rank 0 has said it is not on shared memory at this N, further
///   repetitions of `fastpmi-shm` would only re-measure the socket path
///   under the wrong name; each N is still checked once.
/// * A run that reached the time-out has shown the configuration does not
///   finish at this N on this machine; repeating it would spend the
///   time-out again (Hydra's 1024-rank exchange: 6 minutes of a full run).
///   The ULFM rows are the exception: `mpirun --with-ft ulfm` hangs now and
///   then, so they are repeated after one time-out, not after
///   [`crate::ulfm::MAX_TIMEOUTS`] (their limits are their own, see
///   [`crate::ulfm::limit`]).
pub fn skip(records: &[Record], case: &Case, timeout_s: u64) -> Option<(String, String)> {
    let same = |r: &&Record| r.config == case.config && r.n == case.n;
    if case.config == Config::FastpmiShm && case.rep > 0 {
        let first = records.iter().filter(same).find(|r| r.rep == 0);
        if let Some(f) = first.filter(|f| f.status == Status::WrongTransport) {
            return Some((
                format!(
                    "not repeated: rep 1 did not use shared memory ({})",
                    f.error
                ),
                "rep 1 did not use shared memory".into(),
            ));
        }
    }
    if case.config.kind() == Kind::Ulfm {
        let reps: Vec<String> = records
            .iter()
            .filter(same)
            .filter(|r| r.status == Status::TimedOut)
            .map(|r| (r.rep + 1).to_string())
            .collect();
        if reps.len() < crate::ulfm::MAX_TIMEOUTS {
            return None;
        }
        let reps = reps.join(" and ");
        return Some((
            format!("not repeated: reps {reps} timed out"),
            format!("reps {reps} timed out"),
        ));
    }
    let t = records
        .iter()
        .filter(same)
        .find(|r| r.status == Status::TimedOut)?;
    Some((
        format!(
            "not repeated: rep {} reached the {timeout_s} s time-out",
            t.rep + 1
        ),
        format!("rep {} timed out", t.rep + 1),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn opts(args: &[&str]) -> Options {
        Options::from_args(&args.iter().map(OsString::from).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn target_configurations_get_more_repetitions_interleaved() {
        let o = opts(&[
            "--sizes",
            "256",
            "--launch-sizes",
            "1024",
            "--reps",
            "3",
            "--target-reps",
            "5",
        ]);
        let present = [
            Config::FastpmiShm,
            Config::FastpmiSocket,
            Config::FutexFloor,
            Config::LaunchShm,
            Config::LaunchSocket,
        ];
        let cases = plan(&o, &present);
        let count = |c: Config| cases.iter().filter(|k| k.config == c).count();
        assert_eq!(count(Config::FastpmiShm), 5);
        assert_eq!(count(Config::FutexFloor), 5);
        assert_eq!(count(Config::FastpmiSocket), 3);
        // Both (c) and (d) of the start-up table are compared.
        assert_eq!(count(Config::LaunchShm), 5);
        assert_eq!(count(Config::LaunchSocket), 5);
        // Interleaved: within N, repetition r of every configuration before
        // repetition r + 1 of any.
        let exchange: Vec<(Config, u32)> = cases
            .iter()
            .filter(|k| k.config.kind() != Kind::Launch)
            .map(|k| (k.config, k.rep))
            .collect();
        assert_eq!(
            exchange,
            [
                (Config::FastpmiShm, 0),
                (Config::FastpmiSocket, 0),
                (Config::FutexFloor, 0),
                (Config::FastpmiShm, 1),
                (Config::FastpmiSocket, 1),
                (Config::FutexFloor, 1),
                (Config::FastpmiShm, 2),
                (Config::FastpmiSocket, 2),
                (Config::FutexFloor, 2),
                (Config::FastpmiShm, 3),
                (Config::FutexFloor, 3),
                (Config::FastpmiShm, 4),
                (Config::FutexFloor, 4),
            ]
        );
        assert!(cases
            .iter()
            .all(|k| k.of == reps_of(&o, k.config, k.n) && k.rep < k.of));
    }

    #[test]
    fn death_detection_runs_at_its_own_sizes_with_target_repetitions() {
        let o = opts(&[
            "--death-sizes",
            "64,1024",
            "--reps",
            "2",
            "--target-reps",
            "5",
        ]);
        let cases = plan(&o, &[Config::DeathDetect]);
        let at = |n: u32| cases.iter().filter(|k| k.n == n).count();
        assert_eq!((at(64), at(1024), cases.len()), (5, 5, 10));
        assert!(cases.iter().all(|k| k.config == Config::DeathDetect));
    }

    #[test]
    fn ulfm_runs_interleave_the_launchers_with_the_common_repetitions() {
        let o = opts(&["--ulfm-sizes", "64", "--reps", "3", "--target-reps", "5"]);
        let cases = plan(&o, &[Config::UlfmFastpmi, Config::UlfmMpirun]);
        let order: Vec<(Config, u32)> = cases.iter().map(|k| (k.config, k.rep)).collect();
        assert_eq!(
            order,
            [
                (Config::UlfmFastpmi, 0),
                (Config::UlfmMpirun, 0),
                (Config::UlfmFastpmi, 1),
                (Config::UlfmMpirun, 1),
                (Config::UlfmFastpmi, 2),
                (Config::UlfmMpirun, 2),
            ]
        );
        assert!(cases.iter().all(|k| k.n == 64 && k.of == 3));
        // Repeated after one time-out, not after two.
        let case = |rep| Case {
            config: Config::UlfmMpirun,
            n: 64,
            rep,
            of: 5,
        };
        let with = |rep, status| Record {
            status,
            ..Record::skipped(Config::UlfmMpirun, 64, rep, "x")
        };
        let mut records = vec![with(0, Status::TimedOut), with(1, Status::Ok)];
        assert!(skip(&records, &case(2), 120).is_none());
        records.push(with(2, Status::TimedOut));
        let (why, short) = skip(&records, &case(3), 120).unwrap();
        assert_eq!(why, "not repeated: reps 1 and 3 timed out");
        assert_eq!(short, "reps 1 and 3 timed out");
        assert!(skip(&records, &Case { n: 256, ..case(3) }, 120).is_none());
    }

    #[test]
    fn short_launches_get_more_repetitions() {
        let o = opts(&["--launch-sizes", "1,64,256", "--target-reps", "5"]);
        let cases = plan(&o, &[Config::LaunchFloor, Config::LaunchFastpmi]);
        let count = |c: Config, n: u32| cases.iter().filter(|k| k.config == c && k.n == n).count();
        for c in [Config::LaunchFloor, Config::LaunchFastpmi] {
            assert_eq!(count(c, 1), 20);
            assert_eq!(count(c, 64), 20);
            assert_eq!(count(c, 256), 5);
        }
    }

    #[test]
    fn more_common_repetitions_than_target_ones_apply_to_all() {
        let o = opts(&["--sizes", "16", "--reps", "7", "--target-reps", "5"]);
        let cases = plan(&o, &[Config::FastpmiShm, Config::FastpmiSocket]);
        assert_eq!(cases.len(), 14);
        assert!(cases.iter().all(|k| k.of == 7));
    }

    #[test]
    fn repetitions_after_a_time_out_or_a_wrong_transport_are_skipped() {
        let case = |config, n, rep| Case {
            config,
            n,
            rep,
            of: 3,
        };
        let with = |config, n, rep, status| Record {
            status,
            ..Record::skipped(config, n, rep, "x")
        };
        let hydra = Config::Hydra;
        let mut records = vec![with(hydra, 1024, 0, Status::Ok)];
        assert!(skip(&records, &case(hydra, 1024, 1), 120).is_none());
        records.push(with(hydra, 1024, 1, Status::TimedOut));
        let (why, short) = skip(&records, &case(hydra, 1024, 2), 120).unwrap();
        assert_eq!(why, "not repeated: rep 2 reached the 120 s time-out");
        assert_eq!(short, "rep 2 timed out");
        // Only that configuration at that N.
        assert!(skip(&records, &case(hydra, 256, 2), 120).is_none());
        assert!(skip(&records, &case(Config::FastpmiShm, 1024, 2), 120).is_none());
        // fastpmi-shm whose first run was not on shared memory.
        records.push(with(Config::FastpmiShm, 64, 0, Status::WrongTransport));
        let (why, _) = skip(&records, &case(Config::FastpmiShm, 64, 1), 120).unwrap();
        assert!(why.contains("did not use shared memory"), "{why}");
        assert!(skip(&records, &case(Config::FastpmiShm, 64, 0), 120).is_none());
    }
}
