//! The placement options of the command line (Hydra's `-bind-to`/`-map-by`,
//! Open MPI's `--bind-to`/`--map-by`) and the object kinds they name. The
//! launcher turns them into CPU lists (`launcher::placement`).

use std::fmt;

/// Binding targets, in hwloc's vocabulary (Hydra's names in the CLI).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjKind {
    HwThread,
    Core,
    L1Cache,
    L2Cache,
    L3Cache,
    Numa,
    Socket,
}

impl ObjKind {
    pub const ALL: [ObjKind; 7] = [
        ObjKind::HwThread,
        ObjKind::Core,
        ObjKind::L1Cache,
        ObjKind::L2Cache,
        ObjKind::L3Cache,
        ObjKind::Numa,
        ObjKind::Socket,
    ];
}

/// Its name on the command line (the first of its spellings).
impl fmt::Display for ObjKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(kind_name(*self))
    }
}

/// A `-bind-to` or `-map-by` value that names no binding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementOptionError {
    #[error("-bind-to {0}: the count after ':' must be a number of objects per rank, 1 or more")]
    BindCount(String),
    #[error("-bind-to {0}: expected none or {OBJECTS} (optionally :N)")]
    BindObject(String),
    #[error("-map-by {0}: expected {OBJECTS}")]
    MapObject(String),
}

/// `-bind-to` as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindTo {
    /// No binding (`none`).
    None,
    /// `N` consecutive objects of a kind per rank (`core`, `socket:2`).
    Obj(ObjKind, u32),
}

/// Placement options of the command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlacementOpts {
    /// `-bind-to`; `None`: the default policy ([`default_bind`]).
    pub bind_to: Option<BindTo>,
    /// `-map-by`; `None`: like the binding object.
    pub map_by: Option<ObjKind>,
    /// `-ppn` (one node: every rank is on it; accepted, checked, no effect).
    pub ppn: Option<u32>,
    /// `--print-bindings`: print rank -> CPU list at start.
    pub print: bool,
}

fn kind(name: &str) -> Option<ObjKind> {
    Some(match name {
        "hwthread" | "pu" => ObjKind::HwThread,
        "core" => ObjKind::Core,
        "l1cache" => ObjKind::L1Cache,
        "l2cache" => ObjKind::L2Cache,
        "l3cache" => ObjKind::L3Cache,
        "numa" => ObjKind::Numa,
        "socket" | "package" => ObjKind::Socket,
        _ => return None,
    })
}

pub fn kind_name(k: ObjKind) -> &'static str {
    match k {
        ObjKind::HwThread => "hwthread",
        ObjKind::Core => "core",
        ObjKind::L1Cache => "l1cache",
        ObjKind::L2Cache => "l2cache",
        ObjKind::L3Cache => "l3cache",
        ObjKind::Numa => "numa",
        ObjKind::Socket => "socket",
    }
}

const OBJECTS: &str = "hwthread, core, l1cache, l2cache, l3cache, numa or socket";

/// `none|hwthread|core|l1cache|l2cache|l3cache|numa|socket[:N]`.
pub fn parse_bind(v: &str) -> Result<BindTo, PlacementOptionError> {
    if v == "none" {
        return Ok(BindTo::None);
    }
    let (name, count) = match v.split_once(':') {
        Some((n, c)) => {
            let c = match c.parse::<u32>() {
                Ok(c) if (1..=65536).contains(&c) => c,
                _ => return Err(PlacementOptionError::BindCount(v.to_string())),
            };
            (n, c)
        }
        None => (v, 1),
    };
    kind(name)
        .map(|k| BindTo::Obj(k, count))
        .ok_or_else(|| PlacementOptionError::BindObject(v.to_string()))
}

/// `hwthread|core|l1cache|l2cache|l3cache|numa|socket`.
pub fn parse_map(v: &str) -> Result<ObjKind, PlacementOptionError> {
    kind(v).ok_or_else(|| PlacementOptionError::MapObject(v.to_string()))
}

/// The policy when `-bind-to` is not given: one core per rank, wrapping
/// around when the ranks outnumber the cores, whatever the job's size. See
/// docs/placement.md for the figures behind it.
pub const fn default_bind() -> BindTo {
    BindTo::Obj(ObjKind::Core, 1)
}
