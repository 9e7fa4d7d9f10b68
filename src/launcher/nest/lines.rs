//! The lines fault-tolerant node servers say to each other
//! ([`super::mesh`]): `died RANK KIND CODE`, `stop ROUND`, `bye`; and the
//! comparison of a peer's token.

use fastpmi_server::deaths::DeathCause;
use sha2::{Digest, Sha256};

pub(super) fn died_line(rank: u32, cause: DeathCause) -> String {
    let (kind, code) = match cause {
        DeathCause::Exited(c) => ("exited", c),
        DeathCause::Signaled(s) => ("signaled", s),
        DeathCause::Aborted(c) => ("aborted", c),
        DeathCause::ConnectionLost => ("lost", 0),
        DeathCause::NodeLost => ("node", 0),
    };
    format!("died {rank} {kind} {code}")
}

/// One line from an established peer.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Line {
    Died { rank: u32, cause: DeathCause },
    Stop(u64),
    Bye,
}

pub(super) fn parse_line(l: &str) -> Option<Line> {
    let w: Vec<&str> = l.split(' ').collect();
    match w.as_slice() {
        ["died", rank, kind, code] => {
            let code: i32 = code.parse().ok()?;
            let cause = match *kind {
                "exited" => DeathCause::Exited(code),
                "signaled" => DeathCause::Signaled(code),
                "aborted" => DeathCause::Aborted(code),
                "lost" => DeathCause::ConnectionLost,
                "node" => DeathCause::NodeLost,
                _ => return None,
            };
            Some(Line::Died {
                rank: rank.parse().ok()?,
                cause,
            })
        }
        ["stop", round] => Some(Line::Stop(round.parse().ok()?)),
        ["bye"] => Some(Line::Bye),
        _ => None,
    }
}

pub(super) fn same_token(a: &str, b: &str) -> bool {
    // Compared as digests: how long a prefix matched tells nothing.
    Sha256::digest(a.as_bytes()) == Sha256::digest(b.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_garbage_is_refused() {
        for c in [
            DeathCause::Exited(3),
            DeathCause::Signaled(9),
            DeathCause::Aborted(-1),
            DeathCause::ConnectionLost,
            DeathCause::NodeLost,
        ] {
            assert_eq!(
                parse_line(&died_line(17, c)),
                Some(Line::Died { rank: 17, cause: c })
            );
        }
        assert_eq!(parse_line("stop 4"), Some(Line::Stop(4)));
        assert_eq!(parse_line("bye"), Some(Line::Bye));
        for bad in [
            "",
            "died",
            "died x exited 1",
            "died 1 eaten 1",
            "stop -1",
            "bye now",
        ] {
            assert_eq!(parse_line(bad), None, "{bad:?}");
        }
    }
}
