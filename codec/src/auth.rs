//! Port-mode authentication: the challenge-response of the PMI-2 wire
//! protocol (`fullinit;authtype=challenge-sha256;` -> `auth-response;
//! authinfo=N;` -> `auth-response-complete;authinfo=H;`), where H is the
//! hex SHA-256 of the job's secret followed by N. Shared by the server and
//! the client; the hash comes from the `sha2` crate.

use sha2::{Digest, Sha256};

/// The one `authtype` fastpmi speaks.
pub const AUTHTYPE: &str = "challenge-sha256";

/// The client's answer to challenge `nonce`.
pub fn answer(secret: &str, nonce: &str) -> String {
    let mut h = Sha256::new();
    h.update(secret.as_bytes());
    h.update(nonce.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `got` answers `nonce` for `secret`. Compares every byte, so the
/// time taken does not tell how much of a guess was right.
pub fn verify(secret: &str, nonce: &str, got: &[u8]) -> bool {
    let want = answer(secret, nonce);
    if want.len() != got.len() {
        return false;
    }
    want.bytes()
        .zip(got.iter())
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_is_sha256_of_secret_then_nonce() {
        // sha256("abc") from FIPS 180-2.
        assert_eq!(
            answer("a", "bc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(verify("s", "42", answer("s", "42").as_bytes()));
        assert!(!verify("s", "42", answer("t", "42").as_bytes()));
        assert!(!verify("s", "42", b"short"));
    }
}
