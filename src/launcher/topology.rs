//! The node's topology, loaded once by the launcher with hwloc and handed to
//! the ranks as an XML file (`PMI_hwloc_xmlfile`), so that MPICH's ranks do
//! not each discover it (what Hydra does too).
//!
//! hwloc is loaded at run time (`libhwloc.so.15`, Debian's `libhwloc15`):
//! without it the launcher works as before and the attribute is a miss. The
//! XML lives in a memfd of the launcher, named to the ranks by its
//! `/proc/<pid>/fd/<n>` path, so nothing is left on disk after any exit.
//! OS glue: the only `unsafe` here is the FFI to hwloc's C API.

use std::ffi::{c_char, c_int, c_ulong, c_void};
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};

/// `hwloc_topology_t`: an opaque pointer.
type Topo = *mut c_void;

/// The topology as XML in a memfd; dropping it closes the memfd.
pub struct TopologyXml {
    _fd: OwnedFd,
    /// Path the ranks open (`/proc/<launcher pid>/fd/<n>`).
    pub path: String,
    pub bytes: usize,
}

/// The names hwloc's shared library goes by on Linux.
const LIBS: &[&str] = &["libhwloc.so.15", "libhwloc.so"];

/// Load the topology and export it. An error says why (no hwloc, ...).
pub fn export() -> Result<TopologyXml, String> {
    let xml = load_xml()?;
    let fd = rustix::fs::memfd_create("fastpmi-topology", rustix::fs::MemfdFlags::CLOEXEC)
        .map_err(|e| format!("memfd_create: {e}"))?;
    let mut f = std::fs::File::from(fd);
    f.write_all(&xml)
        .map_err(|e| format!("writing the topology: {e}"))?;
    let fd = OwnedFd::from(f);
    let path = format!("/proc/{}/fd/{}", std::process::id(), fd.as_raw_fd());
    Ok(TopologyXml {
        _fd: fd,
        path,
        bytes: xml.len(),
    })
}

fn load_xml() -> Result<Vec<u8>, String> {
    // SAFETY: loading hwloc runs its initialisers, which only set up the
    // library's own state; no other code in this process uses hwloc.
    let lib = LIBS
        .iter()
        .find_map(|name| unsafe { libloading::Library::new(name) }.ok())
        .ok_or("hwloc is not installed (libhwloc.so.15, Debian package libhwloc15)")?;
    // SAFETY: the symbols have these C prototypes in hwloc 2.x
    // (hwloc.h, hwloc/export.h); the library outlives every call below.
    unsafe {
        let init: libloading::Symbol<unsafe extern "C" fn(*mut Topo) -> c_int> = lib
            .get(b"hwloc_topology_init\0")
            .map_err(|e| e.to_string())?;
        let load: libloading::Symbol<unsafe extern "C" fn(Topo) -> c_int> = lib
            .get(b"hwloc_topology_load\0")
            .map_err(|e| e.to_string())?;
        let export: libloading::Symbol<
            unsafe extern "C" fn(Topo, *mut *mut c_char, *mut c_int, c_ulong) -> c_int,
        > = lib
            .get(b"hwloc_topology_export_xmlbuffer\0")
            .map_err(|e| e.to_string())?;
        let free_buf: libloading::Symbol<unsafe extern "C" fn(Topo, *mut c_char)> = lib
            .get(b"hwloc_free_xmlbuffer\0")
            .map_err(|e| e.to_string())?;
        let destroy: libloading::Symbol<unsafe extern "C" fn(Topo)> = lib
            .get(b"hwloc_topology_destroy\0")
            .map_err(|e| e.to_string())?;
        let mut topo: Topo = std::ptr::null_mut();
        if init(&mut topo) != 0 {
            return Err("hwloc_topology_init failed".into());
        }
        if load(topo) != 0 {
            destroy(topo);
            return Err("hwloc_topology_load failed".into());
        }
        let mut buf: *mut c_char = std::ptr::null_mut();
        let mut len: c_int = 0;
        let r = export(topo, &mut buf, &mut len, 0);
        let out = if r != 0 || buf.is_null() || len <= 0 {
            Err("hwloc_topology_export_xmlbuffer failed".to_string())
        } else {
            // `len` counts the terminating NUL.
            let n = (len as usize).saturating_sub(1);
            let v = std::slice::from_raw_parts(buf.cast::<u8>(), n).to_vec();
            free_buf(topo, buf);
            Ok(v)
        };
        destroy(topo);
        out
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn exported_xml_is_readable_through_its_proc_path() {
        // hwloc is a test peer (scripts/test-all installs it).
        let t = super::export().expect("hwloc topology");
        let xml = std::fs::read_to_string(&t.path).unwrap();
        assert_eq!(xml.len(), t.bytes);
        assert!(xml.contains("<topology"), "{}", &xml[..xml.len().min(200)]);
        assert!(xml.contains("type=\"Machine\""));
    }
}
