//! PMI return codes, named once for the Rust client, the C libraries and
//! the server's error replies (`rc=` on the wire).
//!
//! The values are those of `pmi2.h` (`PMI2_SUCCESS`, `PMI2_ERR_INIT`, ...)
//! and of `pmi.h` (`PMI_SUCCESS`, ...), as MPICH and Slurm ship them: the
//! two numberings are identical except that PMI-1 has no `ERR_OTHER` (a
//! PMI-1 library reports it as [`FAIL`]).

/// A PMI return code (`int` in the C headers).
pub type Code = i32;

pub const SUCCESS: Code = 0;
/// A failure without a more specific code; also the `rc` of the server's
/// error replies.
pub const FAIL: Code = -1;
/// PMI is not initialised (or already finalized).
pub const ERR_INIT: Code = 1;
/// The output buffer is too small.
pub const ERR_NOMEM: Code = 2;
pub const ERR_INVALID_ARG: Code = 3;
pub const ERR_INVALID_KEY: Code = 4;
pub const ERR_INVALID_KEY_LENGTH: Code = 5;
pub const ERR_INVALID_VAL: Code = 6;
pub const ERR_INVALID_VAL_LENGTH: Code = 7;
pub const ERR_INVALID_LENGTH: Code = 8;
pub const ERR_INVALID_NUM_ARGS: Code = 9;
pub const ERR_INVALID_ARGS: Code = 10;
pub const ERR_INVALID_NUM_PARSED: Code = 11;
pub const ERR_INVALID_KEYVALP: Code = 12;
pub const ERR_INVALID_SIZE: Code = 13;
/// Anything else (PMI-2 only; PMI-1 reports it as [`FAIL`]).
pub const ERR_OTHER: Code = 14;

#[cfg(test)]
mod tests {
    use super::*;

    /// The `#define PREFIX... value` lines of one of the repository's
    /// headers, as (name without the prefix, value).
    fn defines(header: &str, prefix: &str) -> Vec<(String, Code)> {
        let path = format!("{}/../include/{header}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        text.lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                (w.next()? == "#define").then_some(())?;
                let name = w.next()?.strip_prefix(prefix)?;
                let value = w.next()?.parse().ok()?;
                Some((name.to_string(), value))
            })
            .filter(|(n, _)| n == "SUCCESS" || n == "FAIL" || n.starts_with("ERR_"))
            .collect()
    }

    #[test]
    fn codes_are_those_of_the_c_headers() {
        let ours = [
            ("SUCCESS", SUCCESS),
            ("FAIL", FAIL),
            ("ERR_INIT", ERR_INIT),
            ("ERR_NOMEM", ERR_NOMEM),
            ("ERR_INVALID_ARG", ERR_INVALID_ARG),
            ("ERR_INVALID_KEY", ERR_INVALID_KEY),
            ("ERR_INVALID_KEY_LENGTH", ERR_INVALID_KEY_LENGTH),
            ("ERR_INVALID_VAL", ERR_INVALID_VAL),
            ("ERR_INVALID_VAL_LENGTH", ERR_INVALID_VAL_LENGTH),
            ("ERR_INVALID_LENGTH", ERR_INVALID_LENGTH),
            ("ERR_INVALID_NUM_ARGS", ERR_INVALID_NUM_ARGS),
            ("ERR_INVALID_ARGS", ERR_INVALID_ARGS),
            ("ERR_INVALID_NUM_PARSED", ERR_INVALID_NUM_PARSED),
            ("ERR_INVALID_KEYVALP", ERR_INVALID_KEYVALP),
            ("ERR_INVALID_SIZE", ERR_INVALID_SIZE),
            ("ERR_OTHER", ERR_OTHER),
        ];
        let pmi2 = defines("pmi2.h", "PMI2_");
        assert_eq!(pmi2.len(), ours.len(), "{pmi2:?}");
        for (name, value) in &pmi2 {
            assert!(
                ours.contains(&(name.as_str(), *value)),
                "PMI2_{name} {value}"
            );
        }
        // PMI-1: the same, without ERR_OTHER.
        let pmi1 = defines("pmi.h", "PMI_");
        assert_eq!(pmi1.len(), ours.len() - 1, "{pmi1:?}");
        for (name, value) in &pmi1 {
            assert!(
                ours.contains(&(name.as_str(), *value)),
                "PMI_{name} {value}"
            );
        }
    }
}
