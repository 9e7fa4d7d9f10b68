//! Spawn from C: reading the argument arrays of `PMI2_Job_Spawn` (Slurm's
//! ABI: info pairs as arrays of `MPID_Info`, pre-put pairs as an array of
//! pointers to `MPID_Info`) and `PMI_Spawn_multiple` (MPICH's ABI: arrays of
//! `PMI_keyval_t`), running the spawn, and writing the error codes back.

use std::ffi::{c_char, c_int};

pub use fastpmi_client::codec::spawn::{SPAWN_MAX_ARGS, SPAWN_MAX_CMDS, SPAWN_MAX_PAIRS};
pub use fastpmi_client::{SpawnCmd, SpawnRequest};

use crate::cbuf;
use crate::codes::*;
use crate::session::Session;

/// Longest program name, argument, info key or value read from C.
const STRING_MAX: usize = 64 * 1024;

/// Slurm's `struct MPID_Info` (`slurm/pmi2.h`).
#[repr(C)]
pub struct MpidInfo {
    pub handle: c_int,
    pub pobj_mutex: c_int,
    pub ref_count: c_int,
    pub next: *const MpidInfo,
    pub key: *const c_char,
    pub value: *const c_char,
}

/// What an info or pre-put element is read as: a key and a value string.
pub trait Pair {
    fn key(&self) -> *const c_char;
    fn value(&self) -> *const c_char;
}

impl Pair for MpidInfo {
    fn key(&self) -> *const c_char {
        self.key
    }
    fn value(&self) -> *const c_char {
        self.value
    }
}

/// A count from C: within `0..=max`, else `INVALID_ARG`.
pub fn count(n: c_int, max: usize, what: &str) -> Result<usize, Rc> {
    if n < 0 || n as usize > max {
        tracing::debug!("spawn: {what} = {n} (0 to {max})");
        return Err(ERR_INVALID_ARG);
    }
    Ok(n as usize)
}

/// A string from C (NULL or overlong is `INVALID_ARG`).
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
pub unsafe fn string(p: *const c_char) -> Result<String, Rc> {
    // SAFETY: forwarded caller contract.
    let b = unsafe { cbuf::bounded(p, STRING_MAX) }.map_err(|_| ERR_INVALID_ARG)?;
    Ok(String::from_utf8_lossy(b).into_owned())
}

/// Element `i` of a C array.
///
/// # Safety
/// `a` is non-NULL and valid for reading `i + 1` elements.
pub unsafe fn at<T: Copy>(a: *const T, i: usize) -> T {
    // SAFETY: caller contract.
    unsafe { *a.add(i) }
}

/// Element `i` of a C array, or `none` if the array is NULL (an optional
/// per-command array).
///
/// # Safety
/// `a` is NULL or valid for reading `i + 1` elements.
pub unsafe fn at_or<T: Copy>(a: *const T, i: usize, none: T) -> T {
    if a.is_null() {
        return none;
    }
    // SAFETY: non-NULL, so valid for `i + 1` elements (caller contract).
    unsafe { at(a, i) }
}

/// The commands of a spawn: `cmds[i]`, `maxprocs[i]`, and what `argv(i)` and
/// `info(i)` read for command `i`.
///
/// # Safety
/// `cmds` and `maxprocs` are valid for `count` elements; each `cmds[i]` is
/// a NUL-terminated string.
pub unsafe fn commands(
    count: c_int,
    cmds: *const *const c_char,
    maxprocs: *const c_int,
    mut argv: impl FnMut(usize) -> Result<Vec<String>, Rc>,
    mut info: impl FnMut(usize) -> Result<Vec<(String, String)>, Rc>,
) -> Result<Vec<SpawnCmd>, Rc> {
    let n = count_nonzero(count, SPAWN_MAX_CMDS, "count")?;
    cbuf::non_null(cmds)?;
    cbuf::non_null(maxprocs)?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: both arrays hold `count` elements (caller contract).
        let (exe, np) = unsafe { (string(at(cmds, i))?, at(maxprocs, i)) };
        out.push(SpawnCmd {
            exe,
            maxprocs: count_nonzero(
                np,
                fastpmi_client::codec::spawn::SPAWN_MAX_PROCS as usize,
                "maxprocs",
            )? as u32,
            args: argv(i)?,
            info: info(i)?,
        });
    }
    Ok(out)
}

fn count_nonzero(n: c_int, max: usize, what: &str) -> Result<usize, Rc> {
    match count(n, max, what)? {
        0 => {
            tracing::debug!("spawn: {what} = 0");
            Err(ERR_INVALID_ARG)
        }
        n => Ok(n),
    }
}

/// `n` arguments from `argv` (`argv` may be NULL when `n` is 0).
///
/// # Safety
/// `argv` is NULL or valid for `n` NUL-terminated strings.
pub unsafe fn args(argv: *const *const c_char, n: usize) -> Result<Vec<String>, Rc> {
    if n == 0 {
        return Ok(Vec::new());
    }
    cbuf::non_null(argv)?;
    // SAFETY: caller contract.
    (0..n).map(|j| unsafe { string(at(argv, j)) }).collect()
}

/// Arguments of a NULL-terminated `argv` (MPICH's PMI-1 form).
///
/// # Safety
/// `argv` is NULL or a NULL-terminated array of NUL-terminated strings.
pub unsafe fn args_until_null(argv: *const *const c_char) -> Result<Vec<String>, Rc> {
    let mut out = Vec::new();
    if argv.is_null() {
        return Ok(out);
    }
    loop {
        // SAFETY: the array is NULL-terminated; we stop at the NULL.
        let p = unsafe { at(argv, out.len()) };
        if p.is_null() {
            return Ok(out);
        }
        if out.len() >= SPAWN_MAX_ARGS {
            tracing::debug!("spawn: more than {SPAWN_MAX_ARGS} arguments");
            return Err(ERR_INVALID_ARG);
        }
        // SAFETY: a non-NULL element is a string.
        out.push(unsafe { string(p) }?);
    }
}

/// `n` pairs read by `pair(j)`.
pub fn pairs(
    n: c_int,
    mut pair: impl FnMut(usize) -> Result<(String, String), Rc>,
) -> Result<Vec<(String, String)>, Rc> {
    let n = count(n, SPAWN_MAX_PAIRS, "pair count")?;
    (0..n).map(&mut pair).collect()
}

/// `n` pairs, pair `j` read from the element `elem(j)` returns; a NULL
/// element is `INVALID_ARG`.
///
/// # Safety
/// Each non-NULL pointer `elem` returns is valid for reading a `T` whose
/// strings are NULL or NUL-terminated.
unsafe fn pairs_from<T: Pair>(
    n: c_int,
    mut elem: impl FnMut(usize) -> Result<*const T, Rc>,
) -> Result<Vec<(String, String)>, Rc> {
    pairs(n, |j| {
        let kv = elem(j)?;
        cbuf::non_null(kv)?;
        // SAFETY: non-NULL and valid (caller contract).
        let kv = unsafe { &*kv };
        // SAFETY: the strings are NULL or NUL-terminated (caller contract).
        unsafe { Ok((string(kv.key())?, string(kv.value())?)) }
    })
}

/// The info pairs of command `i`: `sizes[i]` pairs in the array
/// `vectors[i]`; none if either array is NULL.
///
/// # Safety
/// `sizes` and `vectors` are NULL or valid for `i + 1` elements;
/// `vectors[i]` is NULL or valid for `sizes[i]` pairs of NUL-terminated
/// strings.
pub unsafe fn info<T: Pair>(
    sizes: *const c_int,
    vectors: *const *const T,
    i: usize,
) -> Result<Vec<(String, String)>, Rc> {
    if sizes.is_null() || vectors.is_null() {
        return Ok(Vec::new());
    }
    // SAFETY: both arrays are non-NULL and hold element `i` (caller contract).
    let (n, arr) = unsafe { (at(sizes, i), at(vectors, i)) };
    // SAFETY: `arr` is checked non-NULL before it is indexed, and holds
    // `n` pairs (caller contract).
    unsafe {
        pairs_from(n, |j| {
            cbuf::non_null(arr)?;
            Ok(arr.add(j))
        })
    }
}

/// The pre-put pairs: `n` elements of `v`, the pair of each read through
/// `pair` (the element itself in MPICH's ABI, a pointer in Slurm's); none
/// if `n` is not positive.
///
/// # Safety
/// `v` is NULL or valid for `n` elements; `pair` returns NULL or a pointer
/// valid for reading a pair of NUL-terminated strings.
pub unsafe fn preput<E, T: Pair>(
    n: c_int,
    v: *const E,
    pair: impl Fn(*const E) -> *const T,
) -> Result<Vec<(String, String)>, Rc> {
    if n <= 0 {
        return Ok(Vec::new());
    }
    cbuf::non_null(v)?;
    // SAFETY: `v` is non-NULL and holds `n` elements (caller contract).
    unsafe { pairs_from(n, |j| Ok(pair(v.add(j)))) }
}

/// Run the spawn and fill `errors` (one per process) and the job id.
///
/// # Safety
/// `errors` is NULL or valid for writing one `int` per requested process;
/// `job_id` is NULL or valid for writing `job_id_size` bytes.
pub unsafe fn run(
    s: &Session,
    req: SpawnRequest,
    errors: *mut c_int,
    job_id: *mut c_char,
    job_id_size: c_int,
) -> Result<Rc, Rc> {
    req.validate().map_err(|e| {
        tracing::debug!("spawn: {e}");
        ERR_INVALID_ARG
    })?;
    let done = s.pmi.spawn(&req).map_err(|e| from_client("spawn", &e))?;
    if !errors.is_null() {
        for (i, &c) in done.errcodes.iter().enumerate() {
            // SAFETY: one int per process (caller contract).
            unsafe { *errors.add(i) = c };
        }
    }
    if !job_id.is_null() && job_id_size > 0 {
        // SAFETY: `job_id_size` writable bytes (caller contract).
        let fits = unsafe { cbuf::copy_out(job_id, job_id_size as usize, done.jobid.as_bytes()) };
        if !fits {
            return Ok(ERR_NOMEM);
        }
    }
    Ok(SUCCESS)
}
