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
    CommandSpec::new("restore-asking", -4, WRITE | DENYOOM, restore)
        .group("server")
        .keys(1, 1, 1)
        .since("3.0.0")
        .doc(
            "An internal command for migrating keys in a cluster.",
            "key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]",
        ),
    CommandSpec::new("migrate", -6, WRITE, migrate)
        .group("generic")
        .keys(3, 3, 1)
        .since("2.6.0")
        .complexity("This command actually executes a DUMP+DEL in the source instance, and a RESTORE in the target instance. See the pages of these commands for time complexity. Also an O(N) data transfer between the two instances is performed.")
        .doc(
            "Atomically transfers a key from one Redis instance to another.",
            "host port key|\"\" destination-db timeout [COPY] [REPLACE] [AUTH password|AUTH2 username password] [KEYS key [key ...]]",
        ),
];

/// How the server's snapshots encode values (`rdbcompression`, the
/// listpack thresholds): DUMP encodes the same way.
pub fn encoder_options(config: &crate::config::Config) -> EncoderOptions {
    EncoderOptions {
        compression: config.rdbcompression,
        checksum: true,
        limits: config.encoding_limits(),
        version: ferrokv_rdb::consts::RDB_VERSION,
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
        ValueRef::Hash(h) => {
            crate::persistence::snapshot::encode_hash(&mut enc, &mut entry, b"", h, None)
        }
        ValueRef::Set(s) => enc.set_entry(&mut entry, b"", s.iter().map(|m| m.text()), None),
        ValueRef::ZSet(z) => enc.zset_entry(&mut entry, b"", z.iter(), None),
        ValueRef::Stream(st) => enc.stream_entry(
            &mut entry,
            b"",
            &crate::persistence::stream_rdb::to_payload(st),
            None,
        ),
    }
    debug_assert_eq!(entry.get(1), Some(&0), "an empty key is one zero byte");
    let mut payload = Vec::with_capacity(entry.len() + 9);
    payload.push(entry[0]);
    payload.extend_from_slice(&entry[2..]);
    // A hash with field TTLs is Redis 7.4's (an older Redis refuses the
    // payload by its version).
    let field_ttls = matches!(v, ValueRef::Hash(h) if h.ttls().is_some_and(|t| !t.is_empty()));
    if field_ttls {
        ferrokv_rdb::dump::seal_version(
            &mut payload,
            ferrokv_rdb::dump::DUMP_RDB_VERSION_FIELD_TTLS,
        );
    } else {
        ferrokv_rdb::dump::seal(&mut payload);
    }
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
    let decoded = ferrokv_rdb::dump::decode(args.get(3), true);
    // Past the checksum every payload is checked in full (Redis does so
    // with `sanitize-dump-payload yes`, and counts it).
    if !matches!(
        decoded,
        Err(ferrokv_rdb::dump::DumpError::VersionOrChecksum)
    ) {
        ctx.srv.stats.dump_payload_sanitizations += 1;
    }
    let value = match decoded {
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

/// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
/// [AUTH password | AUTH2 username password] [KEYS key [key ...]]
///
/// As Redis 7.0 does, the transfer is synchronous: the loop waits for the
/// target, at most `timeout` milliseconds per connect, write or read (a
/// target that answers slowly holds every client up to that long). The
/// keys go as `RESTORE key ttl payload [REPLACE]` in one write, the replies
/// are read in order, and each key the target took is deleted here unless
/// `COPY`; the deletions, not MIGRATE, are what replicas and the AOF see.
fn migrate(ctx: &mut Ctx, args: Args) {
    let (mut copy, mut replace) = (false, false);
    let mut auth: Option<(Option<&[u8]>, &[u8])> = None;
    let mut first_key = 3;
    let mut num_keys = 1;
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - j - 1;
        let a = args.get(j);
        if is(a, "copy") {
            copy = true;
        } else if is(a, "replace") {
            replace = true;
        } else if is(a, "auth") && more >= 1 {
            auth = Some((None, args.get(j + 1)));
            j += 1;
        } else if is(a, "auth2") && more >= 2 {
            auth = Some((Some(args.get(j + 1)), args.get(j + 2)));
            j += 2;
        } else if is(a, "keys") {
            if !args.get(3).is_empty() {
                return ctx.error(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                );
            }
            first_key = j + 1;
            num_keys = args.len() - j - 1;
            break;
        } else {
            return ctx.error(err::SYNTAX);
        }
        j += 1;
    }
    let (Some(dbid), Some(timeout)) = (
        ferrokv_resp::parse_i64(args.get(4)),
        ferrokv_resp::parse_i64(args.get(5)),
    ) else {
        return ctx.error(err::NOT_INTEGER);
    };
    let timeout =
        std::time::Duration::from_millis(if timeout <= 0 { 1000 } else { timeout as u64 });
    // The keys that exist, with their payloads and remaining TTLs.
    let db = ctx.client.db;
    let options = encoder_options(&ctx.srv.config);
    let mut found: Vec<(&[u8], Vec<u8>, i64)> = Vec::new();
    for i in first_key..first_key + num_keys {
        let key = args.get(i);
        let now = ctx.now_ms;
        let Some(e) = ctx.srv.lookup_read(db, key, now) else {
            continue;
        };
        let ttl = if e.expire_at == NO_EXPIRE {
            0
        } else {
            (e.expire_at - now).max(1)
        };
        found.push((key, dump_payload(options.clone(), e.value()), ttl));
    }
    if found.is_empty() {
        return ctx.client.out.simple("NOKEY");
    }
    let host = String::from_utf8_lossy(args.get(1)).into_owned();
    let port = String::from_utf8_lossy(args.get(2)).into_owned();
    let mut out = Vec::new();
    let mut push = |argv: &[&[u8]]| {
        ferrokv_resp::encode::array(&mut out, argv.len());
        for a in argv {
            ferrokv_resp::encode::bulk(&mut out, a);
        }
    };
    if let Some((user, pass)) = auth {
        match user {
            Some(u) => push(&[b"AUTH", u, pass]),
            None => push(&[b"AUTH", pass]),
        }
    }
    let dbid_s = dbid.to_string();
    push(&[b"SELECT", dbid_s.as_bytes()]);
    // In cluster mode the target takes them into an importing slot.
    let restore: &[u8] = if ctx.srv.cluster.is_some() {
        b"RESTORE-ASKING"
    } else {
        b"RESTORE"
    };
    for (key, payload, ttl) in &found {
        let t = ttl.to_string();
        if replace {
            push(&[restore, key, t.as_bytes(), payload, b"REPLACE"]);
        } else {
            push(&[restore, key, t.as_bytes(), payload]);
        }
    }
    let replies = match migrate_exchange(
        &host,
        &port,
        &out,
        timeout,
        auth.is_some() as usize + 1 + found.len(),
    ) {
        Ok(r) => r,
        Err(e) => return ctx.error(e),
    };
    let mut replies = replies.into_iter();
    // AUTH and SELECT first: an error there stops everything.
    for _ in 0..auth.is_some() as usize + 1 {
        let r = replies.next().unwrap_or_default();
        if let Some(msg) = r.strip_prefix('-') {
            return ctx.error(&format!("ERR Target instance replied with error: {msg}"));
        }
    }
    let mut error = None;
    let mut moved: Vec<&[u8]> = Vec::new();
    for (key, _, _) in &found {
        let r = replies.next().unwrap_or_default();
        if let Some(msg) = r.strip_prefix('-') {
            error.get_or_insert_with(|| msg.to_string());
        } else if !copy {
            moved.push(key);
        }
    }
    if !moved.is_empty() {
        for key in &moved {
            if let Some(old) = ctx.srv.keyspace.dbs[db].remove(key) {
                ctx.srv.drop_value(old);
            }
            ctx.notify(NOTIFY_GENERIC, "del", key);
        }
        let mut argv: Vec<&[u8]> = vec![b"DEL"];
        argv.extend(moved.iter().copied());
        ctx.rewrite(&argv);
        ctx.modified(moved.len() as u64);
    }
    match error {
        Some(msg) => ctx.error(&format!("ERR Target instance replied with error: {msg}")),
        None => ctx.client.out.ok(),
    }
}

/// Connects, writes `out`, reads `n` one-line replies (MIGRATE's target
/// answers only simple strings and errors), each step within `timeout`.
fn migrate_exchange(
    host: &str,
    port: &str,
    out: &[u8],
    timeout: std::time::Duration,
    n: usize,
) -> Result<Vec<String>, &'static str> {
    use std::io::{BufRead, Write};
    const CONNECT: &str = "IOERR error or timeout connecting to the client";
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&(
        host,
        port.parse::<u16>().map_err(|_| CONNECT)?,
    ))
    .map_err(|_| CONNECT)?
    .next()
    .ok_or(CONNECT)?;
    // Redis connects without blocking and learns of a refusal only when it
    // writes: a refused connection is a write error, a silent one a
    // connect timeout.
    let s = std::net::TcpStream::connect_timeout(&addr, timeout).map_err(|e| {
        if e.kind() == std::io::ErrorKind::TimedOut {
            CONNECT
        } else {
            "IOERR error or timeout writing to target instance"
        }
    })?;
    let _ = s.set_nodelay(true);
    s.set_write_timeout(Some(timeout)).map_err(|_| CONNECT)?;
    s.set_read_timeout(Some(timeout)).map_err(|_| CONNECT)?;
    (&s).write_all(out)
        .map_err(|_| "IOERR error or timeout writing to target instance")?;
    let mut r = std::io::BufReader::new(&s);
    let mut replies = Vec::with_capacity(n);
    for _ in 0..n {
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => return Err("IOERR error or timeout reading to target instance"),
            Ok(_) => replies.push(line.trim_end().to_string()),
        }
    }
    Ok(replies)
}
