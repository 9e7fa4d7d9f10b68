//! Dynamic processes with real MPI stacks: `MPI_Comm_spawn`,
//! `MPI_Comm_spawn_multiple`, a spawn that must fail, publish/lookup, and
//! connect/accept between two jobs through a name server; plus the
//! PMI-level spawn calls of Slurm's `libpmi2` and fastpmi's `libpmi`.
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

use common::nameserver::{free_port, Daemon};
use common::stacks::Stack;
use common::{
    assert_no_process_left, capi_lib_dir, heavy, launch, prog, scratch_dir, unique_copy, Cmd,
    Outcome, Prog,
};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long processes of a finished job may take to disappear.
const GRACE: Duration = Duration::from_secs(5);

/// Which launcher a half ran under, for failure messages.
#[derive(Clone, Copy)]
enum Half {
    Own,
    Fastpmi,
    /// A test that only fastpmi can run (its doc comment says why).
    FastpmiOnly,
}

impl Half {
    fn blame(self) -> &'static str {
        match self {
            Half::Own => {
                "UNDER THE STACK'S OWN LAUNCHER (this half must pass: the test program or the \
                 stack installation is broken, not fastpmi)"
            }
            Half::Fastpmi => "UNDER FASTPMI (the stack's own launcher passed this test)",
            Half::FastpmiOnly => "UNDER FASTPMI (a fastpmi-only test: see its doc comment)",
        }
    }
}

/// Sorted non-empty stdout lines.
fn sorted_lines(out: &Outcome) -> Vec<String> {
    let mut v: Vec<String> = out.stdout_lines().iter().map(|l| l.to_string()).collect();
    v.sort();
    v
}

/// A check of the sorted stdout lines: exactly these lines, in any order.
fn exactly(expected: Vec<String>) -> impl Fn(&[String]) -> Result<(), String> {
    move |lines: &[String]| {
        let mut want = expected.clone();
        want.sort();
        if lines == want.as_slice() {
            Ok(())
        } else {
            Err(format!(
                "stdout lines (sorted) should be exactly {want:#?}\ngot {lines:#?}"
            ))
        }
    }
}

/// Exit 0 and the lines pass `check`; otherwise a message saying which
/// half failed, with the launcher's output.
fn verdict(
    half: Half,
    out: &Outcome,
    check: &dyn Fn(&[String]) -> Result<(), String>,
) -> Result<(), String> {
    if !out.status.success() {
        return Err(format!(
            "{}: the launcher did not exit 0\n{}",
            half.blame(),
            out.report()
        ));
    }
    check(&sorted_lines(out)).map_err(|e| format!("{}: {e}\n{}", half.blame(), out.report()))
}

/// [`verdict`] must pass, and no process of `exe` may be left.
fn judge(half: Half, out: &Outcome, exe: &Path, check: &dyn Fn(&[String]) -> Result<(), String>) {
    if let Err(e) = verdict(half, out, check) {
        panic!("{e}");
    }
    assert_no_process_left(exe, GRACE);
}

/// A private copy of `exe` in `<dir>/bin/` (so the job's working directory,
/// `dir`, differs from the program's directory).
fn private_copy(exe: &Path, dir: &Path, tag: &str) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("create bin dir");
    unique_copy(exe, &bin, tag)
}

/// Run `-n N <program> ARGS` of `stack` under its own launcher, then under
/// fastpmi, both in a scratch directory with `extra_env`; both halves must
/// pass `check`.
#[allow(clippy::too_many_arguments)]
fn own_then_fastpmi(
    stack: Stack,
    source: &str,
    tag: &str,
    n: usize,
    args: &[&str],
    extra_env: &[(&str, &str)],
    timeout: Duration,
    check: &dyn Fn(&[String]) -> Result<(), String>,
) {
    let _g = heavy();
    let dir = scratch_dir(tag);
    let exe = private_copy(&stack.program(source), dir.path(), tag);
    let mut argv: Vec<String> = vec!["-n".into(), n.to_string(), exe.display().to_string()];
    argv.extend(args.iter().map(|a| a.to_string()));

    let with_env = |mut c: Cmd| {
        for (k, v) in extra_env {
            c = c.env(k, v);
        }
        c.cwd(dir.path()).timeout(timeout)
    };
    let own_argv: Vec<String> = stack
        .own_flags()
        .iter()
        .map(|f| f.to_string())
        .chain(argv.iter().cloned())
        .collect();
    let own = with_env(stack.own_launcher(&own_argv)).run();
    judge(Half::Own, &own, &exe, check);
    let fast = with_env(stack.fastpmi(&argv)).run();
    judge(Half::Fastpmi, &fast, &exe, check);
    // A PMIx stack: with its own server library too (Debian's 4.2 above).
    if let Some(lib) = stack.pmix_lib() {
        let with_lib: Vec<String> = ["--pmix-lib".to_string(), lib.display().to_string()]
            .into_iter()
            .chain(argv.iter().cloned())
            .collect();
        let fast = with_env(stack.fastpmi(&with_lib)).run();
        judge(Half::Fastpmi, &fast, &exe, check);
    }
}

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
fn impi_spawn_of_missing_program_returns_an_error() {
    spawn_missing(Stack::Impi);
}

// ---------------------------------------------------------------------------
// Name service
// ---------------------------------------------------------------------------

/// A spawned child publishes a port under a service name, the parent looks
/// it up (same string), the child unpublishes, the parent's second lookup
/// fails. No separate name server: the launcher serves the job and its
/// children (Hydra 5 does without `-nameserver`).
#[test]
fn mpich5_child_publishes_parent_looks_up() {
    let stack = Stack::Mpich5;
    let service = format!("fastpmi-test-pub-{}", std::process::id());
    let s2 = service.clone();
    let check = move |lines: &[String]| {
        let child = format!("nameserv child ok published={s2}");
        let parent_prefix = format!("nameserv ok service={s2} port_len=");
        let ok = lines.len() == 2
            && lines.contains(&child)
            && lines
                .iter()
                .any(|l| l.starts_with(&parent_prefix) && l.ends_with(" unpublished=yes"));
        if ok {
            Ok(())
        } else {
            Err(format!(
                "expected `{child}` and `{parent_prefix}N unpublished=yes`; got {lines:#?}"
            ))
        }
    };
    own_then_fastpmi(
        stack,
        "nameserv_pub",
        "mpich5-nameserv",
        2,
        &[&service],
        stack.port_env(),
        Duration::from_secs(60),
        &check,
    );
}

/// Server job (2 ranks) and client job (3 ranks) started separately, sharing
/// a name server: `MPI_Publish_name` + `MPI_Comm_accept` meets
/// `MPI_Lookup_name` + `MPI_Comm_connect`; they exchange messages and
/// allreduce over the merged communicator. First with the stack's
/// `hydra_nameserver` and `mpiexec -nameserver`, then with `fastpmi
/// nameserver --port P` and `fastpmi --nameserver 127.0.0.1:P`.
fn connect_accept(stack: Stack) {
    let _g = heavy();
    let tag = format!("{}-connect", stack.name());
    let dir = scratch_dir(&tag);
    let exe = private_copy(&stack.program("connect_accept"), dir.path(), &tag);
    let exe_s = exe.display().to_string();
    let service = format!("fastpmi-test-ca-{}-{}", std::process::id(), stack.name());
    let timeout = Duration::from_secs(90);
    let server_line = "server ok clients=3 merged=5 got=hello-from-client-3".to_string();
    let client_line = "client ok servers=2 merged=5 got=hello-from-server-2".to_string();

    // Open MPI 5 connects jobs started apart only inside one PRRTE DVM
    // (`prte`, then `prun`), not between two `prterun`s: no own half; its
    // fastpmi half runs with Debian's server library and the wheel's.
    let halves: Vec<(Half, Option<PathBuf>)> = match stack.pmix_lib() {
        Some(lib) => vec![(Half::FastpmiOnly, None), (Half::FastpmiOnly, Some(lib))],
        None => vec![(Half::Own, None), (Half::Fastpmi, None)],
    };
    for (half, lib) in halves {
        let port = free_port();
        let ns_addr = format!("127.0.0.1:{port}");
        let mut ns = match half {
            Half::Own => Daemon::start(
                half.blame(),
                &stack.hydra_nameserver(),
                ["-port", &port.to_string()],
                port,
                Duration::from_secs(10),
            ),
            Half::Fastpmi | Half::FastpmiOnly => Daemon::start(
                half.blame(),
                Path::new(env!("CARGO_BIN_EXE_fastpmi")),
                ["nameserver", "--port", &port.to_string()],
                port,
                Duration::from_secs(10),
            ),
        };
        let job = |role: &str, n: &str| -> Cmd {
            let args: Vec<&str> = match half {
                Half::Own => vec!["-nameserver", &ns_addr, "-n", n, &exe_s, role, &service],
                Half::Fastpmi | Half::FastpmiOnly => {
                    let mut a = vec!["--nameserver", ns_addr.as_str()];
                    if let Some(l) = lib.as_ref().and_then(|l| l.to_str()) {
                        a.extend(["--pmix-lib", l]);
                    }
                    a.extend(["-n", n, &exe_s, role, &service]);
                    a
                }
            };
            let mut c = match half {
                Half::Own => stack.own_launcher(&args),
                Half::Fastpmi | Half::FastpmiOnly => stack.fastpmi(&args),
            };
            for (k, v) in stack.port_env() {
                c = c.env(k, v);
            }
            c.cwd(dir.path()).timeout(timeout)
        };
        let server = job("server", "2").spawn();
        let client = job("client", "3").run();
        let server = server.wait();
        let ns_report = ns.stop_and_report();
        let mut errors = Vec::new();
        for (out, line) in [(&server, &server_line), (&client, &client_line)] {
            if let Err(e) = verdict(half, out, &exactly(vec![line.clone()])) {
                errors.push(e);
            }
        }
        if !errors.is_empty() {
            panic!(
                "{}\n--- both jobs ---\nserver job:\n{}\nclient job:\n{}\n{ns_report}",
                errors.join("\n"),
                server.report(),
                client.report()
            );
        }
        assert_no_process_left(&exe, GRACE);
    }
}

#[test]
fn mpich5_connect_accept_through_nameserver() {
    connect_accept(Stack::Mpich5);
}

/// Open MPI 5 jobs of two launchers: after `PMIx_Connect` each side's
/// ranks get the other side's endpoint data from their own launcher,
/// which fetches what the other launcher offered in the name server
/// (docs/pmix.md).
#[test]
fn open_mpi_5_connect_accept_through_nameserver() {
    connect_accept(Stack::Ompi5);
}

#[test]
fn impi_connect_accept_through_nameserver() {
    connect_accept(Stack::Impi);
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
