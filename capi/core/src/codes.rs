//! PMI return codes (the values of `pmi2.h` and `pmi.h`, identical except
//! that PMI-1 has no `ERR_OTHER`) and the one place client errors map to
//! them.

use std::ffi::c_int;

use fastpmi_client::PmiError;

/// A PMI return code (PMI-2 numbering).
pub type Rc = c_int;

pub const SUCCESS: Rc = 0;
pub const FAIL: Rc = -1;
pub const ERR_INIT: Rc = 1;
pub const ERR_NOMEM: Rc = 2;
pub const ERR_INVALID_ARG: Rc = 3;
pub const ERR_INVALID_KEY: Rc = 4;
pub const ERR_INVALID_KEY_LENGTH: Rc = 5;
pub const ERR_INVALID_VAL: Rc = 6;
pub const ERR_INVALID_VAL_LENGTH: Rc = 7;
pub const ERR_INVALID_LENGTH: Rc = 8;
pub const ERR_INVALID_NUM_ARGS: Rc = 9;
pub const ERR_INVALID_ARGS: Rc = 10;
pub const ERR_INVALID_NUM_PARSED: Rc = 11;
pub const ERR_INVALID_KEYVALP: Rc = 12;
pub const ERR_INVALID_SIZE: Rc = 13;
/// PMI-2 only; PMI-1 reports it as [`FAIL`].
pub const ERR_OTHER: Rc = 14;

/// Longest key (bytes, without the NUL): `PMI2_MAX_KEYLEN`.
pub const MAX_KEYLEN: usize = 64;
/// Longest value through the C ABI (bytes, without the NUL):
/// `PMI2_MAX_VALLEN`. The Rust API allows more on shared memory; C callers
/// size their buffers by this constant.
pub const MAX_VALLEN: usize = 1024;
/// Longest job id / kvsname the libraries hand out (PMI-1
/// `PMI_KVS_Get_name_length_max`, `PMI_Get_id_length_max`), NUL included.
pub const MAX_NAMELEN: usize = 256;
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
