//! What a run does, independent of any server: YCSB's core workloads as
//! operation mixes, the record layout (key names, fields, values), and the
//! per-connection generator that turns a seed into a stream of operations.
//!
//! Values are a pure function of (record, field), as with YCSB's
//! `dataintegrity` option: an update writes the same bytes a load wrote, so
//! any read can be checked exactly (`--verify`) without the client keeping a
//! copy of the data set.

use crate::generator::{fnv_hash64, Distribution, KeyChooser};
use rand::Rng;
use serde::Serialize;

/// The operation types of YCSB's core workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum OpKind {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

impl OpKind {
    pub const ALL: [OpKind; 5] = [
        OpKind::Read,
        OpKind::Update,
        OpKind::Insert,
        OpKind::Scan,
        OpKind::ReadModifyWrite,
    ];

    pub fn index(self) -> usize {
        self as usize
    }

    /// The name YCSB prints for it.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "READ",
            OpKind::Update => "UPDATE",
            OpKind::Insert => "INSERT",
            OpKind::Scan => "SCAN",
            OpKind::ReadModifyWrite => "READ-MODIFY-WRITE",
        }
    }
}

/// YCSB's core workloads A–F.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Update heavy: 50% read, 50% update, zipfian.
    A,
    /// Read mostly: 95% read, 5% update, zipfian.
    B,
    /// Read only: 100% read, zipfian.
    C,
    /// Read latest: 95% read, 5% insert, latest.
    D,
    /// Short ranges: 95% scan, 5% insert, zipfian.
    E,
    /// Read-modify-write: 50% read, 50% read-modify-write, zipfian.
    F,
}

/// Proportions of each operation type; they need not sum to one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Mix {
    pub read: f64,
    pub update: f64,
    pub insert: f64,
    pub scan: f64,
    pub read_modify_write: f64,
}

impl Workload {
    pub fn mix(self) -> Mix {
        let m = |read, update, insert, scan, read_modify_write| Mix {
            read,
            update,
            insert,
            scan,
            read_modify_write,
        };
        match self {
            Workload::A => m(0.5, 0.5, 0.0, 0.0, 0.0),
            Workload::B => m(0.95, 0.05, 0.0, 0.0, 0.0),
            Workload::C => m(1.0, 0.0, 0.0, 0.0, 0.0),
            Workload::D => m(0.95, 0.0, 0.05, 0.0, 0.0),
            Workload::E => m(0.0, 0.0, 0.05, 0.95, 0.0),
            Workload::F => m(0.5, 0.0, 0.0, 0.0, 0.5),
        }
    }

    pub fn default_distribution(self) -> Distribution {
        match self {
            Workload::D => Distribution::Latest,
            _ => Distribution::Zipfian,
        }
    }
}

impl Mix {
    pub fn proportion(&self, kind: OpKind) -> f64 {
        match kind {
            OpKind::Read => self.read,
            OpKind::Update => self.update,
            OpKind::Insert => self.insert,
            OpKind::Scan => self.scan,
            OpKind::ReadModifyWrite => self.read_modify_write,
        }
    }

    fn total(&self) -> f64 {
        OpKind::ALL.iter().map(|k| self.proportion(*k)).sum()
    }

    /// Draws an operation type with the mix's probabilities.
    pub fn choose<R: Rng + ?Sized>(&self, rng: &mut R) -> OpKind {
        let mut x = rng.gen::<f64>() * self.total();
        for kind in OpKind::ALL {
            let p = self.proportion(kind);
            if x < p {
                return kind;
            }
            x -= p;
        }
        // Rounding at the very top of the range: the last non-zero kind.
        *OpKind::ALL
            .iter()
            .rev()
            .find(|k| self.proportion(**k) > 0.0)
            .unwrap_or(&OpKind::Read)
    }
}

/// How records are laid out: their key names, field count and sizes.
#[derive(Debug, Clone, Serialize)]
pub struct RecordLayout {
    pub key_prefix: String,
    pub field_count: usize,
    /// Bytes of each field; the first `extra_bytes` fields have one more,
    /// so a record is exactly the value size asked for.
    pub field_length: usize,
    pub extra_bytes: usize,
}

impl RecordLayout {
    /// Splits `value_size` bytes over `field_count` fields (at least 1 byte
    /// per field).
    pub fn new(key_prefix: &str, value_size: usize, field_count: usize) -> RecordLayout {
        let field_count = field_count.max(1);
        let value_size = value_size.max(field_count);
        RecordLayout {
            key_prefix: key_prefix.to_string(),
            field_count,
            field_length: value_size / field_count,
            extra_bytes: value_size % field_count,
        }
    }

    /// Bytes of field `field`.
    pub fn field_len(&self, field: usize) -> usize {
        self.field_length + usize::from(field < self.extra_bytes)
    }

    /// YCSB's key name for record `keynum`: the prefix and the FNV hash of
    /// the number, so consecutive inserts land far apart.
    pub fn key(&self, keynum: u64) -> String {
        format!("{}{}", self.key_prefix, fnv_hash64(keynum))
    }

    pub fn field_name(&self, field: usize) -> String {
        format!("field{field}")
    }

    /// The bytes of one field of one record: printable ASCII from a
    /// SplitMix64 stream seeded by (record, field).
    pub fn field_value(&self, keynum: u64, field: usize, out: &mut Vec<u8>) {
        let mut state = fnv_hash64(keynum) ^ (field as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let start = out.len();
        let len = self.field_len(field);
        out.reserve(len);
        while out.len() - start < len {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            for b in z.to_le_bytes() {
                if out.len() - start == len {
                    break;
                }
                // 64 printable characters: ' '..'_'.
                out.push(b' ' + (b & 63));
            }
        }
    }

    /// The whole record as one string value: the fields concatenated.
    pub fn string_value(&self, keynum: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.value_size());
        for f in 0..self.field_count {
            self.field_value(keynum, f, &mut out);
        }
        out
    }

    pub fn value_size(&self) -> usize {
        self.field_count * self.field_length + self.extra_bytes
    }
}

/// One operation to perform, with everything needed to issue it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operation {
    pub kind: OpKind,
    pub keynum: u64,
    /// The field an update (or the write of a read-modify-write) sets.
    pub field: usize,
    /// Number of records a scan asks for.
    pub scan_length: usize,
}

/// Everything that shapes a run's operation stream.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadSpec {
    pub mix: Mix,
    pub distribution: Distribution,
    pub zipf_theta: f64,
    pub record_count: u64,
    pub operation_count: u64,
    pub max_scan_length: usize,
    pub layout: RecordLayout,
}

impl WorkloadSpec {
    /// The key space a zipfian chooser is sized for: loaded records plus
    /// twice the expected inserts, as YCSB's CoreWorkload does, but at
    /// most twice the records, so that redrawing keys that do not exist yet
    /// stays cheap (and a run bounded only by time has a finite key space).
    pub fn key_space(&self) -> u64 {
        let total = self.mix.total().max(f64::MIN_POSITIVE);
        let expected_inserts =
            (self.operation_count as f64 * self.mix.insert / total * 2.0).ceil() as u64;
        self.record_count
            .saturating_add(expected_inserts.min(self.record_count))
    }
}

/// Turns random numbers into operations for one connection. Insert key
/// numbers come from the caller (a counter shared by all connections).
pub struct OperationGenerator {
    spec: WorkloadSpec,
    keys: KeyChooser,
}

impl OperationGenerator {
    pub fn new(spec: &WorkloadSpec) -> OperationGenerator {
        OperationGenerator {
            keys: KeyChooser::new(spec.distribution, spec.key_space(), spec.zipf_theta),
            spec: spec.clone(),
        }
    }

    /// The next operation. `existing` is how many records are known to
    /// exist; `next_insert` is called only for an insert and returns the key
    /// number to insert.
    pub fn next<R: Rng + ?Sized>(
        &mut self,
        rng: &mut R,
        existing: u64,
        next_insert: impl FnOnce() -> u64,
    ) -> Operation {
        let kind = self.spec.mix.choose(rng);
        let keynum = match kind {
            OpKind::Insert => next_insert(),
            _ => self.keys.next(rng, existing),
        };
        let field = rng.gen_range(0..self.spec.layout.field_count);
        let scan_length = if kind == OpKind::Scan {
            rng.gen_range(1..=self.spec.max_scan_length.max(1))
        } else {
            0
        };
        Operation {
            kind,
            keynum,
            field,
            scan_length,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_values_are_deterministic_and_sized() {
        let l = RecordLayout::new("user", 1000, 10);
        assert_eq!(l.field_length, 100);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        l.field_value(7, 3, &mut a);
        l.field_value(7, 3, &mut b);
        assert_eq!(a, b);
        assert_eq!(a.len(), 100);
        let mut c = Vec::new();
        l.field_value(7, 4, &mut c);
        assert_ne!(a, c);
        assert_eq!(l.string_value(7).len(), 1000);
    }

    #[test]
    fn key_space_of_an_unbounded_run_is_finite() {
        let spec = WorkloadSpec {
            mix: Workload::D.mix(),
            distribution: Distribution::Latest,
            zipf_theta: 0.99,
            record_count: 1000,
            operation_count: u64::MAX,
            max_scan_length: 100,
            layout: RecordLayout::new("user", 100, 10),
        };
        assert_eq!(spec.key_space(), 2000);
        let read_only = WorkloadSpec {
            mix: Workload::C.mix(),
            ..spec
        };
        assert_eq!(read_only.key_space(), 1000);
    }

    #[test]
    fn records_are_exactly_the_value_size() {
        let l = RecordLayout::new("user", 1024, 10);
        assert_eq!(l.value_size(), 1024);
        assert_eq!(l.string_value(3).len(), 1024);
        let mut total = 0;
        for f in 0..10 {
            let mut v = Vec::new();
            l.field_value(3, f, &mut v);
            total += v.len();
        }
        assert_eq!(total, 1024);
    }
}
