// Included by the build scripts of capi/pmi2, capi/pmi1 and the launcher.
//
// Link GCC's unwinder statically (libgcc_eh.a) instead of through
// libgcc_s.so.1. Rust's std asks for `-lgcc_s` on linux-gnu; a rank that
// loads libgcc_s.so.1 pays for one more object to map and relocate and for
// its constructor (`__cpu_indicator_init`, a series of CPUID instructions,
// which trap to the hypervisor on a virtual machine): about 0.1 ms of CPU per
// rank measured, 0.1 s of a 1024-rank start on two cores. A linker script
// named libgcc_s.so in a directory searched before the compiler's (every
// `-L` applies to every `-l`, in order) makes `-lgcc_s` mean libgcc_eh.a.
// The unwinder's symbols stay local: rustc's version script exports only the
// C API. Panics are still caught at every C entry point (panic = "unwind").
fn link_unwinder_statically() {
    let dir = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"))
        .join("static-unwinder");
    std::fs::create_dir_all(&dir).expect("create OUT_DIR/static-unwinder");
    std::fs::write(dir.join("libgcc_s.so"), "INPUT(-lgcc_eh)\n")
        .expect("write the libgcc_s.so linker script");
    println!("cargo:rustc-link-search=native={}", dir.display());
}
