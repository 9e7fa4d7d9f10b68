//! The subcommands: `ps`, `release`, `checkpoint`, `nameserver` and `demo`.

use std::ffi::OsString;
use std::path::PathBuf;

use super::command::{CliError, Command};
use super::options::{global_option, parse_count};
use crate::config::{Knobs, LaunchConfig};

/// `ps [PID|JOBID] [--json] [--socket PATH]`, `release PID|JOBID [--socket
/// PATH]`, `checkpoint PID|JOBID [--socket PATH]`.
pub(super) fn parse_tool(
    name: &str,
    mut it: impl Iterator<Item = OsString>,
) -> Result<Command, CliError> {
    let needs_target = name != "ps";
    let (mut target, mut json, mut socket) = (None, false, None);
    while let Some(arg) = it.next() {
        let s = arg.to_string_lossy().into_owned();
        match s.as_str() {
            "--json" if !needs_target => json = true,
            "--socket" => {
                socket = Some(PathBuf::from(
                    it.next()
                        .ok_or_else(|| CliError("--socket needs a path".into()))?,
                ))
            }
            "-h" | "--help" => return Ok(Command::Help),
            _ if s.starts_with('-') => {
                return Err(CliError(format!("{name}: unknown option {s}")));
            }
            _ if target.is_none() => target = Some(s),
            _ => return Err(CliError(format!("{name}: unexpected argument {s}"))),
        }
    }
    if needs_target {
        let target =
            target.ok_or_else(|| CliError(format!("{name} needs a launcher pid or a job id")))?;
        return Ok(if name == "checkpoint" {
            Command::Checkpoint { target, socket }
        } else {
            Command::Release { target, socket }
        });
    }
    Ok(Command::Ps {
        target,
        json,
        socket,
    })
}

/// Default port of `fastpmi nameserver` (Hydra's name server uses the same).
pub const NAMESERVER_PORT: u16 = 6392;

pub(super) fn parse_nameserver(
    mut it: impl Iterator<Item = OsString>,
) -> Result<Command, CliError> {
    let mut port = NAMESERVER_PORT;
    let mut bind = "127.0.0.1".to_string();
    while let Some(arg) = it.next() {
        let s = arg.to_string_lossy().into_owned();
        match s.as_str() {
            "--port" | "-port" => {
                let v = it.next().map(|v| v.to_string_lossy().into_owned());
                port = v.as_deref().and_then(|v| v.parse().ok()).ok_or_else(|| {
                    CliError(format!(
                        "--port {}: expected a port number (0 picks a free one)",
                        v.unwrap_or_default()
                    ))
                })?;
            }
            "--bind" => {
                bind = it
                    .next()
                    .ok_or_else(|| CliError("--bind needs an address".into()))?
                    .to_string_lossy()
                    .into_owned();
            }
            "-h" | "--help" => return Ok(Command::Help),
            _ => {
                return Err(CliError(format!(
                    "nameserver: unknown argument {s} (usage: fastpmi nameserver [--port P] [--bind ADDR])"
                )))
            }
        }
    }
    Ok(Command::NameServer { bind, port })
}

pub(super) fn parse_demo(mut it: impl Iterator<Item = OsString>) -> Result<Command, CliError> {
    let mut nranks = 16;
    let mut cfg = LaunchConfig::default();
    while let Some(arg) = it.next() {
        let s = arg.to_string_lossy().into_owned();
        match s.as_str() {
            "-n" | "-np" => nranks = parse_count(&s, it.next())?,
            "-h" | "--help" => return Ok(Command::Help),
            _ if global_option(&mut cfg, &s, &mut it)? => {}
            _ => {
                return Err(CliError(format!(
                    "demo: unknown argument {s} (usage: fastpmi demo [-n N] [launcher options])"
                )))
            }
        }
    }
    cfg.knobs = Knobs::from_env();
    Ok(Command::Demo { nranks, cfg })
}
