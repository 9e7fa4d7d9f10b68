//! How node servers trade their pairs through the outer job's KVS: the
//! reserved keys, the packing of many pairs into few values, and one
//! trade (put, outer fence, get) per fence of the ranks.
//!
//! With fastpmi outside, a node's new pairs go in one `kvs-putall` and
//! come back in one `kvs-getall` (docs/dynamic-jobs.md). Other servers
//! (Slurm's `slurmstepd`, Hydra) take values of at most 1024 bytes: there a
//! node's pairs are packed into one byte string (key and value lengths,
//! then their bytes), cut into values of base64 text, and put under keys
//! named by round, node and part, with the count of parts under its own.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use fastpmi_client::{Pmi, PmiError};

/// A key and its value.
pub(super) type Pair = (Vec<u8>, Vec<u8>);

/// Every key node servers put in the outer KVS starts so; such pairs are
/// never copied into a node's segment.
pub(super) const RESERVED: &str = fastpmi_codec::names::attr::NEST_KEY_PREFIX;

/// The card of a node server that is not fault tolerant.
const NOT_TOLERANT: &str = "off";

/// Base64 characters per outer value: under every server's 1024 bytes
/// (`PMI2_MAX_VALLEN`), whatever it counts in.
const CHUNK_CHARS: usize = 1000;

/// Bytes of pairs per `kvs-putall`: under the server's bound
/// (`PUTALL_BYTES_MAX`, 64 MiB) with room for the framing.
const PUTALL_BYTES: usize = 16 << 20;

/// Why a trade failed (the job then fails on every node).
#[derive(Debug, thiserror::Error)]
pub(in crate::launcher) enum TradeError {
    #[error("the outer PMI server: {0}")]
    Outer(#[from] PmiError),
    #[error("node server {node} put {what} that cannot be read: {why}")]
    Garbled {
        node: u32,
        what: String,
        why: String,
    },
    #[error("node server {node} did not put {what}")]
    Missing { node: u32, what: String },
}

/// One node server's view of the outer job.
pub(super) struct Trader<'a> {
    pub(super) outer: &'a Pmi,
    /// This node server's rank in the outer job.
    pub(super) node: u32,
    pub(super) nodes: u32,
}

impl Trader<'_> {
    /// Every node server's rank count, in outer rank order, and its mesh
    /// card (fault-tolerant jobs, [`super::mesh`]; `None`: not tolerant):
    /// the first trade, before any rank starts.
    pub(super) fn counts(
        &self,
        local: u32,
        card: Option<&str>,
    ) -> Result<(Vec<u32>, Vec<Option<String>>), TradeError> {
        let key = |n: u32| format!("{RESERVED}size-{n}");
        let card_key = |n: u32| format!("{RESERVED}ft-{n}");
        self.outer.put(key(self.node), local.to_string())?;
        self.outer
            .put(card_key(self.node), card.unwrap_or(NOT_TOLERANT))?;
        self.outer.fence()?;
        let mut counts = Vec::with_capacity(self.nodes as usize);
        let mut cards = Vec::with_capacity(self.nodes as usize);
        for n in 0..self.nodes {
            let what = format!("its rank count ({})", key(n));
            let v = self
                .outer
                .get(key(n), Some(n))?
                .ok_or(TradeError::Missing {
                    node: n,
                    what: what.clone(),
                })?;
            let count = std::str::from_utf8(&v)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| TradeError::Garbled {
                    node: n,
                    what,
                    why: format!("{:?}", String::from_utf8_lossy(&v)),
                })?;
            counts.push(count);
            let c = self.outer.get(card_key(n), Some(n))?;
            cards.push(
                c.filter(|c| c != NOT_TOLERANT.as_bytes())
                    .map(|c| String::from_utf8_lossy(&c).into_owned()),
            );
        }
        Ok((counts, cards))
    }

    /// Trade round `round`: put `mine` (this node's new pairs), fence the
    /// outer job, and return the pairs the others put (with fastpmi
    /// outside: every pair of the outer KVS but the reserved ones), and
    /// whether the round was a fence of every node's ranks. `broken`: this
    /// node's ranks did not all arrive (a rank died); a node server then
    /// trades only so that none is left waiting in the outer fence, and
    /// the others must not release their ranks.
    pub(super) fn round(
        &self,
        round: u64,
        mine: &[Pair],
        broken: bool,
    ) -> Result<(Vec<Pair>, bool), TradeError> {
        let marker = format!("{RESERVED}broken-r{round}").into_bytes();
        if self.outer.server_is_fastpmi() {
            let mut mine = mine.to_vec();
            if broken {
                mine.push((marker.clone(), b"1".to_vec()));
            }
            self.putall(&mine)?;
            self.outer.fence()?;
            let all = self.outer.kvs_getall(None)?;
            let whole = !all.iter().any(|(k, _)| *k == marker);
            return Ok((
                all.into_iter()
                    .filter(|(k, _)| !k.starts_with(RESERVED.as_bytes()))
                    .collect(),
                whole,
            ));
        }
        let mut mine = mine.to_vec();
        if broken {
            mine.push((marker.clone(), b"1".to_vec()));
        }
        let text = URL_SAFE_NO_PAD.encode(pack(&mine));
        let parts: Vec<&str> = text
            .as_bytes()
            .chunks(CHUNK_CHARS)
            .map(|c| std::str::from_utf8(c).unwrap_or_default())
            .collect();
        let count_key = |n: u32| format!("{RESERVED}r{round}-n{n}");
        for (i, p) in parts.iter().enumerate() {
            self.outer.put(format!("{}-{i}", count_key(self.node)), p)?;
        }
        self.outer
            .put(count_key(self.node), parts.len().to_string())?;
        self.outer.fence()?;
        let mut theirs = Vec::new();
        for n in (0..self.nodes).filter(|&n| n != self.node) {
            let garbled = |what: &str, why: String| TradeError::Garbled {
                node: n,
                what: what.to_string(),
                why,
            };
            let what = format!("its pairs of round {round}");
            let count =
                self.outer
                    .get(count_key(n), Some(n))?
                    .ok_or_else(|| TradeError::Missing {
                        node: n,
                        what: what.clone(),
                    })?;
            let count: usize = std::str::from_utf8(&count)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| garbled(&what, "its part count is not a number".into()))?;
            let mut text = Vec::with_capacity(count * CHUNK_CHARS);
            for i in 0..count {
                let part = self
                    .outer
                    .get(format!("{}-{i}", count_key(n)), Some(n))?
                    .ok_or_else(|| TradeError::Missing {
                        node: n,
                        what: format!("part {i} of {what}"),
                    })?;
                text.extend_from_slice(&part);
            }
            let bytes = URL_SAFE_NO_PAD
                .decode(&text)
                .map_err(|e| garbled(&what, e.to_string()))?;
            theirs.extend(unpack(&bytes).map_err(|e| garbled(&what, e.to_string()))?);
        }
        let whole = !broken && !theirs.iter().any(|(k, _)| *k == marker);
        theirs.retain(|(k, _)| !k.starts_with(RESERVED.as_bytes()));
        Ok((theirs, whole))
    }

    fn putall(&self, mine: &[Pair]) -> Result<(), TradeError> {
        let mut batch: Vec<(&[u8], &[u8])> = Vec::new();
        let mut bytes = 0;
        for (k, v) in mine {
            if bytes + k.len() + v.len() > PUTALL_BYTES && !batch.is_empty() {
                self.outer.kvs_putall(&batch)?;
                batch.clear();
                bytes = 0;
            }
            bytes += k.len() + v.len();
            batch.push((k, v));
        }
        if !batch.is_empty() {
            self.outer.kvs_putall(&batch)?;
        }
        Ok(())
    }
}

/// Pairs as one byte string: per pair its key's length (u16) and value's
/// (u32), little endian, then the key and the value.
pub(super) fn pack(pairs: &[Pair]) -> Vec<u8> {
    let mut out = Vec::with_capacity(pairs.iter().map(|(k, v)| 6 + k.len() + v.len()).sum());
    for (k, v) in pairs {
        // Keys are at most 64 bytes and values 16 MiB (the store's limits).
        out.extend_from_slice(&(k.len() as u16).to_le_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(k);
        out.extend_from_slice(v);
    }
    out
}

/// Why a byte string is not [`pack`]'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum Unpacked {
    #[error("{0} bytes left, not a pair")]
    Short(usize),
    #[error("a pair of {key}+{value} bytes with {left} left")]
    Cut {
        key: usize,
        value: usize,
        left: usize,
    },
}

/// The pairs of [`pack`]'s byte string, or why it is not one.
pub(super) fn unpack(mut b: &[u8]) -> Result<Vec<Pair>, Unpacked> {
    let mut pairs = Vec::new();
    while !b.is_empty() {
        if b.len() < 6 {
            return Err(Unpacked::Short(b.len()));
        }
        let kl = u16::from_le_bytes([b[0], b[1]]) as usize;
        let vl = u32::from_le_bytes([b[2], b[3], b[4], b[5]]) as usize;
        let rest = &b[6..];
        if rest.len() < kl.saturating_add(vl) {
            return Err(Unpacked::Cut {
                key: kl,
                value: vl,
                left: rest.len(),
            });
        }
        pairs.push((rest[..kl].to_vec(), rest[kl..kl + vl].to_vec()));
        b = &rest[kl + vl..];
    }
    Ok(pairs)
}

/// `PMI_process_mapping` of a job whose node server `n` runs `counts[n]`
/// ranks, in blocks: runs of nodes with the same count are one entry
/// (`(vector,(0,2,16))` for two nodes of 16).
pub(super) fn mapping(counts: &[u32]) -> String {
    let mut out = String::from("(vector");
    let mut i = 0;
    while i < counts.len() {
        let run = counts[i..].iter().take_while(|&&c| c == counts[i]).count();
        out.push_str(&format!(",({i},{run},{})", counts[i]));
        i += run;
    }
    out.push(')');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_pairs_come_back_whole() {
        let pairs = vec![
            (b"a".to_vec(), b"".to_vec()),
            (b"bc".to_vec(), vec![0u8, 59, 61, 255]),
            (vec![b'k'; 64], vec![7u8; 70_000]),
        ];
        assert_eq!(unpack(&pack(&pairs)).unwrap(), pairs);
        assert_eq!(unpack(&[]).unwrap(), Vec::<Pair>::new());
    }

    #[test]
    fn truncated_packing_is_an_error() {
        let b = pack(&[(b"key".to_vec(), b"value".to_vec())]);
        for cut in 1..b.len() {
            assert!(unpack(&b[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn mapping_has_one_entry_per_run_of_equal_nodes() {
        assert_eq!(mapping(&[16, 16]), "(vector,(0,2,16))");
        assert_eq!(mapping(&[4]), "(vector,(0,1,4))");
        assert_eq!(mapping(&[8, 8, 3, 8]), "(vector,(0,2,8),(2,1,3),(3,1,8))");
    }
}
