//! The topology kept across launches in this user's private directory
//! (`crate::private_dir`), so that a launch reads one file instead of
//! loading hwloc and letting it walk sysfs (1.7 ms of a 4.7 ms
//! `fastpmi -n 1` on a 2-core VM; docs/launch.md).
//!
//! It must never be stale. The file is named by a hash of a [`Key`]: the
//! contents of everything hwloc's CPU sets depend on that can change while
//! the node runs (the boot's id, the online CPUs and NUMA nodes, this
//! process's cpuset, hwloc's environment, the loader's cache), read fresh
//! at every launch. The file holds the whole key, compared byte for byte
//! (the hash only names the file), the [`MemoryKey`] (memory and huge-page
//! totals, which only the XML's figures depend on, compared once the
//! first ranks are on their way: [`KeptXml::memory_matches`]), and the
//! identity of the hwloc library that wrote it, checked with one `stat`.
//! Whatever does not match is a miss: hwloc loads the topology and the file
//! is rewritten. Everything else hwloc reads (cache sizes, core and package
//! numbering, DMI, CPU models) is fixed until the next boot.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::key::{identity, Key, MemoryKey};
use super::objects::Objects;
use crate::config::placement::ObjKind;

/// Cache files kept; the least recently written beyond these are removed.
const KEEP: usize = 8;
/// A file larger than this is not read (a large node's XML is well under).
const MAX_FILE: u64 = 64 << 20;
/// A temporary file older than this is a dead launcher's: removed.
const STALE_TMP: Duration = Duration::from_secs(60);
const MAGIC: &[u8] = b"fastpmi topology cache 2\n";
const PREFIX: &str = "topology-";
const SUFFIX: &str = ".cache";

/// The file name `key`'s topology is kept under.
fn file_name(key: &Key) -> String {
    // Only an index: the file holds the whole key, compared byte for
    // byte, so another hash (another Rust release) is only a miss. Not
    // sha2, whose CPU-feature probe (CPUID, trapped on a VM: about 4 µs
    // each) cost more than the rest of the name.
    let mut h = std::hash::DefaultHasher::new();
    std::hash::Hasher::write(&mut h, key.0.as_bytes());
    format!("{PREFIX}{:016x}{SUFFIX}", std::hash::Hasher::finish(&h))
}

/// What a cache file gives back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub xml: Vec<u8>,
    pub objects: Objects,
}

/// A file found for this launch's [`Key`]: the CPU sets, usable at once,
/// and the XML, not until its memory figures are compared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub objects: Objects,
    pub xml: KeptXml,
}

/// A kept XML and the memory key it was written with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptXml {
    pub bytes: Vec<u8>,
    memory: String,
}

impl KeptXml {
    /// Whether it was written with the memory figures the node has now.
    pub fn memory_matches(&self, now: &MemoryKey) -> bool {
        self.memory == now.0
    }
}

/// The cache directory and the key of this launch.
pub struct Cache {
    dir: PathBuf,
    key: Key,
}

/// Why a topology could not be kept (the launch goes on without).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0}: {1}")]
    Io(PathBuf, io::Error),
}

impl Cache {
    /// The cache in `dir` (created on the first store) for `key`.
    pub fn new(dir: PathBuf, key: Key) -> Cache {
        Cache { dir, key }
    }

    fn path(&self) -> PathBuf {
        self.dir.join(file_name(&self.key))
    }

    /// The topology kept for this key, if any and if it is whole, was
    /// written for exactly this key and by the hwloc library still there
    /// (its memory key is for the caller to compare).
    pub fn lookup(&self) -> Option<Hit> {
        crate::private_dir::check_dir(&self.dir).ok()?;
        let f = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(self.path())
            .ok()?;
        let len = f.metadata().ok()?.len();
        if len > MAX_FILE {
            return None;
        }
        // Sized from the file: one read, not a doubling series of them.
        let mut bytes = Vec::with_capacity(len as usize + 1);
        f.take(MAX_FILE).read_to_end(&mut bytes).ok()?;
        let (key, memory, library, entry) = decode(&bytes)?;
        if key != self.key.0 {
            return None;
        }
        if let Some((path, id)) = library {
            if identity(Path::new(&path)) != id {
                return None;
            }
        }
        Some(Hit {
            objects: entry.objects,
            xml: KeptXml {
                bytes: entry.xml,
                memory,
            },
        })
    }

    /// Keep `entry`, found by the hwloc library at `library` with the
    /// memory figures of `memory`, for this key (written whole or not at
    /// all), and remove the oldest files beyond [`KEEP`].
    pub fn store(
        &self,
        library: Option<&Path>,
        memory: &MemoryKey,
        entry: &Entry,
    ) -> Result<(), StoreError> {
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |e| StoreError::Io(p, e)
        };
        crate::private_dir::ensure_dir(&self.dir).map_err(io(&self.dir))?;
        let library = library.map(|p| (p.to_string_lossy().into_owned(), identity(p)));
        let bytes = encode(&self.key.0, &memory.0, library.as_ref(), entry);
        let name = file_name(&self.key);
        let tmp = self.dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let write = || -> io::Result<()> {
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(&bytes)?;
            fs::rename(&tmp, self.dir.join(&name))
        };
        if let Err(e) = write() {
            let _ = fs::remove_file(&tmp);
            return Err(StoreError::Io(tmp, e));
        }
        self.evict(&name);
        Ok(())
    }

    /// Remove cache files beyond the [`KEEP`] newest (never `keep`), and
    /// dead launchers' temporary files.
    fn evict(&self, keep: &str) {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        let now = SystemTime::now();
        let mut files = Vec::new();
        for e in entries.flatten() {
            let Ok(name) = e.file_name().into_string() else {
                continue;
            };
            let Ok(m) = e.metadata() else { continue };
            let modified = m.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            if name.starts_with(&format!(".{PREFIX}")) && name.ends_with(".tmp") {
                if now.duration_since(modified).unwrap_or_default() > STALE_TMP {
                    let _ = fs::remove_file(e.path());
                }
            } else if name.starts_with(PREFIX) && name.ends_with(SUFFIX) && name != keep {
                files.push((modified, e.path()));
            }
        }
        if files.len() < KEEP {
            return;
        }
        files.sort();
        for (_, path) in &files[..files.len() + 1 - KEEP] {
            let _ = fs::remove_file(path);
        }
    }
}

/// The file: [`MAGIC`], then length-prefixed sections.
fn encode(key: &str, memory: &str, library: Option<&(String, String)>, entry: &Entry) -> Vec<u8> {
    let mut t = String::new();
    let _ = write!(t, "key {}\n{key}\n", key.len());
    let _ = write!(t, "memory {}\n{memory}\n", memory.len());
    match library {
        Some((path, id)) => {
            let _ = write!(t, "lib {}\n{path}\n{id}\n", path.len());
        }
        None => t.push_str("lib -\n"),
    }
    let o = &entry.objects;
    let _ = writeln!(t, "kinds {}", o.sets.len());
    for (kind, sets) in &o.sets {
        let _ = writeln!(t, "kind {} {}", kind_index(*kind), sets.len());
        for set in sets {
            let list: Vec<String> = set.iter().map(u32::to_string).collect();
            let _ = writeln!(t, "{}", list.join(","));
        }
    }
    let _ = writeln!(t, "caches {}", o.cache_sizes.len());
    for (kind, size) in &o.cache_sizes {
        let _ = writeln!(t, "{} {size}", kind_index(*kind));
    }
    let _ = writeln!(t, "xml {}", entry.xml.len());
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(t.as_bytes());
    out.extend_from_slice(&entry.xml);
    out
}

/// The key, the memory key, the library (path, identity) and the entry of
/// a file; `None` for anything not whole and well-formed.
type Decoded = (String, String, Option<(String, String)>, Entry);

fn decode(bytes: &[u8]) -> Option<Decoded> {
    let mut r = Reader(bytes.strip_prefix(MAGIC)?);
    let key = r.sized("key")?;
    let memory = r.sized("memory")?;
    let library = match r.line()? {
        "lib -" => None,
        l => {
            let n = l.strip_prefix("lib ")?.parse().ok()?;
            let path = std::str::from_utf8(r.take(n)?).ok()?.to_string();
            r.newline()?;
            Some((path, r.line()?.to_string()))
        }
    };
    let kinds: usize = r.line()?.strip_prefix("kinds ")?.parse().ok()?;
    let mut sets = Vec::new();
    for _ in 0..kinds.min(ObjKind::ALL.len()) {
        let (kind, n) = r.line()?.strip_prefix("kind ")?.split_once(' ')?;
        let kind = kind_at(kind)?;
        let n: usize = n.parse().ok()?;
        let mut objs = Vec::with_capacity(n.min(1 << 16));
        for _ in 0..n {
            let pus = r
                .line()?
                .split(',')
                .map(|p| p.parse().ok())
                .collect::<Option<Vec<u32>>>()?;
            objs.push(pus);
        }
        sets.push((kind, objs));
    }
    let caches: usize = r.line()?.strip_prefix("caches ")?.parse().ok()?;
    let mut cache_sizes = Vec::new();
    for _ in 0..caches.min(ObjKind::ALL.len()) {
        let (kind, size) = r.line()?.split_once(' ')?;
        cache_sizes.push((kind_at(kind)?, size.parse().ok()?));
    }
    let n: usize = r.line()?.strip_prefix("xml ")?.parse().ok()?;
    let xml = r.take(n)?.to_vec();
    if !r.0.is_empty() {
        return None;
    }
    let objects = Objects { sets, cache_sizes };
    Some((
        key.to_string(),
        memory.to_string(),
        library,
        Entry { xml, objects },
    ))
}

fn kind_index(k: ObjKind) -> usize {
    ObjKind::ALL
        .iter()
        .position(|&x| x == k)
        .unwrap_or(usize::MAX)
}

fn kind_at(s: &str) -> Option<ObjKind> {
    ObjKind::ALL.get(s.parse::<usize>().ok()?).copied()
}

/// A cursor over a cache file.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.0.len() {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }

    fn newline(&mut self) -> Option<()> {
        (self.take(1)? == b"\n").then_some(())
    }

    fn line(&mut self) -> Option<&'a str> {
        let end = self.0.iter().position(|&b| b == b'\n')?;
        let l = std::str::from_utf8(self.take(end)?).ok()?;
        self.newline()?;
        Some(l)
    }

    /// `<what> <n>\n`, n bytes of text, `\n`.
    fn sized(&mut self, what: &str) -> Option<&'a str> {
        let n = self
            .line()?
            .strip_prefix(what)?
            .strip_prefix(' ')?
            .parse()
            .ok()?;
        let v = std::str::from_utf8(self.take(n)?).ok()?;
        self.newline()?;
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        Entry {
            xml: b"<topology>\n x \n</topology>\n".to_vec(),
            objects: Objects {
                sets: vec![
                    (ObjKind::HwThread, vec![vec![0], vec![1]]),
                    (ObjKind::Core, vec![vec![0, 1]]),
                ],
                cache_sizes: vec![(ObjKind::L2Cache, 1 << 20)],
            },
        }
    }

    fn temp_dir(tag: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("fastpmi-topo-test-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    fn entry_of(h: Hit) -> Entry {
        Entry {
            xml: h.xml.bytes,
            objects: h.objects,
        }
    }

    fn memory() -> MemoryKey {
        MemoryKey("node0 MemTotal 1\n".into())
    }

    #[test]
    fn a_file_decodes_to_what_was_encoded() {
        let lib = ("/lib/libhwloc.so.15".to_string(), "1 2 3 4.5".to_string());
        let bytes = encode("k 1\nv\n", "m 1\nw\n", Some(&lib), &entry());
        assert_eq!(
            decode(&bytes),
            Some(("k 1\nv\n".into(), "m 1\nw\n".into(), Some(lib), entry()))
        );
        let bytes = encode("k", "", None, &entry());
        assert_eq!(
            decode(&bytes),
            Some(("k".into(), String::new(), None, entry()))
        );
    }

    #[test]
    fn a_cut_or_altered_file_is_a_miss() {
        let bytes = encode("key", "memory", None, &entry());
        for n in 0..bytes.len() {
            assert_eq!(decode(&bytes[..n]), None, "cut at {n}");
        }
        let mut longer = bytes.clone();
        longer.push(b'x');
        assert_eq!(decode(&longer), None);
        let text = String::from_utf8(bytes)
            .unwrap()
            .replace("kind 1 1\n0,1", "kind 1 1\n0,x");
        assert_eq!(decode(text.as_bytes()), None);
    }

    #[test]
    fn a_stored_topology_is_found_only_under_the_same_key() {
        let dir = temp_dir("key");
        let key = Key::read();
        let c = Cache::new(dir.clone(), key.clone());
        assert_eq!(c.lookup(), None);
        c.store(None, &memory(), &entry()).unwrap();
        assert_eq!(c.lookup().map(entry_of), Some(entry()));
        let other = Key(format!("{}cpu hot-plugged 3\n0-2\n", key.0));
        assert_eq!(Cache::new(dir.clone(), other).lookup(), None);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_hit_tells_whether_the_memory_figures_are_the_same() {
        let dir = temp_dir("memory");
        let c = Cache::new(dir.clone(), Key::read());
        c.store(None, &memory(), &entry()).unwrap();
        let hit = c.lookup().unwrap();
        assert!(hit.xml.memory_matches(&memory()));
        assert!(!hit
            .xml
            .memory_matches(&MemoryKey("node0 MemTotal 2\n".into())));
        // What the node has now is read from the kernel.
        assert!(MemoryKey::read().0.contains("MemTotal:"));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_replaced_library_is_a_miss() {
        let dir = temp_dir("lib");
        let lib = dir.join("libfake.so");
        let c = Cache::new(dir.clone(), Key::read());
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        fs::write(&lib, b"one").unwrap();
        c.store(Some(&lib), &memory(), &entry()).unwrap();
        assert_eq!(c.lookup().map(entry_of), Some(entry()));
        fs::write(&lib, b"two, longer").unwrap();
        assert_eq!(c.lookup(), None);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_colliding_file_name_with_another_key_is_a_miss() {
        let dir = temp_dir("collide");
        let c = Cache::new(dir.clone(), Key::read());
        c.store(None, &memory(), &entry()).unwrap();
        // Another key's contents under this key's name.
        fs::write(c.path(), encode("another key", &memory().0, None, &entry())).unwrap();
        assert_eq!(c.lookup(), None);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_key_sees_the_cpus_and_the_environment() {
        let k = Key::read().0;
        assert!(k.contains("/sys/devices/system/cpu/online"), "{k}");
        // Memory figures are the other part's.
        assert!(!k.contains("MemTotal"), "{k}");
        assert!(k.contains("/proc/sys/kernel/random/boot_id"), "{k}");
        // Key::read takes the environment as it is now.
        assert_eq!(
            k.contains("env HWLOC_"),
            std::env::vars().any(|(n, _)| n.starts_with("HWLOC_"))
        );
    }

    #[test]
    fn at_most_keep_files_stay() {
        let dir = temp_dir("evict");
        for i in 0..KEEP + 3 {
            let key = Key(format!("i 1\n{i}\n"));
            Cache::new(dir.clone(), key)
                .store(None, &memory(), &entry())
                .unwrap();
        }
        let n = fs::read_dir(&dir).unwrap().count();
        assert_eq!(n, KEEP);
        let _ = fs::remove_dir_all(&dir);
    }
}
