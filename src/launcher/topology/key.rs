//! The key of a kept topology: what hwloc's answer depends on that can
//! change while the node runs, read fresh at every launch (see
//! [`super::cache`]). In two parts: what the CPU sets depend on ([`Key`]),
//! read before the first rank is bound, and the memory figures of the XML
//! ([`MemoryKey`]), read while the first ranks start, before any rank can
//! be handed the XML.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The inputs of hwloc's CPU sets that can change without a reboot, as
/// read now, in an unambiguous text (every value length-prefixed): what
/// the launcher binds ranks with, read before the first rank starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key(pub(super) String);

/// The inputs that change only the XML's memory figures (each NUMA node's
/// memory and huge pages), read once the first ranks are on their way:
/// the XML is handed out only after they matched (see
/// [`super::Unexported`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryKey(pub(super) String);

impl Key {
    /// Read the key of this process on this node now.
    pub fn read() -> Key {
        let mut k = Key(String::new());
        k.value("fastpmi", env!("CARGO_PKG_VERSION"));
        k.file("/proc/sys/kernel/random/boot_id");
        k.file("/sys/devices/system/cpu/online");
        k.file("/sys/devices/system/node/online");
        k.cpuset();
        let mut vars: Vec<(String, String)> = std::env::vars_os()
            .filter_map(|(n, v)| Some((n.into_string().ok()?, v.to_string_lossy().into_owned())))
            .filter(|(n, _)| n.starts_with("HWLOC_") || n == "LD_LIBRARY_PATH" || n == "LD_PRELOAD")
            .collect();
        vars.sort();
        for (n, v) in vars {
            k.value(&format!("env {n}"), &v);
        }
        // Where the loader would find hwloc (ldconfig rewrites it).
        k.value("ld.so.cache", &identity(Path::new("/etc/ld.so.cache")));
        k
    }

    fn value(&mut self, name: &str, v: &str) {
        let _ = writeln!(self.0, "{name} {}\n{v}", v.len());
    }

    fn file(&mut self, path: &str) {
        let v = read_small(Path::new(path)).unwrap_or_else(|e| format!("! {:?}", e.kind()));
        self.value(path, &v);
    }

    /// The lines of `path` that contain one of `fields`.
    fn lines(&mut self, path: &str, fields: &[&str]) {
        let v = match read_small(Path::new(path)) {
            Ok(text) => text
                .lines()
                .filter(|l| fields.iter().any(|f| l.contains(f)))
                .collect::<Vec<_>>()
                .join("\n"),
            Err(e) => format!("! {:?}", e.kind()),
        };
        self.value(path, &v);
    }

    /// The number of pages of every huge-page size under `dir`.
    fn huge_pages(&mut self, dir: &str) {
        let Ok(entries) = fs::read_dir(dir) else {
            self.value(dir, "! absent");
            return;
        };
        let mut sizes: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with("hugepages-"))
            .collect();
        sizes.sort();
        for s in sizes {
            self.file(&format!("{dir}/{s}/nr_hugepages"));
        }
    }

    /// This process's cpuset (hwloc leaves the CPUs and memory outside it
    /// out): its files in the cgroup v1 and v2 hierarchies. Where none can
    /// be read, the CPUs and memory nodes the kernel allows this process
    /// stand in for them.
    fn cpuset(&mut self) {
        let path = read_small(Path::new("/proc/self/cpuset")).unwrap_or_default();
        let path = path.trim();
        let mut found = false;
        if path.starts_with('/') && !path.split('/').any(|c| c == "..") {
            let path = path.trim_end_matches('/');
            // A controller serves one hierarchy at a time: where the v1
            // cpuset answers, the v2 files cannot exist (two opens saved).
            for pair in [
                [
                    format!("/sys/fs/cgroup/cpuset{path}/cpuset.cpus"),
                    format!("/sys/fs/cgroup/cpuset{path}/cpuset.mems"),
                ],
                [
                    format!("/sys/fs/cgroup{path}/cpuset.cpus.effective"),
                    format!("/sys/fs/cgroup{path}/cpuset.mems.effective"),
                ],
            ] {
                for f in pair {
                    let v = read_small(Path::new(&f));
                    found |= v.is_ok();
                    let v = v.unwrap_or_else(|e| format!("! {:?}", e.kind()));
                    self.value(&f, &v);
                }
                if found {
                    break;
                }
            }
        }
        if !found {
            self.lines(
                "/proc/self/status",
                &["Cpus_allowed_list:", "Mems_allowed_list:"],
            );
        }
    }
}

impl MemoryKey {
    /// Read the memory part of the key now: memory and huge pages per NUMA
    /// node, or of the whole node where the kernel shows no NUMA nodes.
    /// Totals only: the free counts change all the time.
    pub fn read() -> MemoryKey {
        let mut k = Key(String::new());
        let nodes = numa_nodes();
        for node in &nodes {
            k.lines(
                &format!("/sys/devices/system/node/{node}/meminfo"),
                &["MemTotal:", "HugePages_Total:"],
            );
            k.huge_pages(&format!("/sys/devices/system/node/{node}/hugepages"));
        }
        if nodes.is_empty() {
            k.lines(
                "/proc/meminfo",
                &["MemTotal:", "HugePages_Total:", "Hugepagesize:"],
            );
            k.huge_pages("/sys/kernel/mm/hugepages");
        }
        MemoryKey(k.0)
    }
}

/// The NUMA nodes' directory names (`node0`, ...), sorted.
fn numa_nodes() -> Vec<String> {
    let Ok(entries) = fs::read_dir("/sys/devices/system/node") else {
        return Vec::new();
    };
    let mut nodes: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| {
            n.strip_prefix("node")
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    nodes.sort();
    nodes
}

/// A small kernel file, whole, in one read where it fits: sysfs files are
/// at most a page and /proc's are filled until the buffer is full or the
/// file ends, so a short read is the end. (`read_to_string` would read
/// until a read returns nothing, probing 32 bytes at a time, and each read
/// of a /proc file formats all of it again.)
fn read_small(path: &Path) -> io::Result<String> {
    let mut f = fs::File::open(path)?;
    let mut buf = vec![0u8; 4096];
    let mut len = 0;
    loop {
        match f.read(&mut buf[len..]) {
            Ok(n) => {
                len += n;
                if len < buf.len() || buf.len() >= 1 << 16 {
                    break;
                }
                buf.resize(buf.len() * 2, 0);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(len);
    String::from_utf8(buf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// What identifies a file's contents: device, inode, size and change time
/// (a rewrite or a replacement changes one of them).
pub(super) fn identity(path: &Path) -> String {
    match fs::metadata(path) {
        Ok(m) => format!(
            "{} {} {} {}.{}",
            m.dev(),
            m.ino(),
            m.len(),
            m.ctime(),
            m.ctime_nsec()
        ),
        Err(e) => format!("! {:?}", e.kind()),
    }
}
