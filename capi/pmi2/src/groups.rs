//! fastpmi's extension of `libpmi2.so.0` (`include/fastpmi.h`): process
//! groups (`FPMI_Group_*`) and process sets (`FPMI_Pset_*`), over
//! [`fastpmi_client::Pmi`]. Same conventions as the PMI-2 functions, plus
//! `FPMI_ERR_NOT_SUPPORTED` when the PMI server has no group extension
//! (Hydra, slurmstepd) and `FPMI_ERR_PARTIAL` when an invitation was not
//! accepted by everyone (the group is still built from those who joined).

use std::ffi::{c_char, c_int};
use std::time::Duration;

use fastpmi_capi::cbuf;
use fastpmi_capi::codes::*;
use fastpmi_capi::guard;
use fastpmi_capi::session::current;
use fastpmi_client::codec::group;
use fastpmi_client::PmiError;

/// The server has no group extension.
pub const FPMI_ERR_NOT_SUPPORTED: c_int = 20;
/// An invitation was declined or timed out by some invitee.
pub const FPMI_ERR_PARTIAL: c_int = 21;
/// Longest group id (bytes, without the NUL).
const MAX_ID: usize = group::GROUP_ID_MAX;
/// Most ranks a list may have (`n`): the most members a list may name.
const MAX_RANKS: c_int = group::MEMBERS_MAX as c_int;

fn code(what: &str, e: &PmiError) -> c_int {
    match e {
        PmiError::Unsupported(_) => {
            tracing::warn!("{what}: {e}");
            FPMI_ERR_NOT_SUPPORTED
        }
        e => from_client(what, e),
    }
}

trait GCtx<T> {
    fn gctx(self, what: &str) -> Result<T, c_int>;
}

impl<T> GCtx<T> for Result<T, PmiError> {
    fn gctx(self, what: &str) -> Result<T, c_int> {
        self.map_err(|e| code(what, &e))
    }
}

/// # Safety
/// `id` is NULL or a NUL-terminated string.
unsafe fn id_arg<'a>(id: *const c_char) -> Result<&'a str, c_int> {
    // SAFETY: forwarded caller contract.
    unsafe { cbuf::text(id, MAX_ID) }
}

/// # Safety
/// `ranks` is NULL or holds `n` ints.
unsafe fn ranks_arg(ranks: *const c_int, n: c_int) -> Result<Vec<u32>, c_int> {
    if !(0..=MAX_RANKS).contains(&n) {
        return Err(ERR_INVALID_SIZE);
    }
    if n == 0 {
        return Ok(Vec::new());
    }
    cbuf::non_null(ranks)?;
    // SAFETY: non-NULL and `n` ints per the caller contract.
    let s = unsafe { std::slice::from_raw_parts(ranks, n as usize) };
    s.iter()
        .map(|&r| u32::try_from(r).map_err(|_| ERR_INVALID_ARG))
        .collect()
}

fn timeout(ms: c_int) -> Result<Duration, c_int> {
    u64::try_from(ms)
        .map(Duration::from_millis)
        .map_err(|_| ERR_INVALID_ARG)
}

/// # Safety
/// Each pointer is valid for one write of its type (checked non-NULL).
unsafe fn out_group(
    g: &fastpmi_client::Group,
    group_rank: *mut c_int,
    group_size: *mut c_int,
    ctxid: *mut u64,
) -> Result<(), c_int> {
    // SAFETY: caller contract.
    unsafe {
        cbuf::put(group_rank, g.rank as c_int)?;
        cbuf::put(group_size, g.size as c_int)?;
        cbuf::put(ctxid, g.ctxid)?;
    }
    Ok(())
}

/// Build group `id` of ranks `ranks[0..n]` of this job, collectively (every
/// member calls it with the same list). Returns this process's group rank
/// (its position in the list), the group size and the context id.
///
/// # Safety
/// `id` is a NUL-terminated string, `ranks` holds `n` ints, the outputs are
/// valid for one write each.
#[no_mangle]
pub unsafe extern "C" fn FPMI_Group_construct(
    id: *const c_char,
    ranks: *const c_int,
    n: c_int,
    group_rank: *mut c_int,
    group_size: *mut c_int,
    ctxid: *mut u64,
) -> c_int {
    guard("FPMI_Group_construct", ERR_OTHER, || {
        let s = current()?;
        cbuf::non_null(group_rank)?;
        cbuf::non_null(group_size)?;
        cbuf::non_null(ctxid)?;
        // SAFETY: caller contract.
        let (id, ranks) = unsafe { (id_arg(id)?, ranks_arg(ranks, n)?) };
        let g = s
            .pmi
            .group_construct(id, &ranks)
            .gctx("FPMI_Group_construct")?;
        // SAFETY: checked non-NULL above; caller contract.
        unsafe { out_group(&g, group_rank, group_size, ctxid)? };
        Ok(SUCCESS)
    })
}

/// Destruct group `id`, collectively over its members.
///
/// # Safety
/// `id` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn FPMI_Group_destruct(id: *const c_char) -> c_int {
    guard("FPMI_Group_destruct", ERR_OTHER, || {
        let s = current()?;
        // SAFETY: caller contract.
        let id = unsafe { id_arg(id)? };
        s.pmi.group_destruct(id).gctx("FPMI_Group_destruct")?;
        Ok(SUCCESS)
    })
}

/// Barrier over the members of group `id`; afterwards every member's puts
/// made before it are visible.
///
/// # Safety
/// `id` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn FPMI_Group_fence(id: *const c_char) -> c_int {
    guard("FPMI_Group_fence", ERR_OTHER, || {
        let s = current()?;
        // SAFETY: caller contract.
        let id = unsafe { id_arg(id)? };
        s.pmi.group_fence(id).gctx("FPMI_Group_fence")?;
        Ok(SUCCESS)
    })
}

/// Leave group `id`; the other members go on without this process.
///
/// # Safety
/// `id` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn FPMI_Group_leave(id: *const c_char) -> c_int {
    guard("FPMI_Group_leave", ERR_OTHER, || {
        let s = current()?;
        // SAFETY: caller contract.
        let id = unsafe { id_arg(id)? };
        s.pmi.group_leave(id).gctx("FPMI_Group_leave")?;
        Ok(SUCCESS)
    })
}

/// Invite ranks `ranks[0..n]` into group `id` led by this process and wait
/// until each answered or `timeout_ms` passed. The group is built from the
/// leader and those who accepted: `members[0..*nmembers]` gets their ranks
/// in group-rank order (room for `n + 1`), and this process's group rank,
/// the size and context id are returned. `FPMI_ERR_PARTIAL` when someone
/// declined or did not answer (the outputs are still filled).
///
/// # Safety
/// `id` is a NUL-terminated string, `ranks` holds `n` ints, `members` has
/// room for `n + 1` ints, the other outputs are valid for one write.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn FPMI_Group_invite(
    id: *const c_char,
    ranks: *const c_int,
    n: c_int,
    timeout_ms: c_int,
    members: *mut c_int,
    nmembers: *mut c_int,
    group_rank: *mut c_int,
    group_size: *mut c_int,
    ctxid: *mut u64,
) -> c_int {
    guard("FPMI_Group_invite", ERR_OTHER, || {
        let s = current()?;
        for p in [nmembers, group_rank, group_size] {
            cbuf::non_null(p)?;
        }
        cbuf::non_null(members)?;
        cbuf::non_null(ctxid)?;
        // SAFETY: caller contract.
        let (id, ranks) = unsafe { (id_arg(id)?, ranks_arg(ranks, n)?) };
        let inv = s
            .pmi
            .group_invite(id, &ranks, timeout(timeout_ms)?)
            .gctx("FPMI_Group_invite")?;
        let joined: Vec<c_int> = inv.members.iter().map(|m| m.rank as c_int).collect();
        if joined.len() > ranks.len() + 1 {
            return Err(ERR_OTHER);
        }
        // SAFETY: `members` has room for n + 1 >= joined.len() ints; the
        // other outputs were checked non-NULL (caller contract).
        unsafe {
            std::ptr::copy_nonoverlapping(joined.as_ptr(), members, joined.len());
            cbuf::put(nmembers, joined.len() as c_int)?;
            out_group(&inv.group, group_rank, group_size, ctxid)?;
        }
        if inv.declined.is_empty() && inv.timed_out.is_empty() {
            Ok(SUCCESS)
        } else {
            tracing::debug!(
                "FPMI_Group_invite {id}: declined {:?}, no answer {:?}",
                inv.declined,
                inv.timed_out
            );
            Ok(FPMI_ERR_PARTIAL)
        }
    })
}

/// Answer an invitation to group `id` from rank `leader` (waiting up to
/// `timeout_ms` for it). With `accept`, returns once the group is built,
/// with the outputs filled; declining returns at once with `*group_rank`
/// set to -1.
///
/// # Safety
/// `id` is a NUL-terminated string; the outputs are valid for one write.
#[no_mangle]
pub unsafe extern "C" fn FPMI_Group_join(
    id: *const c_char,
    leader: c_int,
    accept: c_int,
    timeout_ms: c_int,
    group_rank: *mut c_int,
    group_size: *mut c_int,
    ctxid: *mut u64,
) -> c_int {
    guard("FPMI_Group_join", ERR_OTHER, || {
        let s = current()?;
        cbuf::non_null(group_rank)?;
        cbuf::non_null(group_size)?;
        cbuf::non_null(ctxid)?;
        // SAFETY: caller contract.
        let id = unsafe { id_arg(id)? };
        let leader = u32::try_from(leader).map_err(|_| ERR_INVALID_ARG)?;
        let g = s
            .pmi
            .group_join(id, leader, accept != 0, timeout(timeout_ms)?)
            .gctx("FPMI_Group_join")?;
        // SAFETY: checked non-NULL; caller contract.
        unsafe {
            match g {
                Some(g) => out_group(&g, group_rank, group_size, ctxid)?,
                None => {
                    cbuf::put(group_rank, -1)?;
                    cbuf::put(group_size, 0)?;
                    cbuf::put(ctxid, 0)?;
                }
            }
        }
        Ok(SUCCESS)
    })
}

/// # Safety
/// `out` valid for `len` bytes.
unsafe fn names_out(out: *mut c_char, len: c_int, names: &[String]) -> Result<c_int, c_int> {
    cbuf::non_null(out)?;
    let cap = cbuf::capacity(len)?;
    // SAFETY: caller contract.
    let fits = unsafe { cbuf::copy_out(out, cap, names.join(",").as_bytes()) };
    Ok(if fits { SUCCESS } else { ERR_NOMEM })
}

/// The job's process set names, comma-separated ("" when there are none).
///
/// # Safety
/// `names` is valid for writing `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn FPMI_Pset_names(names: *mut c_char, len: c_int) -> c_int {
    guard("FPMI_Pset_names", ERR_OTHER, || {
        let s = current()?;
        let v = s.pmi.pset_names().gctx("FPMI_Pset_names")?;
        // SAFETY: caller contract.
        unsafe { names_out(names, len, &v) }
    })
}

/// The process sets this rank is in, comma-separated ("" for none).
///
/// # Safety
/// `names` is valid for writing `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn FPMI_Pset_mine(names: *mut c_char, len: c_int) -> c_int {
    guard("FPMI_Pset_mine", ERR_OTHER, || {
        let s = current()?;
        let v = s.pmi.my_psets().gctx("FPMI_Pset_mine")?;
        // SAFETY: caller contract.
        unsafe { names_out(names, len, &v) }
    })
}

/// The ranks of process set `name`: `*found` 0 if there is no such set;
/// else up to `maxranks` ranks in `ranks` and their total in `*nranks`
/// (`PMI2_ERR_NOMEM` when they did not all fit).
///
/// # Safety
/// `name` is a NUL-terminated string, `ranks` has room for `maxranks` ints,
/// `nranks` and `found` are valid for one write.
#[no_mangle]
pub unsafe extern "C" fn FPMI_Pset_members(
    name: *const c_char,
    ranks: *mut c_int,
    maxranks: c_int,
    nranks: *mut c_int,
    found: *mut c_int,
) -> c_int {
    guard("FPMI_Pset_members", ERR_OTHER, || {
        let s = current()?;
        cbuf::non_null(ranks)?;
        cbuf::non_null(nranks)?;
        cbuf::non_null(found)?;
        let cap = cbuf::capacity(maxranks)?;
        // SAFETY: caller contract.
        let name = unsafe { cbuf::text(name, fastpmi_client::codec::KEYLEN_MAX)? };
        let m = s.pmi.pset_members(name).gctx("FPMI_Pset_members")?;
        // SAFETY: checked non-NULL; `ranks` has room for `cap` ints.
        unsafe {
            match m {
                None => {
                    cbuf::put(found, 0)?;
                    cbuf::put(nranks, 0)?;
                    Ok(SUCCESS)
                }
                Some(v) => {
                    cbuf::put(found, 1)?;
                    cbuf::put(nranks, v.len() as c_int)?;
                    let k = v.len().min(cap);
                    for (i, r) in v.iter().take(k).enumerate() {
                        *ranks.add(i) = *r as c_int;
                    }
                    Ok(if k == v.len() { SUCCESS } else { ERR_NOMEM })
                }
            }
        }
    })
}
