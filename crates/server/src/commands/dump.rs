//! DUMP and RESTORE: a key's value as a Redis 7.0 `DUMP` payload (the RDB
//! value, RDB version 10, CRC64; `ferrokv_rdb::dump`) and back, so values
//! move between ferrokv and Redis both ways.
//!
//! # Hostile input
//!
//! A payload is checked in full before anything is stored: its footer
//! (version, CRC64), then the value through the same decoder that loads RDB
//! files, which validates every listpack, ziplist and intset it meets and
//! never reserves more than the payload could hold. A payload that fails
//! either check is an error (Redis's two texts) and leaves the key as it
//! was; an empty collection is refused. ferrokv always validates payloads
//! this way: `sanitize-dump-payload` is accepted for compatibility and
//! changes nothing.

use super::flags::*;
use super::{err, is, CommandSpec, Ctx};
use crate::notify::NOTIFY_GENERIC;
use ferrokv_rdb::{EncoderOptions, RdbEncoder};
use ferrokv_resp::Args;
use ferrokv_store::value::itoa_buf;
use ferrokv_store::{ValueRef, NO_EXPIRE};

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("dump", 2, READONLY, dump)
        .group("generic")
        .keys(1, 1, 1)
        .since("2.6.0")
        .complexity("O(1) to access the key and additional O(N*M) to serialize it, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1).")
        .doc("Returns a serialized representation of the value stored at a key.", "key"),
    CommandSpec::new("restore", -4, WRITE | DENYOOM, restore)
        .group("generic")
        .keys(1, 1, 1)
        .since("2.6.0")
        .complexity("O(1) to create the new key and additional O(N*M) to reconstruct the serialized value, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1). However for sorted set values the complexity is O(N*M*log(N)) because inserting values into sorted sets is O(log(N)).")
        .doc(
            "Creates a key from the serialized representation of a value.",
            "key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]",
        ),
];

/// How the server's snapshots encode values (`rdbcompression`, the
/// listpack thresholds): DUMP encodes the same way.
pub fn encoder_options(config: &crate::config::Config) -> EncoderOptions {
    EncoderOptions {
        compression: config.rdbcompression,
        checksum: true,
        limits: config.encoding_limits(),
    }
}

/// The DUMP payload of a value.
pub fn dump_payload(options: EncoderOptions, v: ValueRef<'_>) -> Vec<u8> {
    let mut enc = RdbEncoder::new(options);
    // An entry with an empty key and no expiry: its type byte, the key's
    // one length byte (0), then the value. The payload is the entry
    // without the key.
    let mut entry = Vec::new();
    match v {
        ValueRef::Str(s) | ValueRef::Raw(s) => enc.string_entry(&mut entry, b"", s, None),
        ValueRef::Int(i) => {
            let mut b = itoa_buf::Buf::new();
            enc.string_entry(&mut entry, b"", b.format(i), None)
        }
        ValueRef::List(l) => enc.list_entry(&mut entry, b"", l.iter(), None),
        ValueRef::Hash(h) => enc.hash_entry(&mut entry, b"", h.iter(), None),
        ValueRef::Set(s) => enc.set_entry(&mut entry, b"", s.iter().map(|m| m.text()), None),
        ValueRef::ZSet(z) => enc.zset_entry(&mut entry, b"", z.iter(), None),
    }
    debug_assert_eq!(entry.get(1), Some(&0), "an empty key is one zero byte");
    let mut payload = Vec::with_capacity(entry.len() + 9);
    payload.push(entry[0]);
    payload.extend_from_slice(&entry[2..]);
    ferrokv_rdb::dump::seal(&mut payload);
    payload
}

/// DUMP key
fn dump(ctx: &mut Ctx, args: Args) {
    let db = ctx.client.db;
    let options = encoder_options(&ctx.srv.config);
    let Some(e) = ctx.srv.lookup_read(db, args.get(1), ctx.now_ms) else {
        return ctx.client.out.null();
    };
    let payload = dump_payload(options, e.value());
    ctx.client.out.bulk(&payload);
}

/// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]
fn restore(ctx: &mut Ctx, args: Args) {
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq): (Option<i64>, Option<i64>) = (None, None);
    let mut j = 4;
    while j < args.len() {
        let more = args.len() - j - 1;
        let a = args.get(j);
        if is(a, "replace") {
            replace = true;
        } else if is(a, "absttl") {
            absttl = true;
        } else if is(a, "idletime") && more >= 1 && freq.is_none() {
            let Some(v) = ferrokv_resp::parse_i64(args.get(j + 1)) else {
                return ctx.error(err::NOT_INTEGER);
            };
            if v < 0 {
                return ctx.error("ERR Invalid IDLETIME value, must be >= 0");
            }
            idle = Some(v);
            j += 1;
        } else if is(a, "freq") && more >= 1 && idle.is_none() {
            let Some(v) = ferrokv_resp::parse_i64(args.get(j + 1)) else {
                return ctx.error(err::NOT_INTEGER);
            };
            if !(0..=255).contains(&v) {
                return ctx.error("ERR Invalid FREQ value, must be >= 0 and <= 255");
            }
            freq = Some(v);
            j += 1;
        } else {
            return ctx.error(err::SYNTAX);
        }
        j += 1;
    }
    let db = ctx.client.db;
    let key = args.get(1);
    if !replace && ctx.srv.lookup_write(db, key, ctx.now_ms).is_some() {
        return ctx.error("BUSYKEY Target key name already exists.");
    }
    let ttl = match ferrokv_resp::parse_i64(args.get(2)) {
        Some(t) if t < 0 => return ctx.error("ERR Invalid TTL value, must be >= 0"),
        Some(t) => t,
        None => return ctx.error(err::NOT_INTEGER),
    };
    let value = match ferrokv_rdb::dump::decode(args.get(3), true) {
        Ok(v) => v,
        Err(ferrokv_rdb::dump::DumpError::VersionOrChecksum) => {
            return ctx.error("ERR DUMP payload version or checksum are wrong")
        }
        Err(ferrokv_rdb::dump::DumpError::BadFormat(why)) => {
            tracing::debug!("RESTORE of a bad payload: {why}");
            return ctx.error("ERR Bad data format");
        }
    };
    let limits = crate::persistence::load::ValueLimits::of(&ctx.srv.config);
    let value = match crate::persistence::load::value_from_rdb(&value, &limits) {
        Ok(Some(v)) => v,
        Ok(None) | Err(_) => return ctx.error("ERR Bad data format"),
    };
    let deleted = replace && ctx.srv.exists(db, key, ctx.now_ms) && {
        if let Some(old) = ctx.srv.keyspace.dbs[db].remove(key) {
            ctx.srv.drop_value(old);
        }
        true
    };
    let expire_at = match ttl {
        0 => NO_EXPIRE,
        t if absttl => t,
        t => ctx.now_ms.saturating_add(t),
    };
    let from_master = ctx.srv.repl.master_client_id() == Some(ctx.client.id);
    if expire_at != NO_EXPIRE && expire_at <= ctx.now_ms && !from_master {
        // Already expired: nothing is created; a replaced key is deleted,
        // and that is what replicas and the AOF see.
        if deleted {
            ctx.rewrite(&[&b"DEL"[..], key]);
            ctx.modified(1);
            ctx.notify(NOTIFY_GENERIC, "del", key);
        }
        return ctx.client.out.ok();
    }
    let lru = if ctx.srv.config.maxmemory_policy.is_lfu() {
        match freq {
            Some(f) => ((crate::evict::lfu_minutes(ctx.now_ms) as u32) << 8) | f as u32,
            None => ctx.srv.lru_clock,
        }
    } else {
        match idle {
            Some(i) => {
                let max = crate::server::LRU_CLOCK_MAX;
                let i = (i.min(i64::from(max)) as u32) % max;
                (ctx.srv.lru_clock + max - i) % max
            }
            None => ctx.srv.lru_clock,
        }
    };
    if ctx.srv.keyspace.dbs[db]
        .upsert(key, value, expire_at, lru)
        .is_none()
    {
        ctx.notify(crate::notify::NOTIFY_NEW, "new", key);
    }
    if expire_at != NO_EXPIRE && !absttl {
        // Replicas and the AOF get the expiry as an absolute time.
        let mut argv: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        argv[2] = expire_at.to_string().into_bytes();
        argv.push(b"ABSTTL".to_vec());
        ctx.rewrite(&argv);
    }
    ctx.modified(1);
    ctx.notify(NOTIFY_GENERIC, "restore", key);
    ctx.client.out.ok();
}
