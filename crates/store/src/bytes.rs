//! `SmallBytes`: a binary-safe byte string that stores up to 22 bytes inline.
//!
//! Keys and small values live inside the hash-table entry itself, so a
//! lookup of a short key costs the table probe and nothing more: no second,
//! dependent cache miss to a boxed key. Longer strings fall back to one
//! shared heap allocation (`Arc<[u8]>`): cloning one — as a snapshot's
//! copy-on-write does for every entry of a segment it must keep — costs a
//! reference count, not a copy of the value. The type is 24 bytes either way.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

/// Bytes held inline.
pub const INLINE_CAP: usize = 22;

#[derive(Clone)]
pub enum SmallBytes {
    Inline { len: u8, data: [u8; INLINE_CAP] },
    Heap(std::sync::Arc<[u8]>),
}

impl SmallBytes {
    #[inline]
    pub fn new(s: &[u8]) -> Self {
        if s.len() <= INLINE_CAP {
            let mut data = [0u8; INLINE_CAP];
            data[..s.len()].copy_from_slice(s);
            SmallBytes::Inline {
                len: s.len() as u8,
                data,
            }
        } else {
            SmallBytes::Heap(s.into())
        }
    }

    /// Takes ownership of a vector (no copy when it goes to the heap).
    pub fn from_vec(v: Vec<u8>) -> Self {
        if v.len() <= INLINE_CAP {
            Self::new(&v)
        } else {
            SmallBytes::Heap(v.into())
        }
    }

    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        match self {
            SmallBytes::Inline { len, data } => &data[..*len as usize],
            SmallBytes::Heap(b) => b,
        }
    }

    /// Heap bytes this value owns beyond its own 24 bytes.
    pub fn heap_size(&self) -> usize {
        match self {
            SmallBytes::Inline { .. } => 0,
            SmallBytes::Heap(b) => b.len(),
        }
    }

    pub fn into_vec(self) -> Vec<u8> {
        match self {
            SmallBytes::Inline { len, data } => data[..len as usize].to_vec(),
            SmallBytes::Heap(b) => b.to_vec(),
        }
    }
}

impl Default for SmallBytes {
    fn default() -> Self {
        SmallBytes::new(b"")
    }
}

impl Deref for SmallBytes {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Borrow<[u8]> for SmallBytes {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for SmallBytes {
    fn eq(&self, o: &Self) -> bool {
        self.as_slice() == o.as_slice()
    }
}
impl Eq for SmallBytes {}

impl PartialOrd for SmallBytes {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for SmallBytes {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.as_slice().cmp(o.as_slice())
    }
}

impl Hash for SmallBytes {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.as_slice().hash(h)
    }
}

impl fmt::Debug for SmallBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_slice()))
    }
}

impl From<&[u8]> for SmallBytes {
    fn from(s: &[u8]) -> Self {
        SmallBytes::new(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_24_bytes_and_round_trips() {
        assert_eq!(std::mem::size_of::<SmallBytes>(), 24);
        for n in [0, 1, 22, 23, 1000] {
            let v: Vec<u8> = (0..n).map(|i| i as u8).collect();
            assert_eq!(SmallBytes::new(&v).as_slice(), &v[..]);
            assert_eq!(SmallBytes::from_vec(v.clone()).into_vec(), v);
        }
    }
}
