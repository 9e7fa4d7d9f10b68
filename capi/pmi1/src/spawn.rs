//! Starting new jobs: `PMI_Spawn_multiple`.

use std::ffi::{c_char, c_int};

use fastpmi_capi::cbuf;
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
    use fastpmi_capi::spawn::{self as sp, at};
    guard("PMI_Spawn_multiple", || {
        let s = current()?;
        // SAFETY (the block and its closures): the arrays and strings follow
        // the caller contract above; `at` reads element i of a checked array.
        let cmds = unsafe {
            sp::commands(
                count,
                cmds,
                maxprocs,
                |i| {
                    let argv = if argvs.is_null() {
                        std::ptr::null()
                    } else {
                        at(argvs, i)
                    };
                    sp::args_until_null(argv)
                },
                |i| {
                    if info_keyval_sizes.is_null() || info_keyval_vectors.is_null() {
                        return Ok(Vec::new());
                    }
                    let arr = at(info_keyval_vectors, i);
                    sp::pairs(at(info_keyval_sizes, i), |j| {
                        cbuf::non_null(arr)?;
                        let kv = &*arr.add(j);
                        Ok((sp::string(kv.key)?, sp::string(kv.val)?))
                    })
                },
            )?
        };
        let preput = if preput_keyval_size > 0 {
            cbuf::non_null(preput_keyval_vector)?;
            sp::pairs(preput_keyval_size, |j| {
                // SAFETY: `preput_keyval_size` pairs (caller contract).
                unsafe {
                    let kv = &*preput_keyval_vector.add(j);
                    Ok((sp::string(kv.key)?, sp::string(kv.val)?))
                }
            })?
        } else {
            Vec::new()
        };
        let req = sp::SpawnRequest { cmds, preput };
        // SAFETY: `errors` per the caller contract; no job id out in PMI-1.
        unsafe { sp::run(&s, req, errors, std::ptr::null_mut(), 0) }
    })
}
