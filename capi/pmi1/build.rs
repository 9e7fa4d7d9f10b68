//! Give the shared object the SONAME of the PMI-1 client library
//! (`libpmi.so.0`, as Slurm's and MPICH's).
include!("../static_unwinder.rs");

fn main() {
    link_unwinder_statically();
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libpmi.so.0");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../static_unwinder.rs");
}
