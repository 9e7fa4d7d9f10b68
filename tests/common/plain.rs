//! The launcher run directly with `std::process::Command` (always fastpmi,
//! not `FASTPMI_TEST_LAUNCHER`), for tests of plain programs and of the
//! launcher's demo ranks.

use std::process::Command;

pub const BIN: &str = env!("CARGO_BIN_EXE_fastpmi");

pub fn run(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).output().expect("run fastpmi")
}
