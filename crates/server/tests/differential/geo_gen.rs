//! The geo part of the generator: GEOADD (NX XX CH), GEODIST, GEOHASH,
//! GEOPOS, GEORADIUS, GEORADIUSBYMEMBER and their `_RO` forms (STORE,
//! STOREDIST), GEOSEARCH and GEOSEARCHSTORE (FROMMEMBER FROMLONLAT BYRADIUS
//! BYBOX ASC DESC COUNT ANY WITH* STOREDIST) over points clustered around
//! anchors that include the poles' limits (±85.05112878), the antimeridian
//! and 0,0; invalid coordinates, units in every case and wrong ones, radii
//! and boxes from 0 to 1e300 and `inf`, negative and non-numeric extents,
//! members that are missing, missing keys, the sorted sets of the zset
//! generator (scores no GEOADD makes) and keys of other types.
//!
//! One nondeterminism of Redis is kept out: with `COUNT n` (no `ANY`) and
//! more than `n` matches, Redis orders the points with its `pqsort`, which
//! leaves the order of equal distances to its partitioning. Equal
//! distances need coincident points (or exact symmetries), so such
//! searches only read [`CONTINUOUS_KEY`], whose points are always drawn at
//! random with full precision far enough apart; the other keys get every
//! other option, and their ties are ordered by glibc's merge sort, which
//! ferrokv reproduces.

use super::{Check, Command, Generator, KEYS};
use rand::Rng;

/// The share of generated commands that are geo commands: 6%, or
/// `FERROKV_DIFF_GEO` (0..1) to focus a run on the family.
pub fn share() -> f64 {
    std::env::var("FERROKV_DIFF_GEO")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.06)
}

const GKEYS: &[&[u8]] = &[b"geo0", b"geo1"];
/// A key that only ever holds points at random full-precision
/// coordinates (see the module note).
const CONTINUOUS_KEY: &[u8] = b"geoc";
/// The zset generator's keys: any score, so any bit pattern to decode.
const ZKEYS: &[&[u8]] = &[b"z0", b"z1"];

/// Where points cluster: ordinary places, the limits and the antimeridian.
const ANCHORS: &[(f64, f64)] = &[
    (13.361389, 38.115556),
    (0.0, 0.0),
    (179.99, 0.5),
    (-179.99, -0.5),
    (0.0, 85.0),
    (0.0, -85.0),
    (100.0, 70.0),
    (-60.0, -81.0),
];

const EDGE_LONS: &[&str] = &[
    "180",
    "-180",
    "179.99999999",
    "-179.99999999",
    "0",
    "-0",
    "180.0000001",
    "-180.5",
    "1e-300",
    "inf",
    "nan",
    "abc",
    "",
    "0x10",
];

const EDGE_LATS: &[&str] = &[
    "85.05112878",
    "-85.05112878",
    "85.05112877",
    "85.05112879",
    "-85.0511288",
    "85",
    "-85",
    "80.0000001",
    "66",
    "-66.5",
    "90",
    "0",
    "-inf",
    "x",
];

/// Cluster sizes in degrees.
const SPREADS: &[f64] = &[0.0001, 0.01, 0.3, 3.0, 40.0];

const UNITS: &[&str] = &["m", "km", "ft", "mi", "M", "KM", "Ft", "mI"];
const BAD_UNITS: &[&str] = &["", "meters", "k", "yd", "km\u{0}"];

const EXTENTS: &[&str] = &[
    "0", "1", "0.5", "10", "100", "1000", "5000", "20000", "1e7", "1e9", "1e300", "inf", "-1",
    "-0", "abc", "", "nan",
];

const COUNTS: &[&str] = &[
    "0",
    "-1",
    "x",
    "1.5",
    "9223372036854775807",
    "99999999999999999999",
];

impl Generator {
    fn gkey(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..20) {
            0 | 1 => ZKEYS[self.rng.gen_range(0..ZKEYS.len())].to_vec(),
            // The main generator's keys: strings, lists, ... (WRONGTYPE).
            2 => KEYS[self.rng.gen_range(0..3)].to_vec(),
            3 => b"geonone".to_vec(),
            4..=7 => CONTINUOUS_KEY.to_vec(),
            _ => GKEYS[self.rng.gen_range(0..GKEYS.len())].to_vec(),
        }
    }

    fn gmember(&mut self) -> Vec<u8> {
        if self.chance(0.08) {
            return self.pick(&["nomember", "", "a", "m\u{0}"]).into();
        }
        format!("m{}", self.rng.gen_range(0..12)).into_bytes()
    }

    /// This sequence's anchor and spread: most points and searches of a
    /// sequence share them, so searches find points (and cross cells).
    fn focus(&mut self) -> (usize, f64) {
        if let Some(f) = self.geo_focus {
            return f;
        }
        let f = (self.rng.gen_range(0..ANCHORS.len()), self.pick(SPREADS));
        self.geo_focus = Some(f);
        f
    }

    /// A point near an anchor, at `spread` degrees at most, clamped to the
    /// valid ranges, with full precision.
    fn near_anchor(&mut self, spread: f64) -> (f64, f64) {
        let (focus, _) = self.focus();
        let (lon, lat) = if self.chance(0.85) {
            ANCHORS[focus]
        } else {
            self.pick(ANCHORS)
        };
        // Some points on the anchor's own meridian: Redis measures those
        // distances with its same-longitude shortcut.
        let lon = if self.chance(0.2) {
            lon
        } else {
            (lon + self.rng.gen_range(-spread..=spread)).clamp(-180.0, 180.0)
        };
        let lat = (lat + self.rng.gen_range(-spread..=spread)).clamp(-85.05112878, 85.05112878);
        (lon, lat)
    }

    fn spread(&mut self) -> f64 {
        let (_, spread) = self.focus();
        if self.chance(0.7) {
            spread
        } else {
            self.pick(SPREADS)
        }
    }

    /// A longitude, latitude pair: mostly near an anchor, sometimes an edge
    /// value or an invalid one.
    fn lon_lat(&mut self, continuous: bool) -> (Vec<u8>, Vec<u8>) {
        if continuous {
            let spread = self.spread().max(0.3);
            let (lon, lat) = self.near_anchor(spread);
            return (
                format!("{lon:?}").into_bytes(),
                format!("{lat:?}").into_bytes(),
            );
        }
        let spread = self.spread();
        let (lon, lat) = self.near_anchor(spread);
        let lon = if self.chance(0.1) {
            self.pick(EDGE_LONS).into()
        } else if self.chance(0.3) {
            format!("{lon:.4}").into_bytes()
        } else {
            format!("{lon:?}").into_bytes()
        };
        let lat = if self.chance(0.1) {
            self.pick(EDGE_LATS).into()
        } else if self.chance(0.3) {
            format!("{lat:.4}").into_bytes()
        } else {
            format!("{lat:?}").into_bytes()
        };
        (lon, lat)
    }

    fn unit(&mut self) -> Vec<u8> {
        if self.chance(0.04) {
            self.pick(BAD_UNITS).into()
        } else {
            self.pick(UNITS).into()
        }
    }

    /// A radius, width or height with its unit: mostly about the
    /// sequence's spread (a tenth of it to three times it, in the unit
    /// given), sometimes an edge or invalid value.
    fn extent(&mut self, unit: &[u8]) -> Vec<u8> {
        if self.chance(0.12) {
            return self.pick(EXTENTS).into();
        }
        let metres_per_unit = match unit.to_ascii_lowercase().as_slice() {
            b"km" => 1000.0,
            b"ft" => 0.3048,
            b"mi" => 1609.34,
            _ => 1.0,
        };
        let spread_m = self.spread() * 111_000.0;
        let m = spread_m * 10f64.powf(self.rng.gen_range(-1.0..0.5f64));
        let v = m / metres_per_unit;
        if self.chance(0.5) {
            format!("{v:?}").into_bytes()
        } else {
            format!("{:.3}", v).into_bytes()
        }
    }

    /// One geo command.
    pub(super) fn geo_command(&mut self) -> Command {
        let b = |s: &str| s.as_bytes().to_vec();
        let args: Vec<Vec<u8>> = match self.rng.gen_range(0..40) {
            0..=9 => {
                let key = self.gkey();
                let continuous = key == CONTINUOUS_KEY;
                let mut a = vec![b("GEOADD"), key];
                if !continuous && self.chance(0.05) {
                    a.push(b(self.pick(&["GT", "INCR", "nx", "Ch"])));
                }
                for _ in 0..self.rng.gen_range(0..3) {
                    a.push(b(self.pick(&["NX", "XX", "CH", "xx"])));
                }
                for _ in 0..self.rng.gen_range(1..5) {
                    let (lon, lat) = self.lon_lat(continuous);
                    a.push(lon);
                    a.push(lat);
                    a.push(self.gmember());
                }
                if self.chance(0.03) {
                    a.pop();
                }
                a
            }
            10..=12 => {
                let mut a = vec![b("GEODIST"), self.gkey(), self.gmember(), self.gmember()];
                if self.chance(0.6) {
                    a.push(self.unit());
                }
                if self.chance(0.03) {
                    a.push(b("extra"));
                }
                a
            }
            13..=15 => {
                let name = self.pick(&["GEOPOS", "GEOHASH"]);
                let mut a = vec![b(name), self.gkey()];
                for _ in 0..self.rng.gen_range(0..4) {
                    a.push(self.gmember());
                }
                a
            }
            _ => return self.geo_search(),
        };
        Command::new(args, Check::Exact)
    }

    /// A GEORADIUS* or GEOSEARCH* command.
    fn geo_search(&mut self) -> Command {
        let b = |s: &str| s.as_bytes().to_vec();
        let key = self.gkey();
        let continuous = key == CONTINUOUS_KEY;
        let form = self.rng.gen_range(0..6);
        let mut a: Vec<Vec<u8>> = Vec::new();
        let storable = match form {
            0 | 1 => {
                let ro = self.chance(0.3);
                a.push(b(if ro { "GEORADIUS_RO" } else { "GEORADIUS" }));
                a.push(key);
                let (lon, lat) = self.lon_lat(continuous);
                a.push(lon);
                a.push(lat);
                let unit = self.unit();
                a.push(self.extent(&unit));
                a.push(unit);
                !ro
            }
            2 => {
                let ro = self.chance(0.3);
                a.push(b(if ro {
                    "GEORADIUSBYMEMBER_RO"
                } else {
                    "GEORADIUSBYMEMBER"
                }));
                a.push(key);
                a.push(self.gmember());
                let unit = self.unit();
                a.push(self.extent(&unit));
                a.push(unit);
                !ro
            }
            _ => {
                let store = self.chance(0.3);
                if store {
                    a.push(b("GEOSEARCHSTORE"));
                    a.push(self.gdest());
                } else {
                    a.push(b(if self.chance(0.1) {
                        "geosearch"
                    } else {
                        "GEOSEARCH"
                    }));
                }
                a.push(key);
                // FROM and BY, in either order, sometimes missing or doubled.
                let mut parts: Vec<Vec<Vec<u8>>> = Vec::new();
                let from_n = if self.chance(0.05) {
                    0
                } else if self.chance(0.05) {
                    2
                } else {
                    1
                };
                for _ in 0..from_n {
                    if self.chance(0.5) {
                        parts.push(vec![b("FROMMEMBER"), self.gmember()]);
                    } else {
                        let (lon, lat) = self.lon_lat(continuous);
                        parts.push(vec![b("FROMLONLAT"), lon, lat]);
                    }
                }
                let by_n = if self.chance(0.05) {
                    0
                } else if self.chance(0.05) {
                    2
                } else {
                    1
                };
                for _ in 0..by_n {
                    let unit = self.unit();
                    if self.chance(0.5) {
                        parts.push(vec![b("BYRADIUS"), self.extent(&unit), unit]);
                    } else {
                        let (w, h) = (self.extent(&unit), self.extent(&unit));
                        parts.push(vec![b("BYBOX"), w, h, unit]);
                    }
                }
                if self.chance(0.2) {
                    parts.reverse();
                }
                for p in parts {
                    a.extend(p);
                }
                if store && self.chance(0.4) {
                    a.push(b("STOREDIST"));
                }
                false
            }
        };
        let store_form = a[0] == b"GEOSEARCHSTORE";
        for _ in 0..self.rng.gen_range(0..4) {
            match self.rng.gen_range(0..14) {
                0..=2 if !store_form || self.chance(0.1) => a.push(b(self.pick(&[
                    "WITHDIST",
                    "WITHHASH",
                    "WITHCOORD",
                    "withdist",
                ]))),
                3..=5 => a.push(b(self.pick(&["ASC", "DESC", "asc"]))),
                6..=8 => {
                    // COUNT without ANY on a key whose points may coincide
                    // would tie (see the module note): ANY there.
                    a.push(b("COUNT"));
                    if self.chance(0.1) {
                        a.push(b(self.pick(COUNTS)));
                    } else {
                        a.push(self.rng.gen_range(1..6u32).to_string().into_bytes());
                    }
                    if !continuous || self.chance(0.3) {
                        a.push(b("ANY"));
                    }
                }
                // A lone ANY: an error without a COUNT, harmless with one.
                9 if self.chance(0.3) => a.push(b("ANY")),
                10 | 11 if storable => {
                    a.push(b(self.pick(&["STORE", "STOREDIST", "store"])));
                    a.push(self.gdest());
                }
                12 if self.chance(0.2) => {
                    // A stray or unknown token, or one another form owns.
                    a.push(b(self.pick(&[
                        "FOO",
                        "STORE",
                        "STOREDIST",
                        "BYBOX",
                        "COUNT",
                    ])));
                }
                _ => {}
            }
        }
        Command::new(a, Check::Exact)
    }

    /// A store destination: the geo keys (not [`CONTINUOUS_KEY`], whose
    /// points must stay random), other types, missing keys.
    fn gdest(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..10) {
            0 => KEYS[self.rng.gen_range(0..3)].to_vec(),
            1 => b"geonone".to_vec(),
            2 => b"geodst".to_vec(),
            _ => GKEYS[self.rng.gen_range(0..GKEYS.len())].to_vec(),
        }
    }
}
