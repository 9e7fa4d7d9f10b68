//! The launcher's binary exports one symbol to the PMIx server library it
//! loads at run time: `PMIx_Query_info_nb`, a guard against a crash in
//! OpenPMIx 4 (src/launcher/os/pmix/guard.rs).
fn main() {
    println!("cargo:rustc-link-arg-bin=fastpmi=-Wl,--export-dynamic-symbol=PMIx_Query_info_nb");
}
