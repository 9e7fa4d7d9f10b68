//! Starting new jobs: `PMI_Spawn_multiple`.

use std::ffi::{c_char, c_int};

use fastpmi_capi::session::current;

use crate::{guard, PMI_keyval_t};

/// Start a new job: `count` commands (`cmds[i]`, `maxprocs[i]` processes,
/// NULL-terminated arguments `argvs[i]`, `info_keyval_sizes[i]` info pairs
/// in `info_keyval_vectors[i]`), with `preput_keyval_size` pairs of
/// `preput_keyval_vector` in its KVS. `errors` gets one code per process
/// (0: started). Sent as PMI-2 `spawn` to this process's server.
///
/// # Safety
/// The arrays hold `count` elements, the strings are NUL-terminated,
/// `errors` has room for every process.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn PMI_Spawn_multiple(
    count: c_int,
    cmds: *const *const c_char,
    argvs: *const *const *const c_char,
    maxprocs: *const c_int,
    info_keyval_sizes: *const c_int,
    info_keyval_vectors: *const *const PMI_keyval_t,
    preput_keyval_size: c_int,
    preput_keyval_vector: *const PMI_keyval_t,
    errors: *mut c_int,
) -> c_int {
    use fastpmi_capi::spawn as sp;
    guard("PMI_Spawn_multiple", || {
        let s = current()?;
        // SAFETY: the arrays and strings (of the block and its closures) follow
        // the caller contract above.
        let cmds = unsafe {
            sp::commands(
                count,
                cmds,
                maxprocs,
                |i| sp::args_until_null(sp::at_or(argvs, i, std::ptr::null())),
                |i| sp::info(info_keyval_sizes, info_keyval_vectors, i),
            )?
        };
        // SAFETY: `preput_keyval_size` pairs in the vector (caller contract).
        let preput = unsafe { sp::preput(preput_keyval_size, preput_keyval_vector, |kv| kv)? };
        let req = sp::SpawnRequest { cmds, preput };
        // SAFETY: `errors` per the caller contract; no job id out in PMI-1.
        unsafe { sp::run(&s, req, errors, std::ptr::null_mut(), 0) }
    })
}
