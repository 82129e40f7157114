//! An owned, ordered picture of an RDB file's content, for tests, tools and
//! small files: [`Dataset::from_rdb`] decodes everything into `BTreeMap`s so
//! two snapshots compare with `==` regardless of key order in the file.
//! The server itself should implement [`crate::RdbVisitor`] and insert into
//! its keyspace directly instead.

use std::collections::{BTreeMap, BTreeSet};

use crate::decoder::{decode, DecodeSummary, Entry, RdbValue, RdbVisitor};
use crate::error::{DecodeError, VisitError};

/// A value with its elements copied out and put in canonical order: sets and
/// hashes sorted, sorted sets by member with their score bits (so `-0.0` and
/// `0.0` differ, as they do on the wire).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum OwnedValue {
    String(Vec<u8>),
    List(Vec<Vec<u8>>),
    Set(BTreeSet<Vec<u8>>),
    SortedSet(BTreeMap<Vec<u8>, OrderedScore>),
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    /// A hash with field TTLs: field → (value, deadline in unix ms).
    HashWithTtls(BTreeMap<Vec<u8>, (Vec<u8>, Option<i64>)>),
    /// As the file holds it (node listpacks undecoded).
    Stream(Box<crate::stream::StreamPayload<'static>>),
}

/// An `f64` compared by value (NaN never occurs in decoded data).
#[derive(Debug, Clone, Copy)]
pub struct OrderedScore(pub f64);

impl PartialEq for OrderedScore {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits() || self.0 == other.0
    }
}
impl Eq for OrderedScore {}
impl PartialOrd for OrderedScore {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrderedScore {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0
            .partial_cmp(&other.0)
            .unwrap_or(std::cmp::Ordering::Equal)
    }
}

impl From<RdbValue<'_>> for OwnedValue {
    fn from(v: RdbValue<'_>) -> Self {
        match v {
            RdbValue::String(s) => OwnedValue::String(s.into_owned()),
            RdbValue::List(l) => OwnedValue::List(l.into_iter().map(|c| c.into_owned()).collect()),
            RdbValue::Set(s) => OwnedValue::Set(s.into_iter().map(|c| c.into_owned()).collect()),
            RdbValue::SortedSet(z) => OwnedValue::SortedSet(
                z.into_iter()
                    .map(|(m, s)| (m.into_owned(), OrderedScore(s)))
                    .collect(),
            ),
            RdbValue::Hash(h) => OwnedValue::Hash(
                h.into_iter()
                    .map(|(f, v)| (f.into_owned(), v.into_owned()))
                    .collect(),
            ),
            RdbValue::HashWithTtls { fields, .. } => OwnedValue::HashWithTtls(
                fields
                    .into_iter()
                    .map(|(f, v, at)| (f.into_owned(), (v.into_owned(), at)))
                    .collect(),
            ),
            RdbValue::Stream(st) => OwnedValue::Stream(Box::new(st.into_owned())),
        }
    }
}

/// One key's value, expiry and the RDB type it was stored as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedEntry {
    pub value: OwnedValue,
    pub expire_ms: Option<i64>,
    pub rdb_type: u8,
}

/// Everything an RDB file holds, keyed by database then key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dataset {
    pub aux: Vec<(Vec<u8>, Vec<u8>)>,
    pub dbs: BTreeMap<u64, BTreeMap<Vec<u8>, OwnedEntry>>,
}

impl Dataset {
    /// Decodes a whole file into memory.
    pub fn from_rdb(data: &[u8]) -> Result<(Dataset, DecodeSummary), DecodeError> {
        let mut ds = Dataset::default();
        let summary = decode(data, &mut ds)?;
        Ok((ds, summary))
    }

    pub fn get(&self, db: u64, key: &[u8]) -> Option<&OwnedEntry> {
        self.dbs.get(&db)?.get(key)
    }

    pub fn aux_value(&self, key: &[u8]) -> Option<&[u8]> {
        self.aux
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_slice())
    }
}

impl RdbVisitor for Dataset {
    fn aux(&mut self, key: &[u8], value: &[u8]) -> Result<(), VisitError> {
        self.aux.push((key.to_vec(), value.to_vec()));
        Ok(())
    }

    fn entry(&mut self, entry: Entry<'_>) -> Result<(), VisitError> {
        let key = entry.key.into_owned();
        let db = self.dbs.entry(entry.db).or_default();
        if db.contains_key(&key) {
            return Err(format!(
                "duplicate key {:?} in db {}",
                key.escape_ascii().to_string(),
                entry.db
            )
            .into());
        }
        db.insert(
            key,
            OwnedEntry {
                value: entry.value.into(),
                expire_ms: entry.expire_ms,
                rdb_type: entry.rdb_type,
            },
        );
        Ok(())
    }
}
