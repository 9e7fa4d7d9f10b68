//! fastpmi: a PMI-1/PMI-2 launcher and runtime for many ranks on one node.
//!
//! The launcher crate: launcher, CLI, tools and the `fastpmi` binary, on the
//! server core (`fastpmi-server`), the codec (`fastpmi-codec`), the segment
//! glue (`fastpmi-segment`) and `shm-layout`; the Rust client is
//! `fastpmi-client`.

pub mod cli;
pub mod config;
pub mod demo;
pub mod launcher;
pub mod nameserver;
pub mod private_dir;
pub mod ranges;
pub mod tools;

/// `println!` that ignores a closed stdout: `fastpmi ... | head` must not
/// panic the launcher.
#[macro_export]
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

/// `eprintln!` that ignores a closed stderr.
#[macro_export]
macro_rules! errln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}
