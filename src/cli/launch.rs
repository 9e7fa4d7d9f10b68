//! The launcher's own command line: MPMD sections with their per-section
//! options (the global ones are in [`super::options`]).

use std::ffi::OsString;
use std::path::PathBuf;

use super::command::{CliError, Command, MAX_RANKS};
use super::options::{global_option, kv, parse_count, parse_secs};
use super::subcommands::{parse_demo, parse_nameserver, parse_tool};
use crate::config::{psets, App, Knobs, LaunchConfig};

/// Parse the arguments after the program name.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Command, CliError> {
    let mut it = args.into_iter().peekable();
    match it.peek().and_then(|a| a.to_str()) {
        Some("demo") => {
            it.next();
            return parse_demo(it);
        }
        Some("__demo-rank") => return Ok(Command::DemoRank),
        Some("nameserver") => {
            it.next();
            return parse_nameserver(it);
        }
        Some(cmd @ ("ps" | "release" | "checkpoint")) => {
            let cmd = cmd.to_string();
            it.next();
            return parse_tool(&cmd, it);
        }
        _ => {}
    }
    let mut cfg = LaunchConfig::default();
    let mut app = App::default();
    let mut nranks_given = false;
    while let Some(arg) = it.next() {
        let s = arg.to_string_lossy().into_owned();
        match s.as_str() {
            "-h" | "--help" | "-help" => return Ok(Command::Help),
            "-V" | "--version" => return Ok(Command::Version),
            "-n" | "-np" | "--np" => {
                app.nranks = parse_count(&s, it.next())?;
                nranks_given = true;
            }
            "-env" => app.env.push(kv(&s, &mut it)?),
            "-wdir" | "-dir" => {
                let d = it
                    .next()
                    .ok_or_else(|| CliError(format!("{s} needs a directory")))?;
                app.wdir = Some(PathBuf::from(d));
            }
            "--pmi" | "-pmi" => {
                let v = it
                    .next()
                    .ok_or_else(|| CliError(format!("{s} needs auto, pmi or pmix")))?;
                app.personality = v
                    .to_string_lossy()
                    .parse()
                    .map_err(|e: crate::config::UnknownPersonality| CliError(e.to_string()))?;
            }
            "--pset" | "-pset" => {
                let v = it
                    .next()
                    .ok_or_else(|| CliError(format!("{s} needs a process set name")))?;
                for name in v.to_string_lossy().split(',') {
                    psets::check_name(name).map_err(|e| CliError(format!("{s}: {e}")))?;
                    if !app.psets.iter().any(|p| p == name) {
                        app.psets.push(name.to_string());
                    }
                }
            }
            _ if global_option(&mut cfg, &s, &mut it)? => {}
            ":" => return Err(CliError("':' without a program before it".into())),
            _ if s.starts_with('-') && s.len() > 1 => {
                return Err(CliError(format!("unknown option {s} (see fastpmi --help)")));
            }
            _ => {
                app.program = arg;
                // Everything up to the next ':' belongs to the program.
                for a in it.by_ref() {
                    if a == ":" {
                        break;
                    }
                    app.args.push(a);
                }
                cfg.apps.push(std::mem::take(&mut app));
                nranks_given = false;
            }
        }
    }
    if !app.program.is_empty()
        || nranks_given
        || !app.env.is_empty()
        || app.wdir.is_some()
        || !app.psets.is_empty()
    {
        if cfg.apps.is_empty() {
            return Err(CliError("no program to run (see fastpmi --help)".into()));
        }
        return Err(CliError(
            "options after the last ':' section without a program".into(),
        ));
    }
    if cfg.apps.is_empty() {
        return Err(CliError("no program to run (see fastpmi --help)".into()));
    }
    if cfg.fence_timeout.is_none() {
        if let Some(v) = std::env::var_os("FASTPMI_FENCE_TIMEOUT").filter(|v| !v.is_empty()) {
            cfg.fence_timeout = Some(parse_secs("FASTPMI_FENCE_TIMEOUT", &v.to_string_lossy())?);
        }
    }
    cfg.knobs = Knobs::from_env();
    let total: u64 = cfg.apps.iter().map(|a| a.nranks as u64).sum();
    if total > MAX_RANKS as u64 {
        return Err(CliError(format!(
            "{total} ranks in all: at most {MAX_RANKS}"
        )));
    }
    Ok(Command::Run(cfg))
}
