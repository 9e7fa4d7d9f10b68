//! The out-of-band channel: a second connection of a rank on which the
//! server sends what the rank did not ask for (docs/oob.md).
//!
//! The rank opens it with a PMI-1 line, `cmd=init_oob pmi_version=2
//! signal=SIGUSR2` (port mode adds `pmiid=R` and may authenticate as
//! `fullinit` does); every message on it is a PMI-1 line. The server then
//! sends [`Notice`]s, each followed by the signal the rank asked for.

use super::{Message, WireError};

/// The signals a rank may ask for, by name. Only signals a program can
/// catch and that mean nothing else to the kernel: the notice is a request
/// to look at the channel, not a way to stop or kill.
pub const SIGNALS: &[&str] = &[
    "SIGHUP", "SIGINT", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGTERM", "SIGCONT", "SIGURG",
    "SIGWINCH", "SIGIO", "SIGPWR",
];

/// A `signal=` the channel does not send.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("signal {0:?} is not NONE or one of {list}", list = SIGNALS.join(", "))]
pub struct BadSignal(pub String);

/// `signal=` of `init_oob`: `NONE` (no signal), or a name of [`SIGNALS`]
/// with or without its `SIG` prefix, in any case.
pub fn parse_signal(value: &str) -> Result<Option<&'static str>, BadSignal> {
    let v = value.trim().to_ascii_uppercase();
    if v == "NONE" {
        return Ok(None);
    }
    let full = if v.starts_with("SIG") {
        v
    } else {
        format!("SIG{v}")
    };
    SIGNALS
        .iter()
        .find(|s| **s == full)
        .map(|s| Some(*s))
        .ok_or_else(|| BadSignal(value.to_string()))
}

/// The longest abort message sent (a PMI-1 line stays short).
pub const MESSAGE_MAX: usize = 900;

/// What the server tells a rank on its out-of-band channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// The job is being torn down: `rank` of `jobid` failed (None: the
    /// launcher ended it, or a job connected to it failed), with `exitcode`;
    /// `message` says why.
    Abort {
        jobid: String,
        rank: Option<u32>,
        exitcode: i32,
        message: String,
    },
    /// An application-level checkpoint is requested (`fastpmi checkpoint`);
    /// `seq` counts the requests to this job from 1.
    Checkpoint { jobid: String, seq: u64 },
    /// Rank `rank` of `jobid` (this job, or one connected to it: its
    /// parent, a job it spawned) died in a fault-tolerant job, which goes
    /// on; `exitcode` is its status (shell convention), `message` how it
    /// died.
    Died {
        jobid: String,
        rank: u32,
        exitcode: i32,
        message: String,
    },
}

impl Notice {
    /// One PMI-1 line. The abort message runs to the end of the line (as
    /// in a client's `cmd=abort`), so it may hold spaces; newlines become
    /// spaces and it is cut at [`MESSAGE_MAX`] bytes.
    pub fn encode(&self) -> Vec<u8> {
        let m = match self {
            Notice::Abort {
                jobid,
                rank,
                exitcode,
                message,
            } => Message::new("abort")
                .with("jobid", token(jobid))
                .with("rank", rank.map_or("-1".to_string(), |r| r.to_string()))
                .with("exitcode", exitcode.to_string())
                .with("message", line_text(message)),
            Notice::Died {
                jobid,
                rank,
                exitcode,
                message,
            } => Message::new("died")
                .with("jobid", token(jobid))
                .with("rank", rank.to_string())
                .with("exitcode", exitcode.to_string())
                .with("message", line_text(message)),
            Notice::Checkpoint { jobid, seq } => Message::new("checkpoint")
                .with("jobid", token(jobid))
                .with("seq", seq.to_string()),
        };
        super::pmi1::encode(&m)
    }

    /// A notice from its line (`cmd=abort`, `cmd=died` or `cmd=checkpoint`).
    pub fn decode(m: &Message) -> Result<Notice, WireError> {
        let int = |key: &'static str| -> Result<i64, WireError> {
            m.get_int(key).ok_or_else(|| match m.get(key) {
                None => WireError::MissingKey {
                    cmd: m.cmd.clone(),
                    key,
                },
                Some(v) => WireError::BadValue {
                    cmd: m.cmd.clone(),
                    key,
                    value: super::show(v),
                },
            })
        };
        let jobid = m.get_str("jobid").unwrap_or_default().to_string();
        match m.cmd.as_str() {
            "abort" => Ok(Notice::Abort {
                jobid,
                rank: u32::try_from(int("rank")?).ok(),
                exitcode: int("exitcode")?.clamp(i32::MIN as i64, i32::MAX as i64) as i32,
                message: m
                    .get("message")
                    .map(|v| String::from_utf8_lossy(v).into_owned())
                    .unwrap_or_default(),
            }),
            "died" => Ok(Notice::Died {
                jobid,
                rank: u32::try_from(int("rank")?).map_err(|_| WireError::BadValue {
                    cmd: m.cmd.clone(),
                    key: "rank",
                    value: m.get_str("rank").unwrap_or_default().to_string(),
                })?,
                exitcode: int("exitcode")?.clamp(i32::MIN as i64, i32::MAX as i64) as i32,
                message: m
                    .get("message")
                    .map(|v| String::from_utf8_lossy(v).into_owned())
                    .unwrap_or_default(),
            }),
            "checkpoint" => Ok(Notice::Checkpoint {
                jobid,
                seq: u64::try_from(int("seq")?).map_err(|_| WireError::BadValue {
                    cmd: m.cmd.clone(),
                    key: "seq",
                    value: m.get_str("seq").unwrap_or_default().to_string(),
                })?,
            }),
            other => Err(WireError::UnknownCommand(other.to_string())),
        }
    }
}

/// A message as the rest of a PMI-1 line: control characters become
/// spaces, cut at [`MESSAGE_MAX`] bytes.
fn line_text(message: &str) -> String {
    let mut text: String = message
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.len() > MESSAGE_MAX {
        let cut = (0..=MESSAGE_MAX).rev().find(|&i| text.is_char_boundary(i));
        text.truncate(cut.unwrap_or(0));
    }
    text.trim().to_string()
}

/// A value as one PMI-1 token (job ids are, but never trust that).
fn token(v: &str) -> String {
    v.chars()
        .map(|c| if c.is_ascii_graphic() { c } else { '_' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names() {
        assert_eq!(parse_signal("NONE"), Ok(None));
        assert_eq!(parse_signal("none"), Ok(None));
        assert_eq!(parse_signal("SIGUSR2"), Ok(Some("SIGUSR2")));
        assert_eq!(parse_signal("usr1"), Ok(Some("SIGUSR1")));
        for bad in ["SIGKILL", "SIGSTOP", "SIGSEGV", "12", ""] {
            assert_eq!(parse_signal(bad), Err(BadSignal(bad.into())));
        }
    }

    #[test]
    fn notices_round_trip_through_a_line() {
        let abort = Notice::Abort {
            jobid: "fastpmi_12_0".into(),
            rank: Some(3),
            exitcode: 7,
            message: "rank 3 called abort:\nout of memory; giving up".into(),
        };
        let line = abort.encode();
        assert_eq!(
            line,
            b"cmd=abort jobid=fastpmi_12_0 rank=3 exitcode=7 message=rank 3 called abort: out of memory; giving up\n"
        );
        let m = crate::pmi1::decode(&line[..line.len() - 1]).unwrap();
        match Notice::decode(&m).unwrap() {
            Notice::Abort { message, rank, .. } => {
                assert_eq!(rank, Some(3));
                assert_eq!(message, "rank 3 called abort: out of memory; giving up");
            }
            n => panic!("{n:?}"),
        }
        let by_launcher = Notice::Abort {
            jobid: "j".into(),
            rank: None,
            exitcode: 130,
            message: "x".repeat(5000),
        };
        let line = by_launcher.encode();
        assert!(line.len() < MESSAGE_MAX + 100);
        let m = crate::pmi1::decode(&line[..line.len() - 1]).unwrap();
        assert!(matches!(
            Notice::decode(&m).unwrap(),
            Notice::Abort {
                rank: None,
                exitcode: 130,
                ..
            }
        ));
        let cp = Notice::Checkpoint {
            jobid: "j".into(),
            seq: 2,
        };
        let line = cp.encode();
        assert_eq!(line, b"cmd=checkpoint jobid=j seq=2\n");
        let m = crate::pmi1::decode(&line[..line.len() - 1]).unwrap();
        assert_eq!(Notice::decode(&m).unwrap(), cp);
        let died = Notice::Died {
            jobid: "j".into(),
            rank: 5,
            exitcode: 137,
            message: "rank 5 was killed by signal 9 (SIGKILL)".into(),
        };
        let line = died.encode();
        assert_eq!(
            line,
            b"cmd=died jobid=j rank=5 exitcode=137 message=rank 5 was killed by signal 9 (SIGKILL)\n"
        );
        let m = crate::pmi1::decode(&line[..line.len() - 1]).unwrap();
        assert_eq!(Notice::decode(&m).unwrap(), died);
    }

    #[test]
    fn bad_notices_are_errors() {
        for line in [
            "cmd=died jobid=j rank=-1 exitcode=1 message=x",
            "cmd=died jobid=j exitcode=1",
            "cmd=checkpoint jobid=j",
            "cmd=checkpoint jobid=j seq=-1",
            "cmd=abort jobid=j rank=x exitcode=1",
            "cmd=hello",
        ] {
            let m = crate::pmi1::decode(line.as_bytes()).unwrap();
            assert!(Notice::decode(&m).is_err(), "{line}");
        }
    }
}
