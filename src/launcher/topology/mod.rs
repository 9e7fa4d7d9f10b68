//! The node's topology, loaded once by the launcher with hwloc and handed to
//! the ranks as an XML file (`PMI_hwloc_xmlfile`), so that MPICH's ranks do
//! not each discover it (what Hydra does too).
//!
//! hwloc is loaded at run time (`libhwloc.so.15`, Debian's `libhwloc15`):
//! without it the launcher works as before and the attribute is a miss. The
//! XML lives in a memfd of the launcher, named to the ranks by its
//! `/proc/<pid>/fd/<n>` path, so nothing is left on disk after any exit.
//! hwloc's C API itself is reached through `os::hwloc` (OS glue).
//!
//! What hwloc found is kept across launches ([`cache`]), so that a launch
//! on an unchanged node does not load hwloc at all. A launch takes it in
//! two steps ([`load`], then [`Unexported::export`]): the CPU sets the
//! first ranks are bound with, then, while they start, the XML, once the
//! memory figures it holds are checked too.

pub mod cache;
mod key;
mod objects;

pub use key::{Key, MemoryKey};
pub use objects::Objects;

use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};

/// The topology as XML in a memfd; dropping it closes the memfd.
pub struct TopologyXml {
    _fd: OwnedFd,
    /// Path the ranks open (`/proc/<launcher pid>/fd/<n>`).
    pub path: String,
    pub bytes: usize,
}

/// The topology's XML, not exported for the ranks yet.
pub struct Unexported(Xml);

enum Xml {
    /// Kept, its memory figures not compared yet.
    Kept(cache::KeptXml),
    /// Loaded by hwloc in this launch.
    Loaded(Vec<u8>),
}

/// Why the launcher has no topology (no hwloc, ...).
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error(transparent)]
    Hwloc(#[from] super::os::hwloc::HwlocError),
    #[error("memfd_create: {0}")]
    Memfd(rustix::io::Errno),
    #[error("writing the topology: {0}")]
    Write(std::io::Error),
}

/// The topology's CPU sets, from `cache` when it holds this node's as it
/// is now (its [`Key`]), else loaded with hwloc (and kept in `cache`), and
/// its XML to export.
pub fn load(cache: Option<&cache::Cache>) -> Result<(Objects, Unexported), TopologyError> {
    if let Some(hit) = cache.and_then(cache::Cache::lookup) {
        tracing::debug!("node topology from the cache");
        return Ok((hit.objects, Unexported(Xml::Kept(hit.xml))));
    }
    let entry = load_with_hwloc(cache)?;
    Ok((entry.objects, Unexported(Xml::Loaded(entry.xml))))
}

/// hwloc's topology, kept in `cache` with the memory figures read before
/// it (a change after them makes the next launch's figures differ).
fn load_with_hwloc(cache: Option<&cache::Cache>) -> Result<cache::Entry, TopologyError> {
    let memory = cache.map(|_| MemoryKey::read());
    let found = super::os::hwloc::load()?;
    let entry = cache::Entry {
        xml: found.xml,
        objects: Objects {
            sets: found.sets,
            cache_sizes: found.cache_sizes,
        },
    };
    tracing::debug!("node topology loaded with hwloc");
    if let (Some(c), Some(m)) = (cache, &memory) {
        if let Err(e) = c.store(found.library.as_deref(), m, &entry) {
            tracing::debug!("topology not cached: {e}");
        }
    }
    Ok(entry)
}

impl Unexported {
    /// The XML for the ranks, in a memfd. A kept one whose memory figures
    /// (each NUMA node's memory and huge pages) are no longer the node's
    /// is not handed out: hwloc loads the topology again, and the file is
    /// rewritten.
    pub fn export(self, cache: Option<&cache::Cache>) -> Result<TopologyXml, TopologyError> {
        let xml = match self.0 {
            Xml::Kept(kept) if kept.memory_matches(&MemoryKey::read()) => kept.bytes,
            Xml::Kept(_) => {
                tracing::debug!("node memory changed: topology loaded again");
                load_with_hwloc(cache)?.xml
            }
            Xml::Loaded(xml) => xml,
        };
        export(&xml)
    }
}

fn export(xml: &[u8]) -> Result<TopologyXml, TopologyError> {
    let fd = rustix::fs::memfd_create("fastpmi-topology", rustix::fs::MemfdFlags::CLOEXEC)
        .map_err(TopologyError::Memfd)?;
    let mut f = std::fs::File::from(fd);
    f.write_all(xml).map_err(TopologyError::Write)?;
    let fd = OwnedFd::from(f);
    let path = format!("/proc/{}/fd/{}", std::process::id(), fd.as_raw_fd());
    Ok(TopologyXml {
        _fd: fd,
        path,
        bytes: xml.len(),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn exported_xml_is_readable_through_its_proc_path() {
        // hwloc is a test peer (scripts/test-all installs it).
        let t = super::load(None)
            .and_then(|(_, xml)| xml.export(None))
            .expect("hwloc topology");
        let xml = std::fs::read_to_string(&t.path).unwrap();
        assert_eq!(xml.len(), t.bytes);
        assert!(xml.contains("<topology"), "{}", &xml[..xml.len().min(200)]);
        assert!(xml.contains("type=\"Machine\""));
    }

    #[test]
    fn kept_xml_with_other_memory_figures_is_not_handed_out() {
        use super::cache::{Cache, Entry};
        let dir = std::env::temp_dir().join(format!("fastpmi-topo-mem-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = Cache::new(dir.clone(), super::Key::read());
        let kept = Entry {
            xml: b"<kept/>".to_vec(),
            objects: super::Objects::default(),
        };
        let xml_of = |memory: &super::MemoryKey| {
            cache.store(None, memory, &kept).unwrap();
            let (objects, xml) = super::load(Some(&cache)).expect("a hit");
            assert_eq!(objects, kept.objects, "the CPU sets come from the file");
            let t = xml.export(Some(&cache)).expect("exported");
            std::fs::read_to_string(&t.path).unwrap()
        };
        // The figures the node has now: the kept XML is handed out.
        assert_eq!(xml_of(&super::MemoryKey::read()), "<kept/>");
        // Other figures: hwloc's XML, and the file rewritten with it.
        let other = super::MemoryKey("node0 MemTotal 1\n".into());
        let fresh = xml_of(&other);
        assert!(
            fresh.contains("<topology"),
            "{}",
            &fresh[..fresh.len().min(200)]
        );
        let hit = cache.lookup().expect("rewritten");
        assert!(hit.xml.memory_matches(&super::MemoryKey::read()));
        assert_ne!(hit.xml.bytes, b"<kept/>");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn every_pu_is_in_one_core_and_one_socket() {
        use crate::config::placement::ObjKind;
        let (o, _) = super::load(None).expect("hwloc topology");
        let pus: Vec<u32> = o.of(ObjKind::HwThread).iter().flatten().copied().collect();
        assert!(!pus.is_empty());
        for kind in [ObjKind::Core, ObjKind::Socket] {
            let mut all: Vec<u32> = o.of(kind).iter().flatten().copied().collect();
            all.sort_unstable();
            let mut want = pus.clone();
            want.sort_unstable();
            assert_eq!(all, want, "{kind:?}");
        }
    }
}
