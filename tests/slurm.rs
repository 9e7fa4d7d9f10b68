//! fastpmi's C libraries, Slurm's own client and MPICH under a real Slurm
//! (`srun --mpi=pmi2`: Slurm's slurmstepd is the PMI-2 server), and the
//! fastpmi launcher inside a Slurm allocation.
//!
//! One private single-node cluster (munged, slurmctld, slurmd from the
//! Debian packages `munge slurmctld slurmd slurm-client`) serves every case;
//! see `slurm/cluster.rs`. Needs root. Nothing is skipped: without root or
//! without Slurm the run fails, naming what is missing. The cases run one
//! after another (each is a 16- to 64-task job on a 2-core machine), so this
//! binary has its own runner (`harness = false`): it starts the cluster,
//! runs the cases (a name filter argument selects some), stops the cluster
//! and then checks that no daemon it started is left, as a last case.
//!
//! What each case checks: every line the programs print (rank 0's `... ok
//! size=N` line is the only stdout line, srun exits 0), and for fastpmi's
//! libraries that every rank really ran on them (their debug line `PMI2_Init:
//! rank R of N, job J, transport Socket` for each R, J being the Slurm step
//! `job.step`).

#[path = "slurm/cluster.rs"]
mod cluster;
mod common;
#[path = "slurm/nested.rs"]
mod nested;

use std::ffi::OsString;
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Duration;

use cluster::Cluster;
use common::{capi_lib_dir, prog, scratch_dir, unique_copy, Outcome, Prog};

/// Warnings (a refused or unsupported call, with the reason) and the C
/// libraries' init line: one per rank, naming rank, size, job and
/// transport.
const INIT_LOG: &str = "warn,fastpmi_capi::session=debug";

struct Case {
    name: &'static str,
    run: fn(&Cluster),
}

const CASES: &[Case] = &[
    Case {
        name: "slurm_libpmi2_16",
        run: |c| slurm_libpmi2(c, 16),
    },
    Case {
        name: "slurm_libpmi2_64",
        run: |c| slurm_libpmi2(c, 64),
    },
    Case {
        name: "fastpmi_libpmi2_16",
        run: |c| fastpmi_libpmi2(c, 16),
    },
    Case {
        name: "fastpmi_libpmi2_64",
        run: |c| fastpmi_libpmi2(c, 64),
    },
    Case {
        name: "fastpmi_libpmi1_16",
        run: |c| fastpmi_libpmi1(c, 16),
    },
    Case {
        name: "fastpmi_libpmi1_64",
        run: |c| fastpmi_libpmi1(c, 64),
    },
    Case {
        name: "fastpmi_libpmi2_every_call_16",
        run: fastpmi_libpmi2_calls,
    },
    Case {
        name: "fastpmi_libpmi2_abort_ends_the_step_8",
        run: fastpmi_libpmi2_abort,
    },
    Case {
        name: "fastpmi_init_refused_by_slurmstepd_reports_why",
        run: fastpmi_init_refused,
    },
    Case {
        name: "mpich_16",
        run: |c| mpich(c, 16),
    },
    Case {
        name: "mpich_64",
        run: |c| mpich(c, 64),
    },
    Case {
        name: "fastpmi_in_allocation_mpich_32",
        run: fastpmi_in_allocation_mpich,
    },
    Case {
        name: "fastpmi_in_allocation_libpmi2_32",
        run: fastpmi_in_allocation_libpmi2,
    },
    Case {
        name: "fastpmi_in_allocation_rank_env",
        run: fastpmi_in_allocation_env,
    },
    Case {
        name: "nested_2x16_slurm_libpmi2",
        run: nested::slurm_libpmi2,
    },
    Case {
        name: "nested_2x16_fastpmi_libpmi2_on_segments",
        run: nested::fastpmi_libpmi2,
    },
    Case {
        name: "nested_2x16_mpich_sees_two_nodes",
        run: |c| nested::mpi(c, None),
    },
    Case {
        name: "nested_2x16_intel_mpi_sees_two_nodes",
        run: |c| nested::mpi(c, Some(common::stacks::Stack::Impi)),
    },
    Case {
        name: "nested_2x16_killed_rank_ends_the_step",
        run: nested::killed_rank,
    },
    Case {
        name: "nested_2x16_fault_tolerant_death_reaches_both_nodes",
        run: nested::fault_tolerant_death,
    },
];

/// Name of the last case: the cluster's daemons are stopped, none is left.
const TEARDOWN: &str = "daemons_stopped_and_none_left";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        for c in CASES {
            println!("{}: test", c.name);
        }
        println!("{TEARDOWN}: test");
        return;
    }
    let filters: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with('-'))
        .map(String::as_str)
        .collect();
    let selected: Vec<&Case> = CASES
        .iter()
        .filter(|c| filters.is_empty() || filters.iter().any(|f| c.name.contains(f)))
        .collect();
    println!("\nrunning {} tests", selected.len() + 1);
    let mut failed: Vec<&str> = Vec::new();

    // Root and Slurm first (clear messages), then compile everything (and
    // build fastpmi's libraries) before the daemons start; a missing
    // compiler or library fails there, naming the package.
    let built = catch_unwind(|| {
        cluster::require_root();
        cluster::require_slurm();
        for p in [
            Prog::Pmi2Slurm,
            Prog::Pmi1Kvs,
            Prog::Pmi2SlurmCalls,
            Prog::MpiAllreduce,
            Prog::MpiNodeSplit,
            Prog::Pmi2SlurmOwnHeader,
            Prog::Pmi2FenceLoopSlurm,
            Prog::Pmi2FtSlurm,
        ] {
            prog(p);
        }
    });
    let cluster = match built.and_then(|()| catch_unwind(Cluster::start)) {
        Ok(c) => Some(c),
        Err(_) => {
            println!("test setup ... FAILED (see the message above)");
            failed.push("setup");
            None
        }
    };
    if let Some(cluster) = cluster {
        for c in &selected {
            print!("test {} ... ", c.name);
            let _ = std::io::stdout().flush();
            let t = std::time::Instant::now();
            match catch_unwind(AssertUnwindSafe(|| (c.run)(&cluster))) {
                Ok(()) => println!("ok ({:.1?})", t.elapsed()),
                Err(_) => {
                    println!("FAILED");
                    eprintln!("{}", cluster.logs());
                    failed.push(c.name);
                }
            }
        }
        print!("test {TEARDOWN} ... ");
        match cluster.stop() {
            Ok(()) => println!("ok"),
            Err(e) => {
                println!("FAILED\n{e}");
                failed.push(TEARDOWN);
            }
        }
    }
    if failed.is_empty() {
        println!("\ntest result: ok. {} passed\n", selected.len() + 1);
    } else {
        println!("\nfailures: {failed:?}\ntest result: FAILED\n");
        std::process::exit(1);
    }
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// A copy of `p` under a name unique to this case, so that a task that
/// outlives its job is found by its executable path.
fn copy_of(p: Prog, tag: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = scratch_dir("slurm");
    let exe = unique_copy(prog(p), dir.path(), tag);
    (dir, exe)
}

/// srun is done: no task of `exe` may be left.
fn no_task_left(exe: &Path) {
    common::assert_no_process_left(exe, Duration::from_secs(10));
}

/// srun exited 0 and printed exactly `line` (rank 0's summary).
fn assert_only_line(out: &Outcome, line: &str) {
    out.assert_success();
    assert_eq!(
        out.stdout_lines(),
        vec![line],
        "expected exactly one stdout line\n{}",
        out.report()
    );
}

/// Every rank 0..n logged `<api>: rank R of n, job J, transport Socket`
/// with the same Slurm step id J (`<digits>.<digits>`): fastpmi's library
/// served every rank, over slurmstepd's socket. Returns J.
fn assert_fastpmi_served_every_rank(out: &Outcome, api: &str, n: u32) -> String {
    let mut seen = vec![false; n as usize];
    let mut jobs = std::collections::BTreeSet::new();
    for l in out.stderr.lines() {
        let Some(rest) = l.split_once(&format!("{api}: rank ")).map(|(_, r)| r) else {
            continue;
        };
        // "R of N, job J, transport T"
        let f: Vec<&str> = rest.split([' ', ',']).filter(|s| !s.is_empty()).collect();
        assert!(
            f.len() == 7 && f[1] == "of" && f[3] == "job" && f[5] == "transport",
            "unexpected init line {l:?}"
        );
        let r: usize = f[0].parse().expect("rank");
        assert_eq!(f[2], n.to_string(), "size in {l:?}");
        assert_eq!(f[6], "Socket", "transport in {l:?}");
        assert!(r < n as usize, "rank out of range in {l:?}");
        seen[r] = true;
        jobs.insert(f[4].to_string());
    }
    let missing: Vec<usize> = (0..n as usize).filter(|&r| !seen[r]).collect();
    assert!(
        missing.is_empty(),
        "ranks {missing:?} did not log {api} from fastpmi's library\n{}",
        out.report()
    );
    assert_eq!(jobs.len(), 1, "ranks disagree on the job id: {jobs:?}");
    let job = jobs.into_iter().next().unwrap();
    let step_like = job
        .split_once('.')
        .is_some_and(|(a, b)| a.parse::<u64>().is_ok() && b.parse::<u64>().is_ok());
    assert!(step_like, "job id {job:?} is not a Slurm job.step");
    job
}

/// An argument list of strings and paths.
macro_rules! argv {
    ($($a:expr),* $(,)?) => { vec![$(OsString::from($a)),*] };
}

/// The tasks srun reports with `suffix` (`srun: error: <node>: tasks
/// 0-2,5: Killed`), sorted.
fn srun_tasks(stderr: &str, suffix: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for l in stderr.lines() {
        let Some(head) = l.strip_suffix(suffix) else {
            continue;
        };
        let Some((_, list)) = head.rsplit_once(" task") else {
            continue;
        };
        for part in list.trim_start_matches('s').trim().split(',') {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            if let (Ok(a), Ok(b)) = (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
                v.extend(a..=b);
            }
        }
    }
    v.sort_unstable();
    v
}

fn fastpmi() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fastpmi"))
}

// ---------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------

/// Slurm's own libpmi2 under slurmstepd: the reference the others match.
/// `-1`: slurmstepd always sends appnum -1.
fn slurm_libpmi2(c: &Cluster, n: u32) {
    let (_d, exe) = copy_of(Prog::Pmi2Slurm, &format!("slurm{n}"));
    let ns = n.to_string();
    let out = c
        .srun(argv!["--mpi=pmi2", "-n", &ns, &exe, &ns, "-1"])
        .env("FASTPMI_LOG", INIT_LOG)
        .run();
    assert_only_line(&out, &format!("pmi2 ok size={n}"));
    // Slurm's library, not fastpmi's: no fastpmi init line.
    assert!(
        !out.stderr.contains("PMI2_Init: rank"),
        "fastpmi's library was loaded\n{}",
        out.report()
    );
    no_task_left(&exe);
}

/// The same program (linked against Slurm's libpmi2.so.0) on fastpmi's
/// libpmi2.so.0 through LD_LIBRARY_PATH.
fn fastpmi_libpmi2(c: &Cluster, n: u32) {
    let (_d, exe) = copy_of(Prog::Pmi2Slurm, &format!("fastpmi{n}"));
    let ns = n.to_string();
    let out = c
        .srun(argv!["--mpi=pmi2", "-n", &ns, &exe, &ns, "-1"])
        .env("LD_LIBRARY_PATH", capi_lib_dir())
        .env("FASTPMI_LOG", INIT_LOG)
        .run();
    assert_only_line(&out, &format!("pmi2 ok size={n}"));
    assert_fastpmi_served_every_rank(&out, "PMI2_Init", n);
    no_task_left(&exe);
}

/// fastpmi's PMI-1 library (speaking PMI-2 to slurmstepd underneath).
fn fastpmi_libpmi1(c: &Cluster, n: u32) {
    let (_d, exe) = copy_of(Prog::Pmi1Kvs, &format!("pmi1-{n}"));
    let ns = n.to_string();
    let out = c
        .srun(argv!["--mpi=pmi2", "-n", &ns, &exe, &ns, "-1"])
        .env("LD_LIBRARY_PATH", capi_lib_dir())
        .env("FASTPMI_LOG", INIT_LOG)
        .run();
    assert_only_line(&out, &format!("pmi1 ok size={n}"));
    assert_fastpmi_served_every_rank(&out, "PMI_Init", n);
    no_task_left(&exe);
}

/// Every other call of fastpmi's libpmi2 under slurmstepd: attributes,
/// ring, name service, and the calls slurmstepd never answers refused at
/// once with the reason on stderr.
fn fastpmi_libpmi2_calls(c: &Cluster) {
    let n: usize = 16;
    let (_d, exe) = copy_of(Prog::Pmi2SlurmCalls, "calls");
    let ns = n.to_string();
    let out = c
        .srun(argv!["--mpi=pmi2", "-n", &ns, &exe, &ns])
        .env("LD_LIBRARY_PATH", capi_lib_dir())
        .env("FASTPMI_LOG", INIT_LOG)
        .timeout(Duration::from_secs(60))
        .run();
    assert_only_line(&out, &format!("pmi2 slurm calls ok size={n}"));
    assert_fastpmi_served_every_rank(&out, "PMI2_Init", n as u32);
    for (what, msg) in [
        ("PMI2_Job_Connect", "job-connect"),
        ("PMI2_Job_Disconnect", "job-disconnect"),
        (
            "PMI2_KVS_Get",
            "reading another job's keys (kvs-get with a jobid)",
        ),
    ] {
        let line = format!(
            "{what}: not supported: {msg}: Slurm's PMI-2 server (slurmstepd) does not implement it"
        );
        let count = out.stderr.matches(&line).count();
        assert_eq!(count, n, "every rank should log `{line}`\n{}", out.report());
    }
    no_task_left(&exe);
}

/// PMI2_Abort on fastpmi's libpmi2: slurmstepd cancels the whole step at
/// once (the other ranks are killed in their fence), the aborting rank
/// exits 1, and its message reaches stderr (slurmstepd drops it, so the
/// library prints it).
fn fastpmi_libpmi2_abort(c: &Cluster) {
    let (_d, exe) = copy_of(Prog::Pmi2SlurmCalls, "abort");
    let out = c
        .srun(argv!["--mpi=pmi2", "-n", "8", &exe, "8", "abort"])
        .env("LD_LIBRARY_PATH", capi_lib_dir())
        .timeout(Duration::from_secs(60))
        .run();
    assert!(!out.status.success(), "srun exited 0\n{}", out.report());
    assert!(out.stdout_lines().is_empty(), "{}", out.report());
    for want in [
        "PMI2_Abort: rank 7 aborts the job (code 1): pmi2_slurm_calls abort test",
        "task 7: Exited with exit code 1",
        "CANCELLED",
    ] {
        assert!(
            out.stderr.contains(want),
            "stderr lacks {want:?}\n{}",
            out.report()
        );
    }
    assert_eq!(
        srun_tasks(&out.stderr, ": Killed"),
        (0..7).collect::<Vec<u32>>(),
        "srun should report tasks 0-6 killed\n{}",
        out.report()
    );
    // Killed in the fence, not returned from it.
    assert!(
        !out.stderr.contains("fence after rank"),
        "a rank's fence returned after the abort\n{}",
        out.report()
    );
    no_task_left(&exe);
}

/// A refusal by slurmstepd reaches the caller with its reason: without
/// PMI_JOBID, fullinit lacks `pmijobid` and slurmstepd answers rc=3 with no
/// message; PMI2_Init returns PMI2_ERR_OTHER and fastpmi logs the refusal.
fn fastpmi_init_refused(c: &Cluster) {
    let (_d, exe) = copy_of(Prog::Pmi2Slurm, "refused");
    let out = c
        .srun(argv![
            "--mpi=pmi2",
            "-n",
            "2",
            "env",
            "-u",
            "PMI_JOBID",
            &exe,
            "2",
            "-1"
        ])
        .env("LD_LIBRARY_PATH", capi_lib_dir())
        .timeout(Duration::from_secs(60))
        .run();
    assert!(!out.status.success(), "srun exited 0\n{}", out.report());
    let refused = "PMI2_Init failed: PMI server refused fullinit (rc=3): the server gave no reason";
    let rc = "pmi2_slurm: PMI2_Init failed: rc=14";
    for want in [refused, rc, "pmijobid missing in fullinit command"] {
        assert_eq!(
            out.stderr.matches(want).count(),
            2,
            "each of the 2 tasks should report {want:?}\n{}",
            out.report()
        );
    }
    no_task_left(&exe);
}

/// Debian MPICH's built-in PMI-1 client under slurmstepd.
fn mpich(c: &Cluster, n: u32) {
    let (_d, exe) = copy_of(Prog::MpiAllreduce, &format!("mpich{n}"));
    let ns = n.to_string();
    let out = c.srun(argv!["--mpi=pmi2", "-n", &ns, &exe, &ns]).run();
    let sum = n * (n - 1) / 2;
    assert_only_line(&out, &format!("allreduce ok size={n} sum={sum}"));
    no_task_left(&exe);
}

/// `srun --mpi=pmi2 -n 1 fastpmi -n 32 mpi_allreduce 32`: the launcher gets
/// Slurm's PMI variables, its ranks get fastpmi's.
fn fastpmi_in_allocation_mpich(c: &Cluster) {
    let (_d, exe) = copy_of(Prog::MpiAllreduce, "inalloc-mpich");
    let out = c
        .srun(argv![
            "--mpi=pmi2",
            "-n",
            "1",
            fastpmi(),
            "-n",
            "32",
            &exe,
            "32"
        ])
        .run();
    assert_only_line(&out, "allreduce ok size=32 sum=496");
    no_task_left(&exe);
}

/// fastpmi's libpmi2 under fastpmi inside a Slurm step: the ranks are not
/// taken for slurmstepd's (appnum 0, shared memory used).
fn fastpmi_in_allocation_libpmi2(c: &Cluster) {
    let (_d, exe) = copy_of(Prog::Pmi2Slurm, "inalloc-pmi2");
    let out = c
        .srun(argv![
            "--mpi=pmi2",
            "-n",
            "1",
            fastpmi(),
            "--stats",
            "-n",
            "32",
            &exe,
            "32"
        ])
        .env("LD_LIBRARY_PATH", capi_lib_dir())
        .run();
    assert_only_line(&out, "pmi2 ok size=32");
    let shm = common::stats_row(&out.stderr, "shared-memory")
        .unwrap_or_else(|| panic!("no shared-memory stats row\n{}", out.report()));
    // Each rank gets every rank's key: 32 * 32 gets in the segment.
    assert!(
        shm[0] >= 32 && shm[1] >= 32 * 32,
        "puts/gets not served from shared memory: {shm:?}\n{}",
        out.report()
    );
    no_task_left(&exe);
}

/// What the ranks of fastpmi inside `srun --mpi=pmi2` see: fastpmi's
/// PMI_FD/PMI_RANK/PMI_SIZE/PMI_JOBID, not slurmstepd's, no SLURM_MPI_TYPE,
/// and none of the task variables of the launcher's own task.
fn fastpmi_in_allocation_env(c: &Cluster) {
    let out = c
        .srun(argv![
            "--mpi=pmi2",
            "-n",
            "1",
            fastpmi(),
            "--label",
            "-n",
            "4",
            "env"
        ])
        .run();
    out.assert_success();
    let mut jobids = std::collections::BTreeSet::new();
    for r in 0..4 {
        let prefix = format!("[{r}] ");
        let vars: std::collections::HashMap<&str, &str> = out
            .stdout
            .lines()
            .filter_map(|l| l.strip_prefix(&prefix)?.split_once('='))
            .collect();
        let want = [
            ("PMI_FD", "3".to_string()),
            ("PMI_RANK", r.to_string()),
            ("PMI_SIZE", "4".to_string()),
        ];
        for (k, v) in want {
            assert_eq!(
                vars.get(k).copied(),
                Some(v.as_str()),
                "rank {r}: {k}\n{}",
                out.report()
            );
        }
        for k in [
            "SLURM_MPI_TYPE",
            "SLURM_PROCID",
            "SLURM_NTASKS",
            "SLURM_STEP_ID",
        ] {
            assert!(
                !vars.contains_key(k),
                "rank {r} inherited {k} (the launcher's own task's)\n{}",
                out.report()
            );
        }
        let j = vars.get("PMI_JOBID").copied().unwrap_or_default();
        // The launcher itself got "<job>.<step>" from slurmstepd.
        assert!(
            !j.is_empty() && !j.chars().all(|ch| ch.is_ascii_digit() || ch == '.'),
            "rank {r}: PMI_JOBID={j:?} is not fastpmi's\n{}",
            out.report()
        );
        assert!(
            vars.contains_key("SLURM_JOB_ID"),
            "rank {r}: the allocation (SLURM_JOB_ID) should stay visible\n{}",
            out.report()
        );
        jobids.insert(j.to_string());
    }
    assert_eq!(jobids.len(), 1, "ranks disagree on PMI_JOBID: {jobids:?}");
}
