//! Redis Cluster's hash slots: the slot of a key, and the per-slot index
//! a database keeps in cluster mode (`COUNTKEYSINSLOT`, `GETKEYSINSLOT`).
//!
//! A key's slot is CRC16 (XMODEM: poly 0x1021, init 0, no reflection) of the
//! key, or of its hash tag — the bytes between the first `{` and the first
//! `}` after it, when there is at least one — modulo 16384.
//!
//! # The index
//! Redis 7.0 threads every key of a slot on a doubly linked list through
//! its dict entries (16 bytes a key). Here each slot keeps its keys' 64-bit
//! hashes, the same hash the database's own table uses: in a short array
//! while it has at most [`SMALL_MAX`] keys (8 bytes a key and a quarter of
//! slack), in a hash table beyond; and 16384 empty arrays (640 KiB) when
//! cluster mode is on. Nothing exists, and nothing is
//! done on the write path, when it is off (the database holds `None`).
//! The keys of a slot are found from their hashes through the database's
//! table ([`crate::Db::keys_in_slot`]), so the index never copies a key.
//! Two keys of one slot may share a hash: the table then holds it twice
//! (the count stays exact) and the lookup reports each key once.

use hashbrown::HashTable;

/// Slots in a cluster.
pub const SLOTS: usize = 16384;

/// `TABLES[k][i]`: the CRC register after byte `i` and then `k` zero
/// bytes, from a zero register. `TABLES[0]` is the usual byte table; the
/// others let [`crc16`] take eight bytes a step (slicing-by-8: the CRC
/// is linear, so a block's CRC is the XOR of each byte's own).
const fn tables() -> [[u16; 256]; 8] {
    let mut t = [[0u16; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = (i as u16) << 8;
        let mut b = 0;
        while b < 8 {
            c = if c & 0x8000 != 0 {
                (c << 1) ^ 0x1021
            } else {
                c << 1
            };
            b += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let c = t[k - 1][i];
            t[k][i] = (c << 8) ^ t[0][(c >> 8) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

static TABLES: [[u16; 256]; 8] = tables();

/// CRC16-XMODEM of `data`: eight bytes a step, then a byte a step.
#[inline]
pub fn crc16(data: &[u8]) -> u16 {
    let t = &TABLES;
    let mut crc = 0u16;
    let mut blocks = data.chunks_exact(8);
    for b in &mut blocks {
        let b: &[u8; 8] = b.try_into().expect("eight bytes");
        let hi = (crc >> 8) as u8 ^ b[0];
        let lo = crc as u8 ^ b[1];
        crc = t[7][hi as usize]
            ^ t[6][lo as usize]
            ^ t[5][b[2] as usize]
            ^ t[4][b[3] as usize]
            ^ t[3][b[4] as usize]
            ^ t[2][b[5] as usize]
            ^ t[1][b[6] as usize]
            ^ t[0][b[7] as usize];
    }
    blocks.remainder().iter().fold(crc, |crc, &b| {
        (crc << 8) ^ t[0][(((crc >> 8) as u8) ^ b) as usize]
    })
}

/// The part of `key` that is hashed: its hash tag when it has a non-empty
/// one, else the whole key.
#[inline]
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = memchr::memchr(b'{', key) {
        if let Some(len) = memchr::memchr(b'}', &key[open + 1..]) {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// The hash slot of `key` (Redis's `keyHashSlot`). Every write of a new
/// key in cluster mode computes it: for a 16-byte key, ~150 instructions
/// (the `{` found by `memchr`, the CRC eight bytes a step) where a byte at
/// a time for both took ~275.
#[inline]
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) & (SLOTS as u16 - 1)
}

/// A slot's key hashes: a short array while the slot has few keys (a
/// scan of at most [`SMALL_MAX`] on removal), a hash table beyond, so a
/// slot holding most of the keys (one hash tag) stays O(1) per change.
enum SlotKeys {
    Small(Vec<u64>),
    Large(HashTable<u64>),
}

/// Keys a slot holds in its short array before it takes a table.
pub const SMALL_MAX: usize = 256;

/// The hashes of the keys of each slot.
pub struct SlotIndex {
    slots: Vec<SlotKeys>,
}

impl Default for SlotIndex {
    fn default() -> Self {
        SlotIndex {
            slots: (0..SLOTS).map(|_| SlotKeys::Small(Vec::new())).collect(),
        }
    }
}

impl SlotIndex {
    /// A key hashing to `h` was added to `slot`.
    #[inline]
    pub fn insert(&mut self, slot: u16, h: u64) {
        let s = &mut self.slots[slot as usize];
        match s {
            SlotKeys::Small(v) if v.len() < SMALL_MAX => {
                if v.len() == v.capacity() {
                    // A quarter more at a time: the arrays are the memory.
                    v.reserve_exact(v.len() / 4 + 4);
                }
                v.push(h);
            }
            SlotKeys::Small(v) => {
                let mut t = HashTable::with_capacity(v.len() + 1);
                for &x in v.iter() {
                    t.insert_unique(x, x, |&y| y);
                }
                t.insert_unique(h, h, |&y| y);
                *s = SlotKeys::Large(t);
            }
            SlotKeys::Large(t) => {
                t.insert_unique(h, h, |&x| x);
            }
        }
    }

    /// A key hashing to `h` left `slot`.
    #[inline]
    pub fn remove(&mut self, slot: u16, h: u64) {
        let s = &mut self.slots[slot as usize];
        match s {
            SlotKeys::Small(v) => {
                if let Some(i) = v.iter().position(|&x| x == h) {
                    v.swap_remove(i);
                }
                if v.capacity() > 2 * v.len() + 8 {
                    v.shrink_to(v.len() + v.len() / 4);
                }
            }
            SlotKeys::Large(t) => {
                if let Ok(e) = t.find_entry(h, |&x| x == h) {
                    e.remove();
                }
                if t.len() < SMALL_MAX / 2 {
                    let v: Vec<u64> = t.iter().copied().collect();
                    *s = SlotKeys::Small(v);
                } else if t.capacity() > 64 && t.len() < t.capacity() / 4 {
                    t.shrink_to(t.len() * 2, |&x| x);
                }
            }
        }
    }

    /// Keys in `slot`.
    pub fn count(&self, slot: u16) -> usize {
        match &self.slots[slot as usize] {
            SlotKeys::Small(v) => v.len(),
            SlotKeys::Large(t) => t.len(),
        }
    }

    /// The hashes of the keys in `slot`, each as often as keys have it.
    pub fn hashes(&self, slot: u16) -> Box<dyn Iterator<Item = u64> + '_> {
        match &self.slots[slot as usize] {
            SlotKeys::Small(v) => Box::new(v.iter().copied()),
            SlotKeys::Large(t) => Box::new(t.iter().copied()),
        }
    }

    /// Heap bytes of the index (docs/cluster.md).
    pub fn heap_bytes(&self) -> usize {
        let fixed = self.slots.capacity() * std::mem::size_of::<SlotKeys>();
        let parts: usize = self
            .slots
            .iter()
            .map(|s| match s {
                SlotKeys::Small(v) => v.capacity() * 8,
                SlotKeys::Large(t) => {
                    // Buckets are a power of two at least 8/7 of the
                    // capacity; each costs the value and a control byte.
                    let buckets = (t.capacity() * 8 / 7).next_power_of_two();
                    buckets * (8 + 1) + 16
                }
            })
            .sum();
        fixed + parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_check_value() {
        // The XMODEM check value, also the one in Redis's crc16.c header.
        assert_eq!(crc16(b"123456789"), 0x31C3);
    }

    #[test]
    fn slots_and_hash_tags() {
        // Values from Redis's cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"somekey"), 11058);
        assert_eq!(key_slot(b""), 0);
        assert_eq!(
            key_slot(b"{user1000}.following"),
            key_slot(b"{user1000}.followers")
        );
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        // An empty tag hashes the whole key; only the first `{` counts.
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        assert_eq!(hash_tag(b"{abc"), b"{abc");
    }

    /// CRC16-XMODEM a bit at a time, as its definition reads.
    fn crc16_bitwise(data: &[u8]) -> u16 {
        let mut crc = 0u16;
        for &b in data {
            crc ^= (b as u16) << 8;
            for _ in 0..8 {
                crc = if crc & 0x8000 != 0 {
                    (crc << 1) ^ 0x1021
                } else {
                    crc << 1
                };
            }
        }
        crc
    }

    /// The hash tag by its definition: the bytes between the first `{`
    /// and the first `}` after it, when there are some.
    fn hash_tag_plain(key: &[u8]) -> &[u8] {
        let Some(open) = key.iter().position(|&b| b == b'{') else {
            return key;
        };
        match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        }
    }

    proptest::proptest! {
        /// Eight bytes a step is the CRC a bit at a time, at every length.
        #[test]
        fn sliced_crc_is_the_bitwise_crc(data in proptest::collection::vec(
            proptest::prelude::any::<u8>(), 0..80)) {
            proptest::prop_assert_eq!(crc16(&data), crc16_bitwise(&data));
        }

        /// The slot is the CRC of the hash tag, braces or not.
        #[test]
        fn slot_is_the_tags_crc(key in proptest::collection::vec(
            proptest::sample::select(vec![b'{', b'}', b'a', b'b', 0u8, 0xff]), 0..40)) {
            proptest::prop_assert_eq!(hash_tag(&key), hash_tag_plain(&key));
            proptest::prop_assert_eq!(key_slot(&key), crc16_bitwise(hash_tag_plain(&key)) & 16383);
        }
    }
}
