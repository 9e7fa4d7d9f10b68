//! fastpmi's C libraries (`capi/pmi2`, `capi/pmi1`), built with the test
//! binary's own profile.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use super::build_dir;
use crate::common;

/// A directory holding fastpmi's C libraries as `libpmi2.so.0`,
/// `libpmi2.so`, `libpmi.so.0` and `libpmi.so` (symlinks into the cargo
/// target directory), for `LD_LIBRARY_PATH` and `-L`.
///
/// Integration tests of the root crate do not build other workspace
/// members, so the first call in a test binary runs `cargo build -p
/// fastpmi-pmi2 -p fastpmi-pmi1` with this binary's profile (and target
/// triple, if any) into the same target directory; under `cargo test
/// --workspace` they are already built and this is a no-op check.
pub fn capi_lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(build_capi)
}

/// `(profile directory, target dir, cargo profile flags)` of this test
/// binary, from its own path: `<target>/[<triple>/]<profile>/deps/<exe>`.
fn own_profile() -> (PathBuf, PathBuf, Vec<OsString>) {
    let target_dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR has a parent")
        .to_path_buf();
    let exe = std::env::current_exe().expect("path of the test binary");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| panic!("unexpected test binary path {}", exe.display()))
        .to_path_buf();
    let profile = profile_dir
        .file_name()
        .and_then(|n| n.to_str())
        .expect("profile directory name")
        .to_string();
    let mut flags: Vec<OsString> = match profile.as_str() {
        "debug" => vec![],
        "release" => vec!["--release".into()],
        other => vec!["--profile".into(), other.into()],
    };
    let parent = profile_dir.parent().map(Path::to_path_buf);
    if parent.as_deref() != Some(target_dir.as_path()) {
        if let Some(triple) = parent.as_deref().and_then(Path::file_name) {
            flags.push("--target".into());
            flags.push(triple.to_owned());
        }
    }
    (profile_dir, target_dir, flags)
}

fn build_capi() -> PathBuf {
    let (profile_dir, target_dir, flags) = own_profile();
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "build",
            "--quiet",
            "-p",
            "fastpmi-pmi2",
            "-p",
            "fastpmi-pmi1",
        ])
        .args(&flags)
        .arg("--target-dir")
        .arg(&target_dir)
        .env_remove("CARGO_TARGET_DIR")
        .stdin(Stdio::null());
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", cmd));
    assert!(
        out.status.success(),
        "building fastpmi's C libraries failed ({})\ncommand: {:?}\n{}{}",
        out.status,
        cmd,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let profile = profile_dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let dir = build_dir().join(format!("capi-lib-{profile}"));
    fs::create_dir_all(&dir).unwrap();
    for (built, names) in [
        ("libpmi2.so", ["libpmi2.so.0", "libpmi2.so"]),
        ("libpmi.so", ["libpmi.so.0", "libpmi.so"]),
    ] {
        let so = profile_dir.join(built);
        assert!(
            so.is_file(),
            "{} missing after building the C libraries",
            so.display()
        );
        for name in names {
            // Symlink under a private name, then rename over the old one.
            let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
            let _ = fs::remove_file(&tmp);
            std::os::unix::fs::symlink(&so, &tmp)
                .unwrap_or_else(|e| panic!("symlink {}: {e}", tmp.display()));
            fs::rename(&tmp, dir.join(name)).unwrap();
        }
    }
    dir
}

/// `cmd` with fastpmi's C libraries on `LD_LIBRARY_PATH` (programs linked
/// to fastpmi's `libpmi2`/`libpmi`, run under any launcher).
pub fn lib_env(cmd: common::Cmd) -> common::Cmd {
    cmd.env("LD_LIBRARY_PATH", capi_lib_dir())
}

/// fastpmi's C library logged `PMI2_Init: rank R of N, job J, transport
/// Shm` (`FASTPMI_LOG=...,fastpmi_capi::session=debug`) exactly once for
/// every rank R of a job of `n`, all with one job id J.
#[allow(dead_code)]
pub fn assert_one_job_on_segments(out: &super::Outcome, n: u32) {
    let mut seen = vec![0u32; n as usize];
    let mut jobs = std::collections::BTreeSet::new();
    for l in out.stderr.lines() {
        let Some((_, rest)) = l.split_once("PMI2_Init: rank ") else {
            continue;
        };
        let f: Vec<&str> = rest.split([' ', ',']).filter(|s| !s.is_empty()).collect();
        assert_eq!(f.len(), 7, "init line {l:?}");
        assert_eq!(f[2], n.to_string(), "size in {l:?}");
        assert_eq!(f[6], "Shm", "transport in {l:?}\n{}", out.report());
        seen[f[0].parse::<usize>().expect("rank")] += 1;
        jobs.insert(f[4].to_string());
    }
    assert!(
        seen.iter().all(|&n| n == 1),
        "every rank of the job inits once: {seen:?}\n{}",
        out.report()
    );
    assert_eq!(jobs.len(), 1, "one job id on both nodes: {jobs:?}");
}
