//! How one field of a request is read from a message and written to one:
//! the kinds the command table (`crate::command`) names for each field.
//!
//! A kind is a type, never a value: the table says `key: Key = "key"`, and
//! the generated decoder calls `<Key as Field>::read(msg, "key")`. Most
//! kinds serve several commands; the few that serve one say which, and
//! why it needs its own.

use crate::{Message, WireError, KEYLEN_MAX};

/// Reading and writing one field under its wire key.
pub trait Field {
    /// The type of the request's field.
    type Value;
    /// The field's value in `msg` (a missing optional field is not an error).
    fn read(msg: &Message, key: &'static str) -> Result<Self::Value, WireError>;
    /// Appends the field to `msg`, or nothing where the kind leaves it out.
    fn write(value: &Self::Value, msg: &mut Message, key: &'static str);
}

fn need<'a>(msg: &'a Message, key: &'static str) -> Result<&'a [u8], WireError> {
    msg.get(key).ok_or_else(|| WireError::MissingKey {
        cmd: msg.cmd.clone(),
        key,
    })
}

fn need_str(msg: &Message, key: &'static str) -> Result<String, WireError> {
    let v = need(msg, key)?;
    std::str::from_utf8(v)
        .map(str::to_string)
        .map_err(|_| WireError::BadValue {
            cmd: msg.cmd.clone(),
            key,
            value: crate::show(v),
        })
}

fn need_int(msg: &Message, key: &'static str) -> Result<i64, WireError> {
    let v = need_str(msg, key)?;
    v.trim().parse().map_err(|_| WireError::BadValue {
        cmd: msg.cmd.clone(),
        key,
        value: v,
    })
}

/// Absent or empty: `None`.
fn opt_int(msg: &Message, key: &'static str) -> Result<Option<i64>, WireError> {
    match msg.get(key) {
        None | Some([]) => Ok(None),
        Some(_) => need_int(msg, key).map(Some),
    }
}

/// Present, non-empty text: `Some`.
fn opt_text(msg: &Message, key: &'static str) -> Option<String> {
    msg.get_str(key)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn clamp_u32(n: i64) -> u32 {
    n.clamp(0, u32::MAX as i64) as u32
}

/// A KVS or attribute key: required, not empty, at most [`KEYLEN_MAX`].
pub struct Key;

impl Field for Key {
    type Value = Vec<u8>;
    fn read(msg: &Message, key: &'static str) -> Result<Vec<u8>, WireError> {
        let k = need(msg, key)?;
        if k.is_empty() {
            return Err(WireError::EmptyKey);
        }
        if k.len() > KEYLEN_MAX {
            return Err(WireError::KeyTooLong {
                len: k.len(),
                max: KEYLEN_MAX,
            });
        }
        Ok(k.to_vec())
    }
    fn write(value: &Vec<u8>, msg: &mut Message, key: &'static str) {
        msg.push(key, value);
    }
}

/// Required bytes, as sent (a value, an answer to a challenge).
pub struct Bytes;

impl Field for Bytes {
    type Value = Vec<u8>;
    fn read(msg: &Message, key: &'static str) -> Result<Vec<u8>, WireError> {
        need(msg, key).map(<[u8]>::to_vec)
    }
    fn write(value: &Vec<u8>, msg: &mut Message, key: &'static str) {
        msg.push(key, value);
    }
}

/// Required UTF-8 text.
pub struct Text;

impl Field for Text {
    type Value = String;
    fn read(msg: &Message, key: &'static str) -> Result<String, WireError> {
        need_str(msg, key)
    }
    fn write(value: &String, msg: &mut Message, key: &'static str) {
        msg.push(key, value);
    }
}

/// Optional text; empty counts as absent, and absent is not written.
pub struct OptText;

impl Field for OptText {
    type Value = Option<String>;
    fn read(msg: &Message, key: &'static str) -> Result<Option<String>, WireError> {
        Ok(opt_text(msg, key))
    }
    fn write(value: &Option<String>, msg: &mut Message, key: &'static str) {
        if let Some(v) = value {
            msg.push(key, v);
        }
    }
}

/// Optional text that is always written, `None` as empty (PMI-2
/// `kvs-get`'s `jobid=`, which clients send empty for their own job).
pub struct TextOrEmpty;

impl Field for TextOrEmpty {
    type Value = Option<String>;
    fn read(msg: &Message, key: &'static str) -> Result<Option<String>, WireError> {
        Ok(opt_text(msg, key))
    }
    fn write(value: &Option<String>, msg: &mut Message, key: &'static str) {
        msg.push(key, value.as_deref().unwrap_or(""));
    }
}

/// Optional text kept as sent, empty included (PMI-1 `get`'s `kvsname=`:
/// the server reads an empty name as the caller's job either way).
pub struct TextAsSent;

impl Field for TextAsSent {
    type Value = Option<String>;
    fn read(msg: &Message, key: &'static str) -> Result<Option<String>, WireError> {
        Ok(msg.get_str(key).map(str::to_string))
    }
    fn write(value: &Option<String>, msg: &mut Message, key: &'static str) {
        if let Some(v) = value {
            msg.push(key, v);
        }
    }
}

/// Text as sent, any bytes shown lossily; absent is empty (abort messages:
/// a rank's last words are kept, whatever their encoding).
pub struct Lossy;

impl Field for Lossy {
    type Value = String;
    fn read(msg: &Message, key: &'static str) -> Result<String, WireError> {
        Ok(msg
            .get(key)
            .map(|m| String::from_utf8_lossy(m).into_owned())
            .unwrap_or_default())
    }
    fn write(value: &String, msg: &mut Message, key: &'static str) {
        msg.push(key, value);
    }
}

/// PMI-2 `abort`'s message: under `key`, or `msg` (Slurm's and older
/// MPICH's clients), written without `;` (nobody's server decodes `;;`).
pub struct AbortMessage;

impl Field for AbortMessage {
    type Value = String;
    fn read(msg: &Message, key: &'static str) -> Result<String, WireError> {
        Ok(msg
            .get(key)
            .or_else(|| msg.get("msg"))
            .map(|m| String::from_utf8_lossy(m).into_owned())
            .unwrap_or_default())
    }
    fn write(value: &String, msg: &mut Message, key: &'static str) {
        msg.push(key, value.replace(';', ","));
    }
}

/// A required integer.
pub struct Int;

impl Field for Int {
    type Value = i64;
    fn read(msg: &Message, key: &'static str) -> Result<i64, WireError> {
        need_int(msg, key)
    }
    fn write(value: &i64, msg: &mut Message, key: &'static str) {
        msg.push(key, value.to_string());
    }
}

/// An optional integer; empty counts as absent, and absent is not written.
pub struct OptInt;

impl Field for OptInt {
    type Value = Option<i64>;
    fn read(msg: &Message, key: &'static str) -> Result<Option<i64>, WireError> {
        opt_int(msg, key)
    }
    fn write(value: &Option<i64>, msg: &mut Message, key: &'static str) {
        if let Some(v) = value {
            msg.push(key, v.to_string());
        }
    }
}

/// An optional integer always written, `None` as `D` (PMI-2's `srcid=-1`,
/// "any"; PMI-1's abort `exitcode=1`, which its clients always send).
pub struct IntOr<const D: i64>;

impl<const D: i64> Field for IntOr<D> {
    type Value = Option<i64>;
    fn read(msg: &Message, key: &'static str) -> Result<Option<i64>, WireError> {
        opt_int(msg, key)
    }
    fn write(value: &Option<i64>, msg: &mut Message, key: &'static str) {
        msg.push(key, value.unwrap_or(D).to_string());
    }
}

/// A protocol version: required, held to `u32`.
pub struct Version;

impl Field for Version {
    type Value = u32;
    fn read(msg: &Message, key: &'static str) -> Result<u32, WireError> {
        need_int(msg, key).map(clamp_u32)
    }
    fn write(value: &u32, msg: &mut Message, key: &'static str) {
        msg.push(key, value.to_string());
    }
}

/// A protocol subversion: 0 when absent, held to `u32`.
pub struct Subversion;

impl Field for Subversion {
    type Value = u32;
    fn read(msg: &Message, key: &'static str) -> Result<u32, WireError> {
        Ok(clamp_u32(opt_int(msg, key)?.unwrap_or(0)))
    }
    fn write(value: &u32, msg: &mut Message, key: &'static str) {
        msg.push(key, value.to_string());
    }
}

/// A count of what follows: a non-negative integer.
pub struct Count;

impl Field for Count {
    type Value = u64;
    fn read(msg: &Message, key: &'static str) -> Result<u64, WireError> {
        match need_int(msg, key)? {
            n if n >= 0 => Ok(n as u64),
            n => Err(WireError::BadValue {
                cmd: msg.cmd.clone(),
                key,
                value: n.to_string(),
            }),
        }
    }
    fn write(value: &u64, msg: &mut Message, key: &'static str) {
        msg.push(key, value.to_string());
    }
}

/// A PMI boolean, `D` when absent or unreadable; always written.
pub struct Flag<const D: bool>;

impl<const D: bool> Field for Flag<D> {
    type Value = bool;
    fn read(msg: &Message, key: &'static str) -> Result<bool, WireError> {
        Ok(msg.get_bool(key).unwrap_or(D))
    }
    fn write(value: &bool, msg: &mut Message, key: &'static str) {
        msg.push(key, bool_str(*value));
    }
}

/// A PMI boolean written only when set: a key only some servers know
/// (`fastpmi-continued`), which the others must never see.
pub struct Marker;

impl Field for Marker {
    type Value = bool;
    fn read(msg: &Message, key: &'static str) -> Result<bool, WireError> {
        Ok(msg.get_bool(key).unwrap_or(false))
    }
    fn write(value: &bool, msg: &mut Message, key: &'static str) {
        if *value {
            msg.push(key, bool_str(true));
        }
    }
}

/// `fullinit`'s rank: `key` (`pmirank`), or `srcid` where Slurm's client
/// has only `PMI_ID` to go by; written under `key` only.
pub struct RankOrSrcid;

impl Field for RankOrSrcid {
    type Value = Option<i64>;
    fn read(msg: &Message, key: &'static str) -> Result<Option<i64>, WireError> {
        match opt_int(msg, key)? {
            Some(r) => Ok(Some(r)),
            None => opt_int(msg, "srcid"),
        }
    }
    fn write(value: &Option<i64>, msg: &mut Message, key: &'static str) {
        OptInt::write(value, msg, key);
    }
}

/// `init_oob`'s signal: `NONE` or a name of [`crate::oob::SIGNALS`].
pub struct Signal;

impl Field for Signal {
    type Value = Option<&'static str>;
    fn read(msg: &Message, key: &'static str) -> Result<Option<&'static str>, WireError> {
        let v = need_str(msg, key)?;
        crate::oob::parse_signal(&v).map_err(|_| WireError::BadValue {
            cmd: msg.cmd.clone(),
            key,
            value: v,
        })
    }
    fn write(value: &Option<&'static str>, msg: &mut Message, key: &'static str) {
        msg.push(key, value.unwrap_or("NONE"));
    }
}

/// A flag's wire spelling.
pub(crate) fn bool_str(b: bool) -> &'static str {
    if b {
        "TRUE"
    } else {
        "FALSE"
    }
}
