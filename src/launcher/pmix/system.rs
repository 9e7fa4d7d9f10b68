//! The node's system-level rendezvous (PMIx RFC0010): a tool asked for
//! "the system server" (`pps --system-server`) reads
//! `$TMPDIR/pmix.sys.<host>` and connects to the server it names. OpenPMIx
//! writes that file itself only when told its system directory, which
//! fastpmi points at its private directory (OpenPMIx 5 keeps other files
//! there); so the launcher writes it: the first PMIx launcher of the node
//! claims it with a copy of its own tool rendezvous file (same format:
//! address, library version, pid, uid:gid, time), and removes it at exit.
//! A file of a live server, or of another user, is left alone; one of
//! this user's whose launcher is gone (killed) is replaced.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Remove the system rendezvous file `path` if it is this user's and its
/// server is gone (a launcher killed with SIGKILL leaves it); whether the
/// name is free now.
fn remove_if_gone(path: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return true;
    };
    let me = rustix::process::geteuid().as_raw();
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let alive = pid_in(&text).is_some_and(crate::private_dir::process_alive);
    if alive || meta.uid() != me || !meta.is_file() {
        return false;
    }
    tracing::debug!("removing {} (its server is gone)", path.display());
    std::fs::remove_file(path).is_ok()
}

/// [`remove_if_gone`] for this node's system rendezvous file.
pub(super) fn remove_if_dead() {
    let host = rustix::system::uname();
    let path = std::env::temp_dir().join(format!("pmix.sys.{}", host.nodename().to_string_lossy()));
    remove_if_gone(&path);
}

/// This launcher's claim on the node's system rendezvous file.
pub(super) struct SystemRendezvous {
    path: PathBuf,
}

/// The pid a rendezvous file names (its third line).
fn pid_in(text: &str) -> Option<u32> {
    text.lines().nth(2).and_then(|l| l.trim().parse().ok())
}

impl SystemRendezvous {
    /// Claim `$TMPDIR/pmix.sys.<hostname>` for the server whose tool
    /// rendezvous file is `ours`; `None` when another live server (or
    /// another user) holds it or it cannot be written.
    pub(super) fn claim(hostname: &str, ours: &Path) -> Option<SystemRendezvous> {
        let dir = std::env::temp_dir();
        let path = dir.join(format!("pmix.sys.{hostname}"));
        if !remove_if_gone(&path) {
            tracing::debug!("{} belongs to another server", path.display());
            return None;
        }
        let content = std::fs::read(ours).ok()?;
        // Written aside, then linked into place: the link fails if another
        // launcher claimed the name meanwhile.
        let aside = dir.join(format!(".pmix.sys.{hostname}.{}", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&aside)
            .and_then(|mut f| f.write_all(&content));
        let linked = written.and_then(|()| std::fs::hard_link(&aside, &path));
        let _ = std::fs::remove_file(&aside);
        match linked {
            Ok(()) => {
                tracing::debug!("system rendezvous {}", path.display());
                Some(SystemRendezvous { path })
            }
            Err(e) => {
                tracing::debug!("no system rendezvous {}: {e}", path.display());
                None
            }
        }
    }

    /// Remove the file, if it is still this launcher's.
    pub(super) fn release(&self) {
        let mine = std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|t| pid_in(&t))
            .is_some_and(|p| p == std::process::id());
        if mine {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::pid_in;

    #[test]
    fn the_pid_is_the_third_line() {
        let f = "pmix-server.42;tcp4://127.0.0.1:5\n4.2.2rc2\n42\n0:0\nFri Nov 27\n";
        assert_eq!(pid_in(f), Some(42));
        assert_eq!(pid_in("a\nb\n"), None);
        assert_eq!(pid_in("a\nb\nx\n"), None);
    }
}
