//! The PMIx 4.x/5.x ABI fastpmi uses (`pmix_common.h`, `pmix_server.h`):
//! types, codes and the info lists handed to the library, declared here so
//! that fastpmi builds without the headers; `tests/layout.rs` checks them
//! against the installed ones.

use std::ffi::{c_char, c_int, c_void, CString};

use crate::error::PmixError;

/// `pmix_status_t`.
pub type Status = c_int;
pub const PMIX_SUCCESS: Status = 0;
pub const PMIX_ERROR: Status = -1;
pub const PMIX_ERR_BAD_PARAM: Status = -27;
pub const PMIX_ERR_NO_PERMISSIONS: Status = -23;
pub const PMIX_ERR_TIMEOUT: Status = -24;
pub const PMIX_ERR_NOT_FOUND: Status = -46;
pub const PMIX_ERR_NOT_SUPPORTED: Status = -47;
pub const PMIX_OPERATION_SUCCEEDED: Status = -157;
/// A process of the job ended (`PMIX_EVENT_PROC_TERMINATED`).
pub const PMIX_EVENT_PROC_TERMINATED: Status = -201;
/// A process terminated (`PMIX_PROC_TERMINATED`): what a group leader's
/// invitation listens for, to raise `PMIX_GROUP_INVITE_FAILED`.
pub const PMIX_PROC_TERMINATED: Status = -111;
/// A member of a group built with `PMIX_GROUP_NOTIFY_TERMINATION` died
/// (`PMIX_GROUP_MEMBER_FAILED`).
pub const PMIX_GROUP_MEMBER_FAILED: Status = -170;
/// A process ended before its finalize (`PMIX_ERR_PROC_TERM_WO_SYNC`).
pub const PMIX_ERR_PROC_TERM_WO_SYNC: Status = -200;
/// A process was killed by a signal (`PMIX_ERR_PROC_ABORTED_BY_SIG`).
pub const PMIX_ERR_PROC_ABORTED_BY_SIG: Status = -402;
/// A process aborted itself (`PMIX_ERR_PROC_ABORTED`, in
/// `pmix_deprecated.h` since PMIx 4 but what Open MPI 5's ULFM handler
/// registers for).
pub const PMIX_ERR_PROC_ABORTED: Status = -7;
/// `pmix_data_range_t` of an event for the source's namespace.
pub const PMIX_RANGE_NAMESPACE: u8 = 3;
pub const PMIX_RANGE_CUSTOM: u8 = 6;
/// The debugger lets ranks held in `PMIx_Init` go (`PMIX_DEBUGGER_RELEASE`).
pub const PMIX_DEBUGGER_RELEASE: Status = -3;
/// Every rank of a namespace.
pub const PMIX_RANK_WILDCARD: u32 = u32::MAX - 1;
/// The library lost a client's connection (`PMIX_ERR_LOST_CONNECTION`): an
/// event it raises in the server itself once it has accounted for the loss.
pub const PMIX_ERR_LOST_CONNECTION: Status = -61;
/// An event handler's answer: the event is handled, the chain ends here
/// (`PMIX_EVENT_ACTION_COMPLETE`).
pub const PMIX_EVENT_ACTION_COMPLETE: Status = -334;

/// `pmix_data_type_t` codes used here.
pub mod ty {
    pub const BOOL: u16 = 1;
    pub const STRING: u16 = 3;
    pub const SIZE: u16 = 4;
    pub const BYTE_OBJECT: u16 = 27;
    pub const PROC_INFO: u16 = 38;
    pub const UINT16: u16 = 13;
    pub const UINT32: u16 = 14;
    pub const INT: u16 = 6;
    pub const PROC: u16 = 22;
    pub const DATA_ARRAY: u16 = 39;
    pub const PROC_RANK: u16 = 40;
    pub const INFO: u16 = 24;
}

/// `PMIX_MAX_KEYLEN + 1`, `PMIX_MAX_NSLEN + 1`.
pub const KEY_BYTES: usize = 512;
pub const NSPACE_BYTES: usize = 256;

/// `pmix_proc_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Proc {
    pub nspace: [c_char; NSPACE_BYTES],
    pub rank: u32,
}

/// `pmix_data_array_t`.
#[repr(C)]
pub struct DataArray {
    pub type_: u16,
    pub size: usize,
    pub array: *mut c_void,
}

/// The union of `pmix_value_t`: the members used here, padded to its size.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ValueData {
    pub flag: bool,
    pub uint16: u16,
    pub uint32: u32,
    pub int: i32,
    pub size: usize,
    pub proc_: *mut Proc,
    pub string: *mut c_char,
    pub darray: *mut DataArray,
    pub bo: ByteObject,
    pub raw: [u64; 3],
}

/// `pmix_byte_object_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ByteObject {
    pub bytes: *mut c_char,
    pub size: usize,
}

/// `pmix_pdata_t` (a lookup's answer).
#[repr(C)]
pub struct PData {
    pub proc_: Proc,
    pub key: [c_char; KEY_BYTES],
    pub value: Value,
}

/// `pmix_value_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Value {
    pub type_: u16,
    pub data: ValueData,
}

/// `pmix_info_t`.
#[repr(C)]
pub struct Info {
    pub key: [c_char; KEY_BYTES],
    pub flags: u32,
    pub value: Value,
}

/// `pmix_cpuset_t`: a bitmap (hwloc's) and where it came from.
#[repr(C)]
pub struct Cpuset {
    pub source: *mut c_char,
    pub bitmap: *mut c_void,
}

/// `pmix_app_t`: one application of a `PMIx_Spawn`.
#[repr(C)]
pub struct App {
    pub cmd: *mut c_char,
    pub argv: *mut *mut c_char,
    pub env: *mut *mut c_char,
    pub cwd: *mut c_char,
    pub maxprocs: c_int,
    pub info: *mut Info,
    pub ninfo: usize,
}

/// `pmix_proc_info_t`: one row of a proc table.
#[repr(C)]
pub struct ProcInfo {
    pub proc_: Proc,
    pub hostname: *mut c_char,
    pub executable_name: *mut c_char,
    pub pid: c_int,
    pub exit_code: c_int,
    pub state: u8,
}

/// `pmix_proc_state_t` values used here.
pub const PMIX_PROC_STATE_RUNNING: u8 = 5;
pub const PMIX_PROC_STATE_CONNECTED: u8 = 6;
pub const PMIX_PROC_STATE_TERMINATED: u8 = 20;

/// `pmix_query_t`: the keys asked (a NULL-terminated `char **`) and the
/// qualifiers that narrow them.
#[repr(C)]
pub struct Query {
    pub keys: *mut *mut c_char,
    pub qualifiers: *mut Info,
    pub nqual: usize,
}

/// Sizes, offsets and codes of the ABI above, for the ABI test
/// (`tests/layout.rs`, against `pmix_server.h`).
pub const LAYOUT: [(&str, i64); 56] = [
    ("sizeof(pmix_info_t)", std::mem::size_of::<Info>() as i64),
    ("sizeof(pmix_value_t)", std::mem::size_of::<Value>() as i64),
    ("sizeof(pmix_proc_t)", std::mem::size_of::<Proc>() as i64),
    (
        "sizeof(pmix_data_array_t)",
        std::mem::size_of::<DataArray>() as i64,
    ),
    (
        "offsetof(pmix_info_t, flags)",
        std::mem::offset_of!(Info, flags) as i64,
    ),
    (
        "offsetof(pmix_info_t, value)",
        std::mem::offset_of!(Info, value) as i64,
    ),
    (
        "offsetof(pmix_value_t, data)",
        std::mem::offset_of!(Value, data) as i64,
    ),
    ("sizeof(pmix_server_module_t)", (MODULE_SLOTS_4 * 8) as i64),
    (
        "offsetof(pmix_server_module_t, fence_nb)",
        (SLOT_FENCE_NB * 8) as i64,
    ),
    (
        "offsetof(pmix_server_module_t, publish)",
        (SLOT_PUBLISH * 8) as i64,
    ),
    ("sizeof(pmix_pdata_t)", std::mem::size_of::<PData>() as i64),
    (
        "offsetof(pmix_pdata_t, value)",
        std::mem::offset_of!(PData, value) as i64,
    ),
    ("PMIX_UINT32", ty::UINT32 as i64),
    ("PMIX_INT", ty::INT as i64),
    ("PMIX_PROC", ty::PROC as i64),
    (
        "PMIX_EVENT_PROC_TERMINATED",
        PMIX_EVENT_PROC_TERMINATED as i64,
    ),
    ("PMIX_RANGE_NAMESPACE", PMIX_RANGE_NAMESPACE as i64),
    (
        "PMIX_ERR_PROC_TERM_WO_SYNC",
        PMIX_ERR_PROC_TERM_WO_SYNC as i64,
    ),
    (
        "PMIX_ERR_PROC_ABORTED_BY_SIG",
        PMIX_ERR_PROC_ABORTED_BY_SIG as i64,
    ),
    ("PMIX_ERR_PROC_ABORTED", PMIX_ERR_PROC_ABORTED as i64),
    ("PMIX_PROC_TERMINATED", PMIX_PROC_TERMINATED as i64),
    ("PMIX_GROUP_MEMBER_FAILED", PMIX_GROUP_MEMBER_FAILED as i64),
    ("PMIX_DEBUGGER_RELEASE", PMIX_DEBUGGER_RELEASE as i64),
    ("PMIX_RANGE_CUSTOM", PMIX_RANGE_CUSTOM as i64),
    ("PMIX_RANK_WILDCARD", PMIX_RANK_WILDCARD as i64),
    ("PMIX_DATA_ARRAY", ty::DATA_ARRAY as i64),
    ("PMIX_OPERATION_SUCCEEDED", PMIX_OPERATION_SUCCEEDED as i64),
    ("PMIX_SIZE", ty::SIZE as i64),
    ("PMIX_ERR_NO_PERMISSIONS", PMIX_ERR_NO_PERMISSIONS as i64),
    ("PMIX_ERR_TIMEOUT", PMIX_ERR_TIMEOUT as i64),
    (
        "offsetof(pmix_server_module_t, group)",
        (SLOT_GROUP * 8) as i64,
    ),
    ("PMIX_GROUP_CONSTRUCT", PMIX_GROUP_CONSTRUCT as i64),
    ("PMIX_BYTE_OBJECT", ty::BYTE_OBJECT as i64),
    ("PMIX_PROC_INFO", ty::PROC_INFO as i64),
    ("sizeof(pmix_app_t)", std::mem::size_of::<App>() as i64),
    (
        "sizeof(pmix_cpuset_t)",
        std::mem::size_of::<Cpuset>() as i64,
    ),
    (
        "offsetof(pmix_app_t, maxprocs)",
        std::mem::offset_of!(App, maxprocs) as i64,
    ),
    (
        "offsetof(pmix_server_module_t, spawn)",
        (SLOT_SPAWN * 8) as i64,
    ),
    (
        "offsetof(pmix_server_module_t, connect)",
        (SLOT_CONNECT * 8) as i64,
    ),
    (
        "sizeof(pmix_proc_info_t)",
        std::mem::size_of::<ProcInfo>() as i64,
    ),
    (
        "offsetof(pmix_proc_info_t, pid)",
        std::mem::offset_of!(ProcInfo, pid) as i64,
    ),
    (
        "offsetof(pmix_proc_info_t, state)",
        std::mem::offset_of!(ProcInfo, state) as i64,
    ),
    ("PMIX_PROC_STATE_RUNNING", PMIX_PROC_STATE_RUNNING as i64),
    (
        "PMIX_PROC_STATE_CONNECTED",
        PMIX_PROC_STATE_CONNECTED as i64,
    ),
    (
        "PMIX_PROC_STATE_TERMINATED",
        PMIX_PROC_STATE_TERMINATED as i64,
    ),
    (
        "sizeof(pmix_byte_object_t)",
        std::mem::size_of::<ByteObject>() as i64,
    ),
    ("PMIX_GROUP_DESTRUCT", PMIX_GROUP_DESTRUCT as i64),
    (
        "offsetof(pmix_server_module_t, tool_connected)",
        (SLOT_TOOL_CONNECTED * 8) as i64,
    ),
    ("PMIX_ERR_NOT_SUPPORTED", PMIX_ERR_NOT_SUPPORTED as i64),
    ("sizeof(pmix_query_t)", std::mem::size_of::<Query>() as i64),
    (
        "offsetof(pmix_query_t, qualifiers)",
        std::mem::offset_of!(Query, qualifiers) as i64,
    ),
    (
        "offsetof(pmix_query_t, nqual)",
        std::mem::offset_of!(Query, nqual) as i64,
    ),
    (
        "offsetof(pmix_server_module_t, query)",
        (SLOT_QUERY * 8) as i64,
    ),
    (
        "offsetof(pmix_server_module_t, job_control)",
        (SLOT_JOB_CONTROL * 8) as i64,
    ),
    ("PMIX_ERR_LOST_CONNECTION", PMIX_ERR_LOST_CONNECTION as i64),
    (
        "PMIX_EVENT_ACTION_COMPLETE",
        PMIX_EVENT_ACTION_COMPLETE as i64,
    ),
];

/// Function slots of `pmix_server_module_t` in PMIx 4.x (v5 adds at the
/// end: the struct handed over is zero-padded well past both).
pub(crate) const MODULE_SLOTS_4: usize = 28;
pub(crate) const MODULE_SLOTS: usize = 64;
/// Slots used (`pmix_server.h` order).
pub(crate) const SLOT_CLIENT_CONNECTED: usize = 0;
pub(crate) const SLOT_CLIENT_FINALIZED: usize = 1;
pub(crate) const SLOT_ABORT: usize = 2;
pub(crate) const SLOT_FENCE_NB: usize = 3;
pub(crate) const SLOT_DIRECT_MODEX: usize = 4;
pub(crate) const SLOT_PUBLISH: usize = 5;
pub(crate) const SLOT_LOOKUP: usize = 6;
pub(crate) const SLOT_UNPUBLISH: usize = 7;
pub(crate) const SLOT_SPAWN: usize = 8;
pub(crate) const SLOT_CONNECT: usize = 9;
pub(crate) const SLOT_DISCONNECT: usize = 10;
pub(crate) const SLOT_QUERY: usize = 15;
pub(crate) const SLOT_TOOL_CONNECTED: usize = 16;
pub(crate) const SLOT_JOB_CONTROL: usize = 19;
pub(crate) const SLOT_GROUP: usize = 25;
/// `pmix_group_operation_t`.
pub const PMIX_GROUP_CONSTRUCT: c_int = 0;
pub const PMIX_GROUP_DESTRUCT: c_int = 1;

/// Keeps the strings and arrays an info list points to alive.
#[derive(Default)]
pub struct InfoList {
    pub(crate) infos: Vec<Info>,
    strings: Vec<CString>,
    // Boxed: the infos point at them, so they must not move when the
    // vector grows.
    #[allow(clippy::vec_box)]
    procs: Vec<Box<Proc>>,
    arrays: Vec<(Box<DataArray>, InfoList)>,
    proc_arrays: Vec<(Box<DataArray>, Vec<Proc>)>,
    table_arrays: Vec<(Box<DataArray>, Vec<ProcInfo>)>,
    string_arrays: Vec<(Box<DataArray>, Vec<*mut c_char>)>,
}

fn key_bytes(key: &str) -> [c_char; KEY_BYTES] {
    let mut k = [0 as c_char; KEY_BYTES];
    for (d, s) in k.iter_mut().zip(key.bytes().take(KEY_BYTES - 1)) {
        *d = s as c_char;
    }
    k
}

fn info(key: &str, type_: u16, data: ValueData) -> Info {
    Info {
        key: key_bytes(key),
        flags: 0,
        value: Value { type_, data },
    }
}

impl InfoList {
    pub fn flag(&mut self, key: &str, v: bool) {
        self.infos.push(info(key, ty::BOOL, ValueData { flag: v }));
    }
    pub fn u16(&mut self, key: &str, v: u16) {
        self.infos
            .push(info(key, ty::UINT16, ValueData { uint16: v }));
    }
    pub fn u32(&mut self, key: &str, v: u32) {
        self.infos
            .push(info(key, ty::UINT32, ValueData { uint32: v }));
    }
    pub fn rank(&mut self, key: &str, v: u32) {
        self.infos
            .push(info(key, ty::PROC_RANK, ValueData { uint32: v }));
    }
    pub fn size(&mut self, key: &str, v: usize) {
        self.infos.push(info(key, ty::SIZE, ValueData { size: v }));
    }
    /// An array of procs under `key` (a process set's members).
    pub fn procs(&mut self, key: &str, mut procs: Vec<Proc>) {
        let mut da = Box::new(DataArray {
            type_: ty::PROC,
            size: procs.len(),
            array: procs.as_mut_ptr().cast(),
        });
        let p: *mut DataArray = &mut *da;
        self.infos
            .push(info(key, ty::DATA_ARRAY, ValueData { darray: p }));
        self.proc_arrays.push((da, procs));
    }
    /// A byte object under `key` whose bytes the library takes over: it
    /// frees them (`PMIX_GROUP_ENDPT_DATA` of a group's answer, which
    /// OpenPMIx 5 unloads and frees), so they come from `malloc`.
    pub fn bytes_given(&mut self, key: &str, b: &[u8]) -> Result<(), PmixError> {
        // SAFETY: a plain allocation of `len` bytes (at least 1).
        let p = unsafe { libc::malloc(b.len().max(1)) }.cast::<u8>();
        if p.is_null() {
            return Err(PmixError::Nul("out of memory".into()));
        }
        // SAFETY: `p` holds `b.len()` bytes and does not overlap `b`.
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), p, b.len()) };
        let bo = ByteObject {
            bytes: p.cast(),
            size: b.len(),
        };
        self.infos
            .push(info(key, ty::BYTE_OBJECT, ValueData { bo }));
        Ok(())
    }
    /// A proc table under `key`: per row (namespace, rank, hostname,
    /// executable, pid, exit code, state); its strings are kept with the
    /// list.
    #[allow(clippy::type_complexity)]
    pub fn proc_table(
        &mut self,
        key: &str,
        rows: &[(String, u32, String, String, i32, i32, u8)],
    ) -> Result<(), PmixError> {
        let mut table = Vec::with_capacity(rows.len());
        for (ns, rank, host, exe, pid, code, state) in rows {
            let h = CString::new(host.as_str()).map_err(|_| PmixError::Nul(host.clone()))?;
            let e = CString::new(exe.as_str()).map_err(|_| PmixError::Nul(exe.clone()))?;
            table.push(ProcInfo {
                proc_: proc_of(ns, *rank),
                hostname: h.as_ptr().cast_mut(),
                executable_name: e.as_ptr().cast_mut(),
                pid: *pid,
                exit_code: *code,
                state: *state,
            });
            self.strings.push(h);
            self.strings.push(e);
        }
        let mut da = Box::new(DataArray {
            type_: ty::PROC_INFO,
            size: table.len(),
            array: table.as_mut_ptr().cast(),
        });
        let p: *mut DataArray = &mut *da;
        self.infos
            .push(info(key, ty::DATA_ARRAY, ValueData { darray: p }));
        self.table_arrays.push((da, table));
        Ok(())
    }
    /// Whether nothing was put in.
    pub fn is_empty(&self) -> bool {
        self.infos.is_empty()
    }
    pub fn int(&mut self, key: &str, v: i32) {
        self.infos.push(info(key, ty::INT, ValueData { int: v }));
    }
    /// A `pmix_proc_t*` value: the proc is kept with the list.
    pub fn proc_(&mut self, key: &str, p: Proc) {
        let mut b = Box::new(p);
        let ptr: *mut Proc = &mut *b;
        self.procs.push(b);
        self.infos
            .push(info(key, ty::PROC, ValueData { proc_: ptr }));
    }
    /// An array of strings under `key` (`PMIX_QUERY_GROUP_NAMES`).
    pub fn strings(&mut self, key: &str, v: &[String]) -> Result<(), PmixError> {
        let mut ptrs = Vec::with_capacity(v.len());
        for s in v {
            let c = CString::new(s.as_str()).map_err(|_| PmixError::Nul(s.clone()))?;
            // The heap buffer stays put when the CString moves into the list.
            ptrs.push(c.as_ptr().cast_mut());
            self.strings.push(c);
        }
        let mut da = Box::new(DataArray {
            type_: ty::STRING,
            size: ptrs.len(),
            array: ptrs.as_mut_ptr().cast(),
        });
        let p: *mut DataArray = &mut *da;
        self.infos
            .push(info(key, ty::DATA_ARRAY, ValueData { darray: p }));
        self.string_arrays.push((da, ptrs));
        Ok(())
    }

    pub fn string(&mut self, key: &str, v: &str) -> Result<(), PmixError> {
        let s = CString::new(v).map_err(|_| PmixError::Nul(v.to_string()))?;
        let p = s.as_ptr().cast_mut();
        self.strings.push(s);
        self.infos
            .push(info(key, ty::STRING, ValueData { string: p }));
        Ok(())
    }
    /// An array of infos under `key` (`PMIX_PROC_INFO_ARRAY` and the like).
    pub fn array(&mut self, key: &str, mut inner: InfoList) {
        let mut da = Box::new(DataArray {
            type_: ty::INFO,
            size: inner.infos.len(),
            array: inner.infos.as_mut_ptr().cast(),
        });
        let p: *mut DataArray = &mut *da;
        self.infos
            .push(info(key, ty::DATA_ARRAY, ValueData { darray: p }));
        self.arrays.push((da, inner));
    }
}

/// The `pmix_proc_t` of `rank` of `nspace` (cut to the ABI's length).
pub fn proc_of(nspace: &str, rank: u32) -> Proc {
    let mut p = Proc {
        nspace: [0; NSPACE_BYTES],
        rank,
    };
    for (d, s) in p
        .nspace
        .iter_mut()
        .zip(nspace.bytes().take(NSPACE_BYTES - 1))
    {
        *d = s as c_char;
    }
    p
}

/// The namespace of a `pmix_proc_t`.
pub fn nspace_of(p: &Proc) -> String {
    let end = p
        .nspace
        .iter()
        .position(|&c| c == 0)
        .unwrap_or(NSPACE_BYTES);
    p.nspace[..end].iter().map(|&c| c as u8 as char).collect()
}

// The library's callback types (`pmix_server.h`, `pmix_common.h`).

pub type InfoCb =
    Option<unsafe extern "C" fn(Status, *mut Info, usize, *mut c_void, ReleaseCb, *mut c_void)>;

pub type LookupCb = Option<unsafe extern "C" fn(Status, *mut PData, usize, *mut c_void)>;

pub type SpawnCb = Option<unsafe extern "C" fn(Status, *mut c_char, *mut c_void)>;

/// `pmix_dmodex_response_fn_t`.
pub type DmodexCb = Option<unsafe extern "C" fn(Status, *mut c_char, usize, *mut c_void)>;

pub type OpCb = Option<unsafe extern "C" fn(Status, *mut c_void)>;

/// `pmix_event_notification_cbfunc_fn_t`: an event handler's answer to the
/// library, which then runs the next handler of the chain or ends it.
pub type EventDoneCb =
    Option<unsafe extern "C" fn(Status, *mut Info, usize, OpCb, *mut c_void, *mut c_void)>;

/// `pmix_notification_fn_t`: an event handler.
pub type EventHandler = Option<
    unsafe extern "C" fn(
        usize,
        Status,
        *const Proc,
        *mut Info,
        usize,
        *mut Info,
        usize,
        EventDoneCb,
        *mut c_void,
    ),
>;

/// `pmix_hdlr_reg_cbfunc_t`: the handler's registration, done (its
/// reference).
pub type RegisteredCb = Option<unsafe extern "C" fn(Status, usize, *mut c_void)>;
pub type ReleaseCb = Option<unsafe extern "C" fn(*mut c_void)>;
pub type ModexCb =
    Option<unsafe extern "C" fn(Status, *const c_char, usize, *mut c_void, ReleaseCb, *mut c_void)>;
