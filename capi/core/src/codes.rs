//! PMI return codes (the client's [`fastpmi_client::codes`], the values of
//! `pmi2.h` and `pmi.h`, identical except that PMI-1 has no `ERR_OTHER`),
//! the C libraries' size limits, and the one place client errors map to
//! codes.

use std::ffi::c_int;

use fastpmi_client::codec;
pub use fastpmi_client::codes::{
    ERR_INIT, ERR_INVALID_ARG, ERR_INVALID_ARGS, ERR_INVALID_KEY, ERR_INVALID_KEYVALP,
    ERR_INVALID_KEY_LENGTH, ERR_INVALID_LENGTH, ERR_INVALID_NUM_ARGS, ERR_INVALID_NUM_PARSED,
    ERR_INVALID_SIZE, ERR_INVALID_VAL, ERR_INVALID_VAL_LENGTH, ERR_NOMEM, ERR_OTHER, FAIL, SUCCESS,
};
use fastpmi_client::PmiError;

/// A PMI return code (PMI-2 numbering), as the C functions return it: the
/// client's codes are `i32`, which is `c_int` here.
pub type Rc = c_int;

/// Longest key (bytes, without the NUL): `PMI2_MAX_KEYLEN`.
pub const MAX_KEYLEN: usize = codec::KEYLEN_MAX;
/// Longest value through the C ABI (bytes, without the NUL):
/// `PMI2_MAX_VALLEN`. The Rust API allows more on shared memory; C callers
/// size their buffers by this constant.
pub const MAX_VALLEN: usize = codec::VALLEN_MAX;
/// Longest job id / kvsname the libraries hand out (PMI-1
/// `PMI_KVS_Get_name_length_max`, `PMI_Get_id_length_max`), NUL included:
/// the `kvsname_max` the server announces.
pub const MAX_NAMELEN: usize = codec::KVSNAME_MAX;
/// Size of the port buffer `PMI_Lookup_name` fills (`PMI_MAX_PORT_NAME`).
pub const MAX_PORT_NAME: usize = 1024;

/// The code of a client error, logged with what failed: at warning level
/// (shown by default) when the server refused the request or the call is
/// not supported by this server, so the C caller sees the server's reason
/// next to the code; at debug level otherwise (the code says it all).
pub fn from_client(what: &str, e: &PmiError) -> Rc {
    match e {
        PmiError::Server { .. } | PmiError::Unsupported(_) => tracing::warn!("{what}: {e}"),
        _ => tracing::debug!("{what}: {e}"),
    }
    code_of(e)
}

/// The code of a client error, without logging it.
pub fn code_of(e: &PmiError) -> Rc {
    match e.code() {
        c @ ERR_INIT..=ERR_OTHER => c,
        _ => ERR_OTHER,
    }
}

/// PMI-1 has no `ERR_OTHER`: an unspecified failure is `PMI_FAIL`.
pub fn to_pmi1(rc: Rc) -> Rc {
    if rc == ERR_OTHER {
        FAIL
    } else {
        rc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_errors_map_to_one_code_each() {
        assert_eq!(
            from_client("t", &PmiError::InvalidArg("x".into())),
            ERR_INVALID_ARG
        );
        assert_eq!(from_client("t", &PmiError::Finalized), ERR_INIT);
        assert_eq!(from_client("t", &PmiError::Protocol("x".into())), ERR_OTHER);
        assert_eq!(to_pmi1(ERR_OTHER), FAIL);
        assert_eq!(to_pmi1(ERR_INVALID_KEY), ERR_INVALID_KEY);
    }
}
