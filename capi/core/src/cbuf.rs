//! C strings and buffers: the only place (besides the `extern "C"`
//! functions themselves) that dereferences pointers handed in by C.
//!
//! Inputs are read with a bound: a key is scanned for at most
//! [`MAX_KEYLEN`] + 1 bytes, so an overlong key is reported as
//! `INVALID_KEY_LENGTH` without walking the whole string. Outputs are always
//! NUL-terminated inside the caller's stated capacity.

use std::ffi::{c_char, c_int};

use crate::codes::*;

/// The bytes of the NUL-terminated string at `p` if it is at most `max`
/// bytes long; `Err(true)` if it is longer, `Err(false)` if `p` is NULL.
/// Reads at most `max + 1` bytes.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string, or to at least
/// `max + 1` readable bytes, that stays valid and unchanged for `'a`.
pub unsafe fn bounded<'a>(p: *const c_char, max: usize) -> Result<&'a [u8], bool> {
    if p.is_null() {
        return Err(false);
    }
    let mut n = 0;
    // SAFETY: the caller guarantees that the bytes up to the NUL, or the
    // first `max + 1` bytes, are readable; the loop never reads past either.
    while unsafe { *p.add(n) } != 0 {
        if n == max {
            return Err(true);
        }
        n += 1;
    }
    // SAFETY: the `n` bytes before the NUL were just read, so they are valid
    // for reads; the caller keeps them alive and unchanged for `'a`.
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n) })
}

/// Up to `max` bytes of the NUL-terminated string at `p` (the rest is
/// cut), as text with invalid UTF-8 replaced; empty for NULL. For messages.
///
/// # Safety
/// As [`bounded`].
pub unsafe fn lossy(p: *const c_char, max: usize) -> String {
    if p.is_null() {
        return String::new();
    }
    let mut n = 0;
    // SAFETY: as in `bounded`: stops at the NUL or after `max` bytes.
    while n < max && unsafe { *p.add(n) } != 0 {
        n += 1;
    }
    // SAFETY: the `n` bytes were just read.
    let b = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n) };
    String::from_utf8_lossy(b).into_owned()
}

/// A key argument: NULL is `INVALID_ARG`, longer than [`MAX_KEYLEN`] is
/// `INVALID_KEY_LENGTH`, empty or with a character the wire formats cannot
/// carry (`=`, `;`, blanks) is `INVALID_KEY`.
///
/// # Safety
/// As [`bounded`] with `max = MAX_KEYLEN`.
pub unsafe fn key<'a>(p: *const c_char) -> Result<&'a [u8], Rc> {
    // SAFETY: forwarded caller contract.
    let k = unsafe { bounded(p, MAX_KEYLEN) }.map_err(|long| {
        if long {
            ERR_INVALID_KEY_LENGTH
        } else {
            ERR_INVALID_ARG
        }
    })?;
    if k.is_empty()
        || k.iter()
            .any(|&b| b == b'=' || b == b';' || b.is_ascii_whitespace())
    {
        return Err(ERR_INVALID_KEY);
    }
    Ok(k)
}

/// A value argument: NULL is `INVALID_ARG`, longer than [`MAX_VALLEN`] is
/// `INVALID_VAL_LENGTH`, a newline (which no wire format can carry) is
/// `INVALID_VAL`. Empty values are allowed.
///
/// # Safety
/// As [`bounded`] with `max = MAX_VALLEN`.
pub unsafe fn value<'a>(p: *const c_char) -> Result<&'a [u8], Rc> {
    // SAFETY: forwarded caller contract.
    unsafe { value_max(p, MAX_VALLEN) }
}

/// Like [`value`], but at most `max` bytes (a caller whose value travels
/// with extra bytes has less room).
///
/// # Safety
/// As [`bounded`].
pub unsafe fn value_max<'a>(p: *const c_char, max: usize) -> Result<&'a [u8], Rc> {
    // SAFETY: forwarded caller contract.
    let v = unsafe { bounded(p, max) }.map_err(|long| {
        if long {
            ERR_INVALID_VAL_LENGTH
        } else {
            ERR_INVALID_ARG
        }
    })?;
    if v.contains(&b'\n') {
        return Err(ERR_INVALID_VAL);
    }
    Ok(v)
}

/// A name argument (job id, kvsname, service, port) as UTF-8 text of at
/// most `max` bytes: NULL is `INVALID_ARG`, too long `INVALID_LENGTH`, not
/// UTF-8 `INVALID_VAL`.
///
/// # Safety
/// As [`bounded`].
pub unsafe fn text<'a>(p: *const c_char, max: usize) -> Result<&'a str, Rc> {
    // SAFETY: forwarded caller contract.
    let b = unsafe { bounded(p, max) }.map_err(|long| {
        if long {
            ERR_INVALID_LENGTH
        } else {
            ERR_INVALID_ARG
        }
    })?;
    std::str::from_utf8(b).map_err(|_| ERR_INVALID_VAL)
}

/// Like [`text`], but NULL is `None` (an optional argument).
///
/// # Safety
/// As [`bounded`].
pub unsafe fn opt_text<'a>(p: *const c_char, max: usize) -> Result<Option<&'a str>, Rc> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: forwarded caller contract.
    unsafe { text(p, max) }.map(Some)
}

/// A capacity argument (`int maxvalue`, `int length`): positive, else
/// `INVALID_LENGTH`.
pub fn capacity(n: c_int) -> Result<usize, Rc> {
    if n > 0 {
        Ok(n as usize)
    } else {
        Err(ERR_INVALID_LENGTH)
    }
}

/// Copy `src` into the buffer `dst` of `cap` bytes as a NUL-terminated
/// string, truncated to `cap - 1` bytes if needed. Returns whether all of
/// `src` fit. Nothing is written when `cap` is 0.
///
/// # Safety
/// `dst` is non-NULL and valid for writes of `cap` bytes, and does not
/// overlap `src`.
pub unsafe fn copy_out(dst: *mut c_char, cap: usize, src: &[u8]) -> bool {
    if cap == 0 {
        // Not even the NUL fits.
        return false;
    }
    let n = src.len().min(cap - 1);
    // SAFETY: `n + 1 <= cap` bytes are written, all inside the caller's
    // buffer; `src` is a distinct Rust allocation or borrowed input.
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), dst.cast::<u8>(), n);
        *dst.add(n) = 0;
    }
    n == src.len()
}

/// Store `v` through an output pointer: NULL is `INVALID_ARG`.
///
/// # Safety
/// `p` is NULL or valid for a write of `T`.
pub unsafe fn put<T>(p: *mut T, v: T) -> Result<(), Rc> {
    if p.is_null() {
        return Err(ERR_INVALID_ARG);
    }
    // SAFETY: non-NULL and valid for writes per the caller contract.
    unsafe { p.write(v) };
    Ok(())
}

/// Check an output pointer before doing work whose result goes there.
pub fn non_null<T>(p: *const T) -> Result<(), Rc> {
    if p.is_null() {
        Err(ERR_INVALID_ARG)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        // SAFETY: literals are NUL-terminated and live for the test.
        unsafe {
            assert_eq!(key(c"abc".as_ptr()), Ok(&b"abc"[..]));
            assert_eq!(key(std::ptr::null()), Err(ERR_INVALID_ARG));
            assert_eq!(key(c"".as_ptr()), Err(ERR_INVALID_KEY));
            assert_eq!(key(c"a=b".as_ptr()), Err(ERR_INVALID_KEY));
            assert_eq!(key(c"a b".as_ptr()), Err(ERR_INVALID_KEY));
            let k64 = std::ffi::CString::new("k".repeat(64)).unwrap();
            assert_eq!(key(k64.as_ptr()).map(<[u8]>::len), Ok(64));
            let k65 = std::ffi::CString::new("k".repeat(65)).unwrap();
            assert_eq!(key(k65.as_ptr()), Err(ERR_INVALID_KEY_LENGTH));
        }
    }

    #[test]
    fn values() {
        // SAFETY: CStrings are NUL-terminated and outlive the calls.
        unsafe {
            assert_eq!(value(c"".as_ptr()), Ok(&b""[..]));
            assert_eq!(value(c"a\nb".as_ptr()), Err(ERR_INVALID_VAL));
            let v = std::ffi::CString::new("v".repeat(1024)).unwrap();
            assert!(value(v.as_ptr()).is_ok());
            let v = std::ffi::CString::new("v".repeat(1025)).unwrap();
            assert_eq!(value(v.as_ptr()), Err(ERR_INVALID_VAL_LENGTH));
        }
    }

    #[test]
    fn copy_out_truncates_and_terminates() {
        let mut buf = [b'x' as c_char; 8];
        // SAFETY: `buf` holds 8 bytes; each call states at most 8.
        unsafe {
            assert!(copy_out(buf.as_mut_ptr(), 8, b"1234567"));
            assert_eq!(buf[7], 0);
            assert!(!copy_out(buf.as_mut_ptr(), 4, b"abcdef"));
            assert_eq!(
                &buf[..4],
                &[b'a' as c_char, b'b' as c_char, b'c' as c_char, 0]
            );
            assert_eq!(buf[4], b'5' as c_char);
            assert!(!copy_out(buf.as_mut_ptr(), 0, b"a"));
        }
    }
}
