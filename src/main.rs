// The C runtime calls `fastpmi_entry`'s `main`, not one std generates: std's
// start-up parses /proc/self/maps for a stack-overflow message, 0.1 ms of
// every launch (capi/entry, docs/launch.md). Tests keep std's harness.
#![cfg_attr(not(test), no_main)]

mod mpir_symbols;

#[cfg(not(test))]
fastpmi_entry::main!(program);

use fastpmi::cli::{self, Command};
use fastpmi_codec::names;

/// The program: its exit status.
#[cfg_attr(test, allow(dead_code))]
fn program() -> u8 {
    init_logging();
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

/// `FASTPMI_LOG=debug` shows every PMI command and reply (on stderr).
/// `FASTPMI_LOG` is a level or `target=level` directives (tracing-subscriber's
/// `Targets`, the C libraries' syntax too): not `EnvFilter`, whose regular
/// expression engine made the launcher's start-up relocate 5 pages more
/// (docs/launch.md).
fn init_logging() {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::layer::SubscriberExt;
    let Ok(spec) = std::env::var(names::env::LOG) else {
        return;
    };
    let filter = spec
        .parse::<Targets>()
        .unwrap_or_else(|_| Targets::new().with_default(LevelFilter::INFO));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let _ = tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(fmt).with(filter),
    );
}
