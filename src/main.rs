// The C runtime calls `fastpmi_entry`'s `main`, not one std generates: std's
// start-up parses /proc/self/maps for a stack-overflow message, 0.1 ms of
// every launch (entry/, docs/launch.md). Tests keep std's harness.
#![cfg_attr(not(test), no_main)]

mod mpir_symbols;

#[cfg(not(test))]
fastpmi_entry::main!(program);

use fastpmi::cli::{self, Command};

/// The program: its exit status.
#[cfg_attr(test, allow(dead_code))]
fn program() -> u8 {
    fastpmi_client::logging::init(fastpmi_client::logging::Unset::Silent);
    mpir_symbols::install();
    let code = match cli::parse(std::env::args_os().skip(1)) {
        Ok(Command::Help) => {
            fastpmi::outln!("{}", cli::USAGE);
            0
        }
        Ok(Command::Version) => {
            fastpmi::outln!("fastpmi {}", env!("CARGO_PKG_VERSION"));
            0
        }
        Ok(Command::Run(cfg)) => fastpmi::launcher::run(&cfg),
        Ok(Command::Demo { nranks, cfg }) => fastpmi::demo::launch(nranks, cfg),
        Ok(Command::DemoRank) => fastpmi::demo::rank_main(),
        Ok(Command::NameServer { bind, port }) => fastpmi::nameserver::run(&bind, port),
        Ok(Command::Ps {
            target,
            json,
            socket,
        }) => fastpmi::tools::ps::ps(target.as_deref(), json, socket.as_deref()),
        Ok(Command::Release { target, socket }) => {
            fastpmi::tools::ps::release(&target, socket.as_deref())
        }
        Ok(Command::Checkpoint { target, socket }) => {
            fastpmi::tools::ps::checkpoint(&target, socket.as_deref())
        }
        Err(e) => {
            fastpmi::errln!("fastpmi: {e}");
            2
        }
    };
    code.clamp(0, 255) as u8
}
