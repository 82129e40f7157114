//! The HyperLogLog family on the string type: PFADD PFCOUNT PFMERGE
//! PFDEBUG PFSELFTEST, as Redis 7.0 answers them (hyperloglog.c). The
//! structure — Redis's bytes, sparse and dense — is
//! `ferrokv_store::hyperloglog`; this file checks types, looks up and
//! replies.
//!
//! An HLL is changed in place (`Entry::string_mut`: a `raw` string, as
//! Redis's `dbUnshareStringValue` leaves it). `PFCOUNT` of one key stores
//! the cardinality it computed in the header and, as Redis, counts that as
//! a change: watchers of the key are told, and the command is propagated,
//! so a replica's and the AOF's bytes stay the master's.
//!
//! # Hostile input
//!
//! Any string can carry the `HYLL` magic. A header that is not an HLL's is
//! Redis's `WRONGTYPE Key is not a valid HyperLogLog string value.`;
//! registers that do not add up are `INVALIDOBJ Corrupted HLL object
//! detected`, found by walks that never read past the string nor index a
//! register past the last. Work is per element (PFADD), per register
//! (PFCOUNT, PFMERGE) or per byte of the string. `PFSELFTEST` runs a fixed
//! amount of work whatever `hll-sparse-max-bytes` says (its sparse limit
//! is capped at the default).

use super::flags::*;
use super::{err, is, CommandSpec, Ctx};
use crate::notify::{NOTIFY_NEW, NOTIFY_STRING};
use ferrokv_resp::Args;
use ferrokv_store::hyperloglog::{self as hll, Encoding};
use ferrokv_store::{Lookup, Value, ValueRef, NO_EXPIRE};
use std::sync::Arc;

const fn cmd(name: &'static str, arity: i32, flags: u32, h: super::Handler) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h).group("hyperloglog")
}

pub static COMMANDS: &[CommandSpec] = &[
    cmd("pfadd", -2, WRITE | DENYOOM | FAST, pfadd).keys(1, 1, 1).since("2.8.9").complexity("O(1) to add every element.").doc("Adds elements to a HyperLogLog key. Creates the key if it doesn't exist.", "key [element [element ...]]"),
    cmd("pfcount", -2, READONLY | MAY_REPLICATE, pfcount).keys(1, -1, 1).since("2.8.9").complexity("O(1) with a very small average constant time when called with a single key. O(N) with N being the number of keys, and much bigger constant times, when called with multiple keys.").doc("Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s).", "key [key ...]"),
    cmd("pfmerge", -2, WRITE | DENYOOM, pfmerge).keys(1, -1, 1).since("2.8.9").complexity("O(N) to merge N HyperLogLogs, but with high constant times.").doc("Merges one or more HyperLogLog values into a single key.", "destkey [sourcekey [sourcekey ...]]"),
    cmd("pfdebug", 3, WRITE | DENYOOM | ADMIN, pfdebug).keys(2, 2, 1).since("2.8.9").complexity("N/A").doc("Internal commands for debugging HyperLogLog values.", "subcommand key"),
    cmd("pfselftest", 1, ADMIN, pfselftest).since("2.8.9").complexity("N/A").doc("An internal command for testing HyperLogLog values.", ""),
];

const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";

/// The HLL encoding of a value, or the error Redis's `isHLLObjectOrReply`
/// replies (an integer-encoded string is no HLL).
fn check(v: ValueRef<'_>) -> Result<(Encoding, &[u8]), &'static str> {
    match v {
        ValueRef::Str(s) | ValueRef::Raw(s) => hll::encoding(s).map(|e| (e, s)).ok_or(NOT_HLL),
        ValueRef::Int(_) => Err(NOT_HLL),
        _ => Err(err::WRONGTYPE),
    }
}

fn sparse_max(ctx: &Ctx) -> usize {
    usize::try_from(ctx.srv.config.hll_sparse_max_bytes).unwrap_or(usize::MAX)
}

/// PFADD key [element ...]
fn pfadd(ctx: &mut Ctx, args: Args) {
    let key = args.get(1);
    let db = ctx.client.db;
    let max = sparse_max(ctx);
    let lru = ctx.srv.lru_clock;
    let updated = match ctx.srv.lookup_write(db, key, ctx.now_ms) {
        None => {
            let mut v = hll::new_sparse();
            let mut updated = 1;
            for ele in args.iter().skip(2) {
                // A new HLL is well formed: adding cannot fail.
                updated += u64::from(hll::add(&mut v, ele, max).unwrap_or(false));
            }
            // Creating the key counts as an update: the cache is marked
            // stale even with no elements (Redis's bytes).
            hll::invalidate_cache(&mut v);
            ctx.srv.keyspace.dbs[db].upsert(key, Value::Raw(Arc::new(v)), NO_EXPIRE, lru);
            ctx.notify(NOTIFY_NEW, "new", key);
            updated
        }
        Some(e) => {
            if let Err(m) = check(e.value()) {
                return ctx.error(m);
            }
            let v = e.string_mut().expect("a string");
            let mut updated = 0;
            for ele in args.iter().skip(2) {
                match hll::add(v, ele, max) {
                    Ok(changed) => updated += u64::from(changed),
                    Err(hll::Corrupt) => return ctx.error(CORRUPT),
                }
            }
            if updated > 0 {
                hll::invalidate_cache(v);
            }
            updated
        }
    };
    if updated > 0 {
        ctx.modified(updated);
        ctx.notify(NOTIFY_STRING, "pfadd", key);
    }
    ctx.client.out.int(i64::from(updated > 0));
}

/// PFCOUNT key [key ...]
fn pfcount(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    if args.len() > 2 {
        // The cardinality of the union, registers merged into one byte
        // each; missing keys are empty HLLs.
        let mut max: Box<hll::Union> = vec![0u8; hll::REGISTERS]
            .into_boxed_slice()
            .try_into()
            .expect("REGISTERS bytes");
        for key in args.iter().skip(1) {
            let Some(e) = ctx.srv.lookup_read(db, key, ctx.now_ms) else {
                continue;
            };
            let merged = match check(e.value()) {
                Ok((_, s)) => hll::merge(&mut max, s).map_err(|_| CORRUPT),
                Err(m) => Err(m),
            };
            if let Err(m) = merged {
                return ctx.error(m);
            }
        }
        return ctx.client.out.int(hll::count_union(&max) as i64);
    }

    let key = args.get(1);
    let (card, stale, unshare) = {
        let Some(e) = ctx.srv.lookup_read(db, key, ctx.now_ms) else {
            return ctx.client.out.int(0);
        };
        let is_raw = matches!(e.value(), ValueRef::Raw(_));
        let s = match check(e.value()) {
            Ok((_, s)) => s,
            Err(m) => return ctx.error(m),
        };
        match hll::cached_cardinality(s) {
            Some(c) => (c, false, !is_raw),
            None => match hll::count(s) {
                Ok(c) => (c, true, true),
                Err(hll::Corrupt) => return ctx.error(CORRUPT),
            },
        }
    };
    if unshare {
        // As Redis's dbUnshareStringValue: the value becomes a raw string
        // it can write the cardinality into.
        if let Lookup::Live(e) = ctx.srv.keyspace.dbs[db].lookup(key, ctx.now_ms, false) {
            if let Some(v) = e.string_mut() {
                if stale {
                    hll::set_cached_cardinality(v, card);
                }
            }
        }
        if stale {
            ctx.modified(1);
        }
    }
    ctx.client.out.int(card as i64);
}

/// PFMERGE destkey [sourcekey ...]
fn pfmerge(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let max_bytes = sparse_max(ctx);
    let mut max: Box<hll::Union> = vec![0u8; hll::REGISTERS]
        .into_boxed_slice()
        .try_into()
        .expect("REGISTERS bytes");
    // The destination is a source too; one dense source makes the
    // destination dense before it is written (as Redis 7.0).
    let mut use_dense = false;
    for key in args.iter().skip(1) {
        let Some(e) = ctx.srv.lookup_read(db, key, ctx.now_ms) else {
            continue;
        };
        let merged = match check(e.value()) {
            Ok((enc, s)) => {
                use_dense |= enc == Encoding::Dense;
                hll::merge(&mut max, s).map_err(|_| CORRUPT)
            }
            Err(m) => Err(m),
        };
        if let Err(m) = merged {
            return ctx.error(m);
        }
    }
    let dest = args.get(1);
    let lru = ctx.srv.lru_clock;
    let created = ctx.srv.lookup_write(db, dest, ctx.now_ms).is_none();
    if created {
        ctx.srv.keyspace.dbs[db].upsert(
            dest,
            Value::Raw(Arc::new(hll::new_sparse())),
            NO_EXPIRE,
            lru,
        );
        ctx.notify(NOTIFY_NEW, "new", dest);
    }
    let Lookup::Live(e) = ctx.srv.keyspace.dbs[db].lookup(dest, ctx.now_ms, false) else {
        unreachable!("the destination was just looked up or created")
    };
    let v = e.string_mut().expect("checked as an HLL string");
    if use_dense && hll::sparse_to_dense(v).is_err() {
        return ctx.error(CORRUPT);
    }
    if hll::encoding(v) == Some(Encoding::Dense) {
        // The destination was a source: every register of it is at most
        // the union's, so the union's registers are its new ones.
        hll::store_union_dense(v, &max);
    } else {
        for (i, &m) in max.iter().enumerate() {
            if m != 0 {
                // The destination was checked with the sources: as Redis, a
                // failure here leaves the registers it did set (and a
                // promotion to dense in between is followed by the rest).
                let _ = hll::set_register(v, i, m, max_bytes);
            }
        }
    }
    hll::invalidate_cache(v);
    ctx.modified(1);
    // Redis announces a merge as a mass-add.
    ctx.notify(NOTIFY_STRING, "pfadd", dest);
    ctx.client.out.ok();
}

/// PFDEBUG GETREG|DECODE|ENCODING|TODENSE key
fn pfdebug(ctx: &mut Ctx, args: Args) {
    let sub = args.get(1);
    let key = args.get(2);
    let db = ctx.client.db;
    let Some(e) = ctx.srv.lookup_write(db, key, ctx.now_ms) else {
        return ctx.error("ERR The specified key does not exist");
    };
    let enc = match check(e.value()) {
        Ok((enc, _)) => enc,
        Err(m) => return ctx.error(m),
    };
    let v = e.string_mut().expect("checked as an HLL string");
    if is(sub, "getreg") || is(sub, "todense") {
        let converted = enc == Encoding::Sparse;
        if converted && hll::sparse_to_dense(v).is_err() {
            return ctx.error(CORRUPT);
        }
        if is(sub, "getreg") {
            let regs = hll::dense_registers(v);
            let out = &mut ctx.client.out;
            out.array(regs.len());
            for r in regs {
                out.int(i64::from(r));
            }
        } else {
            ctx.client.out.int(i64::from(converted));
        }
        if converted {
            // The encoding changed: replicas and the AOF change it too.
            ctx.modified(1);
        }
    } else if is(sub, "decode") {
        if enc != Encoding::Sparse {
            return ctx.error("ERR HLL encoding is not sparse");
        }
        let s = hll::decode_sparse(v);
        ctx.client.out.bulk(s.as_bytes());
    } else if is(sub, "encoding") {
        ctx.client.out.simple(enc.name());
    } else {
        let msg = format!(
            "ERR Unknown PFDEBUG subcommand '{}'",
            String::from_utf8_lossy(sub)
        );
        ctx.error(&msg);
    }
}

/// Registers round-tripped per cycle of PFSELFTEST's first test, and
/// elements added in its second (Redis's figures).
const SELFTEST_CYCLES: usize = 1000;
const SELFTEST_ELEMENTS: u64 = 10_000_000;

/// PFSELFTEST
fn pfselftest(ctx: &mut Ctx, _args: Args) {
    let max = sparse_max(ctx).min(hll::DEFAULT_SPARSE_MAX_BYTES);
    match hll::selftest(&mut ctx.srv.rng, SELFTEST_CYCLES, SELFTEST_ELEMENTS, max) {
        Ok(()) => ctx.client.out.ok(),
        Err(m) => ctx.error(&m),
    }
}
