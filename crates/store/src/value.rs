//! Typed values stored under a key.
//!
//! Strings are either an `i64` (what Redis calls the `int` encoding: a
//! canonical decimal integer that fits, stored without its text) or bytes in
//! a [`SmallBytes`]. The enum is 24 bytes, so an entry stays within one cache
//! line.

use crate::bytes::SmallBytes;
use crate::hash::Hash;
use crate::set::Set;

/// Redis's type ids, as `TYPE` names them and as the digest hashes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    String = 0,
    List = 1,
    Set = 2,
    ZSet = 3,
    Hash = 4,
    Stream = 6,
}

impl ValueType {
    pub fn name(self) -> &'static str {
        match self {
            ValueType::String => "string",
            ValueType::List => "list",
            ValueType::Set => "set",
            ValueType::ZSet => "zset",
            ValueType::Hash => "hash",
            ValueType::Stream => "stream",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string that is a canonical integer.
    Int(i64),
    /// Any other string (binary-safe).
    Str(SmallBytes),
    /// A string edited in place (`APPEND`, `SETRANGE`, `SETBIT`,
    /// `BITFIELD`). Redis keeps such a string in its `raw` encoding however
    /// short it is, and `OBJECT ENCODING` shows it; the bytes live on the
    /// heap with room to grow, as Redis's do, so appends and bit writes
    /// change them in place (a snapshot holding the same bytes makes the
    /// next write copy them first: `Arc::make_mut`).
    Raw(std::sync::Arc<Vec<u8>>),
    /// A list (shared with a snapshot in progress until written to).
    List(std::sync::Arc<crate::list::List>),
    /// A hash (`listpack` or `hashtable`); a 16-byte handle to shared storage.
    Hash(Hash),
    /// A set (`intset` or `hashtable`); a 16-byte handle to shared storage.
    Set(Set),
    /// A sorted set (shared so a snapshot's copy of an entry is a refcount;
    /// writes go through `Arc::make_mut`).
    ZSet(std::sync::Arc<crate::zset::ZSet>),
    /// A stream (shared like the sorted set).
    Stream(std::sync::Arc<crate::stream::Stream>),
}

/// A borrowed view of a stored value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueRef<'a> {
    Int(i64),
    Str(&'a [u8]),
    /// A string edited in place (`APPEND`, `SETRANGE`): Redis reports its
    /// encoding as `raw` whatever its length.
    Raw(&'a [u8]),
    List(&'a crate::list::List),
    Hash(&'a Hash),
    Set(&'a Set),
    ZSet(&'a crate::zset::ZSet),
    Stream(&'a crate::stream::Stream),
}

impl<'a> ValueRef<'a> {
    pub fn value_type(self) -> ValueType {
        match self {
            ValueRef::Int(_) | ValueRef::Str(_) | ValueRef::Raw(_) => ValueType::String,
            ValueRef::List(_) => ValueType::List,
            ValueRef::Hash(_) => ValueType::Hash,
            ValueRef::Set(_) => ValueType::Set,
            ValueRef::ZSet(_) => ValueType::ZSet,
            ValueRef::Stream(_) => ValueType::Stream,
        }
    }

    /// The encoding name `OBJECT ENCODING` reports.
    pub fn encoding(self) -> &'static str {
        match self {
            ValueRef::Int(_) => "int",
            ValueRef::Str(s) if s.len() <= EMBSTR_MAX => "embstr",
            ValueRef::Str(_) | ValueRef::Raw(_) => "raw",
            // Redis 7.0 keeps every list in a quicklist.
            ValueRef::List(_) => "quicklist",
            ValueRef::Hash(h) => h.encoding(),
            ValueRef::Set(s) => s.encoding(),
            ValueRef::ZSet(z) => z.encoding(),
            ValueRef::Stream(_) => "stream",
        }
    }

    /// A string's bytes, formatting an integer into `buf`; `None` for other types.
    pub fn as_bytes(self, buf: &'a mut itoa_buf::Buf) -> Option<&'a [u8]> {
        match self {
            ValueRef::Int(i) => Some(buf.format(i)),
            ValueRef::Str(s) | ValueRef::Raw(s) => Some(s),
            ValueRef::List(_) => None,
            ValueRef::Hash(_) | ValueRef::Set(_) => None,
            ValueRef::ZSet(_) | ValueRef::Stream(_) => None,
        }
    }

    pub fn is_string(self) -> bool {
        matches!(self, ValueRef::Int(_) | ValueRef::Str(_) | ValueRef::Raw(_))
    }

    /// An owned copy (of a collection: a handle sharing its storage, which
    /// is copied on the first write to either).
    pub fn to_value(self) -> Value {
        match self {
            ValueRef::Hash(h) => Value::Hash(h.clone()),
            ValueRef::Set(s) => Value::Set(s.clone()),
            ValueRef::Int(i) => Value::Int(i),
            ValueRef::Str(s) => Value::Str(SmallBytes::new(s)),
            ValueRef::Raw(s) => Value::Raw(std::sync::Arc::new(s.to_vec())),
            ValueRef::List(l) => Value::List(std::sync::Arc::new(l.clone())),
            ValueRef::ZSet(z) => Value::ZSet(std::sync::Arc::new(z.clone())),
            ValueRef::Stream(x) => Value::Stream(std::sync::Arc::new(x.clone())),
        }
    }
}

/// Longest string Redis stores as `embstr` (reported by `OBJECT ENCODING`).
pub const EMBSTR_MAX: usize = 44;

impl Value {
    /// Stores a string the way Redis's `tryObjectEncoding` would: as an
    /// integer when it is a canonical one of at most 20 characters.
    pub fn from_bytes(s: &[u8]) -> Value {
        if s.len() <= 20 {
            if let Some(i) = parse_canonical_i64(s) {
                return Value::Int(i);
            }
        }
        Value::Str(SmallBytes::new(s))
    }

    pub fn from_vec(v: Vec<u8>) -> Value {
        if v.len() <= 20 {
            if let Some(i) = parse_canonical_i64(&v) {
                return Value::Int(i);
            }
        }
        Value::Str(SmallBytes::from_vec(v))
    }

    pub fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Value::Int(i) => ValueRef::Int(*i),
            Value::Str(s) => ValueRef::Str(s),
            Value::Raw(b) => ValueRef::Raw(b.as_slice()),
            Value::List(l) => ValueRef::List(l),
            Value::Hash(h) => ValueRef::Hash(h),
            Value::Set(s) => ValueRef::Set(s),
            Value::ZSet(z) => ValueRef::ZSet(z),
            Value::Stream(x) => ValueRef::Stream(x),
        }
    }

    pub fn value_type(&self) -> ValueType {
        self.as_ref().value_type()
    }

    /// The encoding name `OBJECT ENCODING` reports.
    pub fn encoding(&self) -> &'static str {
        self.as_ref().encoding()
    }

    /// Heap bytes owned by the value (for memory accounting).
    pub fn heap_size(&self) -> usize {
        match self {
            Value::Int(_) => 0,
            Value::Str(s) => s.heap_size(),
            Value::Raw(b) => 24 + b.capacity(),
            Value::List(l) => std::mem::size_of::<crate::list::List>() + 16 + l.heap_size(),
            Value::Hash(h) => h.heap_size(),
            Value::Set(s) => s.heap_size(),
            Value::ZSet(z) => std::mem::size_of::<crate::zset::ZSet>() + z.heap_size(),
            Value::Stream(x) => x.heap_bytes(),
        }
    }

    /// [`Self::heap_size`] for `MEMORY USAGE`: the elements of hash, set
    /// and sorted-set tables estimated from `samples` of them (0: all).
    /// Lists and streams are summed over their blocks, which are few.
    pub fn heap_size_sampled(&self, samples: usize) -> usize {
        match self {
            Value::Hash(h) => h.heap_size_sampled(samples),
            Value::Set(s) => s.heap_size_sampled(samples),
            Value::ZSet(z) => {
                std::mem::size_of::<crate::zset::ZSet>() + z.heap_size_sampled(samples)
            }
            other => other.heap_size(),
        }
    }
}

/// A tiny integer formatter so the store does not need a dependency for it.
pub mod itoa_buf {
    #[derive(Default)]
    pub struct Buf([u8; 20], usize);
    impl Buf {
        pub fn new() -> Self {
            Self::default()
        }
        pub fn format(&mut self, v: i64) -> &[u8] {
            let mut n = v.unsigned_abs();
            let mut i = 20;
            loop {
                i -= 1;
                self.0[i] = b'0' + (n % 10) as u8;
                n /= 10;
                if n == 0 {
                    break;
                }
            }
            if v < 0 {
                i -= 1;
                self.0[i] = b'-';
            }
            self.1 = i;
            &self.0[i..]
        }
    }
}

/// Cheap pre-check: could `s` be a canonical integer?
#[inline]
pub fn looks_numeric(s: &[u8]) -> bool {
    s.len() <= 20
        && !s.is_empty()
        && (s[0] == b'-' || s[0].is_ascii_digit())
        && s[s.len() - 1].is_ascii_digit()
}

/// Parses a canonical decimal integer (no `+`, no leading zeros, no
/// spaces), like Redis's `string2ll`.
pub fn parse_canonical_i64(s: &[u8]) -> Option<i64> {
    let (neg, d) = match s.first()? {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if d.is_empty() || d.len() > 19 || (d[0] == b'0' && (d.len() > 1 || neg)) {
        return None;
    }
    let mut v: u64 = 0;
    for &c in d {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    if neg {
        (v <= i64::MAX as u64 + 1).then(|| (v as i64).wrapping_neg())
    } else {
        i64::try_from(v).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_strings_report_raw_whatever_their_length() {
        assert_eq!(
            Value::Raw(std::sync::Arc::new(b"12".to_vec())).encoding(),
            "raw"
        );
        assert_eq!(
            Value::Raw(std::sync::Arc::new(b"12".to_vec())).value_type(),
            ValueType::String
        );
    }

    #[test]
    fn value_is_24_bytes() {
        assert_eq!(std::mem::size_of::<Value>(), 24);
    }

    #[test]
    fn integers_are_encoded_as_int_only_when_canonical() {
        assert_eq!(Value::from_bytes(b"123"), Value::Int(123));
        assert_eq!(
            Value::from_bytes(b"-9223372036854775808"),
            Value::Int(i64::MIN)
        );
        assert!(matches!(Value::from_bytes(b"0123"), Value::Str(_)));
        assert!(matches!(
            Value::from_bytes(b"9223372036854775808"),
            Value::Str(_)
        ));
        assert_eq!(Value::from_bytes(b"x").encoding(), "embstr");
        assert_eq!(Value::from_bytes(&[b'a'; 45]).encoding(), "raw");
        let mut b = itoa_buf::Buf::new();
        assert_eq!(b.format(i64::MIN), b"-9223372036854775808");
        assert_eq!(b.format(0), b"0");
    }
}
