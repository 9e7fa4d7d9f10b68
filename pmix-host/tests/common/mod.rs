//! What this crate's tests share: C programs built against the installed
//! OpenPMIx headers (Debian's `libpmix-dev`, found with `pkg-config pmix`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// `tests/c/<source>.c` compiled against libpmix (`libs`: linked too) into
/// the tests' build directory, under a name of this process's.
pub fn compile(source: &str, libs: bool) -> PathBuf {
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
    let out =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{source}.{}", std::process::id()));
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
