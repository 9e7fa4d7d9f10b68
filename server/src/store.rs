//! The store behind the wire server: KVS, node attributes and fence
//! accounting of one job, behind one narrow trait.
//!
//! [`MemStore`] keeps everything in the launcher's memory. The shared-memory
//! job segment implements the same trait, so socket ranks and shared-memory
//! ranks of one job share one table and one barrier without the protocol
//! code knowing which backing is in use.

use std::collections::HashMap;

mod api;
pub mod shm;
pub use api::{FenceTicket, Store, StoreError};
pub use shm::ShmStore;

use api::large_fits;

/// In-launcher store: hash maps and an arrival counter.
#[derive(Debug)]
pub struct MemStore {
    size: u32,
    max_value: usize,
    kvs: HashMap<Vec<u8>, Vec<u8>>,
    node_attrs: HashMap<Vec<u8>, Vec<u8>>,
    arrived: u32,
    completed: u64,
    /// Total bytes of keys and values held, bounded by `capacity`.
    bytes: usize,
    capacity: usize,
    aborted: Option<(i32, u32)>,
}

impl MemStore {
    /// A store for a job of `size` ranks. Capacity scales with the job
    /// (64 KiB per rank, at least 64 MiB) so a runaway client gets a
    /// "full" error instead of exhausting the launcher's memory.
    pub fn new(size: u32, max_value: usize) -> Self {
        MemStore {
            size: size.max(1),
            max_value,
            kvs: HashMap::new(),
            node_attrs: HashMap::new(),
            arrived: 0,
            completed: 0,
            bytes: 0,
            capacity: (size as usize * 64 * 1024).max(64 << 20),
            aborted: None,
        }
    }

    fn check(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        if let Some((code, rank)) = self.aborted {
            return Err(StoreError::Aborted { code, rank });
        }
        if key.is_empty() {
            return Err(StoreError::EmptyKey);
        }
        if key.len() > fastpmi_codec::KEYLEN_MAX {
            return Err(StoreError::KeyTooLong {
                len: key.len(),
                max: fastpmi_codec::KEYLEN_MAX,
            });
        }
        if value.len() > self.max_value {
            return Err(StoreError::ValueTooLong {
                len: value.len(),
                max: self.max_value,
            });
        }
        if self.bytes + key.len() + value.len() > self.capacity {
            return Err(StoreError::Full(format!("{} bytes in use", self.bytes)));
        }
        Ok(())
    }
}

fn insert(map: &mut HashMap<Vec<u8>, Vec<u8>>, bytes: &mut usize, key: &[u8], value: &[u8]) {
    *bytes += key.len() + value.len();
    if let Some(old) = map.insert(key.to_vec(), value.to_vec()) {
        *bytes -= key.len() + old.len();
    }
}

impl Store for MemStore {
    fn max_value(&self) -> usize {
        self.max_value
    }

    fn put(&mut self, _rank: u32, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.check(key, value)?;
        insert(&mut self.kvs, &mut self.bytes, key, value);
        Ok(())
    }

    fn put_large(&mut self, _rank: u32, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        large_fits(value)?;
        self.check(key, &[])?;
        if self.bytes + key.len() + value.len() > self.capacity {
            return Err(StoreError::Full(format!("{} bytes in use", self.bytes)));
        }
        insert(&mut self.kvs, &mut self.bytes, key, value);
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.kvs.get(key).cloned()
    }

    fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.kvs
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    fn put_node_attr(&mut self, _rank: u32, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.check(key, value)?;
        insert(&mut self.node_attrs, &mut self.bytes, key, value);
        Ok(())
    }

    fn get_node_attr(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.node_attrs.get(key).cloned()
    }

    fn put_launcher_attr(&mut self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        insert(&mut self.node_attrs, &mut self.bytes, key, value);
        Ok(())
    }

    fn fence_arrive(&mut self, _rank: u32) -> Result<FenceTicket, StoreError> {
        if let Some((code, rank)) = self.aborted {
            return Err(StoreError::Aborted { code, rank });
        }
        let ticket = FenceTicket {
            generation: self.completed,
        };
        self.arrived += 1;
        if self.arrived == self.size {
            self.arrived = 0;
            self.completed += 1;
        }
        Ok(ticket)
    }

    fn fence_done(&self, ticket: FenceTicket) -> bool {
        self.completed > ticket.generation
    }

    fn fences_completed(&self) -> u64 {
        self.completed
    }

    fn fence_arrivals(&self) -> u32 {
        self.arrived
    }

    fn abort(&mut self, code: i32, rank: u32) {
        self.aborted.get_or_insert((code, rank));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fence_generations() {
        let mut s = MemStore::new(3, 1024);
        let t0 = s.fence_arrive(0).unwrap();
        s.fence_arrive(1).unwrap();
        assert_eq!(s.fences_completed(), 0);
        s.fence_arrive(2).unwrap();
        assert!(s.fences_completed() > t0.generation);
        let t1 = s.fence_arrive(1).unwrap();
        assert_eq!(t1.generation, 1);
        assert_eq!(s.fences_completed(), 1);
    }

    #[test]
    fn limits_and_last_writer_wins() {
        let mut s = MemStore::new(1, 8);
        assert_eq!(
            s.put(0, b"k", b"123456789"),
            Err(StoreError::ValueTooLong { len: 9, max: 8 })
        );
        assert_eq!(
            s.put(0, &[b'k'; 65], b"v"),
            Err(StoreError::KeyTooLong { len: 65, max: 64 })
        );
        // The launcher's own attributes may be longer than a client's.
        s.put_launcher_attr(b"localRanks", b"0,1,2,3,4,5").unwrap();
        assert_eq!(s.get_node_attr(b"localRanks").unwrap().len(), 11);
        s.put(0, b"k", b"a").unwrap();
        s.put(0, b"k", b"b").unwrap();
        assert_eq!(s.get(b"k").as_deref(), Some(&b"b"[..]));
        s.abort(3, 0);
        assert_eq!(
            s.put(0, b"x", b"y"),
            Err(StoreError::Aborted { code: 3, rank: 0 })
        );
    }
}
