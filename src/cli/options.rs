//! Options that take values, shared by the launch and `demo`: the global
//! options of a launch, rank counts, `K V` pairs and durations.

use std::ffi::OsString;

use super::command::{CliError, MAX_RANKS};
use crate::config::{placement, LaunchConfig};
use fastpmi_segment::MemPool;

pub(super) fn parse_count(flag: &str, v: Option<OsString>) -> Result<u32, CliError> {
    let v = v.ok_or_else(|| CliError(format!("{flag} needs a number of ranks")))?;
    let s = v.to_string_lossy();
    match s.parse::<u32>() {
        Ok(0) => Err(CliError(format!("{flag} {s}: need at least 1 rank"))),
        Ok(n) if n > MAX_RANKS => Err(CliError(format!("{flag} {s}: at most {MAX_RANKS} ranks"))),
        Ok(n) => Ok(n),
        Err(_) => Err(CliError(format!("{flag} {s}: not a number of ranks"))),
    }
}

/// prterun's `--with-ft MODE`: `ulfm` (also `mpi`, `yes`) is the
/// fault-tolerant mode; `no` and `none` leave it off.
fn with_ft(cfg: &mut LaunchConfig, mode: &str) -> Result<(), CliError> {
    cfg.fault_tolerant = match mode {
        "ulfm" | "mpi" | "yes" => true,
        "no" | "none" => false,
        other => {
            return Err(CliError(format!(
                "--with-ft {other}: expected ulfm (or mpi, yes; no, none)"
            )))
        }
    };
    Ok(())
}

pub(super) fn kv(
    flag: &str,
    it: &mut impl Iterator<Item = OsString>,
) -> Result<(OsString, OsString), CliError> {
    let k = it
        .next()
        .ok_or_else(|| CliError(format!("{flag} needs a name and a value")))?;
    let v = it
        .next()
        .ok_or_else(|| CliError(format!("{flag} {} needs a value", k.to_string_lossy())))?;
    if k.is_empty() || k.to_string_lossy().contains('=') {
        return Err(CliError(format!(
            "{flag}: bad variable name {:?}",
            k.to_string_lossy()
        )));
    }
    Ok((k, v))
}

/// Options that apply to the whole launch (accepted by `demo` too).
/// Returns false when `s` is not one of them.
pub(super) fn global_option(
    cfg: &mut LaunchConfig,
    s: &str,
    mut it: &mut impl Iterator<Item = OsString>,
) -> Result<bool, CliError> {
    match s {
        "-genv" => cfg.genv.push(kv(s, &mut it)?),
        "-l" | "--label" | "-prepend-rank" => cfg.label = true,
        "--pmi-port" | "-pmi-port" => cfg.pmi_port = true,
        "--pmi-port-bind" => {
            let v = it
                .next()
                .ok_or_else(|| CliError("--pmi-port-bind needs an address".into()))?;
            let v = v.to_string_lossy();
            cfg.pmi_port_bind = Some(
                v.parse()
                    .map_err(|_| CliError(format!("--pmi-port-bind {v}: not an IP address")))?,
            );
            cfg.pmi_port = true;
        }
        "--stats" => cfg.stats = true,
        "--nest" => {
            let v = it
                .next()
                .ok_or_else(|| CliError("--nest needs auto or off".into()))?;
            cfg.nest = match v.to_string_lossy().as_ref() {
                "auto" => true,
                "off" => false,
                other => return Err(CliError(format!("--nest {other}: expected auto or off"))),
            };
        }
        "--pmix-lib" => {
            let v = it
                .next()
                .ok_or_else(|| CliError("--pmix-lib needs the path of libpmix.so".into()))?;
            cfg.pmix_lib = Some(std::path::PathBuf::from(v));
        }
        "-bind-to" | "--bind-to" | "-binding" => {
            let v = it
                .next()
                .ok_or_else(|| CliError(format!("{s} needs an object (core, none, ...)")))?;
            cfg.placement.bind_to = Some(
                placement::parse_bind(&v.to_string_lossy()).map_err(|e| CliError(e.to_string()))?,
            );
        }
        "-map-by" | "--map-by" => {
            let v = it
                .next()
                .ok_or_else(|| CliError(format!("{s} needs an object (core, socket, ...)")))?;
            cfg.placement.map_by = Some(
                placement::parse_map(&v.to_string_lossy()).map_err(|e| CliError(e.to_string()))?,
            );
        }
        "-ppn" | "--ppn" | "-perhost" => {
            let v = it.next().map(|v| v.to_string_lossy().into_owned());
            match v.as_deref().map(str::parse::<u32>) {
                Some(Ok(n)) if (1..=MAX_RANKS).contains(&n) => cfg.placement.ppn = Some(n),
                _ => {
                    return Err(CliError(format!(
                        "{s} {}: expected a number of ranks per node",
                        v.unwrap_or_default()
                    )))
                }
            }
        }
        "--print-bindings" | "-print-bindings" | "--report-bindings" => cfg.placement.print = true,
        "--tolerate-group-failures" => cfg.tolerate_group_failures = true,
        // Hydra's and prterun's spellings of the same mode.
        "--fault-tolerant" | "-disable-auto-cleanup" | "--disable-auto-cleanup" => {
            cfg.fault_tolerant = true
        }
        "--with-ft" => {
            let v = it
                .next()
                .ok_or_else(|| CliError("--with-ft needs a mode (ulfm)".into()))?;
            with_ft(cfg, &v.to_string_lossy())?;
        }
        "--fail-on-death" => {
            cfg.fault_tolerant = true;
            cfg.fail_on_death = true;
        }
        s if s.starts_with("--with-ft=") => with_ft(cfg, &s["--with-ft=".len()..])?,
        "--stop-in-init" => cfg.stop_in_init = true,
        "-v" | "--verbose" => cfg.verbose = true,
        "--fence-timeout" => {
            let v = it
                .next()
                .ok_or_else(|| CliError("--fence-timeout needs a number of seconds".into()))?;
            cfg.fence_timeout = Some(parse_secs(s, &v.to_string_lossy())?);
        }
        "--nameserver" | "-nameserver" => {
            let v = it
                .next()
                .ok_or_else(|| CliError(format!("{s} needs HOST:PORT")))?;
            let v = v.to_string_lossy().into_owned();
            match v.rsplit_once(':') {
                Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0) => {}
                _ => return Err(CliError(format!("{s} {v}: expected HOST:PORT"))),
            }
            cfg.nameserver = Some(v);
        }
        "--mem-pool" => {
            let v = it
                .next()
                .ok_or_else(|| CliError("--mem-pool needs anonmmap, sysv or none".into()))?;
            let v = v.to_string_lossy();
            cfg.mem_pool = match v.as_ref() {
                "none" => None,
                other => Some(MemPool::parse(other).ok_or_else(|| {
                    CliError(format!(
                        "--mem-pool {other}: expected anonmmap, sysv or none"
                    ))
                })?),
            };
        }
        "--kvs-mb" => {
            let v = it
                .next()
                .ok_or_else(|| CliError("--kvs-mb needs a size in MiB".into()))?;
            let v = v.to_string_lossy();
            match v.parse::<u64>() {
                Ok(mb) if (1..=1 << 20).contains(&mb) => cfg.kvs_mb = Some(mb),
                _ => {
                    return Err(CliError(format!(
                        "--kvs-mb {v}: expected a size in MiB (1 to 1048576)"
                    )))
                }
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// A positive number of seconds (fractions allowed), at most a day.
pub(super) fn parse_secs(what: &str, v: &str) -> Result<std::time::Duration, CliError> {
    match v.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 86400.0 => Ok(std::time::Duration::from_secs_f64(s)),
        _ => Err(CliError(format!(
            "{what} {v}: expected a number of seconds (more than 0, at most 86400)"
        ))),
    }
}
