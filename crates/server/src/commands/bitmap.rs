//! The bitmap family on the string type: SETBIT GETBIT BITCOUNT BITPOS
//! BITOP BITFIELD BITFIELD_RO, as Redis 7.0 answers them (bitops.c). The
//! bit arithmetic is `ferrokv_store::bitmap`; this file parses, looks up
//! and replies.
//!
//! A bit write changes the string in place (`Entry::string_mut`: the value
//! becomes a `raw` string, grown with room to spare), so setting bits one
//! after another costs what the bit costs, not a copy of the bitmap.
//!
//! # Hostile input
//!
//! A bit offset is refused past `proto-max-bulk-len` bytes (Redis's
//! "bit offset is not an integer or out of range"; a master's stream is
//! obeyed whatever it says, as Redis's `mustObeyClient`), so no write can
//! make a string larger than a client could send. A new bitmap is allocated
//! zeroed (pages untouched until written). `BITCOUNT`/`BITPOS` clamp any
//! `i64` range to the string; `BITOP` reads its sources by reference and
//! allocates the longest one's length once; `BITFIELD` checks every
//! operation's arguments before it touches the key, and its work is per
//! operation (at most 64 bits each).

use super::flags::*;
use super::{err, is, CommandSpec, Ctx};
use crate::notify::{NOTIFY_GENERIC, NOTIFY_NEW, NOTIFY_STRING};
use ferrokv_resp::Args;
use ferrokv_store::bitmap::{self, BitOp, Overflow};
use ferrokv_store::value::itoa_buf;
use ferrokv_store::{Value, NO_EXPIRE};
use std::sync::Arc;

const fn cmd(name: &'static str, arity: i32, flags: u32, h: super::Handler) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h)
        .group("bitmap")
        .keys(1, 1, 1)
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd("setbit", 4, WRITE | DENYOOM, setbit).since("2.2.0").complexity("O(1)").doc("Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.", "key offset value"),
    cmd("getbit", 3, READONLY | FAST, getbit).since("2.2.0").complexity("O(1)").doc("Returns a bit value by offset.", "key offset"),
    cmd("bitcount", -2, READONLY, bitcount).since("2.6.0").complexity("O(N)").doc("Counts the number of set bits (population counting) in a string.", "key [start end [BYTE|BIT]]"),
    cmd("bitpos", -3, READONLY, bitpos).since("2.8.7").complexity("O(N)").doc("Finds the first set (1) or clear (0) bit in a string.", "key bit [start [end [BYTE|BIT]]]"),
    cmd("bitop", -4, WRITE | DENYOOM, bitop).keys(2, -1, 1).since("2.6.0").complexity("O(N)").doc("Performs bitwise operations on multiple strings, and stores the result.", "AND|OR|XOR|NOT destkey key [key ...]"),
    cmd("bitfield", -2, WRITE | DENYOOM, bitfield).since("3.2.0").complexity("O(1) for each subcommand specified").doc("Performs arbitrary bitfield integer operations on strings.", "key [GET encoding offset] [OVERFLOW WRAP|SAT|FAIL] [SET encoding offset value] [INCRBY encoding offset increment]"),
    cmd("bitfield_ro", -2, READONLY | FAST, bitfield_ro).since("6.0.0").complexity("O(1) for each subcommand specified").doc("Performs arbitrary read-only bitfield integer operations on strings.", "key [GET encoding offset [GET encoding offset ...]]"),
];

const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";
const BAD_BIT: &str = "ERR bit is not an integer or out of range";
const BAD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

/// A bit offset (Redis's `getBitOffsetFromArgument`): with `hash_bits`, a
/// `#n` offset means `n * bits` (BITFIELD).
fn bit_offset(ctx: &mut Ctx, arg: &[u8], hash_bits: Option<u32>) -> Option<u64> {
    let (digits, mul) = match hash_bits {
        Some(bits) if arg.first() == Some(&b'#') => (&arg[1..], i64::from(bits)),
        _ => (arg, 1),
    };
    let Some(v) = ferrokv_resp::parse_i64(digits) else {
        ctx.error(BAD_OFFSET);
        return None;
    };
    let v = v.wrapping_mul(mul);
    let obey = ctx.srv.repl.master_client_id() == Some(ctx.client.id);
    if v < 0 || (!obey && (v as u64 >> 3) >= ctx.srv.config.proto_max_bulk_len) {
        ctx.error(BAD_OFFSET);
        return None;
    }
    Some(v as u64)
}

/// SETBIT key offset value
fn setbit(ctx: &mut Ctx, args: Args) {
    let Some(offset) = bit_offset(ctx, args.get(2), None) else {
        return;
    };
    let on = match ferrokv_resp::parse_i64(args.get(3)) {
        Some(v) if v & !1 == 0 => v == 1,
        _ => return ctx.error(BAD_BIT),
    };
    let key = args.get(1);
    let db = ctx.client.db;
    let lru = ctx.srv.lru_clock;
    let need = (offset >> 3) as usize + 1;
    let old = match ctx.srv.lookup_write(db, key, ctx.now_ms) {
        None => {
            let mut v = vec![0u8; need];
            bitmap::set_bit(&mut v, offset, on);
            ctx.srv.keyspace.dbs[db].upsert(key, Value::Raw(Arc::new(v)), NO_EXPIRE, lru);
            ctx.notify(NOTIFY_NEW, "new", key);
            false
        }
        Some(e) => {
            let Some(v) = e.string_mut() else {
                return ctx.error(err::WRONGTYPE);
            };
            if v.len() < need {
                v.resize(need, 0);
            }
            bitmap::set_bit(v, offset, on)
        }
    };
    ctx.modified(1);
    ctx.notify(NOTIFY_STRING, "setbit", key);
    ctx.client.out.int(old as i64);
}

/// GETBIT key offset
fn getbit(ctx: &mut Ctx, args: Args) {
    let Some(offset) = bit_offset(ctx, args.get(2), None) else {
        return;
    };
    let db = ctx.client.db;
    let bit = match ctx.srv.lookup_read(db, args.get(1), ctx.now_ms) {
        None => false,
        Some(e) => {
            let mut buf = itoa_buf::Buf::new();
            let Some(s) = e.value().as_bytes(&mut buf) else {
                return ctx.error(err::WRONGTYPE);
            };
            bitmap::get_bit(s, offset)
        }
    };
    ctx.client.out.int(bit as i64);
}

/// `BYTE|BIT` (the unit of a BITCOUNT/BITPOS range): `Some(true)` for bits.
fn unit(arg: &[u8]) -> Option<bool> {
    if is(arg, "bit") {
        Some(true)
    } else if is(arg, "byte") {
        Some(false)
    } else {
        None
    }
}

/// BITCOUNT key [start end [BYTE|BIT]]
fn bitcount(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    // As Redis 7.0: the key first (a missing one counts 0 whatever the
    // arguments), then the range.
    let Some(e) = ctx.srv.lookup_read(db, args.get(1), ctx.now_ms) else {
        return ctx.client.out.int(0);
    };
    let mut buf = itoa_buf::Buf::new();
    let Some(s) = e.value().as_bytes(&mut buf) else {
        return ctx.client.out.error(err::WRONGTYPE);
    };
    let range = match args.len() {
        2 => None,
        4 | 5 => {
            let (Some(start), Some(end)) = (
                ferrokv_resp::parse_i64(args.get(2)),
                ferrokv_resp::parse_i64(args.get(3)),
            ) else {
                return ctx.client.out.error(err::NOT_INTEGER);
            };
            // As Redis 7.0: a range that is empty from both ends counts 0
            // before the unit is looked at.
            if start < 0 && end < 0 && start > end {
                return ctx.client.out.int(0);
            }
            let bits = if args.len() == 5 {
                match unit(args.get(4)) {
                    Some(b) => b,
                    None => return ctx.client.out.error(err::SYNTAX),
                }
            } else {
                false
            };
            Some((start, end, bits))
        }
        _ => return ctx.client.out.error(err::SYNTAX),
    };
    let n = bitmap::bitcount(s, range);
    ctx.client.out.int(n as i64);
}

/// BITPOS key bit [start [end [BYTE|BIT]]]
fn bitpos(ctx: &mut Ctx, args: Args) {
    let bit = match ferrokv_resp::parse_i64(args.get(2)) {
        Some(0) => false,
        Some(1) => true,
        Some(_) => return ctx.error("ERR The bit argument must be 1 or 0."),
        None => return ctx.error(err::NOT_INTEGER),
    };
    let db = ctx.client.db;
    // A missing key is an infinite run of 0s.
    let Some(e) = ctx.srv.lookup_read(db, args.get(1), ctx.now_ms) else {
        return ctx.client.out.int(if bit { -1 } else { 0 });
    };
    let mut buf = itoa_buf::Buf::new();
    let Some(s) = e.value().as_bytes(&mut buf) else {
        return ctx.client.out.error(err::WRONGTYPE);
    };
    let (mut start, mut end, mut bits) = (None, None, false);
    match args.len() {
        3 => {}
        4..=6 => {
            let Some(st) = ferrokv_resp::parse_i64(args.get(3)) else {
                return ctx.client.out.error(err::NOT_INTEGER);
            };
            start = Some(st);
            if args.len() == 6 {
                match unit(args.get(5)) {
                    Some(b) => bits = b,
                    None => return ctx.client.out.error(err::SYNTAX),
                }
            }
            if args.len() >= 5 {
                let Some(en) = ferrokv_resp::parse_i64(args.get(4)) else {
                    return ctx.client.out.error(err::NOT_INTEGER);
                };
                end = Some(en);
            }
        }
        _ => return ctx.client.out.error(err::SYNTAX),
    }
    let pos = bitmap::bitpos(s, bit, start, end, bits);
    ctx.client.out.int(pos);
}

/// A source of BITOP: shared with the keyspace when it is large, else
/// copied (integers, inline strings).
enum Source {
    Missing,
    Shared(ferrokv_store::db::SharedStr),
    Owned(Vec<u8>),
}

impl Source {
    fn bytes(&self) -> &[u8] {
        match self {
            Source::Missing => &[],
            Source::Shared(s) => s.as_ref(),
            Source::Owned(v) => v,
        }
    }
}

/// BITOP AND|OR|XOR|NOT destkey key [key ...]
fn bitop(ctx: &mut Ctx, args: Args) {
    let name = args.get(1);
    let op = if is(name, "and") {
        BitOp::And
    } else if is(name, "or") {
        BitOp::Or
    } else if is(name, "xor") {
        BitOp::Xor
    } else if is(name, "not") {
        BitOp::Not
    } else {
        return ctx.error(err::SYNTAX);
    };
    if op == BitOp::Not && args.len() != 4 {
        return ctx.error("ERR BITOP NOT must be called with a single source key.");
    }
    let db = ctx.client.db;
    let mut sources = Vec::with_capacity(args.len() - 3);
    for key in args.iter().skip(3) {
        let src = match ctx.srv.lookup_read(db, key, ctx.now_ms) {
            None => Source::Missing,
            Some(e) => {
                let mut buf = itoa_buf::Buf::new();
                match e.shared_str() {
                    Some(shared) => Source::Shared(shared),
                    None => match e.value().as_bytes(&mut buf) {
                        Some(s) => Source::Owned(s.to_vec()),
                        None => return ctx.error(err::WRONGTYPE),
                    },
                }
            }
        };
        sources.push(src);
    }
    let slices: Vec<&[u8]> = sources.iter().map(Source::bytes).collect();
    let result = bitmap::bitop(op, &slices);
    drop(slices);
    drop(sources);
    let dst = args.get(2);
    let n = result.len();
    if n == 0 {
        if ctx.srv.exists(db, dst, ctx.now_ms) {
            if let Some(old) = ctx.srv.keyspace.dbs[db].remove(dst) {
                ctx.srv.drop_value(old);
            }
            ctx.modified(1);
            ctx.notify(NOTIFY_GENERIC, "del", dst);
        }
    } else {
        let lru = ctx.srv.lru_clock;
        match ctx.srv.keyspace.dbs[db].upsert(dst, Value::Raw(Arc::new(result)), NO_EXPIRE, lru) {
            Some(old) => ctx.srv.drop_value(old),
            None => ctx.notify(NOTIFY_NEW, "new", dst),
        }
        ctx.modified(1);
        ctx.notify(NOTIFY_STRING, "set", dst);
    }
    ctx.client.out.int(n as i64);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum FieldOp {
    Get,
    Set,
    IncrBy,
}

struct Field {
    op: FieldOp,
    offset: u64,
    value: i64,
    overflow: Overflow,
    bits: u32,
    signed: bool,
}

/// `i<1..64>` or `u<1..63>`.
fn field_type(arg: &[u8]) -> Option<(bool, u32)> {
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return None,
    };
    let bits = ferrokv_resp::parse_i64(&arg[1..])?;
    let max = if signed { 64 } else { 63 };
    (1..=max).contains(&bits).then_some((signed, bits as u32))
}

/// BITFIELD key [GET type offset | [OVERFLOW WRAP|SAT|FAIL] SET type offset value | INCRBY type offset increment ...]
fn bitfield(ctx: &mut Ctx, args: Args) {
    bitfield_generic(ctx, args, false)
}

/// BITFIELD_RO key [GET type offset ...]
fn bitfield_ro(ctx: &mut Ctx, args: Args) {
    bitfield_generic(ctx, args, true)
}

fn bitfield_generic(ctx: &mut Ctx, args: Args, readonly_command: bool) {
    let mut fields: Vec<Field> = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut readonly = true;
    let mut highest = 0u64;
    let n = args.len();
    let mut j = 2;
    while j < n {
        let rem = n - j - 1;
        let sub = args.get(j);
        let op = if is(sub, "get") && rem >= 2 {
            FieldOp::Get
        } else if is(sub, "set") && rem >= 3 {
            FieldOp::Set
        } else if is(sub, "incrby") && rem >= 3 {
            FieldOp::IncrBy
        } else if is(sub, "overflow") && rem >= 1 {
            let t = args.get(j + 1);
            overflow = if is(t, "wrap") {
                Overflow::Wrap
            } else if is(t, "sat") {
                Overflow::Sat
            } else if is(t, "fail") {
                Overflow::Fail
            } else {
                return ctx.error("ERR Invalid OVERFLOW type specified");
            };
            j += 2;
            continue;
        } else {
            return ctx.error(err::SYNTAX);
        };
        let Some((signed, bits)) = field_type(args.get(j + 1)) else {
            return ctx.error(BAD_TYPE);
        };
        let Some(offset) = bit_offset(ctx, args.get(j + 2), Some(bits)) else {
            return;
        };
        let mut value = 0;
        if op != FieldOp::Get {
            readonly = false;
            highest = highest.max(offset + u64::from(bits) - 1);
            let Some(v) = ferrokv_resp::parse_i64(args.get(j + 3)) else {
                return ctx.error(err::NOT_INTEGER);
            };
            value = v;
        }
        fields.push(Field {
            op,
            offset,
            value,
            overflow,
            bits,
            signed,
        });
        j += if op == FieldOp::Get { 3 } else { 4 };
    }
    let db = ctx.client.db;
    let key = args.get(1);
    if readonly {
        let e = ctx.srv.lookup_read(db, key, ctx.now_ms);
        let mut buf = itoa_buf::Buf::new();
        let s: &[u8] = match e {
            None => &[],
            Some(e) => match e.value().as_bytes(&mut buf) {
                Some(s) => s,
                None => return ctx.client.out.error(err::WRONGTYPE),
            },
        };
        let mut replies = Vec::with_capacity(fields.len());
        for f in &fields {
            replies.push(read_field(s, f));
        }
        ctx.client.out.array(replies.len());
        for r in replies {
            ctx.client.out.int(r);
        }
        return;
    }
    if readonly_command {
        return ctx.error("ERR BITFIELD_RO only supports the GET subcommand");
    }
    let lru = ctx.srv.lru_clock;
    let need = (highest >> 3) as usize + 1;
    let (replies, changes, created) = match ctx.srv.lookup_write(db, key, ctx.now_ms) {
        None => {
            let mut v = vec![0u8; need];
            let (replies, changes) = apply_fields(&mut v, &fields);
            ctx.srv.keyspace.dbs[db].upsert(key, Value::Raw(Arc::new(v)), NO_EXPIRE, lru);
            (replies, changes, true)
        }
        Some(e) => {
            let Some(v) = e.string_mut() else {
                return ctx.client.out.error(err::WRONGTYPE);
            };
            if v.len() < need {
                v.resize(need, 0);
            }
            let (replies, changes) = apply_fields(v, &fields);
            (replies, changes, false)
        }
    };
    if created {
        ctx.notify(NOTIFY_NEW, "new", key);
    }
    ctx.client.out.array(replies.len());
    for r in replies {
        match r {
            Some(i) => ctx.client.out.int(i),
            None => ctx.client.out.null(),
        }
    }
    if changes > 0 {
        ctx.modified(changes);
        ctx.notify(NOTIFY_STRING, "setbit", key);
    }
}

/// Runs BITFIELD's operations over `v` (long enough for every write): the
/// replies (`None`: an `OVERFLOW FAIL` that wrote nothing) and the writes.
fn apply_fields(v: &mut [u8], fields: &[Field]) -> (Vec<Option<i64>>, u64) {
    let mut replies: Vec<Option<i64>> = Vec::with_capacity(fields.len());
    let mut changes = 0;
    for f in fields {
        if f.op == FieldOp::Get {
            replies.push(Some(read_field(v, f)));
            continue;
        }
        let written = if f.signed {
            let old = bitmap::get_signed(v, f.offset, f.bits);
            let (over, limit) = if f.op == FieldOp::IncrBy {
                bitmap::signed_overflow(old, f.value, f.bits, f.overflow)
            } else {
                bitmap::signed_overflow(f.value, 0, f.bits, f.overflow)
            };
            let new = match (over, f.op) {
                (0, FieldOp::IncrBy) => old.wrapping_add(f.value),
                (0, _) => f.value,
                _ => limit,
            };
            (over == 0 || f.overflow != Overflow::Fail).then(|| {
                bitmap::set_field(v, f.offset, f.bits, new as u64);
                if f.op == FieldOp::IncrBy {
                    new
                } else {
                    old
                }
            })
        } else {
            let old = bitmap::get_unsigned(v, f.offset, f.bits);
            let (over, limit) = if f.op == FieldOp::IncrBy {
                bitmap::unsigned_overflow(old, f.value, f.bits, f.overflow)
            } else {
                bitmap::unsigned_overflow(f.value as u64, 0, f.bits, f.overflow)
            };
            let new = match (over, f.op) {
                (0, FieldOp::IncrBy) => old.wrapping_add(f.value as u64),
                (0, _) => f.value as u64,
                _ => limit,
            };
            (over == 0 || f.overflow != Overflow::Fail).then(|| {
                bitmap::set_field(v, f.offset, f.bits, new);
                if f.op == FieldOp::IncrBy {
                    new as i64
                } else {
                    old as i64
                }
            })
        };
        if written.is_some() {
            changes += 1;
        }
        replies.push(written);
    }
    (replies, changes)
}

/// A GET of `f` over `s` (zero-padded).
fn read_field(s: &[u8], f: &Field) -> i64 {
    if f.signed {
        bitmap::get_signed(s, f.offset, f.bits)
    } else {
        bitmap::get_unsigned(s, f.offset, f.bits) as i64
    }
}
