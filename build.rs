//! How the launcher's binary is linked.
//!
//! * It exports one symbol to the PMIx server library it loads at run
//!   time: `PMIx_Query_info_nb`, a guard against a crash in OpenPMIx 4
//!   (pmix-host/src/guard.rs).
//! * GCC's unwinder is linked in statically, as in the C libraries
//!   (capi/static_unwinder.rs): loading libgcc_s.so.1 and its CPU-probing
//!   constructor cost every launch about 0.1 ms on a VM.
//! * Its relative relocations are packed (`DT_RELR`, glibc 2.36 and
//!   binutils 2.38 or later, probed): 340 KiB of relocation entries, read
//!   at every start, become 2 KiB (docs/launch.md).
include!("capi/static_unwinder.rs");

use std::path::PathBuf;
use std::process::{Command, Stdio};

fn main() {
    link_unwinder_statically();
    println!("cargo:rustc-link-arg-bin=fastpmi=-Wl,--export-dynamic-symbol=PMIx_Query_info_nb");
    if links_packed_relocations() {
        println!("cargo:rustc-link-arg-bin=fastpmi=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=capi/static_unwinder.rs");
}

/// Whether the C toolchain links a program with packed relocations that
/// this C library can load: a linker that does not know the option warns
/// (an error here), one whose C library lacks `GLIBC_ABI_DT_RELR` fails.
fn links_packed_relocations() -> bool {
    // The probe runs what it links: only where the launcher will run.
    if std::env::var_os("TARGET") != std::env::var_os("HOST") {
        return false;
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("relr-probe");
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let Ok(mut child) = Command::new(cc)
        .args(["-x", "c", "-", "-o"])
        .arg(&out)
        .args(["-Wl,-z,pack-relative-relocs", "-Wl,--fatal-warnings"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    else {
        return false;
    };
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        let _ = stdin.write_all(b"int main(void) { return 0; }\n");
    }
    child.wait().is_ok_and(|s| s.success())
        && Command::new(&out).status().is_ok_and(|s| s.success())
}
