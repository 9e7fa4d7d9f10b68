//! This crate declares the server library's types itself (the library is
//! loaded at run time, and the crate builds without its headers): here
//! they are checked against the installed headers (Debian's `libpmix-dev`,
//! found with `pkg-config pmix`).

use std::process::Command;

mod common;

#[test]
fn the_pmix_ffi_matches_the_installed_headers() {
    let exe = common::compile("pmix_layout", false);
    let out = Command::new(&exe).output().expect("run pmix_layout");
    let _ = std::fs::remove_file(&exe);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut seen = 0;
    for line in text.lines() {
        let (name, value) = line.split_once(" = ").expect("name = value");
        let want: i64 = value.parse().unwrap();
        let ours = pmix_host::LAYOUT
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
    assert_eq!(seen, pmix_host::LAYOUT.len());
}
