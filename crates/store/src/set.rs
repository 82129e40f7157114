//! The set type, in Redis 7.0's two encodings (7.0 has no listpack sets).
//!
//! - **intset**: while every member is a canonical integer (`string2ll`:
//!   no sign `+`, no leading zeros, no `-0`) and there are at most
//!   `set-max-intset-entries`, the members are sorted `i64`s in one shared
//!   block (`Arc<[i64]>`), so `SMEMBERS` answers in ascending order as Redis
//!   does and membership is a binary search.
//! - **hashtable**: a [`Dense`] table of members (O(1) membership and
//!   random pick for `SPOP`/`SRANDMEMBER`), behind an `Arc` so a snapshot's
//!   copy of a segment costs a reference count (`Arc::make_mut` copies the
//!   table only while a snapshot still holds it).
//!
//! A set becomes a hashtable when a non-integer member arrives or it grows
//! past the limit, and never goes back (as in Redis).

use crate::bytes::SmallBytes;
use crate::dense::{Dense, Keyed};
use crate::value::{itoa_buf, parse_canonical_i64};
use std::sync::Arc;

impl Keyed for SmallBytes {
    fn key(&self) -> &[u8] {
        self
    }
}

/// A set value: a 16-byte handle to its shared storage.
#[derive(Clone)]
pub enum Set {
    Intset(Arc<[i64]>),
    Table(Arc<Dense<SmallBytes>>),
}

/// One member, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Member<'a> {
    Int(i64),
    Bytes(&'a [u8]),
}

impl<'a> Member<'a> {
    /// Calls `f` with the member's bytes (an integer formatted on the stack).
    #[inline]
    pub fn with_bytes<R>(self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            Member::Int(i) => f(itoa_buf::Buf::new().format(i)),
            Member::Bytes(b) => f(b),
        }
    }

    pub fn to_vec(self) -> Vec<u8> {
        self.with_bytes(|b| b.to_vec())
    }

    /// The member as bytes that own an integer's text (for APIs that take
    /// `AsRef<[u8]>` items, such as the snapshot encoder).
    pub fn text(self) -> MemberText<'a> {
        match self {
            Member::Int(i) => {
                let mut buf = itoa_buf::Buf::new();
                let s = buf.format(i);
                let mut b = [0u8; 20];
                b[..s.len()].copy_from_slice(s);
                MemberText::Int(b, s.len() as u8)
            }
            Member::Bytes(b) => MemberText::Bytes(b),
        }
    }
}

/// A member's bytes: borrowed, or an integer's text held inline.
#[derive(Debug, Clone, Copy)]
pub enum MemberText<'a> {
    Int([u8; 20], u8),
    Bytes(&'a [u8]),
}

impl AsRef<[u8]> for MemberText<'_> {
    fn as_ref(&self) -> &[u8] {
        match self {
            MemberText::Int(b, n) => &b[..*n as usize],
            MemberText::Bytes(b) => b,
        }
    }
}

/// Iterates the members.
#[derive(Clone)]
pub enum SetIter<'a> {
    Intset(std::slice::Iter<'a, i64>),
    Table(std::slice::Iter<'a, SmallBytes>),
}

impl<'a> Iterator for SetIter<'a> {
    type Item = Member<'a>;
    #[inline]
    fn next(&mut self) -> Option<Member<'a>> {
        match self {
            SetIter::Intset(it) => it.next().map(|&i| Member::Int(i)),
            SetIter::Table(it) => it.next().map(|m| Member::Bytes(m)),
        }
    }
}

impl Default for Set {
    fn default() -> Self {
        Set::new()
    }
}

impl Set {
    /// An empty set (Redis never stores one: add a member first).
    pub fn new() -> Set {
        Set::Intset(Arc::from(&[][..]))
    }

    /// Builds a set from members (a snapshot being loaded), choosing the
    /// encoding as Redis does on load. Duplicates are ignored.
    pub fn from_members<'a>(
        members: impl ExactSizeIterator<Item = &'a [u8]>,
        max_intset: usize,
    ) -> Set {
        let mut s = Set::new();
        if members.len() > max_intset {
            s.convert(members.len());
        }
        for m in members {
            s.insert(m, max_intset);
        }
        s
    }

    pub fn len(&self) -> usize {
        match self {
            Set::Intset(v) => v.len(),
            Set::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The encoding `OBJECT ENCODING` reports.
    pub fn encoding(&self) -> &'static str {
        match self {
            Set::Intset(_) => "intset",
            Set::Table(_) => "hashtable",
        }
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        match self {
            Set::Intset(v) => {
                parse_canonical_i64(member).is_some_and(|i| v.binary_search(&i).is_ok())
            }
            Set::Table(t) => t.get(member).is_some(),
        }
    }

    pub fn iter(&self) -> SetIter<'_> {
        match self {
            Set::Intset(v) => SetIter::Intset(v.iter()),
            Set::Table(t) => SetIter::Table(t.iter()),
        }
    }

    /// The member at position `i` in `0..len()` (O(1)).
    pub fn nth(&self, i: usize) -> Member<'_> {
        match self {
            Set::Intset(v) => Member::Int(v[i]),
            Set::Table(t) => Member::Bytes(t.nth(i)),
        }
    }

    fn convert(&mut self, capacity: usize) {
        if let Set::Intset(v) = self {
            let mut d = Dense::with_capacity(capacity.max(v.len() + 1));
            let mut buf = itoa_buf::Buf::new();
            for &i in v.iter() {
                d.insert_new(SmallBytes::new(buf.format(i)));
            }
            *self = Set::Table(Arc::new(d));
        }
    }

    /// Adds `member`. Returns true when it is new.
    pub fn insert(&mut self, member: &[u8], max_intset: usize) -> bool {
        if let Set::Intset(v) = self {
            match parse_canonical_i64(member) {
                Some(i) => match v.binary_search(&i) {
                    Ok(_) => return false,
                    Err(at) if v.len() < max_intset => {
                        let rebuilt: Arc<[i64]> = v[..at]
                            .iter()
                            .chain(std::iter::once(&i))
                            .chain(&v[at..])
                            .copied()
                            .collect();
                        *v = rebuilt;
                        return true;
                    }
                    Err(_) => self.convert(0),
                },
                None => self.convert(0),
            }
        }
        let Set::Table(t) = self else {
            unreachable!("converted above")
        };
        if t.get(member).is_some() {
            return false;
        }
        Arc::make_mut(t).insert_new(SmallBytes::new(member));
        true
    }

    /// Removes `member`. Returns true when it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self {
            Set::Intset(v) => {
                let Some(at) = parse_canonical_i64(member).and_then(|i| v.binary_search(&i).ok())
                else {
                    return false;
                };
                let rebuilt: Arc<[i64]> = v[..at].iter().chain(&v[at + 1..]).copied().collect();
                *v = rebuilt;
                true
            }
            Set::Table(t) => {
                if t.get(member).is_none() {
                    return false;
                }
                Arc::make_mut(t).remove(member).is_some()
            }
        }
    }

    /// One `SSCAN` step: an intset is returned whole (cursor 0), as Redis
    /// does; a hashtable goes `count` members at a time.
    pub fn scan(&self, cursor: u64, count: usize, mut visit: impl FnMut(Member<'_>)) -> u64 {
        match self {
            Set::Intset(_) => {
                self.iter().for_each(visit);
                0
            }
            Set::Table(t) => t.scan(cursor, count, |m| visit(Member::Bytes(m))),
        }
    }

    /// Heap bytes owned (for memory accounting).
    pub fn heap_size(&self) -> usize {
        match self {
            Set::Intset(v) => 16 + v.len() * 8,
            Set::Table(t) => {
                16 + std::mem::size_of::<Dense<SmallBytes>>() + t.heap_size(|m| m.heap_size())
            }
        }
    }
}

impl Set {
    /// [`Self::heap_size`], the members of a table sampled
    /// (`MEMORY USAGE ... SAMPLES`; 0: all).
    pub fn heap_size_sampled(&self, samples: usize) -> usize {
        match self {
            Set::Intset(v) => 16 + v.len() * 8,
            Set::Table(t) => {
                16 + std::mem::size_of::<Dense<SmallBytes>>()
                    + t.heap_size_sampled(samples, |m| m.heap_size())
            }
        }
    }
}

impl PartialEq for Set {
    /// Same members, whatever the order or encoding.
    fn eq(&self, o: &Set) -> bool {
        self.len() == o.len() && self.iter().all(|m| m.with_bytes(|b| o.contains(b)))
    }
}

impl std::fmt::Debug for Set {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set()
            .entries(
                self.iter()
                    .map(|m| String::from_utf8_lossy(&m.to_vec()).into_owned()),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn handle_is_16_bytes() {
        assert_eq!(std::mem::size_of::<Set>(), 16);
    }

    #[test]
    fn intset_until_a_text_member_or_the_limit() {
        let mut s = Set::new();
        assert!(s.insert(b"3", 4));
        assert!(s.insert(b"-1", 4));
        assert!(!s.insert(b"3", 4));
        assert_eq!(s.encoding(), "intset");
        let all: Vec<Vec<u8>> = s.iter().map(|m| m.to_vec()).collect();
        assert_eq!(all, vec![b"-1".to_vec(), b"3".to_vec()]);
        assert!(!s.contains(b"03"));
        assert!(s.insert(b"03", 4), "not canonical: a text member");
        assert_eq!(s.encoding(), "hashtable");
        assert!(s.contains(b"3") && s.contains(b"03"));
        let mut s = Set::new();
        for i in 0..4 {
            s.insert(i.to_string().as_bytes(), 4);
        }
        assert_eq!(s.encoding(), "intset");
        s.insert(b"9", 4);
        assert_eq!(s.encoding(), "hashtable");
        s.remove(b"9");
        assert_eq!(s.encoding(), "hashtable", "never converts back");
    }

    proptest! {
        #[test]
        fn behaves_like_a_btreeset(ops in proptest::collection::vec((0u8..3, 0u8..40), 1..400)) {
            let mut s = Set::new();
            let mut model: BTreeSet<Vec<u8>> = BTreeSet::new();
            let mut converted = false;
            for (op, m) in ops {
                // Mostly integers, some text members.
                let member = if m < 30 { (m as i64 - 10).to_string().into_bytes() } else { format!("m{m}").into_bytes() };
                match op {
                    0 | 1 => {
                        prop_assert_eq!(s.insert(&member, 16), model.insert(member.clone()));
                        if m >= 30 || model.len() > 16 { converted = true; }
                    }
                    _ => { prop_assert_eq!(s.remove(&member), model.remove(&member)); }
                }
                prop_assert_eq!(s.encoding() == "hashtable", converted);
            }
            prop_assert_eq!(s.len(), model.len());
            let all: BTreeSet<Vec<u8>> = s.iter().map(|m| m.to_vec()).collect();
            prop_assert_eq!(&all, &model);
            for m in &model { prop_assert!(s.contains(m)); }
            let mut seen = BTreeSet::new();
            let mut c = 0;
            loop {
                c = s.scan(c, 2, |m| { seen.insert(m.to_vec()); });
                if c == 0 { break; }
            }
            prop_assert_eq!(&seen, &model);
            let rebuilt = Set::from_members(model.iter().map(|m| &m[..]).collect::<Vec<_>>().into_iter(), 16);
            prop_assert_eq!(&rebuilt, &s);
        }
    }
}
