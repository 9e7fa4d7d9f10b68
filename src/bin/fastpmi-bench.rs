//! `fastpmi-bench`: the benchmark harness (see `fastpmi::bench`).
//!
//! `cargo run --release --bin fastpmi-bench -- [--sizes 2,16,64,256,1024] [--reps 3] [--out results]`

fn main() -> std::process::ExitCode {
    fastpmi::bench::main()
}
