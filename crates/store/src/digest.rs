//! `DEBUG DIGEST` and `DEBUG DIGEST-VALUE`, computed exactly as Redis 7.0's
//! `computeDatasetDigest` / `xorObjectDigest` do, so one comparison proves
//! that two servers — ferrokv or Redis — hold the same data.
//!
//! Two primitives, both over SHA-1: `xor` (digest ^= SHA1(data), order-free,
//! used for the elements of sets and for the keys of a database) and `mix`
//! (digest = SHA1(digest ^ SHA1(data)), order-dependent, used for sequences
//! such as a list's elements or a key followed by its value).

use crate::db::{Db, Entry};
use crate::value::{itoa_buf, ValueRef, ValueType};
use sha1::{Digest as _, Sha1};

pub type Digest = [u8; 20];

/// digest = SHA1(digest ^ SHA1(data))
pub fn mix(digest: &mut Digest, data: &[u8]) {
    xor(digest, data);
    let h = Sha1::digest(&digest[..]);
    digest.copy_from_slice(&h);
}

/// digest ^= SHA1(data)
pub fn xor(digest: &mut Digest, data: &[u8]) {
    let h = Sha1::digest(data);
    for (d, x) in digest.iter_mut().zip(h.iter()) {
        *d ^= x;
    }
}

/// Redis's `xorObjectDigest`: continues `d` with the type id and the
/// value, and marks a key that has an expiry.
fn mix_value(d: &mut Digest, e: &Entry) {
    let v = e.value();
    let ty: ValueType = v.value_type();
    mix(d, &(ty as u32).to_be_bytes());
    match v {
        ValueRef::Int(i) => mix(d, itoa_buf::Buf::new().format(i)),
        ValueRef::Str(s) | ValueRef::Raw(s) => mix(d, s),
        // Each element in order (an integer element as its text, which is
        // what a list stores here).
        ValueRef::List(l) => l.iter().for_each(|e| mix(d, e)),
        // Each member xored in: the order of a set does not matter.
        ValueRef::Set(set) => {
            for m in set.iter() {
                m.with_bytes(|b| xor(d, b));
            }
        }
        // Per field a fresh digest mixed with the field then its value,
        // xored in (hashed, as Redis's `xorDigest` hashes what it xors).
        // A field with a TTL also has `!!hexpire!!` xored into its own
        // digest (Redis 7.4: whether it has one, not when); due fields
        // not removed yet count, as in Redis.
        ValueRef::Hash(h) => {
            for (f, v) in h.iter() {
                let mut fd = [0u8; 20];
                mix(&mut fd, f);
                mix(&mut fd, v);
                if h.field_expire(f).is_some() {
                    xor(&mut fd, b"!!hexpire!!");
                }
                xor(d, &fd);
            }
        }
        ValueRef::ZSet(z) => {
            // Per member a fresh digest of the member then its score as
            // Redis 7.0 prints it (`%.17g`), xored in (hashed): order-free.
            let mut elem = [0u8; 20];
            let mut text = Vec::with_capacity(24);
            for (m, score) in z.iter() {
                elem.fill(0);
                mix(&mut elem, m);
                text.clear();
                crate::zset::write_score(&mut text, score);
                mix(&mut elem, &text);
                xor(d, &elem);
            }
        }
        // Each entry in ID order: its ID as `ms.seq` (a dot, not the
        // dash of replies), then its fields and values, into the one
        // digest. Consumer groups are not part of it, as in Redis.
        ValueRef::Stream(st) => {
            let mut id = Vec::with_capacity(41);
            let all = (crate::stream::StreamId::MIN, crate::stream::StreamId::MAX);
            for (eid, pairs) in st.range(all.0, all.1, false) {
                id.clear();
                id.extend_from_slice(&eid.format());
                if let Some(dash) = id.iter().position(|&c| c == b'-') {
                    id[dash] = b'.';
                }
                mix(d, &id);
                for (f, v) in pairs {
                    mix(d, f);
                    mix(d, v);
                }
            }
        }
    }
    if e.has_expire() {
        xor(d, b"!!expire!!");
    }
}

/// `DEBUG DIGEST-VALUE` of one key: its value's digest from a zero state.
pub fn value_digest(e: &Entry) -> Digest {
    let mut d = [0u8; 20];
    mix_value(&mut d, e);
    d
}

/// The digest of a whole keyspace (`DEBUG DIGEST`): all zeros when empty.
/// Each database that holds keys mixes in its id; each key's digest (the
/// key, then its value) is xored in, so the order of keys does not matter.
pub fn dataset_digest<'a>(dbs: impl Iterator<Item = (usize, &'a Db)>) -> Digest {
    let mut fin = [0u8; 20];
    for (id, db) in dbs {
        if db.is_empty() {
            continue;
        }
        mix(&mut fin, &(id as u32).to_be_bytes());
        for e in db.iter() {
            let mut d = [0u8; 20];
            mix(&mut d, e.key());
            mix_value(&mut d, e);
            xor(&mut fin, &d);
        }
    }
    fin
}

pub fn to_hex(d: &Digest) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}
