//! Open MPI 5's ULFM (`MPIX_Comm_revoke`, `MPIX_Comm_shrink`,
//! `MPIX_Comm_agree`) under fastpmi's fault-tolerant mode, against the
//! wheel's own `mpirun --with-ft ulfm` (PRRTE) in the same test:
//! `tests/c/ulfm_shrink.c` SIGKILLs some ranks (after the first barrier,
//! after the first allreduce, or while the others are inside an
//! allreduce); the others learn of it (the PMIx event
//! `PMIX_ERR_PROC_ABORTED_BY_SIG` from the dead proc), revoke, shrink and
//! finish. Under fastpmi (`--with-ft ulfm`, and `--fault-tolerant` in the
//! three-victim case) every survivor, and no one else, prints `ulfm ok
//! rank R shrunk=S sum=S` with S = N - victims, the launcher exits 0 within
//! the limit, says once on stderr per dead rank that it was SIGKILLed and
//! "the job goes on", and leaves no rank process behind. Under `mpirun`
//! the same survivors print the same lines. Cases: rank 3 killed after the
//! barrier at 8, 64 and 256 ranks (the reference at 8 and 64); ranks 3, 17
//! and 42 killed at three different moments, one inside a collective, at
//! 64 ranks. The wall time of each run under both launchers is printed
//! (`--nocapture`).
//!
//! The reference: the wheel's `prterun` does not know `--with-ft`; `mpirun`
//! (the Open MPI personality of the same PRRTE) does. It may hang after
//! every survivor printed its line: survivors wait for ever in
//! `MPI_Finalize`'s PMIx fence, seen 4 times in 10 in the three-victim case
//! (and once at 256 ranks). That is OpenPMIx 5.0.11's server (in prterun
//! as in fastpmi): when the host deregisters a dead client
//! (`PMIx_server_deregister_client`) before the library has read the EOF
//! on its socket, `remove_client` marks it finalized and the namespace's
//! count of local procs keeps it, so a fence over the whole namespace
//! waits for it. So an `mpirun` run still going past its limit is killed
//! and passes if every survivor had printed its line (the test says so on
//! stderr); fastpmi must exit 0: it deregisters a dead rank only after the
//! library reported the lost connection (docs/fault-tolerance.md), and so
//! never loses that race.

mod common;

use std::path::Path;
use std::time::Duration;

use common::stacks::Stack;
use common::{
    assert_no_process_left, heavy, mentions_rank, scratch_dir, unique_copy, Cmd, Outcome,
};

const S: Stack = Stack::Ompi5;

/// One run of `ulfm_shrink`: `n` ranks, `victims` as the program takes
/// them (`3`, `3:0,17:1,42:2`), `dead` their world ranks; `limit` for
/// fastpmi, `own_limit` for `mpirun` (about 2.5 times its usual time).
struct Case {
    n: u32,
    victims: &'static str,
    dead: &'static [u32],
    limit: Duration,
    /// `None`: no reference run under `mpirun`.
    own_limit: Option<Duration>,
}

/// Run `cmd` within `limit`; past it, kill it and all under it. Also says
/// whether it was killed.
fn run_or_kill(cmd: Cmd, limit: Duration) -> (Outcome, bool) {
    match cmd.spawn().wait_timeout(limit) {
        Ok(out) => (out, false),
        Err(job) => (job.kill_all(), true),
    }
}

impl Case {
    fn tag(&self) -> String {
        format!("n{}-{}", self.n, self.victims.replace([':', ','], "_"))
    }

    fn survivors(&self) -> u32 {
        self.n - self.dead.len() as u32
    }

    /// The `ulfm` lines the survivors should print, sorted.
    fn want(&self) -> Vec<String> {
        let s = self.survivors();
        let mut want: Vec<String> = (0..self.n)
            .filter(|r| !self.dead.contains(r))
            .map(|r| format!("ulfm ok rank {r} shrunk={s} sum={s}"))
            .collect();
        want.sort();
        want
    }

    /// The `ulfm` lines printed, sorted.
    fn got<'a>(&self, out: &'a Outcome) -> Vec<&'a str> {
        let mut got: Vec<&str> = out
            .stdout_lines()
            .into_iter()
            .filter(|l| l.starts_with("ulfm "))
            .collect();
        got.sort();
        got
    }

    /// Under fastpmi with `ft_flags` (`--with-ft ulfm`, `--fault-tolerant`).
    fn fastpmi(&self, prog: &Path, ft_flags: &[&str]) -> Outcome {
        let n = self.n.to_string();
        let mut args: Vec<&str> = ft_flags.to_vec();
        args.extend(["-n", &n, prog.to_str().unwrap(), self.victims]);
        let (out, killed) = run_or_kill(S.fastpmi(&args), self.limit);
        assert!(
            !killed,
            "fastpmi still running after {:.0?}, killed with its ranks; {} of {} survivors \
             had printed their line (if all: they wait in MPI_Finalize's PMIx fence for a \
             dead rank, see the module doc)\n{}",
            self.limit,
            self.got(&out).len(),
            self.survivors(),
            out.report()
        );
        assert_no_process_left(prog, Duration::from_secs(5));
        out
    }

    /// Under the wheel's `mpirun --with-ft ulfm`; also whether it hung
    /// (killed past `own_limit`).
    fn mpirun(&self, prog: &Path) -> (Outcome, bool) {
        let n = self.n.to_string();
        let args = S.own_flags().iter().copied().chain([
            "--with-ft",
            "ulfm",
            "-n",
            &n,
            prog.to_str().unwrap(),
            self.victims,
        ]);
        let cmd = S.own_launcher(args).program(S.venv().join("bin/mpirun"));
        let limit = self.own_limit.expect("a reference run");
        let (out, killed) = run_or_kill(cmd, limit);
        assert_no_process_left(prog, Duration::from_secs(5));
        (out, killed)
    }

    /// Every survivor, and no one else, printed its line with the shrunk
    /// size.
    fn assert_survivors_finish(&self, out: &Outcome) {
        assert_eq!(self.got(out), self.want(), "{}", out.report());
    }

    /// fastpmi said exactly once per dead rank that it was SIGKILLed and
    /// the job goes on, and nothing of the kind about any other rank.
    fn assert_deaths_told_once(&self, out: &Outcome) {
        let told: Vec<&str> = out
            .stderr_lines()
            .into_iter()
            .filter(|l| l.contains("the job goes on"))
            .collect();
        assert_eq!(told.len(), self.dead.len(), "{}", out.report());
        for &r in self.dead {
            let about: Vec<&&str> = told
                .iter()
                .filter(|l| mentions_rank(l, r as usize))
                .collect();
            assert!(
                about.len() == 1 && about[0].contains("SIGKILL"),
                "one line should tell that rank {r} was SIGKILLed\n{}",
                out.report()
            );
        }
    }

    /// fastpmi with `ft_flags`, then `mpirun --with-ft ulfm`: both finish
    /// on the survivors.
    fn run(&self, ft_flags: &[&str]) {
        let _g = heavy();
        let dir = scratch_dir("ulfm");
        let prog = unique_copy(&S.program("ulfm_shrink"), dir.path(), &self.tag());
        let fp = self.fastpmi(&prog, ft_flags);
        eprintln!(
            "ulfm n={} victims={}: fastpmi {} {:.1?}",
            self.n,
            self.victims,
            ft_flags.join(" "),
            fp.elapsed,
        );
        fp.assert_success();
        self.assert_survivors_finish(&fp);
        self.assert_deaths_told_once(&fp);
        if self.own_limit.is_none() {
            return;
        }
        let (own, own_hung) = self.mpirun(&prog);
        eprintln!(
            "ulfm n={} victims={}: mpirun --with-ft ulfm {:.1?}{}",
            self.n,
            self.victims,
            own.elapsed,
            if own_hung {
                " (hung after the survivors' lines: killed)"
            } else {
                ""
            }
        );
        self.assert_survivors_finish(&own);
        if !own_hung {
            own.assert_success();
        }
    }
}

#[test]
fn rank_3_killed_after_the_barrier_at_8_ranks() {
    Case {
        n: 8,
        victims: "3",
        dead: &[3],
        limit: Duration::from_secs(60),
        own_limit: Some(Duration::from_secs(60)),
    }
    .run(&["--with-ft", "ulfm"]);
}

#[test]
fn rank_3_killed_after_the_barrier_at_64_ranks() {
    Case {
        n: 64,
        victims: "3",
        dead: &[3],
        limit: Duration::from_secs(120),
        own_limit: Some(Duration::from_secs(60)),
    }
    .run(&["--with-ft", "ulfm"]);
}

/// About 35-60 s under fastpmi on 2 cores. `mpirun --with-ft ulfm` at 256
/// ranks takes 75-95 s here and agrees (measured when this test was
/// written); it is left out to keep the suite within its CI time, the 8-
/// and 64-rank cases compare both launchers.
#[test]
fn rank_3_killed_after_the_barrier_at_256_ranks() {
    Case {
        n: 256,
        victims: "3",
        dead: &[3],
        limit: Duration::from_secs(300),
        own_limit: None,
    }
    .run(&["--with-ft", "ulfm"]);
}

/// Rank 3 dies after the barrier, rank 17 after the first allreduce, rank
/// 42 while the others are inside the fourth; the fastpmi run spells the
/// mode `--fault-tolerant`.
#[test]
fn three_ranks_killed_at_three_moments_one_inside_a_collective_at_64_ranks() {
    Case {
        n: 64,
        victims: "3:0,17:1,42:2",
        dead: &[3, 17, 42],
        limit: Duration::from_secs(120),
        own_limit: Some(Duration::from_secs(60)),
    }
    .run(&["--fault-tolerant"]);
}
