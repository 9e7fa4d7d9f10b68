//! The FFI to hwloc's C API (OS glue): load the node's topology, export it
//! as XML and read the CPU sets (and cache sizes) of the objects ranks can
//! be bound to. hwloc is loaded at run time (`libhwloc.so.15`).

use std::ffi::{c_char, c_int, c_uint, c_ulong, c_void};

use crate::config::placement::ObjKind;

/// `hwloc_topology_t`: an opaque pointer.
type Topo = *mut c_void;

/// The names hwloc's shared library goes by on Linux.
const LIBS: &[&str] = &["libhwloc.so.15", "libhwloc.so"];

/// `hwloc_obj_type_t` (hwloc 2.x, hwloc.h).
fn hwloc_type(k: ObjKind) -> c_int {
    match k {
        ObjKind::Socket => 1,   // HWLOC_OBJ_PACKAGE
        ObjKind::Core => 2,     // HWLOC_OBJ_CORE
        ObjKind::HwThread => 3, // HWLOC_OBJ_PU
        ObjKind::L1Cache => 4,  // HWLOC_OBJ_L1CACHE
        ObjKind::L2Cache => 5,
        ObjKind::L3Cache => 6,
        ObjKind::Numa => 13, // HWLOC_OBJ_NUMANODE
    }
}

/// The leading fields of `struct hwloc_obj` in hwloc 2.x (hwloc.h; ABI of
/// libhwloc.so.15), up to `cpuset`. Checked at run time against the API
/// version and against each object's own type and logical index.
#[repr(C)]
#[allow(dead_code)] // fields before `cpuset` are there for the layout
struct HwlocObjHead {
    type_: c_int,
    subtype: *mut c_char,
    os_index: c_uint,
    name: *mut c_char,
    total_memory: u64,
    attr: *mut c_void,
    depth: c_int,
    logical_index: c_uint,
    next_cousin: *mut c_void,
    prev_cousin: *mut c_void,
    parent: *mut c_void,
    sibling_rank: c_uint,
    next_sibling: *mut c_void,
    prev_sibling: *mut c_void,
    arity: c_uint,
    children: *mut c_void,
    first_child: *mut c_void,
    last_child: *mut c_void,
    symmetric_subtree: c_int,
    memory_arity: c_uint,
    memory_first_child: *mut c_void,
    io_arity: c_uint,
    io_first_child: *mut c_void,
    misc_arity: c_uint,
    misc_first_child: *mut c_void,
    cpuset: *const c_void,
}

/// hwloc plugins this load never uses: I/O discovery (hwloc 2 leaves I/O
/// objects out of a topology unless asked) and the libxml exporter (the
/// built-in one writes the same XML). Debian's `libhwloc-plugins` loads
/// them all in `hwloc_topology_init`, with about 20 libraries behind them
/// (X11, OpenCL, ICU, libxml2): 3 ms of every launch on a 2-core VM.
const UNUSED_PLUGINS: &str = "hwloc_xml_libxml,hwloc_pci,hwloc_gl,hwloc_opencl,\
                              hwloc_cuda,hwloc_nvml,hwloc_rsmi,hwloc_levelzero";
const BLACKLIST_VAR: &str = "HWLOC_PLUGINS_BLACKLIST";

/// `HWLOC_PLUGINS_BLACKLIST=UNUSED_PLUGINS` while alive, which hwloc reads
/// in `hwloc_topology_init`; removed on drop, so that the ranks (whose
/// environment is the launcher's) do not inherit it. Only when the
/// variable is unset (the user's own list wins) and this process has one
/// thread, the launcher's state when it loads the topology: changing the
/// environment is not thread-safe.
struct PluginBlacklist {
    set: bool,
}

impl PluginBlacklist {
    fn new() -> PluginBlacklist {
        let single = std::fs::read_dir("/proc/self/task").is_ok_and(|d| d.count() == 1);
        let set = single && std::env::var_os(BLACKLIST_VAR).is_none();
        if set {
            std::env::set_var(BLACKLIST_VAR, UNUSED_PLUGINS);
        }
        PluginBlacklist { set }
    }
}

impl Drop for PluginBlacklist {
    fn drop(&mut self) {
        if self.set {
            std::env::remove_var(BLACKLIST_VAR);
        }
    }
}

/// `HWLOC_TYPE_DEPTH_UNKNOWN`, `HWLOC_TYPE_DEPTH_MULTIPLE`.
const DEPTH_UNKNOWN: c_int = -1;
const DEPTH_MULTIPLE: c_int = -2;

/// What one load finds: the topology as XML, and per kind its objects
/// (each the sorted OS numbers of its processing units, in hwloc's logical
/// order) and the size of a cache level's first object. Plain data, which
/// `launcher::topology` wraps: this glue imports nothing of the launcher.
pub struct Found {
    /// The file the library was loaded from, when the loader says.
    pub library: Option<std::path::PathBuf>,
    pub xml: Vec<u8>,
    pub sets: Vec<(ObjKind, Vec<Vec<u32>>)>,
    pub cache_sizes: Vec<(ObjKind, u64)>,
}

/// Why the topology cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum HwlocError {
    #[error("hwloc is not installed (libhwloc.so.15, Debian package libhwloc15)")]
    NotInstalled,
    /// A function missing from the library.
    #[error(transparent)]
    Symbol(#[from] libloading::Error),
    #[error("hwloc API version {0:#x}: fastpmi reads hwloc 2.x topologies")]
    Version(c_uint),
    /// The hwloc call that failed.
    #[error("{0} failed")]
    Failed(&'static str),
    #[error("hwloc object layout not as expected (hwloc 2.x)")]
    Layout,
}

/// Load the node's topology.
pub fn load() -> Result<Found, HwlocError> {
    // SAFETY: loading hwloc runs its initialisers, which only set up the
    // library's own state; no other code in this process uses hwloc.
    let lib = LIBS
        .iter()
        .find_map(|name| unsafe { libloading::Library::new(name) }.ok())
        .ok_or(HwlocError::NotInstalled)?;
    // SAFETY: the symbols have these C prototypes in hwloc 2.x
    // (hwloc.h, hwloc/export.h, hwloc/bitmap.h); the library outlives every
    // call below. Objects from hwloc_get_obj_by_depth live until
    // hwloc_topology_destroy and are only read before it; `HwlocObjHead`
    // is the prefix of hwloc 2.x's `struct hwloc_obj` (API version checked
    // first, each object's type and logical index checked before its
    // cpuset is read); a cache object's non-null `attr` points to
    // `union hwloc_obj_attr_u`, whose `cache` member starts with its size.
    unsafe {
        let init: libloading::Symbol<unsafe extern "C" fn(*mut Topo) -> c_int> =
            lib.get(b"hwloc_topology_init\0")?;
        let load: libloading::Symbol<unsafe extern "C" fn(Topo) -> c_int> =
            lib.get(b"hwloc_topology_load\0")?;
        let export: libloading::Symbol<
            unsafe extern "C" fn(Topo, *mut *mut c_char, *mut c_int, c_ulong) -> c_int,
        > = lib.get(b"hwloc_topology_export_xmlbuffer\0")?;
        let free_buf: libloading::Symbol<unsafe extern "C" fn(Topo, *mut c_char)> =
            lib.get(b"hwloc_free_xmlbuffer\0")?;
        let destroy: libloading::Symbol<unsafe extern "C" fn(Topo)> =
            lib.get(b"hwloc_topology_destroy\0")?;
        let api: libloading::Symbol<unsafe extern "C" fn() -> c_uint> =
            lib.get(b"hwloc_get_api_version\0")?;
        let type_depth: libloading::Symbol<unsafe extern "C" fn(Topo, c_int) -> c_int> =
            lib.get(b"hwloc_get_type_depth\0")?;
        let nbobjs: libloading::Symbol<unsafe extern "C" fn(Topo, c_int) -> c_uint> =
            lib.get(b"hwloc_get_nbobjs_by_depth\0")?;
        let obj_at: libloading::Symbol<
            unsafe extern "C" fn(Topo, c_int, c_uint) -> *const HwlocObjHead,
        > = lib.get(b"hwloc_get_obj_by_depth\0")?;
        let bit_next: libloading::Symbol<unsafe extern "C" fn(*const c_void, c_int) -> c_int> =
            lib.get(b"hwloc_bitmap_next\0")?;
        let version = api();
        let library = library_path(*api as *const c_void);
        if !(0x20000..0x30000).contains(&version) {
            return Err(HwlocError::Version(version));
        }
        let mut topo: Topo = std::ptr::null_mut();
        let blacklist = PluginBlacklist::new();
        let r = init(&mut topo);
        drop(blacklist);
        if r != 0 {
            return Err(HwlocError::Failed("hwloc_topology_init"));
        }
        if load(topo) != 0 {
            destroy(topo);
            return Err(HwlocError::Failed("hwloc_topology_load"));
        }
        let mut buf: *mut c_char = std::ptr::null_mut();
        let mut len: c_int = 0;
        let r = export(topo, &mut buf, &mut len, 0);
        let out = if r != 0 || buf.is_null() || len <= 0 {
            Err(HwlocError::Failed("hwloc_topology_export_xmlbuffer"))
        } else {
            // `len` counts the terminating NUL.
            let n = (len as usize).saturating_sub(1);
            let v = std::slice::from_raw_parts(buf.cast::<u8>(), n).to_vec();
            free_buf(topo, buf);
            Ok(v)
        };
        let mut all_sets = Vec::new();
        let mut cache_sizes = Vec::new();
        for kind in ObjKind::ALL {
            let depth = type_depth(topo, hwloc_type(kind));
            if depth == DEPTH_UNKNOWN || depth == DEPTH_MULTIPLE {
                // None (no L3 here), or at several depths: not a target.
                continue;
            }
            let mut sets = Vec::new();
            for i in 0..nbobjs(topo, depth) {
                let o = obj_at(topo, depth, i);
                if o.is_null() {
                    break;
                }
                let o = &*o;
                if o.type_ != hwloc_type(kind) || o.logical_index != i || o.cpuset.is_null() {
                    destroy(topo);
                    return Err(HwlocError::Layout);
                }
                let mut pus = Vec::new();
                let mut b = bit_next(o.cpuset, -1);
                while b >= 0 {
                    pus.push(b as u32);
                    b = bit_next(o.cpuset, b);
                }
                if !pus.is_empty() {
                    sets.push(pus);
                }
                let cache = matches!(kind, ObjKind::L1Cache | ObjKind::L2Cache | ObjKind::L3Cache);
                if cache && i == 0 && !o.attr.is_null() {
                    // `attr->cache.size`: the first field of
                    // `struct hwloc_cache_attr_s` (hwloc_uint64_t).
                    let size = *o.attr.cast::<u64>();
                    if size > 0 {
                        cache_sizes.push((kind, size));
                    }
                }
            }
            all_sets.push((kind, sets));
        }
        destroy(topo);
        out.map(|xml| Found {
            library,
            xml,
            sets: all_sets,
            cache_sizes,
        })
    }
}

/// The file of the loaded library that holds `addr` (`dladdr`).
fn library_path(addr: *const c_void) -> Option<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr only reads the loader's tables and fills `info`; it
    // accepts any address (0: not found).
    let found = unsafe { libc::dladdr(addr, info.as_mut_ptr()) };
    // SAFETY: zero-initialised, and filled by dladdr when it returned
    // non-zero.
    let info = unsafe { info.assume_init() };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated string owned by the loader, valid while the
    // library stays loaded (it is: the caller holds it).
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    let path = std::path::Path::new(std::ffi::OsStr::from_bytes(name.to_bytes()));
    path.is_absolute().then(|| path.to_path_buf())
}
