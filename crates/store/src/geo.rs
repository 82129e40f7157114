//! Geospatial indexes on sorted sets, as Redis 7.0 builds them (geohash.c,
//! geohash_helper.c, geo.c): a point is stored as a member whose score is
//! its 52-bit interleaved geohash, and a radius or box search reads the
//! score ranges of at most nine geohash cells around the centre, then
//! keeps the points the exact distance test admits.
//!
//! The formulas are those of the Redis 7.0.15 build that is our oracle,
//! which carries 7.2's faster distance code (checked against it): the
//! haversine skips to `R * |Δlat|` when the longitudes are equal, a box
//! tests the latitude that way first, and distances are printed by
//! `fixedpoint_d2string` (an `llrint` of the value times 10^4), not
//! `%.4f`.
//!
//! Everything here is arithmetic that must give Redis's bits, not merely
//! close values: the same double operations in the same order (a member
//! found or missed at the edge of a search, or a distance printed with
//! four decimals, depends on the last bit). So the encoding, the cell
//! arithmetic, the step estimate with its "decrease step" correction, the
//! bounding box and the haversine distance follow Redis's formulas, with
//! `f64` operations that round as C's `double` ones do (`sin`, `cos`,
//! `asin` and `sqrt` are the platform's libm, as in Redis).
//!
//! Two conversions C leaves to the machine are spelled out, as they behave
//! on x86-64 (the oracle): a score becomes the hash bits through
//! `(uint64_t)score` ([`score_to_bits`]: a negative score wraps, an
//! out-of-range one gives the "integer indefinite" value), and a cell
//! coordinate `ilato + 1` wraps in 32 bits.
//!
//! # Work
//!
//! A search visits at most nine score ranges of the set, each once in
//! score order; the candidates are the members in those ranges, so the
//! work is bounded by the set whatever the radius, and a limit (`ANY`)
//! stops the walk early. Nothing is allocated from a client's number.

use crate::zset::{ScoreRange, ZSet};
use std::cmp::Ordering;

/// Bits per coordinate of a stored score (52 bits in all).
pub const STEP_MAX: u8 = 26;
pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;
pub const LON_MIN: f64 = -180.0;
pub const LON_MAX: f64 = 180.0;
/// Redis's Earth radius for the haversine formula.
pub const EARTH_RADIUS_IN_METERS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;
const D_R: f64 = std::f64::consts::PI / 180.0;

#[inline]
fn deg_rad(ang: f64) -> f64 {
    ang * D_R
}

#[inline]
fn rad_deg(ang: f64) -> f64 {
    ang / D_R
}

/// A closed interval of one coordinate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    pub min: f64,
    pub max: f64,
}

/// Redis's coordinate ranges for stored points (EPSG:900913's limits).
pub const LON_RANGE: Range = Range {
    min: LON_MIN,
    max: LON_MAX,
};
pub const LAT_RANGE: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

/// A geohash cell: `step` bits per coordinate, interleaved in `bits`
/// (latitude in the even positions, longitude in the odd ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HashBits {
    pub bits: u64,
    pub step: u8,
}

impl HashBits {
    /// Redis's `HASHISZERO`: a neighbour cell excluded from a search.
    pub fn is_zero(&self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The cell's bits shifted to the 52-bit score scale.
    pub fn align52(&self) -> u64 {
        self.bits << (52 - u32::from(self.step) * 2)
    }
}

/// A cell's extent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Area {
    pub hash: HashBits,
    pub lon: Range,
    pub lat: Range,
}

/// Spreads the 32 bits of `v` to the even bit positions of a u64.
fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// Gathers the even bit positions of `v` into 32 bits.
fn gather(v: u64) -> u32 {
    let mut x = v & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x >> 16)) & 0x0000_0000_FFFF_FFFF;
    x as u32
}

/// Latitude bits in the even positions, longitude bits in the odd ones.
pub fn interleave(lat: u32, lon: u32) -> u64 {
    spread(lat) | (spread(lon) << 1)
}

/// The inverse of [`interleave`]: (latitude, longitude) cell numbers.
pub fn deinterleave(bits: u64) -> (u32, u32) {
    (gather(bits), gather(bits >> 1))
}

/// C's `(uint32_t)` of a non-negative double below 2^32: truncation.
#[inline]
fn to_cell(offset: f64) -> u32 {
    offset as u64 as u32
}

/// The cell of (`lon`, `lat`) at `step` bits per coordinate within the
/// given ranges (Redis's `geohashEncode`); `None` outside Redis's limits
/// or the ranges.
pub fn encode(
    lon_range: Range,
    lat_range: Range,
    lon: f64,
    lat: f64,
    step: u8,
) -> Option<HashBits> {
    if step > 32 || step == 0 {
        return None;
    }
    // Both range checks compare as C does (a NaN passes neither way).
    #[allow(clippy::manual_range_contains)]
    if lon > LON_MAX || lon < LON_MIN || lat > LAT_MAX || lat < LAT_MIN {
        return None;
    }
    if lat < lat_range.min || lat > lat_range.max || lon < lon_range.min || lon > lon_range.max {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_offset = (lat - lat_range.min) / (lat_range.max - lat_range.min) * scale;
    let lon_offset = (lon - lon_range.min) / (lon_range.max - lon_range.min) * scale;
    Some(HashBits {
        bits: interleave(to_cell(lat_offset), to_cell(lon_offset)),
        step,
    })
}

/// [`encode`] within the stored points' ranges.
pub fn encode_wgs84(lon: f64, lat: f64, step: u8) -> Option<HashBits> {
    encode(LON_RANGE, LAT_RANGE, lon, lat, step)
}

/// The extent of a cell (Redis's `geohashDecode`); `None` for a zero cell.
pub fn decode(lon_range: Range, lat_range: Range, hash: HashBits) -> Option<Area> {
    if hash.is_zero() {
        return None;
    }
    let (ilat, ilon) = deinterleave(hash.bits);
    let lat_scale = lat_range.max - lat_range.min;
    let lon_scale = lon_range.max - lon_range.min;
    let div = (1u64 << hash.step) as f64;
    // `ilato + 1` is 32-bit arithmetic in C: it wraps.
    let at = |min: f64, cell: u32, scale: f64| min + (f64::from(cell) / div) * scale;
    Some(Area {
        hash,
        lat: Range {
            min: at(lat_range.min, ilat, lat_scale),
            max: at(lat_range.min, ilat.wrapping_add(1), lat_scale),
        },
        lon: Range {
            min: at(lon_range.min, ilon, lon_scale),
            max: at(lon_range.min, ilon.wrapping_add(1), lon_scale),
        },
    })
}

/// The centre of a cell, clamped to the stored points' limits.
pub fn area_center(a: &Area) -> (f64, f64) {
    let lon = ((a.lon.min + a.lon.max) / 2.0).clamp(LON_MIN, LON_MAX);
    let lat = ((a.lat.min + a.lat.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

/// C's `(uint64_t)score` as x86-64 compiles it: below 2^63 a signed
/// truncation (so `-1` becomes all ones), above it a truncation of
/// `score - 2^63` with the top bit flipped; a value the conversion cannot
/// represent (±inf, beyond ±2^63 or 2^64) gives the "integer indefinite"
/// `0x8000000000000000` before that flip.
pub fn score_to_bits(score: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    fn cvttsd2si(x: f64) -> u64 {
        if x.is_nan() || !(-TWO_63..TWO_63).contains(&x) {
            1 << 63
        } else {
            x as i64 as u64
        }
    }
    if score < TWO_63 {
        cvttsd2si(score)
    } else {
        cvttsd2si(score - TWO_63) ^ (1 << 63)
    }
}

/// The point a score stands for (Redis's `decodeGeohash`): the centre of
/// its step-26 cell, clamped. Any score decodes to some point.
pub fn decode_score(score: f64) -> (f64, f64) {
    let hash = HashBits {
        bits: score_to_bits(score),
        step: STEP_MAX,
    };
    let area = decode(LON_RANGE, LAT_RANGE, hash).expect("step 26 is never the zero cell");
    area_center(&area)
}

/// The score GEOADD stores for a point (within the limits).
pub fn score_of(lon: f64, lat: f64) -> Option<u64> {
    encode_wgs84(lon, lat, STEP_MAX).map(|h| h.align52())
}

/// Whether (`lon`, `lat`) may be stored (Redis's check in
/// `extractLongLatOrReply`).
#[allow(clippy::manual_range_contains)] // a NaN passes, as in C
pub fn valid_lon_lat(lon: f64, lat: f64) -> bool {
    !(lon < LON_MIN || lon > LON_MAX || lat < LAT_MIN || lat > LAT_MAX)
}

/// GEOHASH's 11-character string for a stored score: the decoded point
/// encoded again with the standard latitude range [-90, 90], five bits a
/// character, the 11th always `0` (52 bits make 10.4 characters).
pub fn geohash_string(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = decode_score(score);
    let bits = encode(
        Range {
            min: -180.0,
            max: 180.0,
        },
        Range {
            min: -90.0,
            max: 90.0,
        },
        lon,
        lat,
        STEP_MAX,
    )
    .map_or(0, |h| h.bits);
    let mut out = [b'0'; 11];
    for (i, c) in out.iter_mut().take(10).enumerate() {
        *c = ALPHABET[((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize];
    }
    out
}

/// The distance in metres between two latitudes on one meridian:
/// Redis's shortcut for the haversine when the longitudes are equal (its
/// `asin(sin(x))` simplified to `x`).
pub fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// The great-circle distance in metres (Redis's haversine, with its
/// shortcut when the longitudes are the same).
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let lon1r = deg_rad(lon1);
    let lon2r = deg_rad(lon2);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let lat1r = deg_rad(lat1);
    let lat2r = deg_rad(lat2);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

// ---------------------------------------------------------------------------
// Cell neighbours
// ---------------------------------------------------------------------------

const ODD: u64 = 0xaaaa_aaaa_aaaa_aaaa;
const EVEN: u64 = 0x5555_5555_5555_5555;

/// One cell east (`d > 0`) or west: the longitude bits, wrapping around.
fn move_x(h: &mut HashBits, d: i8) {
    let shift = 64 - u32::from(h.step) * 2;
    let mut x = h.bits & ODD;
    let y = h.bits & EVEN;
    let zz = EVEN >> shift;
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= ODD >> shift;
    h.bits = x | y;
}

/// One cell north (`d > 0`) or south: the latitude bits, wrapping around.
fn move_y(h: &mut HashBits, d: i8) {
    let shift = 64 - u32::from(h.step) * 2;
    let x = h.bits & ODD;
    let mut y = h.bits & EVEN;
    let zz = ODD >> shift;
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= EVEN >> shift;
    h.bits = x | y;
}

/// The eight neighbours of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Neighbors {
    pub north: HashBits,
    pub south: HashBits,
    pub east: HashBits,
    pub west: HashBits,
    pub north_east: HashBits,
    pub north_west: HashBits,
    pub south_east: HashBits,
    pub south_west: HashBits,
}

pub fn neighbors(h: HashBits) -> Neighbors {
    let moved = |dx: i8, dy: i8| {
        let mut n = h;
        if dx != 0 {
            move_x(&mut n, dx);
        }
        if dy != 0 {
            move_y(&mut n, dy);
        }
        n
    };
    Neighbors {
        east: moved(1, 0),
        west: moved(-1, 0),
        south: moved(0, -1),
        north: moved(0, 1),
        north_west: moved(-1, 1),
        north_east: moved(1, 1),
        south_east: moved(1, -1),
        south_west: moved(-1, -1),
    }
}

// ---------------------------------------------------------------------------
// Search shapes and the cells that cover them
// ---------------------------------------------------------------------------

/// What a search covers, in the unit the client gave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ShapeKind {
    Radius(f64),
    Box { width: f64, height: f64 },
}

/// A search: its centre, its extent and the unit's size in metres
/// (Redis's `GeoShape`). Distances are multiplied by `conversion` where
/// Redis multiplies them, so the roundings are the same.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    pub lon: f64,
    pub lat: f64,
    pub conversion: f64,
    pub kind: ShapeKind,
}

/// (min lon, min lat, max lon, max lat) around the shape (Redis's
/// `geohashBoundingBox`): the longitude span taken at the box's edge
/// nearer the pole (top in the north, bottom in the south).
pub fn bounding_box(s: &Shape) -> [f64; 4] {
    let (height, width) = match s.kind {
        ShapeKind::Radius(r) => (s.conversion * r, s.conversion * r),
        ShapeKind::Box { width, height } => {
            (s.conversion * (height / 2.0), s.conversion * (width / 2.0))
        }
    };
    let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
    let lon_delta_top = rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(s.lat + lat_delta).cos());
    let lon_delta_bottom =
        rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(s.lat - lat_delta).cos());
    let lon_delta = if s.lat < 0.0 {
        lon_delta_bottom
    } else {
        lon_delta_top
    };
    [
        s.lon - lon_delta,
        s.lat - lat_delta,
        s.lon + lon_delta,
        s.lat + lat_delta,
    ]
}

/// The cell size (bits per coordinate) for a search of `range_m` metres
/// at latitude `lat` (Redis's `geohashEstimateStepsByRadius`).
pub fn estimate_steps(range_m: f64, lat: f64) -> u8 {
    if range_m == 0.0 {
        return 26;
    }
    let mut range_m = range_m;
    let mut step: i32 = 1;
    while range_m < MERCATOR_MAX {
        range_m *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// The centre cell and the neighbours a search must read (Redis's
/// `geohashCalculateAreasByShapeWGS84`); excluded neighbours are zero.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchAreas {
    pub hash: HashBits,
    pub neighbors: Neighbors,
    pub area: Area,
}

pub fn areas_for_shape(s: &Shape) -> SearchAreas {
    let [min_lon, min_lat, max_lon, max_lat] = bounding_box(s);
    let radius_m = match s.kind {
        ShapeKind::Radius(r) => r,
        ShapeKind::Box { width, height } => {
            ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
        }
    } * s.conversion;
    let mut steps = estimate_steps(radius_m, s.lat);
    // The centre was checked against the limits, so it encodes; a cell of
    // 0 is what Redis's untouched struct would hold otherwise.
    let cells = |steps: u8| {
        let hash = encode_wgs84(s.lon, s.lat, steps).unwrap_or(HashBits {
            bits: 0,
            step: steps,
        });
        let area = decode(LON_RANGE, LAT_RANGE, hash).unwrap_or(Area {
            hash,
            lon: Range { min: 0.0, max: 0.0 },
            lat: Range { min: 0.0, max: 0.0 },
        });
        (hash, neighbors(hash), area)
    };
    let (mut hash, mut nb, mut area) = cells(steps);
    // The estimated step may leave part of the box outside the 3x3 cells
    // when the centre is near its cell's edge: one step coarser then.
    let edge = |h: HashBits| decode(LON_RANGE, LAT_RANGE, h);
    let decrease = edge(nb.north).is_some_and(|a| a.lat.max < max_lat)
        || edge(nb.south).is_some_and(|a| a.lat.min > min_lat)
        || edge(nb.east).is_some_and(|a| a.lon.max < max_lon)
        || edge(nb.west).is_some_and(|a| a.lon.min > min_lon);
    if steps > 1 && decrease {
        steps -= 1;
        (hash, nb, area) = cells(steps);
    }
    // Neighbours the box does not reach are not read.
    if steps >= 2 {
        let zero = HashBits::default();
        if area.lat.min < min_lat {
            nb.south = zero;
            nb.south_west = zero;
            nb.south_east = zero;
        }
        if area.lat.max > max_lat {
            nb.north = zero;
            nb.north_east = zero;
            nb.north_west = zero;
        }
        if area.lon.min < min_lon {
            nb.west = zero;
            nb.south_west = zero;
            nb.north_west = zero;
        }
        if area.lon.max > max_lon {
            nb.east = zero;
            nb.south_east = zero;
            nb.north_east = zero;
        }
    }
    SearchAreas {
        hash,
        neighbors: nb,
        area,
    }
}

/// The score ranges `[min, max)` a search reads, in Redis's order (centre,
/// N, S, E, W, NE, NW, SE, SW), without the excluded cells and without a
/// cell equal to the one read just before it (huge radii make neighbours
/// coincide).
pub fn search_ranges(s: &Shape) -> Vec<(f64, f64)> {
    let a = areas_for_shape(s);
    let n = a.neighbors;
    let cells = [
        a.hash,
        n.north,
        n.south,
        n.east,
        n.west,
        n.north_east,
        n.north_west,
        n.south_east,
        n.south_west,
    ];
    let mut out = Vec::with_capacity(9);
    let mut last: Option<HashBits> = None;
    for (i, c) in cells.iter().enumerate() {
        if c.is_zero() {
            continue;
        }
        // Redis's `last_processed` is 0 until a neighbour (not the centre)
        // was read, so a neighbour equal to the centre is read again.
        if i > 0 && last == Some(*c) {
            continue;
        }
        let min = c.align52();
        let max = HashBits {
            bits: c.bits.wrapping_add(1),
            step: c.step,
        }
        .align52();
        out.push((min as f64, max as f64));
        if i > 0 {
            last = Some(*c);
        }
    }
    out
}

/// Whether the point of `score` is inside the shape (Redis's
/// `geoWithinShape`): its coordinates and distance from the centre (in
/// metres) if so.
pub fn within(s: &Shape, score: f64) -> Option<(f64, f64, f64)> {
    let (lon, lat) = decode_score(score);
    match s.kind {
        ShapeKind::Radius(r) => {
            let d = distance(s.lon, s.lat, lon, lat);
            // `d > radius` rejects; a NaN distance is kept, as in Redis.
            if d > r * s.conversion {
                return None;
            }
            Some((lon, lat, d))
        }
        ShapeKind::Box { width, height } => {
            // Latitude first (the cheaper test), then the longitude span
            // along the point's own parallel.
            let (w, h) = (width * s.conversion, height * s.conversion);
            if lat_distance(lat, s.lat) > h / 2.0 {
                return None;
            }
            if distance(lon, lat, s.lon, lat) > w / 2.0 {
                return None;
            }
            Some((lon, lat, distance(s.lon, s.lat, lon, lat)))
        }
    }
}

/// One point a search found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Found<'a> {
    /// Borrowed from the set searched.
    pub member: &'a [u8],
    pub score: f64,
    pub lon: f64,
    pub lat: f64,
    /// Metres from the centre.
    pub dist: f64,
}

/// The members of `z` inside the shape, in the order Redis finds them
/// (cell by cell, each in score order); `limit` > 0 stops after that many
/// (`ANY`), checked after each member as Redis does.
pub fn search<'a>(z: &'a ZSet, s: &Shape, limit: usize) -> Vec<Found<'a>> {
    let mut found = Vec::new();
    for (min, max) in search_ranges(s) {
        if limit > 0 && found.len() >= limit {
            break;
        }
        let r = ScoreRange {
            min,
            max,
            minex: false,
            maxex: true,
        };
        // Redis's zslIsInRange: an empty or inverted range reads nothing.
        if min >= max {
            continue;
        }
        let (from, to) = z.score_range_ranks(&r);
        for (member, score) in z.iter_from_rank(from).take(to - from) {
            if let Some((lon, lat, dist)) = within(s, score) {
                found.push(Found {
                    member,
                    score,
                    lon,
                    lat,
                    dist,
                });
            }
            if limit > 0 && found.len() >= limit {
                break;
            }
        }
    }
    found
}

/// Orders found points by distance as Redis's `qsort` does on glibc (a
/// top-down merge sort, so equal distances keep the order they were
/// found in), with Redis's comparator (`>` is after, `==` is equal,
/// anything else — a NaN too — is before).
///
/// Without a NaN the comparator is a total order, and every stable sort
/// gives the one result glibc's does: the standard library's. A NaN
/// distance (antipodal points, whose haversine rounds past 1) makes it no
/// order at all; then glibc's own merge (halves of `n / 2` and the rest,
/// the left element first unless it compares after) is followed step by
/// step, with one buffer.
pub fn sort_by_distance(points: &mut [Found<'_>], desc: bool) {
    if !points.iter().any(|p| p.dist.is_nan()) {
        if desc {
            points.sort_by(|a, b| b.dist.partial_cmp(&a.dist).unwrap_or(Ordering::Equal));
        } else {
            points.sort_by(|a, b| a.dist.partial_cmp(&b.dist).unwrap_or(Ordering::Equal));
        }
        return;
    }
    glibc_merge_sort(points, desc);
}

/// glibc's `msort` with Redis's comparator, step by step (see
/// [`sort_by_distance`]).
fn glibc_merge_sort(points: &mut [Found<'_>], desc: bool) {
    fn asc(a: f64, b: f64) -> i32 {
        if a > b {
            1
        } else if a == b {
            0
        } else {
            -1
        }
    }
    let cmp = |a: &Found, b: &Found| {
        let c = asc(a.dist, b.dist);
        if desc {
            -c
        } else {
            c
        }
    };
    fn merge_sort<'a>(
        v: &mut [Found<'a>],
        tmp: &mut Vec<Found<'a>>,
        cmp: &dyn Fn(&Found, &Found) -> i32,
    ) {
        if v.len() <= 1 {
            return;
        }
        let mid = v.len() / 2;
        merge_sort(&mut v[..mid], tmp, cmp);
        merge_sort(&mut v[mid..], tmp, cmp);
        tmp.clear();
        let (mut i, mut j) = (0, mid);
        while i < mid && j < v.len() {
            if cmp(&v[i], &v[j]) <= 0 {
                tmp.push(v[i]);
                i += 1;
            } else {
                tmp.push(v[j]);
                j += 1;
            }
        }
        tmp.extend_from_slice(&v[i..mid]);
        tmp.extend_from_slice(&v[j..]);
        v.copy_from_slice(tmp);
    }
    let mut tmp = Vec::with_capacity(points.len());
    merge_sort(points, &mut tmp, &cmp);
}

/// A distance as Redis replies it (`fixedpoint_d2string(.., 4)`): the
/// value times 10^4 rounded to an integer by `llrint` (half to even, on
/// the rounded product), printed with four decimals; zero is `0.0000`,
/// and a value `llrint` cannot represent (NaN) is x86's `LLONG_MIN`.
pub fn format_distance(d: f64) -> String {
    if d == 0.0 {
        return "0.0000".to_string();
    }
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    let scaled = (d * 10000.0).round_ties_even();
    let v = if scaled.is_nan() || !(-TWO_63..TWO_63).contains(&scaled) {
        i64::MIN
    } else {
        scaled as i64
    };
    let abs = v.unsigned_abs();
    format!(
        "{}{}.{:04}",
        if v < 0 { "-" } else { "" },
        abs / 10000,
        abs % 10000
    )
}

/// A coordinate as Redis's `addReplyHumanLongDouble` prints a double
/// (`%.17Lf` with the trailing zeros and dot removed, `-0` as `0`): a
/// double is exact in a `long double`, and Rust's fixed-precision
/// formatting is exact too, rounding half to even as glibc does.
pub fn format_coordinate(v: f64) -> String {
    let mut s = format!("{v:.17}");
    if s.contains('.') {
        let t = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(t);
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

/// A coordinate as `%f` prints it (Redis's invalid-pair error).
pub fn format_c_f(v: f64) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    format!("{v:.6}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zset::ZsetLimits;

    #[test]
    fn palermo_and_catania_get_redis_scores() {
        assert_eq!(score_of(13.361389, 38.115556), Some(3479099956230698));
        assert_eq!(score_of(15.087269, 37.502669), Some(3479447370796909));
    }

    #[test]
    fn a_score_decodes_to_redis_coordinates() {
        let (lon, lat) = decode_score(3479099956230698.0);
        assert_eq!(format_coordinate(lon), "13.36138933897018433");
        assert_eq!(format_coordinate(lat), "38.11555639549629859");
    }

    #[test]
    fn the_limits_encode_and_decode_clamped() {
        // Redis: GEOADD k 180 85.05112878 top -180 -85.05112878 bot.
        assert_eq!(score_of(-180.0, -85.05112878), Some(0));
        assert_eq!(score_of(180.0, 85.05112878), Some(13510798882111488));
        let (lon, lat) = decode_score(13510798882111488.0);
        assert_eq!(format_coordinate(lon), "180");
        assert_eq!(format_coordinate(lat), "85.0511287799999991");
        assert_eq!(score_of(180.1, 0.0), None);
        assert_eq!(score_of(0.0, 85.06), None);
        assert!(!valid_lon_lat(0.0, -85.0511288));
    }

    #[test]
    fn odd_scores_decode_as_redis_casts_them() {
        // ZADD z -1 neg 1e18 big 1.5 frac inf pinf -inf ninf, then GEOPOS.
        assert_eq!(score_to_bits(-1.0), u64::MAX);
        assert_eq!(score_to_bits(1.5), 1);
        assert_eq!(score_to_bits(f64::INFINITY), 0);
        assert_eq!(score_to_bits(f64::NEG_INFINITY), 1 << 63);
        assert_eq!(score_to_bits(1e19), 10_000_000_000_000_000_000);
        assert_eq!(score_to_bits(1e20), 0);
        let (lon, lat) = decode_score(-1.0);
        assert_eq!(
            (format_coordinate(lon), format_coordinate(lat)),
            ("180".into(), "85.0511287799999991".into())
        );
        let (lon, lat) = decode_score(f64::NEG_INFINITY);
        assert_eq!(
            (format_coordinate(lon), format_coordinate(lat)),
            ("180".into(), "-85.05112751263942528".into())
        );
        let (lon, lat) = decode_score(1.5);
        assert_eq!(
            (format_coordinate(lon), format_coordinate(lat)),
            (
                "-179.99999731779098511".into(),
                "-85.05112497791824921".into()
            )
        );
    }

    #[test]
    fn geohash_strings_are_redis_ones() {
        assert_eq!(&geohash_string(3479099956230698.0), b"sqc8b49rny0");
        assert_eq!(&geohash_string(3479447370796909.0), b"sqdtr74hyu0");
        assert_eq!(&geohash_string(13510798882111488.0), b"bp05b5048p0");
        assert_eq!(&geohash_string(0.0), b"00bh0hbj200");
        assert_eq!(&geohash_string(1.5), b"00bh0hbj210");
    }

    #[test]
    fn palermo_catania_distance_is_redis_one() {
        let (a, b) = (
            decode_score(3479099956230698.0),
            decode_score(3479447370796909.0),
        );
        let d = distance(a.0, a.1, b.0, b.1);
        assert_eq!(format_distance(d), "166274.1516");
        assert_eq!(format_distance(d / 1000.0), "166.2742");
        assert_eq!(format_distance(d / 1609.34), "103.3182");
    }

    #[test]
    fn encode_decode_round_trips_within_a_cell() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let lon = (x % 360_000_000) as f64 / 1e6 - 180.0;
            let lat = ((x >> 32) % 170_000_000) as f64 / 1e6 - 85.0;
            let h = encode_wgs84(lon, lat, STEP_MAX).unwrap();
            let area = decode(LON_RANGE, LAT_RANGE, h).unwrap();
            assert!(area.lon.min <= lon && lon <= area.lon.max, "{lon}");
            assert!(area.lat.min <= lat && lat <= area.lat.max, "{lat}");
            // The stored score decodes to the cell's centre, which
            // encodes to the same score again.
            let (clon, clat) = decode_score(h.align52() as f64);
            assert_eq!(score_of(clon, clat), Some(h.align52()));
            assert_eq!(
                deinterleave(interleave((x >> 7) as u32, x as u32)),
                ((x >> 7) as u32, x as u32)
            );
        }
    }

    #[test]
    fn neighbours_wrap_around_the_edges() {
        let h = encode_wgs84(179.9, 0.0, 4).unwrap();
        let n = neighbors(h);
        let e = decode(LON_RANGE, LAT_RANGE, n.east).unwrap();
        assert_eq!(e.lon.min, -180.0);
        let w = decode(LON_RANGE, LAT_RANGE, n.west).unwrap();
        assert!(w.lon.max < 179.9);
        let north = decode(LON_RANGE, LAT_RANGE, n.north).unwrap();
        let here = decode(LON_RANGE, LAT_RANGE, h).unwrap();
        assert_eq!(north.lat.min, here.lat.max);
    }

    #[test]
    fn step_estimate_follows_the_radius_and_latitude() {
        assert_eq!(estimate_steps(0.0, 0.0), 26);
        assert_eq!(estimate_steps(1.0, 0.0), 24);
        assert_eq!(estimate_steps(200_000.0, 0.0), 6);
        assert_eq!(estimate_steps(200_000.0, 70.0), 5);
        assert_eq!(estimate_steps(200_000.0, -81.0), 4);
        assert_eq!(estimate_steps(f64::INFINITY, 0.0), 1);
        assert_eq!(estimate_steps(1e-300, 0.0), 26);
    }

    fn sicily() -> ZSet {
        let lim = ZsetLimits::default();
        let mut z = ZSet::new();
        for (lon, lat, m) in [
            (13.361389, 38.115556, "Palermo"),
            (15.087269, 37.502669, "Catania"),
            (13.583333, 37.316667, "Agrigento"),
        ] {
            z.insert(m.as_bytes(), score_of(lon, lat).unwrap() as f64, &lim);
        }
        z
    }

    fn names<'a>(v: &[Found<'a>]) -> Vec<&'a str> {
        v.iter()
            .map(|f| std::str::from_utf8(f.member).unwrap())
            .collect()
    }

    #[test]
    fn radius_and_box_searches_find_what_redis_finds() {
        let z = sicily();
        let shape = Shape {
            lon: 15.0,
            lat: 37.0,
            conversion: 1000.0,
            kind: ShapeKind::Radius(200.0),
        };
        let mut f = search(&z, &shape, 0);
        sort_by_distance(&mut f, false);
        assert_eq!(names(&f), ["Catania", "Agrigento", "Palermo"]);
        assert_eq!(format_distance(f[0].dist / 1000.0), "56.4413");
        assert_eq!(format_distance(f[2].dist / 1000.0), "190.4424");
        let shape = Shape {
            kind: ShapeKind::Radius(100.0),
            ..shape
        };
        assert_eq!(names(&search(&z, &shape, 0)), ["Catania"]);
        let shape = Shape {
            kind: ShapeKind::Box {
                width: 400.0,
                height: 100.0,
            },
            ..shape
        };
        let mut f = search(&z, &shape, 0);
        sort_by_distance(&mut f, true);
        // Catania is 56 km from the centre but 44 km north of it: outside.
        assert_eq!(names(&f), ["Agrigento"]);
        // A huge radius reads every cell at step 1 and finds all, once.
        let shape = Shape {
            kind: ShapeKind::Radius(f64::INFINITY),
            ..shape
        };
        assert_eq!(search(&z, &shape, 0).len(), 3);
        assert_eq!(search(&z, &shape, 2).len(), 2);
    }

    #[test]
    fn sorting_keeps_the_found_order_of_ties() {
        let p = |m: &'static str, dist: f64| Found {
            member: m.as_bytes(),
            score: 0.0,
            lon: 0.0,
            lat: 0.0,
            dist,
        };
        let mut v = vec![
            p("a", 2.0),
            p("b", 1.0),
            p("c", 2.0),
            p("d", 1.0),
            p("e", f64::NAN),
        ];
        sort_by_distance(&mut v, false);
        assert_eq!(names(&v)[..4], ["b", "d", "a", "c"]);
        let mut v = vec![p("a", 2.0), p("b", 1.0), p("c", 2.0), p("d", 1.0)];
        sort_by_distance(&mut v, true);
        assert_eq!(names(&v), ["a", "c", "b", "d"]);
    }

    #[test]
    fn the_stable_sort_orders_as_glibcs_merge_sort() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let members: Vec<String> = (0..300).map(|i| i.to_string()).collect();
        for _ in 0..200 {
            let n = rng.gen_range(0..300);
            let v: Vec<Found> = (0..n)
                .map(|i| Found {
                    member: members[i].as_bytes(),
                    score: 0.0,
                    lon: 0.0,
                    lat: 0.0,
                    // Many ties, and both zeros (equal for Redis).
                    dist: match rng.gen_range(0..4) {
                        0 => -0.0,
                        1 => rng.gen_range(0..5) as f64,
                        _ => rng.gen_range(0.0..1e6),
                    },
                })
                .collect();
            for desc in [false, true] {
                let (mut a, mut b) = (v.clone(), v.clone());
                sort_by_distance(&mut a, desc);
                glibc_merge_sort(&mut b, desc);
                assert_eq!(names(&a), names(&b));
            }
        }
    }

    #[test]
    fn numbers_print_as_redis_prints_them() {
        assert_eq!(format_distance(0.0), "0.0000");
        assert_eq!(format_distance(-0.0), "0.0000");
        assert_eq!(format_distance(0.03125), "0.0312");
        assert_eq!(format_distance(0.00015), "0.0001");
        // 0.000125 * 10^4 is exactly 1.25: llrint gives 1.
        assert_eq!(format_distance(0.000125), "0.0001");
        assert_eq!(format_distance(0.000375), "0.0004");
        assert_eq!(format_distance(12.5), "12.5000");
        assert_eq!(format_distance(20037726.123456), "20037726.1235");
        assert_eq!(format_distance(f64::NAN), "-922337203685477.5808");
        assert_eq!(format_coordinate(-0.0), "0");
        assert_eq!(format_coordinate(180.0), "180");
        assert_eq!(format_c_f(200.0), "200.000000");
        assert_eq!(format_c_f(f64::NEG_INFINITY), "-inf");
    }
}
