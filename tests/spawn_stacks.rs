//! Dynamic processes with real MPI stacks: `MPI_Comm_spawn`,
//! `MPI_Comm_spawn_multiple`, a spawn that must fail; plus the PMI-level
//! spawn calls of Slurm's `libpmi2` and fastpmi's `libpmi`. Publish/lookup
//! and connect/accept: `tests/names_stacks.rs`.
//!
//! Each test runs its program first under the stack's own launcher (the
//! `mpich` wheel's Hydra 5 `mpiexec`, Intel's `mpiexec.hydra`, Debian's
//! Hydra 4.0.2 for `libpmi2`), which must pass: that half checks the program
//! and the stack installation. Then the same program and arguments run under
//! fastpmi in the same test, so a failure of the second half points at
//! fastpmi. Failure messages say which half failed and carry the launcher's
//! stderr. Tests without an own-launcher half say why next to them.
//!
//! The stacks come from `scripts/install-mpi-stacks` (see
//! `tests/common/stacks.rs`). Children run `/proc/self/exe`, a copy of the
//! program unique to the test, so leftover processes of a job are found by
//! that path after the launcher exits.

mod common;

use common::halves::{exactly, judge, own_then_fastpmi, private_copy, Half};
use common::stacks::Stack;
use common::{capi_lib_dir, heavy, launch, prog, scratch_dir, Cmd, Prog};
use std::time::Duration;

// ---------------------------------------------------------------------------
// MPI_Comm_spawn + merge + allreduce
// ---------------------------------------------------------------------------

fn spawn_parent(stack: Stack, parents: usize, children: usize, timeout: Duration) {
    let m = parents + children;
    let sum = m * (m + 1) / 2;
    let check = exactly(vec![
        format!("spawn ok parents={parents} children={children} merged={m} sum={sum}"),
        format!("spawn child ok children={children} parents={parents} merged={m} sum={sum}"),
    ]);
    own_then_fastpmi(
        stack,
        "spawn_parent",
        &format!("{}-{parents}x{children}", stack.name()),
        parents,
        &[&children.to_string()],
        &[],
        timeout,
        &check,
    );
}

#[test]
fn mpich5_spawn_2_parents_1_child() {
    spawn_parent(Stack::Mpich5, 2, 1, Duration::from_secs(60));
}

#[test]
fn mpich5_spawn_2_parents_4_children() {
    spawn_parent(Stack::Mpich5, 2, 4, Duration::from_secs(60));
}

#[test]
fn mpich5_spawn_2_parents_16_children() {
    spawn_parent(Stack::Mpich5, 2, 16, Duration::from_secs(120));
}

#[test]
fn mpich5_spawn_16_parents_1_child() {
    spawn_parent(Stack::Mpich5, 16, 1, Duration::from_secs(120));
}

#[test]
fn mpich5_spawn_16_parents_4_children() {
    spawn_parent(Stack::Mpich5, 16, 4, Duration::from_secs(120));
}

#[test]
fn mpich5_spawn_16_parents_16_children() {
    spawn_parent(Stack::Mpich5, 16, 16, Duration::from_secs(120));
}

#[test]
fn open_mpi_5_spawn_2_parents_1_child() {
    spawn_parent(Stack::Ompi5, 2, 1, Duration::from_secs(90));
}

#[test]
fn open_mpi_5_spawn_2_parents_4_children() {
    spawn_parent(Stack::Ompi5, 2, 4, Duration::from_secs(120));
}

#[test]
fn impi_spawn_2_parents_2_children() {
    spawn_parent(Stack::Impi, 2, 2, Duration::from_secs(90));
}

#[test]
fn impi_spawn_2_parents_8_children() {
    spawn_parent(Stack::Impi, 2, 8, Duration::from_secs(120));
}

/// Intel MPI loading fastpmi's `libpmi2.so.0` (`I_MPI_PMI=pmi2`): its
/// `PMI2_Job_Spawn` goes over the wire to whichever server the library talks
/// to: Debian's Hydra 4.0.2, then fastpmi. Hydra gets `-ppn` large enough
/// for parents and children on one proxy: spread over several proxies its
/// spawn fails an assertion (`pmip_cb.c: assert (!closed)`) with Slurm's own
/// libpmi2 too.
fn impi_spawn_on_fastpmi_libpmi2(children: usize) {
    let _g = heavy();
    let parents = 2;
    let tag = format!("impi-pmi2lib-{children}");
    let dir = scratch_dir(&tag);
    let exe = private_copy(&Stack::Impi.program("spawn_parent"), dir.path(), &tag);
    let lib = capi_lib_dir().join("libpmi2.so.0");
    let m = parents + children;
    let sum = m * (m + 1) / 2;
    let check = exactly(vec![
        format!("spawn ok parents={parents} children={children} merged={m} sum={sum}"),
        format!("spawn child ok children={children} parents={parents} merged={m} sum={sum}"),
    ]);
    let args = |ppn: bool| {
        let mut v: Vec<String> = Vec::new();
        if ppn {
            v.extend(["-ppn".into(), (parents + children).to_string()]);
        }
        v.extend(["-n".into(), parents.to_string(), exe.display().to_string()]);
        v.push(children.to_string());
        v
    };
    let with_env = |mut c: Cmd| {
        for (k, v) in Stack::Impi.env() {
            c = c.env(k, v);
        }
        c.env("I_MPI_PMI", "pmi2")
            .env("I_MPI_PMI_LIBRARY", &lib)
            .cwd(dir.path())
            .timeout(Duration::from_secs(120))
    };
    let hydra = with_env(launch(args(true)).program("mpiexec.hydra")).run();
    judge(Half::Own, &hydra, &exe, &check);
    let fast = with_env(launch(args(false))).run();
    judge(Half::Fastpmi, &fast, &exe, &check);
}

#[test]
fn impi_pmi2_library_spawn_2_children() {
    impi_spawn_on_fastpmi_libpmi2(2);
}

#[test]
fn impi_pmi2_library_spawn_8_children() {
    impi_spawn_on_fastpmi_libpmi2(8);
}

// ---------------------------------------------------------------------------
// MPI_Comm_spawn_multiple: appnum, per-command argv, info wdir
// ---------------------------------------------------------------------------

/// Two parents spawn 1 copy of command 0 and 2 of command 1 (with info
/// `wdir` = the program's directory, not the job's): the children report
/// appnum 0, 1, 1 and their command's arguments.
fn spawn_multiple(stack: Stack) {
    let check = exactly(vec![
        "child rank 0 appnum 0 tag first".into(),
        "child rank 1 appnum 1 tag second".into(),
        "child rank 2 appnum 1 tag second".into(),
        "spawn_multiple ok children=3 appnums=0,1,1".into(),
    ]);
    own_then_fastpmi(
        stack,
        "spawn_multiple",
        &format!("{}-multi", stack.name()),
        2,
        &["1", "2"],
        &[],
        Duration::from_secs(90),
        &check,
    );
}

#[test]
fn mpich5_spawn_multiple_appnums() {
    spawn_multiple(Stack::Mpich5);
}

#[test]
fn open_mpi_5_spawn_multiple_appnums() {
    spawn_multiple(Stack::Ompi5);
}

#[test]
fn impi_spawn_multiple_appnums() {
    spawn_multiple(Stack::Impi);
}

// ---------------------------------------------------------------------------
// Spawning a program that does not exist
// ---------------------------------------------------------------------------

/// fastpmi only: neither own launcher can pass this. Hydra 5 answers the
/// spawn with `rc=0` and only its proxy logs the execvp failure, so the
/// MPICH parent root waits forever for the children to connect; Intel's
/// mpiexec.hydra ends the whole job with exit 255. fastpmi must answer the
/// spawn with an error: `MPI_Comm_spawn` returns it (MPI_ERRORS_RETURN),
/// the parent world still works, a control spawn of an existing program
/// then succeeds (so a launcher that refuses every spawn fails this test),
/// and the job exits 0.
fn spawn_missing(stack: Stack) {
    let _g = heavy();
    let tag = format!("{}-missing", stack.name());
    let dir = scratch_dir(&tag);
    let exe = private_copy(&stack.program("spawn_missing"), dir.path(), &tag);
    let out = stack
        .fastpmi(["-n", "2", exe.to_str().unwrap(), "2"])
        .cwd(dir.path())
        .timeout(Duration::from_secs(60))
        .run();
    let check = |lines: &[String]| {
        let ok = lines.len() == 2
            && lines.iter().any(|l| l == "spawn_missing child ok")
            && lines.iter().any(|l| {
                l.starts_with("spawn_missing ok rc_class=") && l.ends_with(" then_spawned=1")
            });
        if ok {
            Ok(())
        } else {
            Err(format!(
                "expected `spawn_missing ok rc_class=C errcode_class=E error=\"...\" \
                 then_spawned=1` (the spawn of the missing program returned an error, the \
                 parents carried on, and the control spawn of an existing program worked) and \
                 the control child's `spawn_missing child ok`; got {lines:#?}"
            ))
        }
    };
    judge(Half::FastpmiOnly, &out, &exe, &check);
}

#[test]
fn mpich5_spawn_of_missing_program_returns_an_error() {
    spawn_missing(Stack::Mpich5);
}

#[test]
fn open_mpi_5_spawn_of_missing_program_returns_an_error() {
    spawn_missing(Stack::Ompi5);
}

#[test]
fn impi_spawn_of_missing_program_returns_an_error() {
    spawn_missing(Stack::Impi);
}

// ---------------------------------------------------------------------------
// PMI-level spawn
// ---------------------------------------------------------------------------

/// Slurm's libpmi2: rank 0 of 2 calls `PMI2_Job_Spawn` of 8 copies with a
/// preput key and info `wdir`; the children see spawned=1, size 8, the
/// preput value, and each other's keys after a fence. Own launcher:
/// Debian's Hydra 4.0.2 (`mpiexec.hydra`); the wheel's Hydra 5 cannot serve
/// Slurm's client (its fullinit-response lacks the version keys).
#[test]
fn slurm_pmi2_job_spawn_8_children() {
    let _g = heavy();
    let dir = scratch_dir("pmi2-spawn");
    let exe = private_copy(prog(Prog::Pmi2Spawn), dir.path(), "pmi2spawn");
    let args = ["-n", "2", exe.to_str().unwrap(), "8"];
    let check = |lines: &[String]| {
        let ok = lines.len() == 2
            && lines.iter().any(|l| l == "pmi2 spawn ok children=8")
            && lines
                .iter()
                .any(|l| l.starts_with("pmi2 spawn child ok size=8 preput=from-"));
        if ok {
            Ok(())
        } else {
            Err(format!(
                "expected `pmi2 spawn ok children=8` and `pmi2 spawn child ok size=8 \
                 preput=from-<parent jobid>`; got {lines:#?}"
            ))
        }
    };
    let own = launch(args)
        .program("mpiexec.hydra")
        .cwd(dir.path())
        .timeout(Duration::from_secs(60))
        .run();
    judge(Half::Own, &own, &exe, &check);
    let fast = launch(args)
        .cwd(dir.path())
        .timeout(Duration::from_secs(60))
        .run();
    judge(Half::Fastpmi, &fast, &exe, &check);
}

/// fastpmi's libpmi: rank 0 of 2 calls `PMI_Spawn_multiple` of two commands
/// (2 + 2 processes, a preput key, info `wdir` on the second); the children
/// see spawned, size 4, appnum 0/1, the preput value, and each other's keys
/// after a barrier. fastpmi only: no other launcher serves fastpmi's client
/// library's spawn (it speaks PMI-2 on the wire, and Debian has no other
/// wire-level PMI-1 library to build this program against).
#[test]
fn fastpmi_pmi1_spawn_multiple() {
    let _g = heavy();
    let dir = scratch_dir("pmi1-spawn");
    let exe = private_copy(prog(Prog::Pmi1Spawn), dir.path(), "pmi1spawn");
    let out = launch(["-n", "2", exe.to_str().unwrap(), "2", "2"])
        .env("LD_LIBRARY_PATH", capi_lib_dir())
        .cwd(dir.path())
        .timeout(Duration::from_secs(60))
        .run();
    let check = |lines: &[String]| {
        let mut want: Vec<String> = vec![
            "pmi1 spawn ok children=4".into(),
            "pmi1 spawn child rank 0 appnum 0".into(),
            "pmi1 spawn child rank 1 appnum 0".into(),
            "pmi1 spawn child rank 2 appnum 1".into(),
            "pmi1 spawn child rank 3 appnum 1".into(),
        ];
        let summary: Vec<&String> = lines
            .iter()
            .filter(|l| l.starts_with("pmi1 spawn child ok size=4 preput=from-"))
            .collect();
        let rest: Vec<String> = lines
            .iter()
            .filter(|l| !l.starts_with("pmi1 spawn child ok"))
            .cloned()
            .collect();
        want.sort();
        if summary.len() == 1 && rest == want {
            Ok(())
        } else {
            Err(format!(
                "expected {want:#?} plus `pmi1 spawn child ok size=4 preput=from-<parent \
                 kvsname>`; got {lines:#?}"
            ))
        }
    };
    judge(Half::FastpmiOnly, &out, &exe, &check);
}
