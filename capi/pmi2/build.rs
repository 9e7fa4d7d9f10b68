//! Give the shared object Slurm's SONAME so that programs linked against
//! Slurm's `libpmi2.so.0` load this one through `LD_LIBRARY_PATH`.
include!("../static_unwinder.rs");

fn main() {
    link_unwinder_statically();
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libpmi2.so.0");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../static_unwinder.rs");
}
