//! The running server: the library's functions, loaded once, and the
//! calls the host makes of it.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use crate::abi::*;
use crate::error::PmixError;
use crate::families::*;
use crate::requests::*;
use crate::upcalls::*;
use crate::{attributes, guard};

/// The names the library goes by (Debian's, then any on the search path).
const LIBS: &[&str] = &[
    "libpmix.so.2",
    "/usr/lib/x86_64-linux-gnu/pmix2/lib/libpmix.so.2",
    "libpmix.so",
];

struct Fns {
    init: unsafe extern "C" fn(*mut c_void, *mut Info, usize) -> Status,
    finalize: unsafe extern "C" fn() -> Status,
    notify: unsafe extern "C" fn(
        Status,
        *const Proc,
        u8,
        *mut Info,
        usize,
        OpCb,
        *mut c_void,
    ) -> Status,
    register_nspace:
        unsafe extern "C" fn(*const c_char, c_int, *mut Info, usize, OpCb, *mut c_void) -> Status,
    register_client:
        unsafe extern "C" fn(*const Proc, u32, u32, *mut c_void, OpCb, *mut c_void) -> Status,
    setup_fork: unsafe extern "C" fn(*const Proc, *mut *mut *mut c_char) -> Status,
    generate_regex: unsafe extern "C" fn(*const c_char, *mut *mut c_char) -> Status,
    generate_ppn: unsafe extern "C" fn(*const c_char, *mut *mut c_char) -> Status,
    error_string: unsafe extern "C" fn(Status) -> *const c_char,
    parse_cpuset: unsafe extern "C" fn(*const c_char, *mut Cpuset) -> Status,
    locality: unsafe extern "C" fn(*const Cpuset, *mut *mut c_char) -> Status,
    cpuset_destruct: unsafe extern "C" fn(*mut Cpuset),
    register_attributes: unsafe extern "C" fn(*mut c_char, *mut *mut c_char) -> Status,
    dmodex_request: unsafe extern "C" fn(*const Proc, DmodexCb, *mut c_void) -> Status,
    deregister_client: unsafe extern "C" fn(*const Proc, OpCb, *mut c_void),
    deregister_nspace: unsafe extern "C" fn(*const c_char, OpCb, *mut c_void),
    register_event_handler: unsafe extern "C" fn(
        *mut Status,
        usize,
        *mut Info,
        usize,
        EventHandler,
        RegisteredCb,
        *mut c_void,
    ) -> Status,
}

/// The library's answer to `Server::request_modex`, on its thread.
unsafe extern "C" fn modex_data(
    status: Status,
    data: *mut c_char,
    size: usize,
    cbdata: *mut c_void,
) {
    if cbdata.is_null() {
        return;
    }
    // SAFETY: `cbdata` is the box `request_modex` leaked, taken back once.
    let who = unsafe { Box::from_raw(cbdata.cast::<(String, u32)>()) };
    let data = (status == PMIX_SUCCESS && !data.is_null()).then(|| {
        // SAFETY: the library passes `size` bytes at `data` for the call.
        unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size) }.to_vec()
    });
    let (nspace, rank) = *who;
    send(Upcall::Remote(RemoteUpcall::LocalModex {
        nspace,
        rank,
        data,
    }));
}

/// Have the library raise the events it reports itself (a client's lost
/// connection) at once: by default it holds each for a window of
/// `pmix_event_caching_window` seconds (1), restarted by every event of
/// the same code, to send them as one; a host that waits for a dead
/// client's lost connection would wait that long. The variable is the
/// default of the library's MCA parameter of that name, so
/// `PMIX_MCA_pmix_event_caching_window` still wins. A library without the
/// (exported, though internal) variable keeps its window.
fn no_event_window(lib: &libloading::Library) {
    // SAFETY: the library's `int pmix_event_caching_window` (pmix_rte.h,
    // PMIX_EXPORT in 4.x and 5.x), looked up as a data symbol.
    match unsafe { lib.get::<*mut c_int>(b"pmix_event_caching_window\0") } {
        // SAFETY: the variable's address, written before
        // `PMIx_server_init` (which reads it) while no thread of the
        // library runs.
        Ok(window) if !window.is_null() => unsafe { **window = 0 },
        Ok(_) => {}
        Err(e) => tracing::debug!("the library's event window stays: {e}"),
    }
}

/// The copy of a string the library allocated with malloc (NULL: empty),
/// which is freed.
fn take_string(out: *mut c_char) -> String {
    if out.is_null() {
        return String::new();
    }
    // SAFETY: a NUL-terminated string the library allocated with malloc
    // and handed over; freed once, after the copy.
    unsafe {
        let s = CStr::from_ptr(out).to_string_lossy().into_owned();
        libc::free(out.cast());
        s
    }
}

/// The embedded server: the library and its functions. Never unloaded (the
/// progress thread lives until the process ends).
pub struct Server {
    fns: Fns,
    /// The library file, for messages.
    pub path: PathBuf,
    _lib: libloading::Library,
}

/// A one-shot completion for the library's `pmix_op_cbfunc_t`.
type Done = Arc<(Mutex<Option<Status>>, Condvar)>;

unsafe extern "C" fn op_done(status: Status, cbdata: *mut c_void) {
    // SAFETY: `cbdata` is the `Arc` leaked by `wait_op` for this one call;
    // taken back here exactly once.
    let done: Done = unsafe { Arc::from_raw(cbdata.cast()) };
    let (m, cv) = &*done;
    *m.lock().unwrap_or_else(|p| p.into_inner()) = Some(status);
    cv.notify_all();
}

/// Call `f` with a completion callback and wait for it (or for `f`'s own
/// status when it is an immediate error or already done).
fn wait_op(f: impl FnOnce(OpCb, *mut c_void) -> Status) -> Status {
    wait_op_for(OP_TIMEOUT, f)
}

/// [`wait_op`], waiting at most `timeout`.
fn wait_op_for(
    timeout: std::time::Duration,
    f: impl FnOnce(OpCb, *mut c_void) -> Status,
) -> Status {
    let done: Done = Arc::new((Mutex::new(None), Condvar::new()));
    let raw = Arc::into_raw(done.clone()).cast_mut().cast::<c_void>();
    let rc = f(Some(op_done), raw);
    if rc != PMIX_SUCCESS {
        // SAFETY: the library will not call back: take the reference back.
        drop(unsafe { Arc::from_raw(raw.cast::<(Mutex<Option<Status>>, Condvar)>()) });
        return if rc == PMIX_OPERATION_SUCCEEDED {
            PMIX_SUCCESS
        } else {
            rc
        };
    }
    // Bounded: a library that never calls back must not hang the launcher
    // (a late callback finds its reference, taken above, still alive).
    let deadline = std::time::Instant::now() + timeout;
    let (m, cv) = &*done;
    let mut g = m.lock().unwrap_or_else(|p| p.into_inner());
    while g.is_none() {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return PMIX_ERR_TIMEOUT;
        }
        g = cv
            .wait_timeout(g, left)
            .map(|(g, _)| g)
            .unwrap_or_else(|p| p.into_inner().0);
    }
    g.unwrap_or(PMIX_SUCCESS)
}

/// The longest an operation of the library may take to call back.
const OP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The longest a namespace's deregistration may take.
const DEREGISTER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// [`op_done`] for an event handler's registration (its reference is not
/// kept: the handler stays for the life of the server).
unsafe extern "C" fn registered(status: Status, _refid: usize, cbdata: *mut c_void) {
    // SAFETY: `cbdata` is the completion `wait_op` leaked for this call.
    unsafe { op_done(status, cbdata) }
}

/// A completion nobody waits for.
unsafe extern "C" fn op_ignored(_status: Status, _cbdata: *mut c_void) {}

/// The longest `PMIx_server_finalize` may take at exit.
const FINALIZE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

impl Server {
    /// Load the library (`lib`, else the usual names) and start the server
    /// with its rendezvous files in `tmpdir`; `sink` receives the upcalls.
    pub fn start(lib: Option<&Path>, tmpdir: &Path, sink: Sink) -> Result<Server, PmixError> {
        let candidates: Vec<PathBuf> = match lib {
            Some(p) => vec![p.to_path_buf()],
            None => LIBS.iter().map(PathBuf::from).collect(),
        };
        let mut tried = Vec::new();
        let mut found = None;
        for c in &candidates {
            // SAFETY: loading libpmix runs its initialisers, which set up
            // the library's own state only.
            match unsafe { libloading::Library::new(c) } {
                Ok(l) => {
                    found = Some((l, c.clone()));
                    break;
                }
                Err(e) => tried.push(format!("{}: {e}", c.display())),
            }
        }
        let (lib, path) = found.ok_or_else(|| PmixError::NotInstalled {
            tried: tried.join("; "),
        })?;
        let sym = |e| PmixError::Symbol {
            path: path.display().to_string(),
            source: e,
        };
        // SAFETY: these are the PMIx 4.x/5.x prototypes (pmix_server.h,
        // pmix_common.h); the library is kept loaded as long as `Server`
        // and the process live.
        let fns = unsafe {
            Fns {
                init: *lib.get(b"PMIx_server_init\0").map_err(sym)?,
                notify: *lib.get(b"PMIx_Notify_event\0").map_err(sym)?,
                finalize: *lib.get(b"PMIx_server_finalize\0").map_err(sym)?,
                register_nspace: *lib.get(b"PMIx_server_register_nspace\0").map_err(sym)?,
                register_client: *lib.get(b"PMIx_server_register_client\0").map_err(sym)?,
                setup_fork: *lib.get(b"PMIx_server_setup_fork\0").map_err(sym)?,
                generate_regex: *lib.get(b"PMIx_generate_regex\0").map_err(sym)?,
                generate_ppn: *lib.get(b"PMIx_generate_ppn\0").map_err(sym)?,
                error_string: *lib.get(b"PMIx_Error_string\0").map_err(sym)?,
                parse_cpuset: *lib.get(b"PMIx_Parse_cpuset_string\0").map_err(sym)?,
                locality: *lib
                    .get(b"PMIx_server_generate_locality_string\0")
                    .map_err(sym)?,
                cpuset_destruct: *lib.get(b"PMIx_Cpuset_destruct\0").map_err(sym)?,
                register_attributes: *lib.get(b"PMIx_Register_attributes\0").map_err(sym)?,
                dmodex_request: *lib.get(b"PMIx_server_dmodex_request\0").map_err(sym)?,
                deregister_client: *lib.get(b"PMIx_server_deregister_client\0").map_err(sym)?,
                deregister_nspace: *lib.get(b"PMIx_server_deregister_nspace\0").map_err(sym)?,
                register_event_handler: *lib.get(b"PMIx_Register_event_handler\0").map_err(sym)?,
            }
        };
        no_event_window(&lib);
        // SAFETY: `PMIx_Query_info_nb` and `PMIx_Get_version` with their
        // pmix.h prototypes; `dlsym` on the library's handle finds its own
        // definitions (not the binary's guard of the same name).
        let (query_nb, version) = unsafe {
            let q: guard::QueryNb = *lib.get(b"PMIx_Query_info_nb\0").map_err(sym)?;
            let v: unsafe extern "C" fn() -> *const c_char =
                *lib.get(b"PMIx_Get_version\0").map_err(sym)?;
            let text = v();
            (
                q,
                if text.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(text).to_string_lossy().into_owned()
                },
            )
        };
        guard::install(query_nb, &version);
        if SINK.set(sink).is_err() {
            return Err(PmixError::Twice);
        }
        let server = Server {
            fns,
            path,
            _lib: lib,
        };
        // The module lives for the rest of the process (the library keeps
        // the pointer).
        let module: &'static mut [usize; MODULE_SLOTS] = Box::leak(Box::new([0; MODULE_SLOTS]));
        module[SLOT_CLIENT_CONNECTED] = up_connected as *const () as usize;
        module[SLOT_CLIENT_FINALIZED] = up_finalized as *const () as usize;
        module[SLOT_ABORT] = up_abort as *const () as usize;
        module[SLOT_FENCE_NB] = up_fence as *const () as usize;
        module[SLOT_DIRECT_MODEX] = up_dmodex as *const () as usize;
        module[SLOT_PUBLISH] = up_publish as *const () as usize;
        module[SLOT_LOOKUP] = up_lookup as *const () as usize;
        module[SLOT_UNPUBLISH] = up_unpublish as *const () as usize;
        module[SLOT_QUERY] = up_query as *const () as usize;
        module[SLOT_SPAWN] = up_spawn as *const () as usize;
        module[SLOT_CONNECT] = up_connect as *const () as usize;
        module[SLOT_DISCONNECT] = up_disconnect as *const () as usize;
        module[SLOT_TOOL_CONNECTED] = up_tool_connected as *const () as usize;
        module[SLOT_GROUP] = up_group as *const () as usize;
        // Present, so that the library takes its clients' cleanup
        // registrations (it refuses them when the host has no job
        // control); the library handles those itself.
        module[SLOT_JOB_CONTROL] = up_job_control as *const () as usize;
        let mut infos = InfoList::default();
        let dir = tmpdir.to_string_lossy();
        infos.string(crate::keys::PMIX_SERVER_TMPDIR, &dir)?;
        infos.string(crate::keys::PMIX_SYSTEM_TMPDIR, &dir)?;
        infos.flag(crate::keys::PMIX_SERVER_TOOL_SUPPORT, true);

        // SAFETY: `module` is a zero-padded pmix_server_module_t of function
        // pointers with the prototypes above; `infos` lives for the call.
        let rc = unsafe {
            (server.fns.init)(
                module.as_mut_ptr().cast(),
                infos.infos.as_mut_ptr(),
                infos.infos.len(),
            )
        };
        server.check("PMIx_server_init", rc)?;
        server.register_attributes();
        if let Err(e) = server.register_lost_connection() {
            tracing::debug!("{e}: lost connections are not reported");
        }
        Ok(server)
    }

    /// Have the library's `PMIX_ERR_LOST_CONNECTION` events come to the
    /// sink ([`ClientUpcall::LostConnection`]): a host that deregisters a
    /// dead client before the library saw its connection close leaves the
    /// client counted among the namespace's local processes (see
    /// [`Server::deregister_client`]).
    fn register_lost_connection(&self) -> Result<(), PmixError> {
        let mut codes = [PMIX_ERR_LOST_CONNECTION];
        let rc = wait_op(|_, data| {
            // SAFETY: the library copies `codes` before it returns; no
            // info; `registered` completes `wait_op`'s `data` once.
            unsafe {
                (self.fns.register_event_handler)(
                    codes.as_mut_ptr(),
                    codes.len(),
                    std::ptr::null_mut(),
                    0,
                    Some(ev_lost_connection),
                    Some(registered),
                    data,
                )
            }
        });
        self.check("PMIx_Register_event_handler", rc)
    }

    /// Tell the library what this host serves, function by function, for
    /// tools that ask (`pattrs --host all`, `PMIX_QUERY_ATTRIBUTE_SUPPORT`).
    /// Best effort: a refusal costs the tools' answer only.
    fn register_attributes(&self) {
        for (function, attrs) in attributes::HOST_ATTRIBUTES {
            let (Ok(f), Ok(names)) = (
                CString::new(*function),
                attrs
                    .iter()
                    .map(|a| CString::new(*a))
                    .collect::<Result<Vec<_>, _>>(),
            ) else {
                continue;
            };
            let mut ptrs: Vec<*mut c_char> = names
                .iter()
                .map(|n| n.as_ptr().cast_mut())
                .chain(std::iter::once(std::ptr::null_mut()))
                .collect();
            // SAFETY: a NUL-terminated name and a NULL-terminated array of
            // NUL-terminated names, alive for the call (the library copies
            // both).
            let rc =
                unsafe { (self.fns.register_attributes)(f.as_ptr().cast_mut(), ptrs.as_mut_ptr()) };
            if let Err(e) = self.check("PMIx_Register_attributes", rc) {
                tracing::debug!("{function}: {e}");
            }
        }
    }

    fn check(&self, call: &'static str, rc: Status) -> Result<(), PmixError> {
        if rc == PMIX_SUCCESS || rc == PMIX_OPERATION_SUCCEEDED {
            return Ok(());
        }
        // SAFETY: PMIx_Error_string returns a static string for any status.
        let text = unsafe { CStr::from_ptr((self.fns.error_string)(rc)) }
            .to_string_lossy()
            .into_owned();
        Err(PmixError::Failed {
            call,
            status: rc,
            text,
        })
    }

    /// The locality string (`PMIX_LOCALITY_STRING`) of a process bound to
    /// `cpus` (a list such as `0-3,8`), as the library computes it from
    /// the node's topology: what Open MPI compares between processes.
    pub fn locality(&self, cpus: &str) -> Result<String, PmixError> {
        let text = format!("hwloc:{cpus}");
        let c = CString::new(text.as_str()).map_err(|_| PmixError::Nul(text.clone()))?;
        let mut set = Cpuset {
            source: std::ptr::null_mut(),
            bitmap: std::ptr::null_mut(),
        };
        // SAFETY: `c` is NUL-terminated; the library fills `set`.
        let rc = unsafe { (self.fns.parse_cpuset)(c.as_ptr(), &mut set) };
        self.check("PMIx_Parse_cpuset_string", rc)?;
        let mut out: *mut c_char = std::ptr::null_mut();
        // SAFETY: `set` was filled by the library above; it mallocs `out`.
        let rc = unsafe { (self.fns.locality)(&set, &mut out) };
        // SAFETY: `set` came from the library's parse, destructed once.
        unsafe { (self.fns.cpuset_destruct)(&mut set) };
        self.check("PMIx_server_generate_locality_string", rc)?;
        Ok(take_string(out))
    }

    /// Ask the library for the data `rank` of `nspace` (a client of this
    /// server) committed, as a direct-modex answer carries it to another
    /// server; it comes back as [`RemoteUpcall::LocalModex`].
    pub fn request_modex(&self, nspace: &str, rank: u32) -> Result<(), PmixError> {
        let p = proc_of(nspace, rank);
        let raw = Box::into_raw(Box::new((nspace.to_string(), rank)));
        // SAFETY: `p` lives for the call (the library copies it); `raw` is
        // taken back by `modex_data`, or below when the library refuses.
        let rc = unsafe { (self.fns.dmodex_request)(&p, Some(modex_data), raw.cast()) };
        if rc != PMIX_SUCCESS && rc != PMIX_OPERATION_SUCCEEDED {
            // SAFETY: refused: the library will not call back.
            drop(unsafe { Box::from_raw(raw) });
        }
        self.check("PMIx_server_dmodex_request", rc)
    }

    /// `PMIx_generate_regex` (`ppn`: `PMIx_generate_ppn`) of `input`.
    pub fn regex(&self, input: &str, ppn: bool) -> Result<String, PmixError> {
        let c = CString::new(input).map_err(|_| PmixError::Nul(input.to_string()))?;
        let mut out: *mut c_char = std::ptr::null_mut();
        let f = if ppn {
            self.fns.generate_ppn
        } else {
            self.fns.generate_regex
        };
        // SAFETY: `c` is NUL-terminated; the library mallocs `out`.
        let rc = unsafe { f(c.as_ptr(), &mut out) };
        self.check(
            if ppn {
                "PMIx_generate_ppn"
            } else {
                "PMIx_generate_regex"
            },
            rc,
        )?;
        Ok(take_string(out))
    }

    /// Stop the server: the library removes what it made (PMIx 5's shared
    /// memory files live in /tmp, outside the launcher's directory).
    /// At most [`FINALIZE_TIMEOUT`]: the library's own threads can
    /// deadlock (seen with OpenPMIx 5.0.11 after a client's failed group
    /// construct), and the launcher must exit; the process's exit then
    /// ends them.
    pub fn finalize(&self) {
        let f = self.fns.finalize;
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("fastpmi-pmix-fin".into())
            .spawn(move || {
                // SAFETY: PMIx_server_finalize takes no argument; called
                // once, at the launcher's exit, after which no other call
                // is made; the library stays loaded (never unloaded).
                let _ = tx.send(unsafe { f() });
            });
        if spawned.is_err() {
            return;
        }
        match rx.recv_timeout(FINALIZE_TIMEOUT) {
            Ok(rc) => {
                if let Err(e) = self.check("PMIx_server_finalize", rc) {
                    tracing::debug!("{e}");
                }
            }
            Err(_) => tracing::warn!(
                "PMIx_server_finalize did not return within {FINALIZE_TIMEOUT:?}; exiting anyway"
            ),
        }
    }

    /// Tell the processes of `nspace` that its rank `rank` ended with
    /// `code` (`PMIX_EVENT_PROC_TERMINATED`): their handlers run before the
    /// launcher stops them.
    pub fn notify_terminated(&self, nspace: &str, rank: u32, code: i32) -> Result<(), PmixError> {
        let source = proc_of(nspace, rank);
        let mut infos = InfoList::default();
        infos.proc_(crate::keys::PMIX_EVENT_AFFECTED_PROC, source);
        infos.int(crate::keys::PMIX_EXIT_CODE, code);
        self.notify(
            PMIX_EVENT_PROC_TERMINATED,
            &source,
            PMIX_RANGE_NAMESPACE,
            infos,
        )
    }

    /// Rank `rank` of `nspace` died and its job goes on (fault-tolerant
    /// jobs): `status` (`PMIX_ERR_PROC_ABORTED_BY_SIG`, `PMIX_ERR_PROC_ABORTED`
    /// or `PMIX_ERR_PROC_TERM_WO_SYNC`) to the processes of `nspace` and of
    /// `also` (the jobs connected to it: its parent, its spawned jobs), as
    /// PRRTE sends it under `--with-ft ulfm`: from the dead process (the
    /// library skips the source), the dead process as the only PMIX_PROC
    /// value (Open MPI's ULFM handler marks every such value failed). Then
    /// `PMIX_EVENT_PROC_TERMINATED` and `PMIX_PROC_TERMINATED` (which a
    /// group leader's pending invitation turns into
    /// `PMIX_GROUP_INVITE_FAILED`), only to handlers registered for them
    /// (`PMIX_EVENT_NON_DEFAULT`: Open MPI's default handler would abort).
    pub fn notify_proc_failed(
        &self,
        nspace: &str,
        rank: u32,
        status: Status,
        code: i32,
        also: &[&str],
    ) -> Result<(), PmixError> {
        let dead = proc_of(nspace, rank);
        let range: Vec<Proc> = std::iter::once(nspace)
            .chain(also.iter().copied())
            .map(|ns| proc_of(ns, PMIX_RANK_WILDCARD))
            .collect();
        let infos = |nondefault: bool| {
            let mut infos = InfoList::default();
            infos.proc_(crate::keys::PMIX_EVENT_AFFECTED_PROC, dead);
            // The range as an array: not a PMIX_PROC value of its own.
            infos.procs(crate::keys::PMIX_EVENT_CUSTOM_RANGE, range.clone());
            infos.int(crate::keys::PMIX_EXIT_CODE, code);
            if nondefault {
                infos.flag(crate::keys::PMIX_EVENT_NON_DEFAULT, true);
            }
            infos
        };
        self.notify(status, &dead, PMIX_RANGE_CUSTOM, infos(false))?;
        for code in [PMIX_EVENT_PROC_TERMINATED, PMIX_PROC_TERMINATED] {
            self.notify(code, &dead, PMIX_RANGE_CUSTOM, infos(true))?;
        }
        Ok(())
    }

    /// `dead` died, a member of group `group` built with
    /// `PMIX_GROUP_NOTIFY_TERMINATION`: `PMIX_GROUP_MEMBER_FAILED` to the
    /// group's other members `rest` (RFC0033), from the dead process, with
    /// it as the affected process and the group's id.
    pub fn notify_group_member_failed(
        &self,
        group: &str,
        dead: (&str, u32),
        rest: &[(String, u32)],
    ) -> Result<(), PmixError> {
        let source = proc_of(dead.0, dead.1);
        let mut infos = InfoList::default();
        infos.proc_(crate::keys::PMIX_EVENT_AFFECTED_PROC, source);
        infos.string(crate::keys::PMIX_GROUP_ID, group)?;
        infos.procs(
            crate::keys::PMIX_EVENT_CUSTOM_RANGE,
            rest.iter().map(|(ns, r)| proc_of(ns, *r)).collect(),
        );
        self.notify(PMIX_GROUP_MEMBER_FAILED, &source, PMIX_RANGE_CUSTOM, infos)
    }

    /// `PMIx_Notify_event` of `code` from `source` to `range`, waited for.
    fn notify(
        &self,
        code: Status,
        source: &Proc,
        range: u8,
        mut infos: InfoList,
    ) -> Result<(), PmixError> {
        let rc = wait_op(|cb, data| {
            // SAFETY: `source` and `infos` outlive the wait for completion.
            unsafe {
                (self.fns.notify)(
                    code,
                    source,
                    range,
                    infos.infos.as_mut_ptr(),
                    infos.infos.len(),
                    cb,
                    data,
                )
            }
        });
        self.check("PMIx_Notify_event", rc)
    }

    /// Forget `rank` of `nspace`, whose process ended: the library runs
    /// the epilog the client registered (Open MPI 5's shared-memory
    /// files) and closes its connection. Not waited for. A client that
    /// died before `PMIx_Finalize` stays counted among its namespace's
    /// local processes (which a whole-job fence waits for) unless the
    /// library saw its connection close first: after its
    /// [`ClientUpcall::LostConnection`].
    pub fn deregister_client(&self, nspace: &str, rank: u32) {
        let p = proc_of(nspace, rank);
        // SAFETY: the library copies `p` before it returns (it threadshifts
        // a caddy holding a copy); `op_ignored` takes no data.
        unsafe { (self.fns.deregister_client)(&p, Some(op_ignored), std::ptr::null_mut()) };
    }

    /// Forget job `nspace`: the library deregisters any of its clients
    /// still registered, runs their epilogs and the job's, and drops its
    /// data. Waited for, at most [`DEREGISTER_TIMEOUT`]: the launcher may
    /// be about to exit, and the epilogs must run before.
    pub fn deregister_nspace(&self, nspace: &str) -> Result<(), PmixError> {
        let ns = CString::new(nspace).map_err(|_| PmixError::Nul(nspace.to_string()))?;
        let rc = wait_op_for(DEREGISTER_TIMEOUT, |cb, data| {
            // SAFETY: `ns` outlives the wait (the library copies it into
            // its caddy before returning); `cb`/`data` are `wait_op`'s.
            unsafe { (self.fns.deregister_nspace)(ns.as_ptr(), cb, data) };
            PMIX_SUCCESS
        });
        self.check("PMIx_server_deregister_nspace", rc)
    }

    /// Release the ranks of `nspace` waiting in `PMIx_Init` for a debugger
    /// (`PMIX_DEBUG_STOP_IN_INIT`): `PMIX_DEBUGGER_RELEASE` to the
    /// namespace. The library keeps the event for a rank that registers
    /// its handler later.
    pub fn release_debugger(&self, nspace: &str) -> Result<(), PmixError> {
        // Not a process of the job: the library skips the source's own
        // processes (a wildcard source would be all of them).
        let source = proc_of("fastpmi-launcher", 0);
        let mut infos = InfoList::default();
        infos.flag(crate::keys::PMIX_EVENT_NON_DEFAULT, true);
        // Only this job's ranks (`PMIX_EVENT_CUSTOM_RANGE`).
        infos.procs(
            crate::keys::PMIX_EVENT_CUSTOM_RANGE,
            vec![proc_of(nspace, PMIX_RANK_WILDCARD)],
        );
        self.notify(PMIX_DEBUGGER_RELEASE, &source, PMIX_RANGE_CUSTOM, infos)
    }

    /// Register job `nspace` with `nlocal` processes on this node.
    pub fn register_nspace(
        &self,
        nspace: &str,
        nlocal: u32,
        mut infos: InfoList,
    ) -> Result<(), PmixError> {
        let ns = CString::new(nspace).map_err(|_| PmixError::Nul(nspace.to_string()))?;
        let rc = wait_op(|cb, data| {
            // SAFETY: `ns` and `infos` outlive the wait for completion.
            unsafe {
                (self.fns.register_nspace)(
                    ns.as_ptr(),
                    nlocal as c_int,
                    infos.infos.as_mut_ptr(),
                    infos.infos.len(),
                    cb,
                    data,
                )
            }
        });
        self.check("PMIx_server_register_nspace", rc)
    }

    /// Register `rank` of `nspace` (to be run as `uid`/`gid`) and return
    /// the environment its process needs to connect.
    pub fn register_client(
        &self,
        nspace: &str,
        rank: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Vec<(String, String)>, PmixError> {
        let p = proc_of(nspace, rank);
        let rc = wait_op(|cb, data| {
            // SAFETY: `p` outlives the wait.
            unsafe { (self.fns.register_client)(&p, uid, gid, std::ptr::null_mut(), cb, data) }
        });
        self.check("PMIx_server_register_client", rc)?;
        let mut env: *mut *mut c_char = std::ptr::null_mut();
        // SAFETY: the library appends to a NULL-terminated, malloc'd array
        // (starting from NULL) that is freed here after the copy.
        let rc = unsafe { (self.fns.setup_fork)(&p, &mut env) };
        self.check("PMIx_server_setup_fork", rc)?;
        let mut out = Vec::new();
        if !env.is_null() {
            // SAFETY: as above.
            unsafe {
                let mut i = 0;
                loop {
                    let e = *env.add(i);
                    if e.is_null() {
                        break;
                    }
                    let kv = CStr::from_ptr(e).to_string_lossy().into_owned();
                    if let Some((k, v)) = kv.split_once('=') {
                        out.push((k.to_string(), v.to_string()));
                    }
                    libc::free(e.cast());
                    i += 1;
                }
                libc::free(env.cast());
            }
        }
        Ok(out)
    }
}
