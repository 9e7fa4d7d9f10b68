//! Starting new jobs: `PMI2_Job_Spawn`.

use std::ffi::{c_char, c_int, c_void};

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
    use fastpmi_capi::spawn::{self as sp, MpidInfo};
    guard("PMI2_Job_Spawn", ERR_OTHER, || {
        let s = current()?;
        let info = info_keyval_vectors.cast::<*const MpidInfo>();
        let preput = preput_keyval_vector.cast::<*const MpidInfo>();
        // SAFETY: the arrays and strings (of the block and its closures) follow
        // the caller contract above.
        let cmds = unsafe {
            sp::commands(
                count,
                cmds,
                maxprocs,
                |i| {
                    let n = sp::at_or(argcs.cast_const(), i, 0);
                    let n = sp::count(n, sp::SPAWN_MAX_ARGS, "argc")?;
                    sp::args(sp::at_or(argvs, i, std::ptr::null()), n)
                },
                |i| sp::info(info_keyval_sizes, info, i),
            )?
        };
        // SAFETY: `preput` holds `preput_keyval_size` pointers to `MPID_Info`
        // (caller contract); `sp::preput` checks each non-NULL before reading.
        let preput = unsafe { sp::preput(preput_keyval_size, preput, |kv| *kv)? };
        let req = sp::SpawnRequest { cmds, preput };
        // SAFETY: output pointers per the caller contract.
        unsafe { sp::run(&s, req, errors, job_id, job_id_size) }
    })
}
