//! This user's private directory: `$XDG_RUNTIME_DIR/fastpmi/`, else
//! `/tmp/fastpmi-<uid>/`, mode 0700. It holds the launchers' rendezvous
//! sockets (`tools::rendezvous`) and the topology cache
//! (`launcher::topology`); nothing in it is trusted unless the directory is
//! this user's and nobody else's ([`check_dir`]).

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// This user's directory (not created).
pub fn dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if Path::new(&d).is_absolute() => Path::new(&d).join("fastpmi"),
        _ => PathBuf::from(format!(
            "/tmp/fastpmi-{}",
            rustix::process::geteuid().as_raw()
        )),
    }
}

/// Check that `dir` is a real directory (not a symlink) of this user that
/// nobody else can enter.
pub fn check_dir(dir: &Path) -> io::Result<()> {
    let m = fs::symlink_metadata(dir)?;
    let me = rustix::process::geteuid().as_raw();
    if !m.file_type().is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    if m.uid() != me {
        return Err(io::Error::other(format!(
            "{} belongs to uid {}, not to this user ({me})",
            dir.display(),
            m.uid()
        )));
    }
    if m.mode() & 0o077 != 0 {
        return Err(io::Error::other(format!(
            "{} has mode {:o}; it must be 0700",
            dir.display(),
            m.mode() & 0o777
        )));
    }
    Ok(())
}

/// Create the directory (0700) if needed and check it.
pub fn ensure_dir(dir: &Path) -> io::Result<()> {
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", dir.display()))),
    }
    check_dir(dir)
}

/// Whether process `pid` lives: a zombie (ended, not yet reaped; a
/// launcher killed with SIGKILL stays one until its parent reaps it) does
/// not. Files in this directory named for a process go with it.
pub fn process_alive(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // "pid (comm) S ...": the state follows the last parenthesis (the
    // command may hold any).
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].trim_start().chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}
