//! Starting new jobs: `PMI2_Job_Spawn`.

use std::ffi::{c_char, c_int, c_void};

use fastpmi_capi::cbuf;
use fastpmi_capi::codes::*;
use fastpmi_capi::guard;
use fastpmi_capi::session::current;

/// Start a new job: `count` commands (`cmds[i]`, `maxprocs[i]` processes,
/// `argcs[i]` arguments in `argvs[i]`, `info_keyval_sizes[i]` info pairs in
/// the `MPID_Info` array `info_keyval_vectors[i]`), with the pre-put pairs
/// `*preput_keyval_vector[j]` in its KVS. `errors` gets one code per
/// process (0: started); `jobId` the new job's id. Sent as PMI-2 `spawn` to
/// whichever server this process talks to. A singleton has no server and
/// gets `PMI2_ERR_OTHER`.
///
/// # Safety
/// The arrays hold `count` elements (`preput_keyval_size` for the pre-put
/// vector), the strings are NUL-terminated, `errors` has room for every
/// process, `jobId` is NULL or valid for `jobIdSize` bytes.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn PMI2_Job_Spawn(
    count: c_int,
    cmds: *const *const c_char,
    argcs: *mut c_int,
    argvs: *const *const *const c_char,
    maxprocs: *const c_int,
    info_keyval_sizes: *const c_int,
    info_keyval_vectors: *const *const c_void,
    preput_keyval_size: c_int,
    preput_keyval_vector: *const *const c_void,
    job_id: *mut c_char,
    job_id_size: c_int,
    errors: *mut c_int,
) -> c_int {
    use fastpmi_capi::spawn::{self as sp, at, MpidInfo};
    guard("PMI2_Job_Spawn", ERR_OTHER, || {
        let s = current()?;
        let info = info_keyval_vectors.cast::<*const MpidInfo>();
        let preput = preput_keyval_vector.cast::<*const MpidInfo>();
        // SAFETY (all blocks below): the arrays and strings follow the
        // caller contract above; `at` reads element i of a checked array.
        let cmds = unsafe {
            sp::commands(
                count,
                cmds,
                maxprocs,
                |i| {
                    let n = if argcs.is_null() {
                        0
                    } else {
                        at(argcs.cast_const(), i)
                    };
                    let n = sp::count(n, sp::SPAWN_MAX_ARGS, "argc")?;
                    let argv = if argvs.is_null() {
                        std::ptr::null()
                    } else {
                        at(argvs, i)
                    };
                    sp::args(argv, n)
                },
                |i| {
                    if info_keyval_sizes.is_null() || info.is_null() {
                        return Ok(Vec::new());
                    }
                    let arr = at(info, i);
                    sp::pairs(at(info_keyval_sizes, i), |j| {
                        cbuf::non_null(arr)?;
                        let kv = &*arr.add(j);
                        Ok((sp::string(kv.key)?, sp::string(kv.value)?))
                    })
                },
            )?
        };
        let preput = if preput_keyval_size > 0 {
            cbuf::non_null(preput)?;
            sp::pairs(preput_keyval_size, |j| {
                // SAFETY: `preput` holds `preput_keyval_size` pointers to
                // `MPID_Info` (caller contract); each is checked non-NULL.
                unsafe {
                    let kv = at(preput, j);
                    cbuf::non_null(kv)?;
                    Ok((sp::string((*kv).key)?, sp::string((*kv).value)?))
                }
            })?
        } else {
            Vec::new()
        };
        let req = sp::SpawnRequest { cmds, preput };
        // SAFETY: output pointers per the caller contract.
        unsafe { sp::run(&s, req, errors, job_id, job_id_size) }
    })
}
