//! fastpmi: a PMI-1/PMI-2 launcher and runtime for many ranks on one node.

pub mod bench;
pub mod cli;
pub mod client;
pub mod demo;
pub mod launcher;
pub mod nameserver;
pub mod server;
pub mod shm;
pub mod store;
pub mod tools;
pub mod wire;

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
