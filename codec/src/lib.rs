//! PMI-1 and PMI-2 wire codecs, shared by the server and the Rust client.
//!
//! Pure functions from bytes to typed messages and back: no sockets here.
//! [`frame::Deframer`] cuts a byte stream into frames (a PMI-1 line, an
//! `mcmd=spawn` block, or a PMI-2 length-prefixed body); [`pmi1`] and
//! [`pmi2`] turn a frame into a [`Message`] (command plus key/value pairs)
//! and encode replies; [`command`] maps a [`Message`] to a typed
//! [`command::Request`] and a [`command::Response`] back to wire pairs.

pub mod auth;
pub mod codes;
// The command table's machinery: its macros serve `command`, `group` and
// `spawn`, so it comes first.
#[macro_use]
pub mod form;
pub mod command;
pub mod continued;
pub mod frame;
pub mod group;
pub mod names;
pub mod oob;
pub mod pmi1;
pub mod pmi2;
pub mod ranks;
pub mod spawn;

pub use command::{Request, Response};
pub use frame::{Deframer, Frame};

/// Limits every fastpmi server advertises and enforces on the wire.
pub const KVSNAME_MAX: usize = 256;
/// Longest key accepted (PMI2_MAX_KEYLEN).
pub const KEYLEN_MAX: usize = 64;
/// Longest value accepted over the wire (PMI2_MAX_VALLEN).
pub const VALLEN_MAX: usize = 1024;
/// Longest value fastpmi's launcher keeps for a client that speaks
/// continued commands (docs/continued.md); others are held to
/// [`VALLEN_MAX`].
pub const LARGE_VALUE_MAX: usize = 16 << 20;
/// Longest PMI-1 line the server reads (newer MPICH sends put lines > 1024 bytes).
pub const PMI1_LINE_MAX: usize = 64 * 1024;
/// Longest PMI-1 `mcmd=spawn` block (all its lines).
pub const SPAWN_BLOCK_MAX: usize = 1 << 20;
/// Longest PMI-2 message body (what a 6-digit length header can say).
pub const PMI2_BODY_MAX: usize = 999_999;
/// Replies to MPICH 4.0 must stay under this (it reads 1024-byte lines).
pub const PMI1_REPLY_MAX: usize = 1023;

/// Which protocol a message was framed in; replies use the same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    Pmi1,
    Pmi2,
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Protocol::Pmi1 => "PMI-1",
            Protocol::Pmi2 => "PMI-2",
        })
    }
}

/// A decoded message: the command name, an optional PMI-2 `thrid`, and the
/// remaining pairs in wire order. Lookups return the first occurrence of a
/// key, because MPICH 3.3–4.0 append garbage that may repeat keys.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Message {
    pub cmd: String,
    pub thrid: Option<Vec<u8>>,
    pub pairs: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Message {
    pub fn new(cmd: impl Into<String>) -> Self {
        Message {
            cmd: cmd.into(),
            thrid: None,
            pairs: Vec::new(),
        }
    }

    /// Builder-style append of a pair.
    pub fn with(mut self, key: &str, value: impl AsRef<[u8]>) -> Self {
        self.pairs
            .push((key.as_bytes().to_vec(), value.as_ref().to_vec()));
        self
    }

    pub fn push(&mut self, key: &str, value: impl AsRef<[u8]>) {
        self.pairs
            .push((key.as_bytes().to_vec(), value.as_ref().to_vec()));
    }

    /// First value of `key`, as bytes.
    pub fn get(&self, key: &str) -> Option<&[u8]> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key.as_bytes())
            .map(|(_, v)| v.as_slice())
    }

    /// First value of `key` as UTF-8 text.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(|v| std::str::from_utf8(v).ok())
    }

    /// First value of `key` parsed as an integer.
    pub fn get_int(&self, key: &str) -> Option<i64> {
        self.get_str(key).and_then(|s| s.trim().parse().ok())
    }

    /// First value of `key` as a PMI boolean (`TRUE`/`FALSE`, any case).
    pub fn get_bool(&self, key: &str) -> Option<bool> {
        let v = self.get_str(key)?;
        if v.eq_ignore_ascii_case("true") || v == "1" {
            Some(true)
        } else if v.eq_ignore_ascii_case("false") || v == "0" {
            Some(false)
        } else {
            None
        }
    }
}

/// Why bytes could not be decoded. Each maps to one error reply on the wire.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("PMI-1 line longer than {max} bytes")]
    LineTooLong { max: usize },
    #[error("bad PMI-2 length header {0:?}")]
    BadLength(String),
    #[error("message does not start with cmd=")]
    NoCommand,
    #[error("malformed token {0:?} (expected key=value)")]
    BadToken(String),
    #[error("command name is not valid text")]
    BadCommandName,
    #[error("unknown command {0:?}")]
    UnknownCommand(String),
    #[error("missing required key {key:?} in {cmd}")]
    MissingKey { cmd: String, key: &'static str },
    #[error("bad value for {key:?} in {cmd}: {value:?}")]
    BadValue {
        cmd: String,
        key: &'static str,
        value: String,
    },
    #[error("key of {len} bytes exceeds the limit of {max}")]
    KeyTooLong { len: usize, max: usize },
    #[error("value of {len} bytes exceeds the limit of {max}")]
    ValueTooLong { len: usize, max: usize },
    #[error("empty key")]
    EmptyKey,
    #[error("malformed spawn request: {0}")]
    BadSpawn(String),
    #[error("mcmd=spawn block longer than {max} bytes")]
    SpawnTooLong { max: usize },
    #[error("connection closed in the middle of a message")]
    Truncated,
}

/// Printable form of wire bytes for logs (lossy, control bytes escaped).
pub fn show(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() {
                s.extend(c.escape_default());
            } else {
                s.push(c);
            }
        }
        for b in chunk.invalid() {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s
}
