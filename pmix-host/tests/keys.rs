//! The attribute keys of `pmix_host::keys` are OpenPMIx's: each constant
//! is the string its name stands for in the installed `pmix_common.h`
//! (Debian's `libpmix-dev`, found with `pkg-config pmix`).

use std::path::PathBuf;
use std::process::Command;

fn header() -> String {
    let out = Command::new("pkg-config")
        .args(["--variable=includedir", "pmix"])
        .output()
        .expect("pkg-config runs");
    assert!(out.status.success(), "pkg-config pmix: install libpmix-dev");
    let dir = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    let path = dir.join("pmix_common.h");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_key_is_the_headers_string_of_its_name() {
    let h = header();
    let mut checked = 0;
    for (name, value) in pmix_host::keys::ALL {
        // OpenPMIx's own key (hwloc 2 XML), not a public attribute.
        if *name == "PMIX_HWLOC_XML_V2" {
            continue;
        }
        let defined = h.lines().any(|l| {
            let mut w = l.split_whitespace();
            w.next() == Some("#define")
                && w.next() == Some(name)
                && w.next() == Some(&format!("\"{value}\""))
        });
        assert!(
            defined,
            "{name} is not #define {name} \"{value}\" in pmix_common.h"
        );
        checked += 1;
    }
    assert!(checked > 50, "{checked} keys");
}
