//! The cleaner's offset map (Kafka's SkimpyOffsetMap): key hash → latest offset,
//! in memory fixed when it is made.
//!
//! Each slot is 24 bytes: a 128-bit XXH3 hash of the key and the offset. Keys
//! themselves are never stored, so the map's size does not depend on the keys;
//! two keys colliding on 128 bits is as unlikely as an MD5 collision is in
//! Kafka's map (XXH3-128 was chosen over MD5 for speed: it hashes at memory
//! bandwidth, and the `twox-hash` crate is already in the dependency tree via
//! lz4_flex). Open addressing with linear probing; the map is "full" at
//! `load_factor` of its slots, which keeps probe chains short.

use twox_hash::XxHash3_128;

/// Bytes one entry takes: the hash (16) and the offset (8).
pub const BYTES_PER_ENTRY: usize = 24;

pub struct OffsetMap {
    /// Three words per slot: the hash's two halves, then offset + 1 (0 marks
    /// an empty slot). All zero is an empty map, so the allocation comes
    /// zeroed from the OS and its pages are only backed once written.
    words: Vec<u64>,
    n: usize,
    max_entries: usize,
    entries: usize,
    lookups: u64,
    probes: u64,
    latest_offset: i64,
}

/// A key's 128-bit hash, the map's only record of the key.
pub type KeyHash = [u64; 2];

#[inline]
pub fn hash_key(key: &[u8]) -> KeyHash {
    let h = XxHash3_128::oneshot(key);
    [h as u64, (h >> 64) as u64]
}

impl OffsetMap {
    /// A map in `memory` bytes, full at `load_factor` (0..1] of its slots.
    pub fn new(memory: usize, load_factor: f64) -> OffsetMap {
        let n = (memory / BYTES_PER_ENTRY).max(2);
        let lf = if load_factor > 0.0 && load_factor <= 1.0 {
            load_factor
        } else {
            0.9
        };
        OffsetMap {
            words: vec![0u64; 3 * n],
            n,
            // one slot always stays empty: it ends every probe for a missing key
            max_entries: ((n as f64 * lf) as usize).clamp(1, n - 1),
            entries: 0,
            lookups: 0,
            probes: 0,
            latest_offset: -1,
        }
    }

    #[inline]
    fn home(&self, hash: &KeyHash) -> usize {
        (hash[0] % self.n as u64) as usize
    }

    /// Ask the CPU to load `hash`'s slot: a map larger than the caches costs
    /// a memory miss per key, which the passes overlap by hashing a batch's
    /// keys and prefetching their slots before using them.
    #[inline]
    pub fn prefetch(&self, hash: &KeyHash) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let p = self.words.as_ptr().wrapping_add(3 * self.home(hash)) as *const i8;
            // SAFETY: a prefetch is a hint; it never faults, whatever the address.
            #[allow(unused_unsafe)]
            unsafe {
                _mm_prefetch(p, _MM_HINT_T0)
            };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = hash;
    }

    #[inline]
    fn find(&mut self, hash: KeyHash) -> usize {
        let n = self.n;
        let mut i = self.home(&hash);
        self.lookups += 1;
        loop {
            let w = &self.words[3 * i..3 * i + 3];
            if w[2] == 0 || (w[0] == hash[0] && w[1] == hash[1]) {
                return i;
            }
            self.probes += 1;
            i += 1;
            if i == n {
                i = 0;
            }
        }
    }

    /// Record `offset` as the latest for `key`. False (nothing changed) when
    /// the key is new and the map is full.
    pub fn put(&mut self, key: &[u8], offset: i64) -> bool {
        self.put_hashed(hash_key(key), offset)
    }

    /// [`put`](Self::put) of a key already hashed with [`hash_key`].
    pub fn put_hashed(&mut self, hash: KeyHash, offset: i64) -> bool {
        let i = self.find(hash);
        let w = &mut self.words[3 * i..3 * i + 3];
        if w[2] == 0 {
            if self.entries >= self.max_entries {
                return false;
            }
            self.entries += 1;
            w[0] = hash[0];
            w[1] = hash[1];
        }
        w[2] = (offset + 1) as u64;
        self.latest_offset = offset;
        true
    }

    /// The latest offset recorded for `key`, or -1.
    pub fn get(&mut self, key: &[u8]) -> i64 {
        self.get_hashed(hash_key(key))
    }

    /// [`get`](Self::get) of a key already hashed with [`hash_key`].
    pub fn get_hashed(&mut self, hash: KeyHash) -> i64 {
        let i = self.find(hash);
        self.words[3 * i + 2] as i64 - 1
    }

    /// Forget every entry. A used map is given back and allocated zeroed
    /// again: cheaper than writing zeros, and between cleans the memory is
    /// returned to the OS.
    pub fn clear(&mut self) {
        if self.entries > 0 {
            self.words = Vec::new();
            self.words = vec![0u64; 3 * self.n];
        }
        self.entries = 0;
        self.lookups = 0;
        self.probes = 0;
        self.latest_offset = -1;
    }

    pub fn size(&self) -> usize {
        self.entries
    }
    pub fn slots(&self) -> usize {
        self.n
    }
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }
    pub fn is_full(&self) -> bool {
        self.entries >= self.max_entries
    }
    /// The offset of the last `put`, -1 when none since the last clear.
    pub fn latest_offset(&self) -> i64 {
        self.latest_offset
    }
    pub fn utilization(&self) -> f64 {
        self.entries as f64 / self.n as f64
    }
    /// Probes past the first slot per lookup (how crowded the map is).
    pub fn collision_rate(&self) -> f64 {
        if self.lookups == 0 {
            0.0
        } else {
            self.probes as f64 / self.lookups as f64
        }
    }
    pub fn memory(&self) -> usize {
        self.n * BYTES_PER_ENTRY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latest_offset_wins_and_missing_is_minus_one() {
        let mut m = OffsetMap::new(24 * 100, 0.9);
        assert_eq!(m.get(b"a"), -1);
        assert!(m.put(b"a", 0));
        assert!(m.put(b"b", 1));
        assert!(m.put(b"a", 5));
        assert_eq!(m.get(b"a"), 5);
        assert_eq!(m.get(b"b"), 1);
        assert_eq!(m.size(), 2);
        assert_eq!(m.latest_offset(), 5);
        m.clear();
        assert_eq!((m.get(b"a"), m.size(), m.latest_offset()), (-1, 0, -1));
    }

    #[test]
    fn full_map_refuses_new_keys_but_updates_old_ones() {
        let mut m = OffsetMap::new(24 * 10, 0.5);
        assert_eq!(m.max_entries(), 5);
        for i in 0..5 {
            assert!(m.put(format!("k{i}").as_bytes(), i));
        }
        assert!(m.is_full());
        assert!(!m.put(b"new", 9));
        assert!(m.put(b"k0", 10));
        assert_eq!(m.get(b"k0"), 10);
        assert_eq!(m.get(b"new"), -1);
    }

    #[test]
    fn many_keys_round_trip() {
        let mut m = OffsetMap::new(24 * 20_000, 0.9);
        for i in 0..15_000i64 {
            assert!(m.put(&i.to_be_bytes(), i * 2));
        }
        for i in 0..15_000i64 {
            assert_eq!(m.get(&i.to_be_bytes()), i * 2);
        }
        assert!(m.collision_rate() < 10.0);
    }
}
