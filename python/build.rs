//! The module links GCC's unwinder statically, as the C libraries do, so
//! that the wheel needs nothing at run time beyond glibc.
include!("../capi/static_unwinder.rs");

fn main() {
    link_unwinder_statically();
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../capi/static_unwinder.rs");
}
