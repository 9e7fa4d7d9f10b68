//! Continued commands: a PMI-2 message whose body is longer than one frame
//! can say ([`crate::PMI2_BODY_MAX`], the 6-digit length) travels as parts,
//! in either direction (docs/continued.md):
//!
//! ```text
//! cmd=continued;[thrid=T;]contid=I;contdata=CHUNK;contpart=K;contparts=N;
//! ```
//!
//! `CHUNK` is the next slice of the whole body (`cmd=spawn;...;` as it
//! would be framed), `K` runs from 1 to `N`, and `I` tells concurrent
//! continuations of one connection apart. The receiver ([`Reassembly`])
//! concatenates the chunks and decodes the body as one message; it bounds
//! what it holds and drops a continuation idle for too long.
//! `contdata` comes before `contpart`/`contparts` so that no escaped `;`
//! of the data ends up where an over-long MPICH body's garbage starts.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::{pmi2, Message, PMI2_BODY_MAX};

/// The command name of a part.
pub const CONTINUED: &str = "continued";
/// The `fullinit` key by which fastpmi's client says it reads continued
/// replies.
pub const FULLINIT_KEY: &str = "fastpmi-continued";
/// How a part's body starts (`cmd` is always its first pair).
pub const PART_PREFIX: &[u8] = b"cmd=continued;";
/// Escaped data bytes per part (the rest of the body stays well under
/// [`PMI2_BODY_MAX`] with the other keys and a thrid of our own).
pub const PART_DATA_MAX: usize = 900_000;
/// Longest whole body of one continued message.
pub const BODY_MAX: usize = 64 << 20;
/// Most parts of one continued message.
pub const PARTS_MAX: u64 = 1 + (BODY_MAX / (PART_DATA_MAX / 2)) as u64;
/// Continuations one connection may have in progress at once.
pub const IN_PROGRESS_MAX: usize = 16;
/// Bytes one connection may hold in unfinished continuations.
pub const HELD_MAX: usize = BODY_MAX;
/// A continuation with no part for this long is dropped.
pub const IDLE_MAX: Duration = Duration::from_secs(30);
/// Longest continuation id.
pub const ID_MAX: usize = 64;

/// `body` (a PMI-2 body) as frames to send: itself when it fits one, else
/// its parts under continuation id `id`, each carrying `thrid` when short.
pub fn frames(body: Vec<u8>, id: &str, thrid: Option<&[u8]>) -> Vec<Vec<u8>> {
    if body.len() <= PMI2_BODY_MAX {
        let mut f = Vec::with_capacity(6 + body.len());
        f.extend_from_slice(format!("{:>6}", body.len()).as_bytes());
        f.extend_from_slice(&body);
        return vec![f];
    }
    let mut chunks = Vec::new();
    let mut start = 0;
    while start < body.len() {
        let (mut end, mut escaped) = (start, 0);
        while end < body.len() && escaped < PART_DATA_MAX {
            escaped += if body[end] == b';' { 2 } else { 1 };
            end += 1;
        }
        chunks.push(&body[start..end]);
        start = end;
    }
    let n = chunks.len();
    chunks
        .into_iter()
        .enumerate()
        .map(|(k, chunk)| {
            let mut m = Message::new(CONTINUED)
                .with("contid", id)
                .with("contdata", chunk)
                .with("contpart", (k + 1).to_string())
                .with("contparts", n.to_string());
            m.thrid = thrid.filter(|t| t.len() <= ID_MAX).map(<[u8]>::to_vec);
            pmi2::encode(&m)
        })
        .collect()
}

/// Why a part was refused; the continuation it belongs to is dropped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContError {
    #[error("continued part without {0}")]
    Missing(&'static str),
    #[error("continued part: bad {key} {value:?}")]
    Bad { key: &'static str, value: String },
    #[error("continuation {id}: part {got} where part {want} was due")]
    OutOfOrder { id: String, got: u64, want: u64 },
    #[error("continuation {id}: {parts} parts (at most {PARTS_MAX})")]
    TooManyParts { id: String, parts: u64 },
    #[error("continuation {id}: more than {BODY_MAX} bytes")]
    TooLong { id: String },
    #[error("{IN_PROGRESS_MAX} continuations already in progress on this connection")]
    TooMany,
    #[error("unfinished continuations would hold more than {HELD_MAX} bytes")]
    HeldTooMuch,
    #[error("continuation {id}: {got} of {parts} parts, then nothing for {secs} s: dropped")]
    Expired {
        id: String,
        got: u64,
        parts: u64,
        secs: u64,
    },
}

struct Partial {
    parts: u64,
    next: u64,
    body: Vec<u8>,
    last: Instant,
    /// The part's thrid, for an error about it later (expiry).
    thrid: Option<Vec<u8>>,
}

/// One connection's continuations in progress.
#[derive(Default)]
pub struct Reassembly {
    partial: HashMap<String, Partial>,
    held: usize,
}

impl Reassembly {
    /// Whether any continuation is in progress.
    pub fn is_empty(&self) -> bool {
        self.partial.is_empty()
    }

    /// Bytes held in unfinished continuations.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Take part `m` (a `cmd=continued` message) at time `now`: the whole
    /// body once its last part came. An error drops the continuation.
    pub fn feed(&mut self, m: &Message, now: Instant) -> Result<Option<Vec<u8>>, ContError> {
        let id = m.get_str("contid").ok_or(ContError::Missing("contid"))?;
        if id.is_empty() || id.len() > ID_MAX {
            return Err(ContError::Bad {
                key: "contid",
                value: crate::show(id.as_bytes()),
            });
        }
        let r = self.take(id, m, now);
        if r.is_err() {
            self.drop_id(id);
        }
        r
    }

    fn take(&mut self, id: &str, m: &Message, now: Instant) -> Result<Option<Vec<u8>>, ContError> {
        let num = |key: &'static str| -> Result<u64, ContError> {
            let v = m.get_str(key).ok_or(ContError::Missing(key))?;
            v.parse::<u64>()
                .ok()
                .filter(|&n| n >= 1)
                .ok_or_else(|| ContError::Bad {
                    key,
                    value: v.to_string(),
                })
        };
        let (part, parts) = (num("contpart")?, num("contparts")?);
        let data = m.get("contdata").ok_or(ContError::Missing("contdata"))?;
        let id_s = id.to_string();
        if parts > PARTS_MAX {
            return Err(ContError::TooManyParts { id: id_s, parts });
        }
        if !self.partial.contains_key(id) {
            if part != 1 {
                return Err(ContError::OutOfOrder {
                    id: id_s,
                    got: part,
                    want: 1,
                });
            }
            if self.partial.len() >= IN_PROGRESS_MAX {
                return Err(ContError::TooMany);
            }
            self.partial.insert(
                id_s.clone(),
                Partial {
                    parts,
                    next: 1,
                    body: Vec::new(),
                    last: now,
                    thrid: None,
                },
            );
        }
        let p = self.partial.get_mut(id).expect("inserted above");
        if part != p.next || parts != p.parts {
            return Err(ContError::OutOfOrder {
                id: id_s,
                got: part,
                want: p.next,
            });
        }
        if p.body.len() + data.len() > BODY_MAX {
            return Err(ContError::TooLong { id: id_s });
        }
        if self.held + data.len() > HELD_MAX {
            return Err(ContError::HeldTooMuch);
        }
        p.body.extend_from_slice(data);
        p.next += 1;
        p.last = now;
        p.thrid = m.thrid.clone();
        self.held += data.len();
        if part < parts {
            return Ok(None);
        }
        let done = self.partial.remove(id).expect("present");
        self.held -= done.body.len();
        Ok(Some(done.body))
    }

    fn drop_id(&mut self, id: &str) {
        if let Some(p) = self.partial.remove(id) {
            self.held -= p.body.len();
        }
    }

    /// Drop continuations with no part since `now - IDLE_MAX`: each with
    /// its error and the thrid of its last part.
    pub fn expire(&mut self, now: Instant) -> Vec<(ContError, Option<Vec<u8>>)> {
        let old: Vec<String> = self
            .partial
            .iter()
            .filter(|(_, p)| now.saturating_duration_since(p.last) > IDLE_MAX)
            .map(|(id, _)| id.clone())
            .collect();
        old.into_iter()
            .filter_map(|id| {
                let p = self.partial.remove(&id)?;
                self.held -= p.body.len();
                Some((
                    ContError::Expired {
                        id,
                        got: p.next - 1,
                        parts: p.parts,
                        secs: IDLE_MAX.as_secs(),
                    },
                    p.thrid,
                ))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Deframer;
    use crate::Frame;

    /// A body of `n` bytes full of `;` (the worst case for escaping).
    fn body(n: usize) -> Vec<u8> {
        let mut b = b"cmd=kvs-put;key=k;value=".to_vec();
        while b.len() < n {
            b.extend_from_slice(b"a;b;;c=d ");
        }
        b.push(b';');
        b
    }

    fn parts_of(frames: &[Vec<u8>]) -> Vec<Message> {
        let mut d = Deframer::new();
        for f in frames {
            d.feed(f);
        }
        let mut out = Vec::new();
        while let Some(Frame::Pmi2(b)) = d.next_frame().unwrap() {
            out.push(pmi2::decode(&b).unwrap());
        }
        out
    }

    #[test]
    fn a_short_body_is_one_ordinary_frame() {
        let f = frames(b"cmd=kvs-fence;".to_vec(), "1", None);
        assert_eq!(f, vec![b"    14cmd=kvs-fence;".to_vec()]);
    }

    #[test]
    fn a_long_body_goes_in_parts_and_comes_back_whole() {
        let b = body(2_500_000);
        let f = frames(b.clone(), "7", Some(b"t1"));
        assert!(f.len() >= 3, "{} parts", f.len());
        for frame in &f {
            assert!(frame.len() - 6 <= PMI2_BODY_MAX);
        }
        let parts = parts_of(&f);
        assert_eq!(parts.len(), f.len());
        let mut r = Reassembly::default();
        let now = Instant::now();
        for (i, p) in parts.iter().enumerate() {
            assert_eq!(p.cmd, CONTINUED);
            assert_eq!(p.thrid.as_deref(), Some(&b"t1"[..]));
            let got = r.feed(p, now).unwrap();
            if i + 1 < parts.len() {
                assert!(got.is_none());
            } else {
                assert_eq!(got.as_deref(), Some(&b[..]));
            }
        }
        assert!(r.is_empty());
        let whole = pmi2::decode(&b).unwrap();
        assert_eq!(whole.cmd, "kvs-put");
    }

    #[test]
    fn interleaved_continuations_are_kept_apart() {
        let (a, b) = (body(1_200_000), body(1_900_000));
        let (pa, pb) = (
            parts_of(&frames(a.clone(), "a", None)),
            parts_of(&frames(b.clone(), "b", None)),
        );
        let mut r = Reassembly::default();
        let now = Instant::now();
        let mut done = Vec::new();
        for i in 0..pa.len().max(pb.len()) {
            for p in [pa.get(i), pb.get(i)].into_iter().flatten() {
                if let Some(x) = r.feed(p, now).unwrap() {
                    done.push(x);
                }
            }
        }
        assert_eq!(done, vec![a, b]);
    }

    fn part(id: &str, k: u64, n: u64, data: &str) -> Message {
        Message::new(CONTINUED)
            .with("contid", id)
            .with("contdata", data)
            .with("contpart", k.to_string())
            .with("contparts", n.to_string())
    }

    #[test]
    fn bad_parts_are_errors_and_drop_their_continuation() {
        let now = Instant::now();
        let mut r = Reassembly::default();
        assert!(matches!(
            r.feed(&part("x", 2, 3, "d"), now),
            Err(ContError::OutOfOrder { want: 1, .. })
        ));
        r.feed(&part("x", 1, 3, "d"), now).unwrap();
        assert!(matches!(
            r.feed(&part("x", 3, 3, "d"), now),
            Err(ContError::OutOfOrder { want: 2, .. })
        ));
        assert!(r.is_empty(), "dropped after the error");
        assert!(matches!(
            r.feed(&part("x", 1, PARTS_MAX + 1, "d"), now),
            Err(ContError::TooManyParts { .. })
        ));
        for bad in [
            Message::new(CONTINUED).with("contdata", "d"),
            part("", 1, 1, "d"),
            part(&"i".repeat(65), 1, 1, "d"),
            part("x", 0, 1, "d"),
            Message::new(CONTINUED)
                .with("contid", "x")
                .with("contpart", "1")
                .with("contparts", "1"),
        ] {
            assert!(r.feed(&bad, now).is_err(), "{bad:?}");
        }
        for i in 0..IN_PROGRESS_MAX {
            r.feed(&part(&i.to_string(), 1, 2, "d"), now).unwrap();
        }
        assert_eq!(
            r.feed(&part("one-more", 1, 2, "d"), now),
            Err(ContError::TooMany)
        );
    }

    #[test]
    fn a_continuation_past_the_bound_is_refused() {
        let now = Instant::now();
        let mut r = Reassembly::default();
        let chunk = "z".repeat(PART_DATA_MAX);
        let n = (BODY_MAX / PART_DATA_MAX + 2) as u64;
        let mut err = None;
        for k in 1..=n {
            if let Err(e) = r.feed(&part("big", k, n, &chunk), now) {
                err = Some((k, e));
                break;
            }
        }
        let (k, e) = err.expect("refused before the end");
        assert_eq!(e, ContError::TooLong { id: "big".into() });
        assert_eq!(k, (BODY_MAX / PART_DATA_MAX + 1) as u64);
        assert!(r.is_empty());
    }

    #[test]
    fn a_continuation_that_never_ends_expires() {
        let t0 = Instant::now();
        let mut r = Reassembly::default();
        let mut p = part("slow", 1, 5, "d");
        p.thrid = Some(b"t9".to_vec());
        r.feed(&p, t0).unwrap();
        r.feed(&part("fresh", 1, 2, "d"), t0 + IDLE_MAX).unwrap();
        assert!(r.expire(t0 + IDLE_MAX).is_empty());
        let gone = r.expire(t0 + IDLE_MAX + Duration::from_secs(1));
        assert_eq!(gone.len(), 1);
        assert!(
            matches!(&gone[0].0, ContError::Expired { id, got: 1, parts: 5, .. } if id == "slow")
        );
        assert_eq!(gone[0].1.as_deref(), Some(&b"t9"[..]));
        assert!(!r.is_empty(), "the fresh one stays");
    }
}
