//! How a YCSB operation becomes Redis commands, for each data model.
//!
//! - `hash` (YCSB's Redis binding): a record is a hash of `field0..fieldN`;
//!   read = HGETALL, update = HSET of one field, insert = HSET of all
//!   fields plus ZADD of the key to a sorted-set index, scan = ZRANGEBYLEX
//!   on that index then HGETALL of each key.
//! - `string`: a record is one string holding the fields concatenated, for
//!   servers without hashes and sorted sets; read = GET, update and insert =
//!   SET, scan = SCAN with MATCH on the key prefix then MGET of the keys it
//!   returned. Strings have no order, so this scan is "some N records", not
//!   a key range: comparable between servers, not with the hash model.
//!
//! Scans and read-modify-writes take two round trips: the second stage
//! depends on the first stage's reply. The engine pipelines every first
//! stage of a batch, then every second stage.

use crate::client::Connection;
use crate::workload::{OpKind, Operation, RecordLayout};
use ferrokv_resp::Frame;
use serde::Serialize;

/// The key of the sorted set the hash model indexes records in.
pub const INDEX_KEY: &str = "ycsb:index";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DataModel {
    Hash,
    String,
}

/// What one operation came to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The server's error reply or an unexpected reply shape.
    pub error: Option<String>,
    /// Whether the record (every record, for a scan) existed.
    pub found: bool,
    /// A value read back differed from the one written.
    pub mismatch: bool,
}

impl Outcome {
    fn found() -> Outcome {
        Outcome {
            found: true,
            ..Outcome::default()
        }
    }

    fn error(reply: &Frame, expected: &str) -> Outcome {
        let error = match reply {
            Frame::Error(e) => String::from_utf8_lossy(e).into_owned(),
            other => format!("expected {expected}, got {other:?}"),
        };
        Outcome {
            error: Some(error),
            ..Outcome::default()
        }
    }
}

/// After the first stage's replies: finished, or a second stage queued
/// whose replies must be read next.
pub enum AfterFirst {
    Done(Outcome),
    Second { replies: usize, first: Outcome },
}

pub struct Commands<'a> {
    pub model: DataModel,
    pub layout: &'a RecordLayout,
    pub verify: bool,
    scratch: Vec<u8>,
}

impl<'a> Commands<'a> {
    pub fn new(model: DataModel, layout: &'a RecordLayout, verify: bool) -> Commands<'a> {
        Commands {
            model,
            layout,
            verify,
            scratch: Vec::new(),
        }
    }

    /// Queues the first stage of `op`; returns how many replies it expects.
    pub fn queue_first(&mut self, conn: &mut Connection, op: &Operation) -> usize {
        let key = self.layout.key(op.keynum);
        match (self.model, op.kind) {
            (DataModel::Hash, OpKind::Read | OpKind::ReadModifyWrite) => {
                conn.queue(&[b"HGETALL".as_slice(), key.as_bytes()]);
                1
            }
            (DataModel::Hash, OpKind::Update) => {
                self.queue_hset_field(conn, &key, op.keynum, op.field);
                1
            }
            (DataModel::Hash, OpKind::Insert) => {
                let mut args: Vec<Vec<u8>> = vec![b"HSET".to_vec(), key.clone().into_bytes()];
                for f in 0..self.layout.field_count {
                    args.push(self.layout.field_name(f).into_bytes());
                    let mut v = Vec::new();
                    self.layout.field_value(op.keynum, f, &mut v);
                    args.push(v);
                }
                conn.queue(&args);
                conn.queue(&[
                    b"ZADD".as_slice(),
                    INDEX_KEY.as_bytes(),
                    b"0",
                    key.as_bytes(),
                ]);
                2
            }
            (DataModel::Hash, OpKind::Scan) => {
                let start = format!("[{key}");
                let count = op.scan_length.to_string();
                conn.queue(&["ZRANGEBYLEX", INDEX_KEY, &start, "+", "LIMIT", "0", &count]);
                1
            }
            (DataModel::String, OpKind::Read | OpKind::ReadModifyWrite) => {
                conn.queue(&[b"GET".as_slice(), key.as_bytes()]);
                1
            }
            (DataModel::String, OpKind::Update | OpKind::Insert) => {
                let value = self.layout.string_value(op.keynum);
                conn.queue(&[b"SET".as_slice(), key.as_bytes(), &value]);
                1
            }
            (DataModel::String, OpKind::Scan) => {
                let pattern = format!("{}*", self.layout.key_prefix);
                let count = op.scan_length.to_string();
                conn.queue(&["SCAN", "0", "MATCH", &pattern, "COUNT", &count]);
                1
            }
        }
    }

    fn queue_hset_field(&mut self, conn: &mut Connection, key: &str, keynum: u64, field: usize) {
        self.scratch.clear();
        self.layout.field_value(keynum, field, &mut self.scratch);
        let name = self.layout.field_name(field);
        conn.queue(&[
            b"HSET".as_slice(),
            key.as_bytes(),
            name.as_bytes(),
            &self.scratch,
        ]);
    }

    /// Judges the first stage's replies and queues a second stage if the
    /// operation has one.
    pub fn after_first(
        &mut self,
        conn: &mut Connection,
        op: &Operation,
        replies: &[Frame],
    ) -> AfterFirst {
        let reply = &replies[0];
        match (self.model, op.kind) {
            (DataModel::Hash, OpKind::Read) => AfterFirst::Done(self.check_hash(op.keynum, reply)),
            (DataModel::String, OpKind::Read) => {
                AfterFirst::Done(self.check_string(op.keynum, reply))
            }
            (DataModel::Hash, OpKind::Update) => AfterFirst::Done(expect_integer(reply)),
            (DataModel::String, OpKind::Update | OpKind::Insert) => {
                AfterFirst::Done(expect_ok(reply))
            }
            (DataModel::Hash, OpKind::Insert) => {
                let hset = expect_integer(&replies[0]);
                if hset.error.is_some() {
                    return AfterFirst::Done(hset);
                }
                AfterFirst::Done(expect_integer(&replies[1]))
            }
            (_, OpKind::ReadModifyWrite) => {
                let first = match self.model {
                    DataModel::Hash => self.check_hash(op.keynum, reply),
                    DataModel::String => self.check_string(op.keynum, reply),
                };
                if first.error.is_some() {
                    return AfterFirst::Done(first);
                }
                let key = self.layout.key(op.keynum);
                match self.model {
                    DataModel::Hash => self.queue_hset_field(conn, &key, op.keynum, op.field),
                    DataModel::String => {
                        let value = self.layout.string_value(op.keynum);
                        conn.queue(&[b"SET".as_slice(), key.as_bytes(), &value]);
                    }
                }
                AfterFirst::Second { replies: 1, first }
            }
            (DataModel::Hash, OpKind::Scan) => {
                let Some(keys) = bulk_list(reply) else {
                    return AfterFirst::Done(Outcome::error(reply, "an array of keys"));
                };
                self.queue_fetch(conn, keys, "HGETALL")
            }
            (DataModel::String, OpKind::Scan) => {
                // [cursor, [keys...]]
                let keys = match reply {
                    Frame::Array(parts) if parts.len() == 2 => bulk_list(&parts[1]),
                    _ => None,
                };
                let Some(mut keys) = keys else {
                    return AfterFirst::Done(Outcome::error(reply, "a SCAN reply"));
                };
                keys.truncate(op.scan_length);
                if keys.is_empty() {
                    return AfterFirst::Done(Outcome::default());
                }
                let mut args: Vec<&[u8]> = vec![b"MGET"];
                args.extend(keys.iter().map(|k| k.as_slice()));
                conn.queue(&args);
                AfterFirst::Second {
                    replies: 1,
                    first: Outcome::found(),
                }
            }
        }
    }

    fn queue_fetch(&mut self, conn: &mut Connection, keys: Vec<Vec<u8>>, cmd: &str) -> AfterFirst {
        if keys.is_empty() {
            return AfterFirst::Done(Outcome::default());
        }
        for k in &keys {
            conn.queue(&[cmd.as_bytes(), k.as_slice()]);
        }
        AfterFirst::Second {
            replies: keys.len(),
            first: Outcome::found(),
        }
    }

    /// Judges the second stage's replies.
    pub fn after_second(&mut self, op: &Operation, first: Outcome, replies: &[Frame]) -> Outcome {
        match (self.model, op.kind) {
            (DataModel::Hash, OpKind::ReadModifyWrite) => {
                let w = expect_integer(&replies[0]);
                merge(first, w)
            }
            (DataModel::String, OpKind::ReadModifyWrite) => merge(first, expect_ok(&replies[0])),
            (DataModel::Hash, OpKind::Scan) => {
                let mut out = first;
                for r in replies {
                    match hash_pairs(r) {
                        Some(pairs) if pairs.is_empty() => out.found = false,
                        Some(pairs) => {
                            if self.verify && pairs.len() != self.layout.field_count {
                                out.mismatch = true;
                            }
                        }
                        None => return Outcome::error(r, "a hash"),
                    }
                }
                out
            }
            (DataModel::String, OpKind::Scan) => {
                let mut out = first;
                let Some(values) = (match &replies[0] {
                    Frame::Array(v) => Some(v),
                    _ => None,
                }) else {
                    return Outcome::error(&replies[0], "an MGET array");
                };
                for v in values {
                    match v {
                        Frame::Bulk(b) => {
                            if self.verify && b.len() != self.layout.value_size() {
                                out.mismatch = true;
                            }
                        }
                        Frame::Null => out.found = false,
                        other => return Outcome::error(other, "a bulk string"),
                    }
                }
                out
            }
            _ => unreachable!("{:?} has no second stage", op.kind),
        }
    }

    fn check_hash(&mut self, keynum: u64, reply: &Frame) -> Outcome {
        let Some(pairs) = hash_pairs(reply) else {
            return Outcome::error(reply, "a hash");
        };
        if pairs.is_empty() {
            return Outcome::default();
        }
        let mut out = Outcome::found();
        if self.verify {
            if pairs.len() != self.layout.field_count {
                out.mismatch = true;
            }
            for (name, value) in pairs {
                let field = std::str::from_utf8(name)
                    .ok()
                    .and_then(|n| n.strip_prefix("field"))
                    .and_then(|n| n.parse::<usize>().ok());
                let Some(field) = field else {
                    out.mismatch = true;
                    continue;
                };
                self.scratch.clear();
                self.layout.field_value(keynum, field, &mut self.scratch);
                if value != self.scratch.as_slice() {
                    out.mismatch = true;
                }
            }
        }
        out
    }

    fn check_string(&mut self, keynum: u64, reply: &Frame) -> Outcome {
        match reply {
            Frame::Null => Outcome::default(),
            Frame::Bulk(b) => {
                let mut out = Outcome::found();
                if self.verify && *b != self.layout.string_value(keynum) {
                    out.mismatch = true;
                }
                out
            }
            other => Outcome::error(other, "a bulk string"),
        }
    }
}

fn merge(first: Outcome, second: Outcome) -> Outcome {
    Outcome {
        error: first.error.or(second.error),
        found: first.found,
        mismatch: first.mismatch || second.mismatch,
    }
}

fn expect_integer(reply: &Frame) -> Outcome {
    match reply {
        Frame::Integer(_) => Outcome::found(),
        other => Outcome::error(other, "an integer"),
    }
}

fn expect_ok(reply: &Frame) -> Outcome {
    match reply {
        Frame::Simple(s) if s == b"OK" => Outcome::found(),
        other => Outcome::error(other, "+OK"),
    }
}

/// The strings of an array reply.
fn bulk_list(reply: &Frame) -> Option<Vec<Vec<u8>>> {
    match reply {
        Frame::Array(items) | Frame::Set(items) => items
            .iter()
            .map(|f| match f {
                Frame::Bulk(b) | Frame::Simple(b) => Some(b.clone()),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// The (field, value) pairs of an HGETALL reply, RESP2 or RESP3.
fn hash_pairs(reply: &Frame) -> Option<Vec<(&[u8], &[u8])>> {
    match reply {
        Frame::Array(items) if items.len() % 2 == 0 => items
            .chunks(2)
            .map(|p| Some((p[0].as_bytes()?, p[1].as_bytes()?)))
            .collect(),
        Frame::Map(pairs) => pairs
            .iter()
            .map(|(k, v)| Some((k.as_bytes()?, v.as_bytes()?)))
            .collect(),
        _ => None,
    }
}

/// Whether the server has the commands the hash model needs: HLEN and ZCARD
/// on a key that does not exist answer 0 where hashes and sorted sets exist
/// and "unknown command" where they do not.
pub fn server_supports_hashes(conn: &mut Connection) -> Result<bool, crate::client::ClientError> {
    for cmd in ["HLEN", "ZCARD"] {
        let reply = conn.call(&[cmd, "ferrokv-bench:probe"])?;
        if !matches!(reply, Frame::Integer(_)) {
            return Ok(false);
        }
    }
    Ok(true)
}
