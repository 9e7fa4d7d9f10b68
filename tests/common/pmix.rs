//! Programs built against Debian's OpenPMIx headers and library
//! (`libpmix-dev`, found with `pkg-config pmix`), for the PMIx host's
//! tests.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// `tests/c/<source>.c` compiled against libpmix (with `libs`: linked too)
/// into the tests' build directory, under a name of this process's, once
/// per test binary (its tests run in parallel).
pub fn compile(source: &str, libs: bool) -> PathBuf {
    static BUILT: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = built.iter().find(|(s, _)| s == source) {
        return p.clone();
    }
    let p = build(source, libs);
    built.push((source.to_string(), p.clone()));
    p
}

fn build(source: &str, libs: bool) -> PathBuf {
    let mut args = vec!["--cflags"];
    if libs {
        args.push("--libs");
    }
    let flags = Command::new("pkg-config")
        .args(&args)
        .arg("pmix")
        .output()
        .expect("pkg-config (Debian: apt-get install pkg-config)");
    assert!(
        flags.status.success(),
        "pkg-config pmix failed: install Debian's libpmix-dev (scripts/test-all does)\n{}",
        String::from_utf8_lossy(&flags.stderr)
    );
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("interop-c/pmix");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(format!("{source}.{}", std::process::id()));
    let cc = Command::new("gcc")
        .args(["-O2", "-o"])
        .arg(&out)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{source}.c")))
        .args(String::from_utf8_lossy(&flags.stdout).split_whitespace())
        .output()
        .expect("gcc");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    out
}

/// Run `fastpmi --pmi pmix -n N <program>` with each server library:
/// Debian's, then the Open MPI wheel's 5.0 (`--pmix-lib`), whose clients
/// then load the wheel's client library too (`LD_LIBRARY_PATH`), so that
/// client and server are of one version. The outcomes, in that order.
#[allow(dead_code)]
pub fn run_with_both_libraries(program: &Path, n: u32) -> Vec<super::Outcome> {
    let wheel = super::stacks::Stack::Ompi5
        .pmix_lib()
        .expect("the wheel ships its library");
    [None, Some(wheel)]
        .into_iter()
        .map(|lib| {
            let mut args: Vec<String> = vec!["--pmi".into(), "pmix".into()];
            if let Some(l) = &lib {
                args.extend(["--pmix-lib".into(), l.display().to_string()]);
            }
            args.extend(["-n".into(), n.to_string(), program.display().to_string()]);
            let mut c = super::launch(&args).timeout(std::time::Duration::from_secs(60));
            if let Some(d) = lib.as_ref().and_then(|l| l.parent()) {
                c = c.env("LD_LIBRARY_PATH", d);
            }
            c.run()
        })
        .collect()
}
