mod mpir_symbols;

use std::process::ExitCode;

use fastpmi::cli::{self, Command};
use fastpmi_codec::names;

fn main() -> ExitCode {
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
    ExitCode::from(code.clamp(0, 255) as u8)
}

/// `FASTPMI_LOG=debug` shows every PMI command and reply (on stderr).
fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let Ok(spec) = std::env::var(names::env::LOG) else {
        return;
    };
    let filter = EnvFilter::try_new(&spec).unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
