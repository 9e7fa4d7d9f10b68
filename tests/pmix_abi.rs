//! fastpmi's FFI to OpenPMIx's server library declares the library's types
//! itself (the library is loaded at run time, and fastpmi builds without
//! its headers): here they are checked against the installed headers
//! (Debian's `libpmix-dev`, found with `pkg-config pmix`).

use std::process::Command;

#[test]
fn the_pmix_ffi_matches_the_installed_headers() {
    let cflags = Command::new("pkg-config")
        .args(["--cflags", "pmix"])
        .output()
        .expect("pkg-config (Debian: apt-get install pkg-config)");
    assert!(
        cflags.status.success(),
        "pkg-config pmix failed: install Debian's libpmix-dev (scripts/test-all does)\n{}",
        String::from_utf8_lossy(&cflags.stderr)
    );
    let dir = std::env::temp_dir().join(format!("fastpmi-pmix-abi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("pmix_layout");
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/pmix_layout.c");
    let cc = Command::new("gcc")
        .args(String::from_utf8_lossy(&cflags.stdout).split_whitespace())
        .args(["-O0", "-o"])
        .arg(&exe)
        .arg(src)
        .output()
        .expect("gcc");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = Command::new(&exe).output().expect("run pmix_layout");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut seen = 0;
    for line in text.lines() {
        let (name, value) = line.split_once(" = ").expect("name = value");
        let want: i64 = value.parse().unwrap();
        let ours = fastpmi::launcher::os::pmix::LAYOUT
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("{name} is not in LAYOUT"))
            .1;
        assert_eq!(
            ours, want,
            "{name}: fastpmi says {ours}, pmix_server.h {want}"
        );
        seen += 1;
    }
    assert_eq!(seen, fastpmi::launcher::os::pmix::LAYOUT.len());
}
