//! The geo family on sorted sets: GEOADD GEODIST GEOHASH GEOPOS GEORADIUS
//! GEORADIUSBYMEMBER (and their `_RO` forms) GEOSEARCH GEOSEARCHSTORE, as
//! Redis 7.0 answers them (geo.c). The geohash arithmetic, the cells a
//! search reads and the distance are `ferrokv_store::geo`; this file
//! parses, looks up, replies and stores.
//!
//! GEOADD is ZADD underneath, as in Redis: the coordinates become scores,
//! the sorted set code adds them (so the keyspace event is `zadd`), and
//! the command is propagated as that ZADD. The store forms announce
//! `georadiusstore` / `geosearchstore`, replace the destination (its TTL
//! goes) and delete it when nothing was found.
//!
//! Replies follow Redis's quirks: distances with four decimals (bulk
//! strings in RESP3 too), coordinates as `%.17Lf` trimmed (doubles in RESP3), a
//! GEORADIUSBYMEMBER on a missing key answers before it reads its radius,
//! and the results are ordered with glibc's merge sort on the distance
//! alone (ties keep the order the cells were read in).
//!
//! # Hostile input
//!
//! A search reads at most nine score ranges of the set once each, whatever
//! the radius or box (a huge radius reads the whole set, no more);
//! `COUNT n` only cuts the result, nothing is allocated from it, and
//! `ANY` stops the walk at `n` matches.

use super::flags::*;
use super::{err, parse_f64, CommandSpec, Ctx};
use crate::notify::{NOTIFY_GENERIC, NOTIFY_NEW, NOTIFY_ZSET};
use ferrokv_resp::encode::Protocol;
use ferrokv_resp::Args;
use ferrokv_store::geo::{self, Found, Shape, ShapeKind};
use ferrokv_store::zset::{ZSet, ZsetLimits};
use ferrokv_store::{Value, ValueRef, NO_EXPIRE};
use std::sync::Arc;

const fn cmd(name: &'static str, arity: i32, flags: u32, h: super::Handler) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h)
        .group("geo")
        .keys(1, 1, 1)
}

const SEARCH_COMPLEXITY: &str = "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.";

pub static COMMANDS: &[CommandSpec] = &[
    cmd("geoadd", -5, WRITE | DENYOOM, geoadd).since("3.2.0").complexity("O(log(N)) for each item added, where N is the number of elements in the sorted set.").doc("Adds one or more members to a geospatial index. The key is created if it doesn't exist.", "key [NX|XX] [CH] longitude latitude member [longitude latitude member ...]"),
    cmd("geodist", -4, READONLY, geodist).since("3.2.0").complexity("O(1)").doc("Returns the distance between two members of a geospatial index.", "key member1 member2 [M|KM|FT|MI]"),
    cmd("geohash", -2, READONLY, geohash).since("3.2.0").complexity("O(1) for each member requested.").doc("Returns members from a geospatial index as geohash strings.", "key [member [member ...]]"),
    cmd("geopos", -2, READONLY, geopos).since("3.2.0").complexity("O(1) for each member requested.").doc("Returns the longitude and latitude of members from a geospatial index.", "key [member [member ...]]"),
    cmd("georadius", -6, WRITE | DENYOOM, georadius).since("3.2.0").complexity(SEARCH_COMPLEXITY).doc("Queries a geospatial index for members within a distance from a coordinate, optionally stores the result.", "key longitude latitude radius M|KM|FT|MI [WITHCOORD] [WITHDIST] [WITHHASH] [COUNT count [ANY]] [ASC|DESC] [STORE key] [STOREDIST key]"),
    cmd("georadius_ro", -6, READONLY, georadius_ro).since("3.2.10").complexity(SEARCH_COMPLEXITY).doc("Returns members from a geospatial index that are within a distance from a coordinate.", "key longitude latitude radius M|KM|FT|MI [WITHCOORD] [WITHDIST] [WITHHASH] [COUNT count [ANY]] [ASC|DESC]"),
    cmd("georadiusbymember", -5, WRITE | DENYOOM, georadiusbymember).since("3.2.0").complexity(SEARCH_COMPLEXITY).doc("Queries a geospatial index for members within a distance from a member, optionally stores the result.", "key member radius M|KM|FT|MI [WITHCOORD] [WITHDIST] [WITHHASH] [COUNT count [ANY]] [ASC|DESC] [STORE key] [STOREDIST key]"),
    cmd("georadiusbymember_ro", -5, READONLY, georadiusbymember_ro).since("3.2.10").complexity(SEARCH_COMPLEXITY).doc("Returns members from a geospatial index that are within a distance from a member.", "key member radius M|KM|FT|MI [WITHCOORD] [WITHDIST] [WITHHASH] [COUNT count [ANY]] [ASC|DESC]"),
    cmd("geosearch", -7, READONLY, geosearch).since("6.2.0").complexity("O(N+log(M)) where N is the number of elements in the grid-aligned bounding box area around the shape provided as the filter and M is the number of items inside the shape").doc("Queries a geospatial index for members inside an area of a box or a circle.", "key [FROMMEMBER member] [FROMLONLAT longitude latitude] [BYRADIUS radius M|KM|FT|MI] [BYBOX width height M|KM|FT|MI] [ASC|DESC] [COUNT count [ANY]] [WITHCOORD] [WITHDIST] [WITHHASH]"),
    cmd("geosearchstore", -8, WRITE | DENYOOM, geosearchstore).keys(1, 2, 1).since("6.2.0").complexity("O(N+log(M)) where N is the number of elements in the grid-aligned bounding box area around the shape provided as the filter and M is the number of items inside the shape").doc("Queries a geospatial index for members inside an area of a box or a circle, optionally stores the result.", "destination source [FROMMEMBER member] [FROMLONLAT longitude latitude] [BYRADIUS radius M|KM|FT|MI] [BYBOX width height M|KM|FT|MI] [ASC|DESC] [COUNT count [ANY]] [STOREDIST]"),
];

const UNKNOWN_MEMBER: &str = "ERR could not decode requested zset member";

/// An option name as Redis's `strcasecmp` sees it: the argument is a C
/// string there, so it ends at its first NUL byte.
fn c_is(a: &[u8], opt: &str) -> bool {
    let end = a.iter().position(|&c| c == 0).unwrap_or(a.len());
    a[..end].eq_ignore_ascii_case(opt.as_bytes())
}

/// A longitude and a latitude (Redis's `extractLongLatOrReply`): both must
/// parse as doubles and lie within Redis's limits.
fn lon_lat(ctx: &mut Ctx, lon: &[u8], lat: &[u8]) -> Option<(f64, f64)> {
    let mut xy = [0f64; 2];
    for (v, a) in xy.iter_mut().zip([lon, lat]) {
        match parse_f64(a) {
            Some(x) => *v = x,
            None => {
                ctx.error(err::NOT_FLOAT);
                return None;
            }
        }
    }
    if !geo::valid_lon_lat(xy[0], xy[1]) {
        ctx.error(&format!(
            "ERR invalid longitude,latitude pair {},{}",
            geo::format_c_f(xy[0]),
            geo::format_c_f(xy[1])
        ));
        return None;
    }
    Some((xy[0], xy[1]))
}

/// A unit's size in metres (Redis's `extractUnitOrReply`).
fn unit(ctx: &mut Ctx, u: &[u8]) -> Option<f64> {
    let m = if c_is(u, "m") {
        1.0
    } else if c_is(u, "km") {
        1000.0
    } else if c_is(u, "ft") {
        0.3048
    } else if c_is(u, "mi") {
        1609.34
    } else {
        ctx.error("ERR unsupported unit provided. please use M, KM, FT, MI");
        return None;
    };
    Some(m)
}

/// A non-negative double, or Redis's error `msg`.
fn extent(ctx: &mut Ctx, a: &[u8], msg: &str) -> Option<f64> {
    let v = parse_f64(a);
    if v.is_none() {
        ctx.error(msg);
    }
    v
}

/// `radius unit` (Redis's `extractDistanceOrReply`): (radius, metres per
/// unit).
fn radius_unit(ctx: &mut Ctx, r: &[u8], u: &[u8]) -> Option<(f64, f64)> {
    let r = extent(ctx, r, "ERR need numeric radius")?;
    if r < 0.0 {
        ctx.error("ERR radius cannot be negative");
        return None;
    }
    Some((r, unit(ctx, u)?))
}

/// `width height unit` (Redis's `extractBoxOrReply`).
fn box_unit(ctx: &mut Ctx, w: &[u8], h: &[u8], u: &[u8]) -> Option<(f64, f64, f64)> {
    let w = extent(ctx, w, "ERR need numeric width")?;
    let h = extent(ctx, h, "ERR need numeric height")?;
    if h < 0.0 || w < 0.0 {
        ctx.error("ERR height or width cannot be negative");
        return None;
    }
    Some((w, h, unit(ctx, u)?))
}

/// What a key holds for the geo commands, looked up once for reading.
enum Source {
    Missing,
    WrongType,
    Present,
}

fn look_up(ctx: &mut Ctx, key: &[u8]) -> Source {
    let db = ctx.client.db;
    match ctx.srv.lookup_read(db, key, ctx.now_ms) {
        None => Source::Missing,
        Some(e) => match e.value() {
            ValueRef::ZSet(_) => Source::Present,
            _ => Source::WrongType,
        },
    }
}

/// The sorted set [`look_up`] found (no second lookup, so no second
/// keyspace hit).
fn zset_of<'a>(ctx: &'a Ctx, key: &[u8]) -> Option<&'a ZSet> {
    match ctx.srv.keyspace.dbs[ctx.client.db].get(key)?.value() {
        ValueRef::ZSet(z) => Some(z),
        _ => None,
    }
}

/// A member's point, if the set holds it.
fn member_point(ctx: &Ctx, key: &[u8], member: &[u8]) -> Option<(f64, f64)> {
    zset_of(ctx, key)?.score(member).map(geo::decode_score)
}

/// Writes a coordinate as Redis's `addReplyHumanLongDouble`: a bulk string
/// in RESP2, a double in RESP3.
fn reply_coordinate(ctx: &mut Ctx, v: f64) {
    let text = geo::format_coordinate(v);
    let out = &mut ctx.client.out;
    match out.proto {
        Protocol::Resp2 => out.bulk(text.as_bytes()),
        Protocol::Resp3 => {
            out.buf.push(b',');
            out.buf.extend_from_slice(text.as_bytes());
            out.buf.extend_from_slice(b"\r\n");
        }
    }
}

// ---------------------------------------------------------------------------
// GEOADD
// ---------------------------------------------------------------------------

/// GEOADD key [NX|XX] [CH] longitude latitude member [longitude latitude member ...]
fn geoadd(ctx: &mut Ctx, args: Args) {
    let (mut nx, mut xx, mut ch) = (false, false, false);
    let mut at = 2;
    while at < args.len() {
        let a = args.get(at);
        if c_is(a, "nx") {
            nx = true;
        } else if c_is(a, "xx") {
            xx = true;
        } else if c_is(a, "ch") {
            ch = true;
        } else {
            break;
        }
        at += 1;
    }
    if !(args.len() - at).is_multiple_of(3) || (xx && nx) {
        return ctx.error(err::SYNTAX);
    }
    // The ZADD it becomes: key, the options, then score member pairs.
    let mut zadd: Vec<Vec<u8>> = vec![b"zadd".to_vec(), args.get(1).to_vec()];
    for (on, name) in [(nx, "nx"), (xx, "xx"), (ch, "ch")] {
        if on {
            zadd.push(name.as_bytes().to_vec());
        }
    }
    for i in (at..args.len()).step_by(3) {
        let Some((lon, lat)) = lon_lat(ctx, args.get(i), args.get(i + 1)) else {
            return;
        };
        let score = geo::score_of(lon, lat).expect("a valid pair encodes");
        zadd.push(score.to_string().into_bytes());
        zadd.push(args.get(i + 2).to_vec());
    }
    let mut buf = Vec::new();
    let mut ranges = Vec::with_capacity(zadd.len());
    for a in &zadd {
        ranges.push((buf.len(), a.len()));
        buf.extend_from_slice(a);
    }
    let dirty = ctx.srv.dirty;
    super::zset::zadd(ctx, Args::new(&buf, &ranges));
    if ctx.srv.dirty != dirty {
        ctx.rewrite(&zadd);
    }
}

// ---------------------------------------------------------------------------
// Point reads
// ---------------------------------------------------------------------------

/// GEODIST key member1 member2 [M|KM|FT|MI]
fn geodist(ctx: &mut Ctx, args: Args) {
    let mut to_meters = 1.0;
    if args.len() == 5 {
        match unit(ctx, args.get(4)) {
            Some(m) => to_meters = m,
            None => return,
        }
    } else if args.len() > 5 {
        return ctx.error(err::SYNTAX);
    }
    let key = args.get(1);
    match look_up(ctx, key) {
        Source::Missing => return ctx.client.out.null(),
        Source::WrongType => return ctx.error(err::WRONGTYPE),
        Source::Present => {}
    }
    let (Some(a), Some(b)) = (
        member_point(ctx, key, args.get(2)),
        member_point(ctx, key, args.get(3)),
    ) else {
        return ctx.client.out.null();
    };
    let d = geo::distance(a.0, a.1, b.0, b.1) / to_meters;
    ctx.client.out.bulk(geo::format_distance(d).as_bytes());
}

/// GEOHASH key [member [member ...]]
fn geohash(ctx: &mut Ctx, args: Args) {
    let key = args.get(1);
    if let Source::WrongType = look_up(ctx, key) {
        return ctx.error(err::WRONGTYPE);
    }
    let db = ctx.client.db;
    let out = &mut ctx.client.out;
    let z = match ctx.srv.keyspace.dbs[db].get(key).map(|e| e.value()) {
        Some(ValueRef::ZSet(z)) => Some(z),
        _ => None,
    };
    out.array(args.len() - 2);
    for m in args.iter().skip(2) {
        match z.and_then(|z| z.score(m)) {
            Some(score) => out.bulk(&geo::geohash_string(score)),
            None => out.null(),
        }
    }
}

/// GEOPOS key [member [member ...]]
fn geopos(ctx: &mut Ctx, args: Args) {
    let key = args.get(1);
    if let Source::WrongType = look_up(ctx, key) {
        return ctx.error(err::WRONGTYPE);
    }
    ctx.client.out.array(args.len() - 2);
    for m in args.iter().skip(2) {
        match member_point(ctx, key, m) {
            Some((lon, lat)) => {
                ctx.client.out.array(2);
                reply_coordinate(ctx, lon);
                reply_coordinate(ctx, lat);
            }
            None => ctx.client.out.null_array(),
        }
    }
}

// ---------------------------------------------------------------------------
// Searches
// ---------------------------------------------------------------------------

/// Which command a search runs for (Redis's `RADIUS_*` / `GEOSEARCH*`
/// flags).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Search {
    /// GEORADIUS; `store`: STORE/STOREDIST allowed (not the `_RO` form).
    Coords { store: bool },
    /// GEORADIUSBYMEMBER.
    Member { store: bool },
    /// GEOSEARCH, or with `store` GEOSEARCHSTORE.
    Shape { store: bool },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    None,
    Asc,
    Desc,
}

/// GEORADIUS key longitude latitude radius M|KM|FT|MI [WITHCOORD] [WITHDIST] [WITHHASH] [COUNT count [ANY]] [ASC|DESC] [STORE key] [STOREDIST key]
fn georadius(ctx: &mut Ctx, args: Args) {
    search_generic(ctx, args, 1, Search::Coords { store: true })
}

/// GEORADIUS_RO key longitude latitude radius M|KM|FT|MI [WITHCOORD] [WITHDIST] [WITHHASH] [COUNT count [ANY]] [ASC|DESC]
fn georadius_ro(ctx: &mut Ctx, args: Args) {
    search_generic(ctx, args, 1, Search::Coords { store: false })
}

/// GEORADIUSBYMEMBER key member radius M|KM|FT|MI [WITHCOORD] [WITHDIST] [WITHHASH] [COUNT count [ANY]] [ASC|DESC] [STORE key] [STOREDIST key]
fn georadiusbymember(ctx: &mut Ctx, args: Args) {
    search_generic(ctx, args, 1, Search::Member { store: true })
}

/// GEORADIUSBYMEMBER_RO key member radius M|KM|FT|MI [WITHCOORD] [WITHDIST] [WITHHASH] [COUNT count [ANY]] [ASC|DESC]
fn georadiusbymember_ro(ctx: &mut Ctx, args: Args) {
    search_generic(ctx, args, 1, Search::Member { store: false })
}

/// GEOSEARCH key FROMMEMBER member|FROMLONLAT longitude latitude BYRADIUS radius unit|BYBOX width height unit [ASC|DESC] [COUNT count [ANY]] [WITHCOORD] [WITHDIST] [WITHHASH]
fn geosearch(ctx: &mut Ctx, args: Args) {
    search_generic(ctx, args, 1, Search::Shape { store: false })
}

/// GEOSEARCHSTORE destination source FROMMEMBER member|FROMLONLAT longitude latitude BYRADIUS radius unit|BYBOX width height unit [ASC|DESC] [COUNT count [ANY]] [STOREDIST]
fn geosearchstore(ctx: &mut Ctx, args: Args) {
    search_generic(ctx, args, 2, Search::Shape { store: true })
}

/// Redis's `georadiusGeneric`: the source is looked up (and type checked)
/// first, then the centre and extent, the options in order (each error
/// replied as it is met), the checks across options, the search, the
/// reply or the store.
fn search_generic(ctx: &mut Ctx, args: Args, src_at: usize, kind: Search) {
    let key = args.get(src_at);
    let present = match look_up(ctx, key) {
        Source::WrongType => return ctx.error(err::WRONGTYPE),
        Source::Missing => false,
        Source::Present => true,
    };
    // Redis's zeroed GeoShape until the arguments fill it in.
    let mut shape = Shape {
        lon: 0.0,
        lat: 0.0,
        conversion: 0.0,
        kind: ShapeKind::Radius(0.0),
    };
    let mut store: Option<&[u8]> = None;
    let mut storedist = false;
    let base = match kind {
        Search::Coords { .. } => {
            let Some((lon, lat)) = lon_lat(ctx, args.get(2), args.get(3)) else {
                return;
            };
            let Some((r, conv)) = radius_unit(ctx, args.get(4), args.get(5)) else {
                return;
            };
            shape = Shape {
                lon,
                lat,
                conversion: conv,
                kind: ShapeKind::Radius(r),
            };
            6
        }
        // With no source the radius is not even read: the reply is empty
        // (or the destination deleted) whatever it says.
        Search::Member { .. } if !present => 5,
        Search::Member { .. } => {
            let Some((lon, lat)) = member_point(ctx, key, args.get(2)) else {
                return ctx.error(UNKNOWN_MEMBER);
            };
            let Some((r, conv)) = radius_unit(ctx, args.get(3), args.get(4)) else {
                return;
            };
            shape = Shape {
                lon,
                lat,
                conversion: conv,
                kind: ShapeKind::Radius(r),
            };
            5
        }
        Search::Shape { store: false } => 2,
        Search::Shape { store: true } => {
            store = Some(args.get(1));
            3
        }
    };
    let georadius_store = matches!(
        kind,
        Search::Coords { store: true } | Search::Member { store: true }
    );
    let is_search = matches!(kind, Search::Shape { .. });
    let searchstore = kind == Search::Shape { store: true };
    let (mut withdist, mut withhash, mut withcoord) = (false, false, false);
    let (mut frommember, mut fromlonlat, mut byradius, mut bybox) = (false, false, false, false);
    let mut order = Order::None;
    let mut any = false;
    let mut count: i64 = 0;
    let remaining = args.len() - base;
    let mut i = 0;
    while i < remaining {
        let a = args.get(base + i);
        let at = base + i;
        if c_is(a, "withdist") {
            withdist = true;
        } else if c_is(a, "withhash") {
            withhash = true;
        } else if c_is(a, "withcoord") {
            withcoord = true;
        } else if c_is(a, "any") {
            any = true;
        } else if c_is(a, "asc") {
            order = Order::Asc;
        } else if c_is(a, "desc") {
            order = Order::Desc;
        } else if c_is(a, "count") && i + 1 < remaining {
            let Some(n) = super::parse_int(ctx, args.get(at + 1)) else {
                return;
            };
            if n <= 0 {
                return ctx.error("ERR COUNT must be > 0");
            }
            count = n;
            i += 1;
        } else if georadius_store && c_is(a, "store") && i + 1 < remaining {
            store = Some(args.get(at + 1));
            storedist = false;
            i += 1;
        } else if georadius_store && c_is(a, "storedist") && i + 1 < remaining {
            store = Some(args.get(at + 1));
            storedist = true;
            i += 1;
        } else if searchstore && c_is(a, "storedist") {
            storedist = true;
        } else if is_search && !fromlonlat && c_is(a, "frommember") && i + 1 < remaining {
            // No source: parsing goes on, the reply is empty.
            if present {
                let Some((lon, lat)) = member_point(ctx, key, args.get(at + 1)) else {
                    return ctx.error(UNKNOWN_MEMBER);
                };
                shape.lon = lon;
                shape.lat = lat;
            }
            frommember = true;
            i += 1;
        } else if is_search && !frommember && c_is(a, "fromlonlat") && i + 2 < remaining {
            let Some((lon, lat)) = lon_lat(ctx, args.get(at + 1), args.get(at + 2)) else {
                return;
            };
            shape.lon = lon;
            shape.lat = lat;
            fromlonlat = true;
            i += 2;
        } else if is_search && !bybox && c_is(a, "byradius") && i + 2 < remaining {
            let Some((r, conv)) = radius_unit(ctx, args.get(at + 1), args.get(at + 2)) else {
                return;
            };
            shape.conversion = conv;
            shape.kind = ShapeKind::Radius(r);
            byradius = true;
            i += 2;
        } else if is_search && !byradius && c_is(a, "bybox") && i + 3 < remaining {
            let Some((w, h, conv)) =
                box_unit(ctx, args.get(at + 1), args.get(at + 2), args.get(at + 3))
            else {
                return;
            };
            shape.conversion = conv;
            shape.kind = ShapeKind::Box {
                width: w,
                height: h,
            };
            bybox = true;
            i += 3;
        } else {
            return ctx.error(err::SYNTAX);
        }
        i += 1;
    }
    if store.is_some() && (withdist || withhash || withcoord) {
        return ctx.error(&format!(
            "ERR {} is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
            if searchstore {
                "GEOSEARCHSTORE"
            } else {
                "STORE option in GEORADIUS"
            }
        ));
    }
    // The command's name as the client spelled it.
    let name = String::from_utf8_lossy(args.get(0)).into_owned();
    if is_search && !(frommember || fromlonlat) {
        return ctx.error(&format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        ));
    }
    if is_search && !(byradius || bybox) {
        return ctx.error(&format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        ));
    }
    if any && count == 0 {
        return ctx.error("ERR the ANY argument requires COUNT argument");
    }
    if !present {
        match store {
            Some(dst) => {
                delete_destination(ctx, dst, georadius_store);
                ctx.client.out.int(0);
            }
            None => ctx.client.out.array(0),
        }
        return;
    }
    // COUNT alone means the N closest: ascending (not with ANY, which
    // takes the first N found).
    if count != 0 && order == Order::None && !any {
        order = Order::Asc;
    }
    let limit = if any { count as usize } else { 0 };
    // A handle of the set (no copy), so the points found borrow their
    // members from it while the reply or the destination is written.
    let source = ctx.srv.keyspace.dbs[ctx.client.db]
        .get(key)
        .and_then(|e| e.shared_collection());
    let mut found = match &source {
        Some(Value::ZSet(z)) => geo::search(z, &shape, limit),
        _ => Vec::new(),
    };
    if found.is_empty() && store.is_none() {
        return ctx.client.out.array(0);
    }
    if order != Order::None {
        geo::sort_by_distance(&mut found, order == Order::Desc);
    }
    if count > 0 && (count as u64) < found.len() as u64 {
        found.truncate(count as usize);
    }
    for f in found.iter_mut() {
        f.dist /= shape.conversion;
    }
    match store {
        None => reply_found(ctx, &found, withdist, withhash, withcoord),
        Some(dst) => {
            let event = if is_search {
                "geosearchstore"
            } else {
                "georadiusstore"
            };
            store_found(ctx, dst, found, storedist, event, georadius_store);
        }
    }
}

fn reply_found(ctx: &mut Ctx, found: &[Found], withdist: bool, withhash: bool, withcoord: bool) {
    let options = usize::from(withdist) + usize::from(withhash) + usize::from(withcoord);
    ctx.client.out.array(found.len());
    for f in found {
        if options > 0 {
            ctx.client.out.array(options + 1);
        }
        ctx.client.out.bulk(f.member);
        if withdist {
            ctx.client.out.bulk(geo::format_distance(f.dist).as_bytes());
        }
        if withhash {
            // C's (long long) of the score: in range for anything a cell holds.
            ctx.client.out.int(f.score as i64);
        }
        if withcoord {
            ctx.client.out.array(2);
            reply_coordinate(ctx, f.lon);
            reply_coordinate(ctx, f.lat);
        }
    }
}

/// A store destination the search leaves empty is deleted (`del`).
/// GEORADIUS's destination is not among its table keys, so its WATCHes
/// and waiters are told here (`touch`); GEOSEARCHSTORE's are told by
/// dispatch.
fn delete_destination(ctx: &mut Ctx, dst: &[u8], touch: bool) {
    let db = ctx.client.db;
    if !ctx.srv.exists(db, dst, ctx.now_ms) {
        return;
    }
    if let Some(old) = ctx.srv.keyspace.dbs[db].remove(dst) {
        ctx.srv.drop_value(old);
    }
    if touch {
        ctx.srv.touch_watched_key(db, dst);
    }
    ctx.notify(NOTIFY_GENERIC, "del", dst);
    ctx.modified(1);
}

/// Stores the found points under `dst` (score: the geohash, or with
/// STOREDIST the distance in the unit asked), replacing any value and its
/// TTL; replies with how many were stored.
fn store_found(
    ctx: &mut Ctx,
    dst: &[u8],
    found: Vec<Found>,
    storedist: bool,
    event: &str,
    touch: bool,
) {
    let n = found.len();
    if n == 0 {
        delete_destination(ctx, dst, touch);
        ctx.client.out.int(0);
        return;
    }
    let lim = ZsetLimits {
        max_listpack_entries: ctx.srv.config.zset_max_listpack_entries as usize,
        max_listpack_value: ctx.srv.config.zset_max_listpack_value as usize,
    };
    let max_member = found.iter().map(|f| f.member.len()).max().unwrap_or(0);
    let z = ZSet::from_pairs(
        found.iter().map(|f| {
            let score = if storedist { f.dist } else { f.score };
            // A sorted set cannot hold NaN (Redis would assert); a NaN
            // distance, which needs antipodal points the haversine rounds
            // past 1, is stored as 0.
            (f.member, if score.is_nan() { 0.0 } else { score })
        }),
        n,
        max_member,
        &lim,
    );
    let db = ctx.client.db;
    let lru = ctx.srv.lru_clock;
    let existed = ctx.srv.lookup_write(db, dst, ctx.now_ms).is_some();
    if let Some(old) =
        ctx.srv.keyspace.dbs[db].upsert(dst, Value::ZSet(Arc::new(z)), NO_EXPIRE, lru)
    {
        ctx.srv.drop_value(old);
    }
    if !existed {
        ctx.notify(NOTIFY_NEW, "new", dst);
    }
    if touch {
        ctx.srv.touch_watched_key(db, dst);
        ctx.srv.blocking.signal(dst);
    }
    ctx.notify(NOTIFY_ZSET, event, dst);
    ctx.modified(n as u64);
    ctx.client.out.int(n as i64);
}

#[cfg(test)]
mod tests {
    use super::c_is;

    #[test]
    fn options_compare_as_c_strings() {
        assert!(c_is(b"WithDist", "withdist"));
        assert!(c_is(b"km\0junk", "km"));
        assert!(!c_is(b"kmx", "km"));
        assert!(!c_is(b"", "m"));
    }
}
