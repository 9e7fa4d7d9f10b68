//! Hashes that must agree across processes (and builds): the key hash picks
//! the KVS slot, so it is part of the segment format and feeds the layout
//! hash ([`crate::layout::LAYOUT_HASH`]).

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a, 64 bits.
pub const fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h = FNV_OFFSET;
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(FNV_PRIME);
        i += 1;
    }
    h
}

/// The hash a KVS key is stored under: FNV-1a followed by the MurmurHash3
/// finaliser, because FNV alone spreads keys that differ only in their last
/// bytes ("P12-bc", "P13-bc") poorly over the low bits that pick the slot.
pub const fn key_hash(key: &[u8]) -> u64 {
    let mut h = fnv1a64(key);
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

/// FNV-1a over a sequence of numbers (each fed as 8 little-endian bytes), for
/// the layout stamp.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fnv(u64);

#[cfg_attr(loom, allow(dead_code))]
impl Fnv {
    pub(crate) const fn new() -> Self {
        Self(FNV_OFFSET)
    }

    pub(crate) const fn push(self, value: u64) -> Self {
        let bytes = value.to_le_bytes();
        let mut h = self.0;
        let mut i = 0;
        while i < 8 {
            h ^= bytes[i] as u64;
            h = h.wrapping_mul(FNV_PRIME);
            i += 1;
        }
        Self(h)
    }

    pub(crate) const fn finish(self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_reference_values() {
        // Published FNV-1a 64 test vectors.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn key_hash_is_stable() {
        // Pinned: changing the key hash changes where keys live, i.e. the
        // segment format, and must come with a layout version bump.
        assert_eq!(key_hash(b"P0-businesscard"), key_hash(b"P0-businesscard"));
        assert_ne!(key_hash(b"P0-businesscard"), key_hash(b"P1-businesscard"));
        // FNV-1a + murmur3 fmix64, computed independently.
        assert_eq!(key_hash(b"fastpmi"), 0x0711_5e5b_c971_2228);
    }
}
