//! What a launcher killed with SIGKILL leaves of its PMIx server, and
//! its removal by the next launch on the node.
//!
//! A launcher that ends any other way deregisters its jobs, so that the
//! library runs the epilogs its clients registered, and removes its files.
//! One killed with SIGKILL can do neither: its `pmix-<pid>` directory (the
//! library's rendezvous files, the ranks' session directories), the node's
//! `pmix.sys.<host>` when it held it, and the files its ranks registered
//! for cleanup stay (Open MPI 5: 16 MiB files `/dev/shm/sm_segment.*`,
//! one per rank). The library keeps registrations to itself, so while a
//! job runs the launcher records the files in /dev/shm its PMIx ranks map
//! and that were created after its PMIx server started (read from
//! `/proc/<pid>/maps` on a timer) in `pmix-<pid>/cleanup`: a file that
//! was there before, which a rank only opened, is never recorded. The next launch
//! removes a recorded file of a dead launcher only while it is still the
//! file recorded (same inode), this user's, and neither mapped nor open in
//! any live process; then the directory.

use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Where the files a launcher's ranks share live.
const SHARED: &str = "/dev/shm/";

/// The record's name in a launcher's `pmix-<pid>` directory.
const RECORD: &str = "cleanup";

/// The files under /dev/shm that process `pid` maps: (inode, path).
fn mapped_shared_files(pid: u32) -> Vec<(u64, String)> {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map(|m| shared_in_maps(&m))
        .unwrap_or_default()
}

/// The files under /dev/shm in a `/proc/<pid>/maps` text: (inode, path).
fn shared_in_maps(maps: &str) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    for line in maps.lines() {
        // address perms offset dev inode path
        let mut f = line.splitn(6, ' ');
        let (Some(_), Some(_), Some(_), Some(_), Some(inode), Some(path)) =
            (f.next(), f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        let path = path.trim_start();
        if !path.starts_with(SHARED) || path.ends_with(" (deleted)") {
            continue;
        }
        if let Ok(ino) = inode.parse::<u64>() {
            out.push((ino, path.to_string()));
        }
    }
    out
}

/// The files recorded so far by this launcher (not written twice).
pub(super) struct Recorder {
    seen: BTreeSet<(u64, String)>,
    /// Files born before this (the server's start) are not the jobs'.
    since: SystemTime,
}

impl Default for Recorder {
    fn default() -> Recorder {
        Recorder {
            seen: BTreeSet::new(),
            since: SystemTime::now(),
        }
    }
}

/// Whether `path` was created at `since` or later: its birth time
/// (tmpfs keeps one since Linux 6.6), else its last status change.
fn born_since(path: &str, since: SystemTime) -> bool {
    let Ok(m) = std::fs::symlink_metadata(path) else {
        return false;
    };
    let born = m.created().ok().or_else(|| {
        let secs = u64::try_from(m.ctime()).ok()?;
        Some(SystemTime::UNIX_EPOCH + std::time::Duration::new(secs, m.ctime_nsec() as u32))
    });
    born.is_some_and(|b| b >= since)
}

impl Recorder {
    /// Record in `dir` (this launcher's `pmix-<pid>`) the shared files the
    /// processes `pids` map, made since the server started, that are not
    /// recorded yet.
    pub(super) fn record(&mut self, dir: &Path, pids: impl Iterator<Item = u32>) {
        let mut new = String::new();
        let mut n = 0;
        for pid in pids {
            n += 1;
            for f in mapped_shared_files(pid) {
                if !self.seen.contains(&f) && born_since(&f.1, self.since) {
                    new.push_str(&format!("{} {}\n", f.0, f.1));
                    self.seen.insert(f);
                }
            }
        }
        tracing::debug!(
            "recording shared files: {n} processes, {} new",
            new.lines().count()
        );
        if new.is_empty() {
            return;
        }
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(RECORD))
            .and_then(|mut f| f.write_all(new.as_bytes()));
        if let Err(e) = written {
            tracing::debug!("cannot record the ranks' shared files: {e}");
        }
    }
}

/// The (inode, path) lines of a record; others are skipped.
fn parse_record(text: &str) -> Vec<(u64, PathBuf)> {
    text.lines()
        .filter_map(|l| {
            let (ino, path) = l.split_once(' ')?;
            let path = Path::new(path);
            // Only plain names in /dev/shm: never a path that climbs out.
            let plain = path.parent() == Some(Path::new(SHARED.trim_end_matches('/')))
                && path.file_name().is_some_and(|n| n != "." && n != "..");
            plain.then(|| Some((ino.parse().ok()?, path.to_path_buf())))?
        })
        .collect()
}

/// The shared files some live process maps or holds open.
fn shared_files_in_use() -> BTreeSet<PathBuf> {
    let mut used = BTreeSet::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return used;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        used.extend(mapped_shared_files(pid).into_iter().map(|(_, p)| p.into()));
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(target) = std::fs::read_link(fd.path()) {
                if target.starts_with(SHARED) {
                    used.insert(target);
                }
            }
        }
    }
    used
}

/// Remove what the recorded files of a dead launcher's `pmix-<pid>`
/// directory `dir` still hold (see the module docs).
fn remove_recorded(dir: &Path) {
    let Ok(text) = std::fs::read_to_string(dir.join(RECORD)) else {
        return;
    };
    let me = rustix::process::geteuid().as_raw();
    let left: Vec<PathBuf> = parse_record(&text)
        .into_iter()
        .filter(|(ino, path)| {
            std::fs::symlink_metadata(path)
                .is_ok_and(|m| m.is_file() && m.uid() == me && m.ino() == *ino)
        })
        .map(|(_, p)| p)
        .collect();
    if left.is_empty() {
        return;
    }
    let used = shared_files_in_use();
    for path in left.iter().filter(|p| !used.contains(*p)) {
        match std::fs::remove_file(path) {
            Ok(()) => tracing::debug!("removed {} (its launcher is gone)", path.display()),
            Err(e) => tracing::debug!("cannot remove {}: {e}", path.display()),
        }
    }
}

/// Remove the PMIx directories of launchers that are gone, with the
/// files their ranks recorded, and the node's system rendezvous file of
/// a gone launcher of this user's.
pub(in crate::launcher) fn remove_dead(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix("pmix-"))
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && !crate::private_dir::process_alive(pid) {
                tracing::debug!("removing {} (its launcher is gone)", e.path().display());
                remove_recorded(&e.path());
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    super::system::remove_if_dead();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_hold_only_plain_names_in_dev_shm() {
        let r = parse_record(
            "12 /dev/shm/sm_segment.a.0\nx /dev/shm/b\n13 /dev/shm/../etc/passwd\n14 /tmp/c\n15 /dev/shm/sub/d\n16 /dev/shm/e f\n",
        );
        assert_eq!(
            r,
            vec![
                (12, PathBuf::from("/dev/shm/sm_segment.a.0")),
                (16, PathBuf::from("/dev/shm/e f")),
            ]
        );
    }

    #[test]
    fn only_files_born_since_the_server_started_are_the_jobs() {
        let before = SystemTime::now() - std::time::Duration::from_secs(1);
        let path = format!("/dev/shm/fastpmi-leftovers-born-{}", std::process::id());
        std::fs::write(&path, b"x").unwrap();
        assert!(born_since(&path, before));
        let later = SystemTime::now() + std::time::Duration::from_secs(60);
        assert!(!born_since(&path, later), "a file older than the server");
        std::fs::remove_file(&path).unwrap();
        assert!(!born_since(&path, before), "a file that is gone");
    }

    #[test]
    fn shared_files_are_read_from_maps_lines() {
        let maps = "7f0000000000-7f0001000000 rw-s 00000000 00:1a 4242 /dev/shm/sm_segment.vm.0.1.0
7f0001000000-7f0002000000 r--p 00000000 08:01 77 /usr/lib/libc.so.6
7f0002000000-7f0003000000 rw-s 00000000 00:1a 4343 /dev/shm/old (deleted)
7f0003000000-7f0004000000 rw-p 00000000 00:00 0
7f0004000000-7f0005000000 rw-s 00000000 00:1a 4444 /dev/shm/with space
";
        assert_eq!(
            shared_in_maps(maps),
            vec![
                (4242, "/dev/shm/sm_segment.vm.0.1.0".to_string()),
                (4444, "/dev/shm/with space".to_string()),
            ]
        );
    }

    #[test]
    fn a_shared_file_held_open_is_in_use() {
        let path = format!("/dev/shm/fastpmi-leftovers-test-{}", std::process::id());
        let f = std::fs::File::create(&path).unwrap();
        assert!(shared_files_in_use().contains(Path::new(&path)));
        drop(f);
        assert!(!shared_files_in_use().contains(Path::new(&path)));
        std::fs::remove_file(&path).unwrap();
    }
}
