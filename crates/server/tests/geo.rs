//! Guards the geo family against Redis 7.0.15: GEOADD's scores and options
//! (it is ZADD underneath: same notification, propagated as ZADD),
//! GEOPOS/GEOHASH/GEODIST with Redis's number formats in RESP2 and RESP3,
//! the searches (GEORADIUS, GEORADIUSBYMEMBER, their `_RO` forms,
//! GEOSEARCH by radius and box) with their options, order, COUNT/ANY and
//! reply shapes, Redis's own blind spots at the antimeridian and the
//! limits (a member at longitude 180 is in no search cell), the STORE /
//! STOREDIST / GEOSEARCHSTORE destination rules (replaced with its TTL
//! gone, deleted when empty, waiters woken, WATCHes broken), every error
//! text, and COMMAND GETKEYS for the store keys.
//!
//! Set `FERROKV_TESTS_TARGET=redis` to run them against the real
//! `redis-server`.
mod common;
#[allow(unused_imports)]
use common::reply::*;
use common::ServerProcess;
use ferrokv_resp::Frame;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_FLOAT: &str = "ERR value is not a valid float";
const BAD_UNIT: &str = "ERR unsupported unit provided. please use M, KM, FT, MI";
const NO_MEMBER: &str = "ERR could not decode requested zset member";

fn sicily(r: &mut common::Raw, key: &str) {
    r.cmd(&["DEL", key]);
    assert_eq!(
        r.cmd(&[
            "GEOADD",
            key,
            "13.361389",
            "38.115556",
            "Palermo",
            "15.087269",
            "37.502669",
            "Catania",
            "13.583333",
            "37.316667",
            "Agrigento",
        ]),
        int(3)
    );
}

fn pair(member: &str, v: &str) -> Frame {
    arr(vec![bulk(member), bulk(v)])
}

#[test]
fn geoadd_stores_redis_scores_and_point_reads_decode_them() {
    let s = server();
    let mut r = s.raw();
    sicily(&mut r, "g0:s");
    r.cmd(&["DEL", "g0:str", "g0:odd", "g0:n"]);
    r.cmd(&["SET", "g0:str", "x"]);
    check(
        &mut r,
        &[
            (&["ZSCORE", "g0:s", "Palermo"], bulk("3479099956230698")),
            (&["ZSCORE", "g0:s", "Catania"], bulk("3479447370796909")),
            (
                &["GEOPOS", "g0:s", "Palermo", "nope", "Catania"],
                arr(vec![
                    bulks(&["13.36138933897018433", "38.11555639549629859"]),
                    Frame::Null,
                    bulks(&["15.08726745843887329", "37.50266842333162032"]),
                ]),
            ),
            (
                &["GEOHASH", "g0:s", "Palermo", "Catania", "nope"],
                arr(vec![bulk("sqc8b49rny0"), bulk("sqdtr74hyu0"), nil()]),
            ),
            (
                &["GEODIST", "g0:s", "Palermo", "Catania"],
                bulk("166274.1516"),
            ),
            (
                &["GEODIST", "g0:s", "Palermo", "Catania", "km"],
                bulk("166.2742"),
            ),
            (
                &["GEODIST", "g0:s", "Palermo", "Agrigento"],
                bulk("90977.7535"),
            ),
            (
                &["GEODIST", "g0:s", "Palermo", "Agrigento", "FT"],
                bulk("298483.4434"),
            ),
            (
                &["GEODIST", "g0:s", "Palermo", "Agrigento", "Mi"],
                bulk("56.5311"),
            ),
            (&["GEODIST", "g0:s", "Palermo", "Palermo"], bulk("0.0000")),
            (&["GEODIST", "g0:s", "Palermo", "nope"], nil()),
            (&["GEODIST", "g0:missing", "a", "b"], nil()),
            // The unit is read before the key, and more arguments are a
            // syntax error.
            (&["GEODIST", "g0:str", "a", "b", "parsec"], err(BAD_UNIT)),
            (
                &["GEODIST", "g0:missing", "a", "b", "km", "x"],
                err("ERR syntax error"),
            ),
            (&["GEODIST", "g0:str", "a", "b"], err(WRONGTYPE)),
            (&["GEOPOS", "g0:str", "a"], err(WRONGTYPE)),
            (&["GEOHASH", "g0:str", "a"], err(WRONGTYPE)),
            (&["GEOPOS", "g0:missing", "a"], arr(vec![Frame::Null])),
            (&["GEOHASH", "g0:missing"], arr(vec![])),
            // GEOADD's options: NX, XX, CH (GT/LT are ZADD's only).
            (
                &["GEOADD", "g0:s", "CH", "13.361389", "38.2", "Palermo"],
                int(1),
            ),
            (
                &[
                    "GEOADD",
                    "g0:s",
                    "XX",
                    "CH",
                    "13.361389",
                    "38.3",
                    "Palermo",
                    "1",
                    "1",
                    "new",
                ],
                int(1),
            ),
            (&["ZSCORE", "g0:s", "new"], nil()),
            (
                &[
                    "GEOADD",
                    "g0:s",
                    "NX",
                    "13.361389",
                    "38.4",
                    "Palermo",
                    "2",
                    "2",
                    "new",
                ],
                int(1),
            ),
            (
                &["GEOPOS", "g0:s", "Palermo", "new"],
                arr(vec![
                    bulks(&["13.36138933897018433", "38.30000045009791876"]),
                    bulks(&["2.00000256299972534", "2.0000001856465488"]),
                ]),
            ),
            (
                &["GEOADD", "g0:s", "NX", "XX", "1", "1", "x"],
                err("ERR syntax error"),
            ),
            (
                &["GEOADD", "g0:s", "GT", "1", "1", "x"],
                err("ERR syntax error"),
            ),
            (
                &["GEOADD", "g0:s", "GT", "1", "1", "x", "2", "2"],
                err(NOT_FLOAT),
            ),
            (
                &["GEOADD", "g0:s", "1", "1", "a", "2"],
                err("ERR syntax error"),
            ),
            (&["GEOADD", "g0:s", "1", "x", "a"], err(NOT_FLOAT)),
            (&["GEOADD", "g0:s", "1", "nan", "a"], err(NOT_FLOAT)),
            // Every pair is checked before anything is added.
            (
                &["GEOADD", "g0:n", "1", "1", "a", "180.5", "0", "b"],
                err("ERR invalid longitude,latitude pair 180.500000,0.000000"),
            ),
            (
                &["GEOADD", "g0:n", "0", "-85.0511288", "b"],
                err("ERR invalid longitude,latitude pair 0.000000,-85.051129"),
            ),
            (
                &["GEOADD", "g0:n", "-inf", "0", "b"],
                err("ERR invalid longitude,latitude pair -inf,0.000000"),
            ),
            (&["EXISTS", "g0:n"], int(0)),
            (&["GEOADD", "g0:str", "1", "1", "a"], err(WRONGTYPE)),
            (&["GEOADD", "g0:n", "0x10", "1", "hex"], int(1)),
            // Scores no GEOADD makes still decode, as C casts them.
            (
                &[
                    "ZADD", "g0:odd", "-1", "neg", "1.5", "frac", "inf", "pinf", "-inf", "ninf",
                ],
                int(4),
            ),
            (
                &["GEOPOS", "g0:odd", "neg", "frac", "pinf", "ninf"],
                arr(vec![
                    bulks(&["180", "85.0511287799999991"]),
                    bulks(&["-179.99999731779098511", "-85.05112497791824921"]),
                    bulks(&["-179.99999731779098511", "-85.05112751263942528"]),
                    bulks(&["180", "-85.05112751263942528"]),
                ]),
            ),
            (
                &["GEOHASH", "g0:odd", "neg", "frac", "pinf"],
                bulks(&["bp05b5048p0", "00bh0hbj210", "00bh0hbj200"]),
            ),
        ],
    );
}

#[test]
fn searches_find_order_and_shape_replies_as_redis() {
    let s = server();
    let mut r = s.raw();
    sicily(&mut r, "g1:s");
    let d = |m: &str, v: &str| pair(m, v);
    check(
        &mut r,
        &[
            (
                &[
                    "GEORADIUS",
                    "g1:s",
                    "15",
                    "37",
                    "200",
                    "km",
                    "WITHDIST",
                    "ASC",
                ],
                arr(vec![
                    d("Catania", "56.4413"),
                    d("Agrigento", "130.4235"),
                    d("Palermo", "190.4424"),
                ]),
            ),
            (
                &[
                    "GEORADIUS",
                    "g1:s",
                    "15",
                    "37",
                    "200",
                    "km",
                    "WITHDIST",
                    "DESC",
                ],
                arr(vec![
                    d("Palermo", "190.4424"),
                    d("Agrigento", "130.4235"),
                    d("Catania", "56.4413"),
                ]),
            ),
            // COUNT alone sorts ascending; with ANY it takes the first found.
            (
                &["GEORADIUS", "g1:s", "15", "37", "200", "km", "COUNT", "2"],
                bulks(&["Catania", "Agrigento"]),
            ),
            (
                &[
                    "GEORADIUS",
                    "g1:s",
                    "15",
                    "37",
                    "200",
                    "km",
                    "COUNT",
                    "2",
                    "DESC",
                ],
                bulks(&["Palermo", "Agrigento"]),
            ),
            (
                &[
                    "GEORADIUS",
                    "g1:s",
                    "15",
                    "37",
                    "200",
                    "km",
                    "COUNT",
                    "1",
                    "ANY",
                ],
                bulks(&["Agrigento"]),
            ),
            (
                &[
                    "GEORADIUS",
                    "g1:s",
                    "15",
                    "37",
                    "200",
                    "km",
                    "COUNT",
                    "99",
                    "ASC",
                ],
                bulks(&["Catania", "Agrigento", "Palermo"]),
            ),
            (
                &[
                    "GEORADIUS",
                    "g1:s",
                    "15",
                    "37",
                    "200",
                    "km",
                    "WITHHASH",
                    "ASC",
                ],
                arr(vec![
                    arr(vec![bulk("Catania"), int(3479447370796909)]),
                    arr(vec![bulk("Agrigento"), int(3479030013248308)]),
                    arr(vec![bulk("Palermo"), int(3479099956230698)]),
                ]),
            ),
            (
                &[
                    "GEORADIUS",
                    "g1:s",
                    "15",
                    "37",
                    "100",
                    "km",
                    "withcoord",
                    "withhash",
                    "withdist",
                ],
                arr(vec![arr(vec![
                    bulk("Catania"),
                    bulk("56.4413"),
                    int(3479447370796909),
                    bulks(&["15.08726745843887329", "37.50266842333162032"]),
                ])]),
            ),
            (
                &["GEORADIUS_RO", "g1:s", "15", "37", "100", "km"],
                bulks(&["Catania"]),
            ),
            (
                &[
                    "GEORADIUSBYMEMBER",
                    "g1:s",
                    "Agrigento",
                    "100",
                    "km",
                    "ASC",
                    "WITHDIST",
                ],
                arr(vec![d("Agrigento", "0.0000"), d("Palermo", "90.9778")]),
            ),
            (
                &[
                    "GEORADIUSBYMEMBER_RO",
                    "g1:s",
                    "Agrigento",
                    "100",
                    "km",
                    "ASC",
                ],
                bulks(&["Agrigento", "Palermo"]),
            ),
            // A box is a box: Catania is 56 km away but 44 km north.
            (
                &[
                    "GEOSEARCH",
                    "g1:s",
                    "FROMLONLAT",
                    "15",
                    "37",
                    "BYBOX",
                    "400",
                    "100",
                    "km",
                    "ASC",
                ],
                bulks(&["Agrigento"]),
            ),
            (
                &[
                    "GEOSEARCH",
                    "g1:s",
                    "FROMLONLAT",
                    "15",
                    "37",
                    "BYBOX",
                    "400",
                    "400",
                    "km",
                    "ASC",
                    "WITHCOORD",
                    "WITHDIST",
                ],
                arr(vec![
                    arr(vec![
                        bulk("Catania"),
                        bulk("56.4413"),
                        bulks(&["15.08726745843887329", "37.50266842333162032"]),
                    ]),
                    arr(vec![
                        bulk("Agrigento"),
                        bulk("130.4235"),
                        bulks(&["13.5833314061164856", "37.31666804993816555"]),
                    ]),
                    arr(vec![
                        bulk("Palermo"),
                        bulk("190.4424"),
                        bulks(&["13.36138933897018433", "38.11555639549629859"]),
                    ]),
                ]),
            ),
            (
                &[
                    "GEOSEARCH",
                    "g1:s",
                    "FROMMEMBER",
                    "Palermo",
                    "BYRADIUS",
                    "100",
                    "mi",
                    "DESC",
                ],
                bulks(&["Agrigento", "Palermo"]),
            ),
            (
                &[
                    "GEOSEARCH",
                    "g1:s",
                    "FROMMEMBER",
                    "Palermo",
                    "BYRADIUS",
                    "100000",
                    "ft",
                ],
                bulks(&["Palermo"]),
            ),
            (
                &[
                    "GEOSEARCH",
                    "g1:s",
                    "FROMMEMBER",
                    "Palermo",
                    "BYRADIUS",
                    "0",
                    "m",
                    "WITHDIST",
                ],
                arr(vec![d("Palermo", "0.0000")]),
            ),
            (
                &[
                    "GEOSEARCH",
                    "g1:s",
                    "FROMLONLAT",
                    "0",
                    "0",
                    "BYRADIUS",
                    "1",
                    "m",
                ],
                arr(vec![]),
            ),
            (
                &[
                    "GEOSEARCH",
                    "g1:missing",
                    "FROMMEMBER",
                    "x",
                    "BYRADIUS",
                    "1",
                    "m",
                ],
                arr(vec![]),
            ),
            // Repeated options: the last one counts, but each is read
            // (a missing member fails at once).
            (
                &[
                    "GEOSEARCH",
                    "g1:s",
                    "FROMMEMBER",
                    "Palermo",
                    "FROMMEMBER",
                    "Catania",
                    "BYRADIUS",
                    "1",
                    "m",
                    "BYRADIUS",
                    "60",
                    "km",
                    "DESC",
                    "ASC",
                ],
                bulks(&["Catania"]),
            ),
            (
                &[
                    "GEOSEARCH",
                    "g1:s",
                    "FROMMEMBER",
                    "x",
                    "FROMMEMBER",
                    "Catania",
                    "BYRADIUS",
                    "1",
                    "m",
                ],
                err(NO_MEMBER),
            ),
        ],
    );
}

#[test]
fn searches_keep_redis_blind_spots_at_the_edges() {
    let s = server();
    let mut r = s.raw();
    r.cmd(&["DEL", "g2:p"]);
    assert_eq!(
        r.cmd(&[
            "GEOADD",
            "g2:p",
            "0",
            "85.05112878",
            "north",
            "0",
            "-85.05112878",
            "south",
            "180",
            "0",
            "east",
            "-180",
            "0",
            "west",
            "179.99999",
            "10",
            "ne",
            "-179.99999",
            "10",
            "nw",
        ]),
        int(6)
    );
    check(
        &mut r,
        &[
            (
                &[
                    "GEOSEARCH",
                    "g2:p",
                    "FROMLONLAT",
                    "180",
                    "0",
                    "BYRADIUS",
                    "1",
                    "km",
                    "WITHDIST",
                ],
                arr(vec![pair("east", "0.0001")]),
            ),
            // 2 km apart across the antimeridian, but the cells of the
            // search stop at it.
            (
                &[
                    "GEOSEARCH",
                    "g2:p",
                    "FROMLONLAT",
                    "180",
                    "10",
                    "BYRADIUS",
                    "10",
                    "km",
                    "WITHDIST",
                ],
                arr(vec![pair("ne", "0.0009")]),
            ),
            // Longitude 180 and latitude 85.05112878 encode one past the
            // last cell: no search reads them, however large.
            (
                &[
                    "GEOSEARCH",
                    "g2:p",
                    "FROMLONLAT",
                    "0",
                    "0",
                    "BYRADIUS",
                    "1e9",
                    "km",
                    "ASC",
                ],
                bulks(&["south", "ne", "nw", "west"]),
            ),
            (
                &[
                    "GEOSEARCH",
                    "g2:p",
                    "FROMLONLAT",
                    "0",
                    "0",
                    "BYBOX",
                    "1e300",
                    "1e300",
                    "ft",
                    "ASC",
                ],
                bulks(&["south", "ne", "nw", "west"]),
            ),
            (
                &["GEORADIUS", "g2:p", "0", "0", "inf", "m", "ASC"],
                bulks(&["south", "ne", "nw", "west"]),
            ),
            (
                &[
                    "GEOHASH", "g2:p", "north", "south", "east", "west", "ne", "nw",
                ],
                bulks(&[
                    "up05b5048p0",
                    "h0bh0hbj200",
                    "80000000000",
                    "80000000000",
                    "xczbzurypz0",
                    "81b0bh2n0p0",
                ]),
            ),
            (
                &["GEOPOS", "g2:p", "north", "east"],
                arr(vec![
                    bulks(&["0.00000268220901489", "85.0511287799999991"]),
                    bulks(&["180", "0.00000126736058093"]),
                ]),
            ),
        ],
    );
}

#[test]
fn search_errors_are_redis_texts_in_redis_order() {
    let s = server();
    let mut r = s.raw();
    sicily(&mut r, "g3:s");
    r.cmd(&["DEL", "g3:str"]);
    r.cmd(&["SET", "g3:str", "x"]);
    let store_with = "ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options";
    check(
        &mut r,
        &[
            (&["GEORADIUS", "g3:s", "15", "37", "200", "km", "COUNT", "0"], err("ERR COUNT must be > 0")),
            (&["GEORADIUS", "g3:s", "15", "37", "200", "km", "COUNT", "-1"], err("ERR COUNT must be > 0")),
            (
                &["GEORADIUS", "g3:s", "15", "37", "200", "km", "COUNT", "x"],
                err("ERR value is not an integer or out of range"),
            ),
            (&["GEORADIUS", "g3:s", "15", "37", "200", "km", "COUNT"], err("ERR syntax error")),
            (
                &["GEORADIUS", "g3:s", "15", "37", "200", "km", "ANY"],
                err("ERR the ANY argument requires COUNT argument"),
            ),
            (&["GEORADIUS", "g3:s", "15", "37", "-1", "km"], err("ERR radius cannot be negative")),
            (&["GEORADIUS", "g3:s", "15", "37", "abc", "km"], err("ERR need numeric radius")),
            (&["GEORADIUS", "g3:s", "15", "37", "1", "parsec"], err(BAD_UNIT)),
            (
                &["GEORADIUS", "g3:s", "1500", "37", "1", "km"],
                err("ERR invalid longitude,latitude pair 1500.000000,37.000000"),
            ),
            (&["GEORADIUS", "g3:s", "x", "37", "1", "km"], err(NOT_FLOAT)),
            (&["GEORADIUS", "g3:s", "15", "37", "200", "km", "withdist", "store", "d"], err(store_with)),
            (&["GEORADIUS", "g3:s", "15", "37", "200", "km", "storedist", "d", "withhash"], err(store_with)),
            (&["GEORADIUS_RO", "g3:s", "15", "37", "200", "km", "store", "d"], err("ERR syntax error")),
            (&["GEORADIUS", "g3:s", "15", "37", "200", "km", "store"], err("ERR syntax error")),
            (&["GEORADIUSBYMEMBER", "g3:s", "nope", "200", "km"], err(NO_MEMBER)),
            (&["GEORADIUSBYMEMBER", "g3:s", "Palermo", "x", "km"], err("ERR need numeric radius")),
            // A missing source answers before the radius is even read.
            (&["GEORADIUSBYMEMBER", "g3:missing", "nope", "abc", "km"], arr(vec![])),
            (&["GEORADIUSBYMEMBER", "g3:missing", "nope", "abc", "km", "store", "d"], int(0)),
            (&["GEORADIUS", "g3:str", "1500", "37", "1", "km"], err(WRONGTYPE)),
            (&["GEOSEARCH", "g3:str", "FROMMEMBER", "x", "BYRADIUS", "1", "km"], err(WRONGTYPE)),
            (&["GEOSEARCHSTORE", "g3:d", "g3:str", "FROMMEMBER", "x", "BYRADIUS", "1", "km"], err(WRONGTYPE)),
            (&["GEOSEARCH", "g3:s", "FROMMEMBER", "nope", "BYRADIUS", "1", "km"], err(NO_MEMBER)),
            (
                &["GEOSEARCH", "g3:s", "FROMMEMBER", "Palermo", "BYBOX", "10", "10", "km", "BYRADIUS", "3", "km"],
                err("ERR syntax error"),
            ),
            (
                &["GEOSEARCH", "g3:s", "FROMMEMBER", "Palermo", "FROMLONLAT", "1", "2", "BYRADIUS", "3", "km"],
                err("ERR syntax error"),
            ),
            (
                &["GEOSEARCH", "g3:s", "FROMMEMBER", "Palermo", "BYBOX", "-1", "10", "km"],
                err("ERR height or width cannot be negative"),
            ),
            (&["GEOSEARCH", "g3:s", "FROMMEMBER", "Palermo", "BYBOX", "a", "10", "km"], err("ERR need numeric width")),
            (&["GEOSEARCH", "g3:s", "FROMMEMBER", "Palermo", "BYBOX", "1", "b", "km"], err("ERR need numeric height")),
            (&["GEOSEARCH", "g3:s", "FROMMEMBER", "Palermo", "BYBOX", "1", "1", "yd"], err(BAD_UNIT)),
            (&["GEOSEARCH", "g3:s", "FROMMEMBER", "Palermo", "BYRADIUS", "1", "km", "STORE", "x"], err("ERR syntax error")),
            (&["GEOSEARCH", "g3:s", "FROMMEMBER", "Palermo", "BYRADIUS", "1", "km", "STOREDIST"], err("ERR syntax error")),
            (
                &["GeoSearch", "g3:s", "WITHDIST", "BYRADIUS", "1", "km", "ASC"],
                err("ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for GeoSearch"),
            ),
            (
                &["geosearch", "g3:s", "FROMMEMBER", "Palermo", "WITHDIST", "ASC", "WITHHASH"],
                err("ERR exactly one of BYRADIUS and BYBOX can be specified for geosearch"),
            ),
            (
                &["GEOSEARCH", "g3:missing", "FROMMEMBER", "Palermo", "WITHDIST", "ASC", "ANY"],
                err("ERR exactly one of BYRADIUS and BYBOX can be specified for GEOSEARCH"),
            ),
            (
                &["GEOSEARCHSTORE", "g3:d", "g3:s", "FROMMEMBER", "Palermo", "BYRADIUS", "1", "km", "WITHDIST"],
                err("ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options"),
            ),
            (
                &["GEOSEARCHSTORE", "g3:d", "g3:s", "FROMMEMBER", "Palermo", "BYRADIUS", "1", "km", "STORE", "x"],
                err("ERR syntax error"),
            ),
            (
                &["GEOSEARCH", "g3:s", "FROMMEMBER", "Palermo"],
                err("ERR wrong number of arguments for 'geosearch' command"),
            ),
            (&["GEOADD", "g3:s", "1", "2"], err("ERR wrong number of arguments for 'geoadd' command")),
        ],
    );
}

#[test]
fn store_forms_replace_or_delete_the_destination() {
    let s = server();
    let mut r = s.raw();
    sicily(&mut r, "g4:s");
    for k in ["g4:d1", "g4:d2", "g4:d3"] {
        r.cmd(&["DEL", k]);
    }
    r.cmd(&["SET", "g4:d1", "old", "EX", "1000"]);
    check(
        &mut r,
        &[
            (
                &[
                    "GEORADIUS",
                    "g4:s",
                    "15",
                    "37",
                    "200",
                    "km",
                    "STORE",
                    "g4:d1",
                ],
                int(3),
            ),
            (&["TYPE", "g4:d1"], Frame::Simple(b"zset".to_vec())),
            (&["TTL", "g4:d1"], int(-1)),
            (&["OBJECT", "ENCODING", "g4:d1"], bulk("listpack")),
            (
                &["ZRANGE", "g4:d1", "0", "-1", "WITHSCORES"],
                bulks(&[
                    "Agrigento",
                    "3479030013248308",
                    "Palermo",
                    "3479099956230698",
                    "Catania",
                    "3479447370796909",
                ]),
            ),
            // STOREDIST: the distance in the unit asked; COUNT cuts first.
            (
                &[
                    "GEORADIUS",
                    "g4:s",
                    "15",
                    "37",
                    "200",
                    "km",
                    "STOREDIST",
                    "g4:d1",
                    "COUNT",
                    "2",
                ],
                int(2),
            ),
            (
                &["ZRANGE", "g4:d1", "0", "-1", "WITHSCORES"],
                bulks(&[
                    "Catania",
                    "56.441257870158204",
                    "Agrigento",
                    "130.42348706714702",
                ]),
            ),
            // The last of STORE and STOREDIST wins.
            (
                &[
                    "GEORADIUSBYMEMBER",
                    "g4:s",
                    "Palermo",
                    "100",
                    "km",
                    "STOREDIST",
                    "g4:d2",
                    "STORE",
                    "g4:d2",
                ],
                int(2),
            ),
            (
                &["ZRANGE", "g4:d2", "0", "-1", "WITHSCORES"],
                bulks(&[
                    "Agrigento",
                    "3479030013248308",
                    "Palermo",
                    "3479099956230698",
                ]),
            ),
            (
                &[
                    "GEOSEARCHSTORE",
                    "g4:d3",
                    "g4:s",
                    "FROMMEMBER",
                    "Palermo",
                    "BYBOX",
                    "400",
                    "400",
                    "km",
                    "STOREDIST",
                ],
                int(3),
            ),
            (
                &["ZRANGE", "g4:d3", "0", "-1", "WITHSCORES"],
                bulks(&[
                    "Palermo",
                    "0",
                    "Agrigento",
                    "90.977753537996037",
                    "Catania",
                    "166.27415156960032",
                ]),
            ),
            (
                &[
                    "GEOSEARCHSTORE",
                    "g4:d3",
                    "g4:s",
                    "FROMLONLAT",
                    "15",
                    "37",
                    "BYRADIUS",
                    "60",
                    "km",
                ],
                int(1),
            ),
            (&["ZRANGE", "g4:d3", "0", "-1"], bulks(&["Catania"])),
            // Nothing found, or no source: the destination goes.
            (
                &["GEORADIUS", "g4:s", "0", "0", "1", "m", "STORE", "g4:d1"],
                int(0),
            ),
            (&["EXISTS", "g4:d1"], int(0)),
            (
                &["GEORADIUS", "g4:s", "0", "0", "1", "m", "STORE", "g4:d1"],
                int(0),
            ),
            (
                &[
                    "GEORADIUSBYMEMBER",
                    "g4:missing",
                    "x",
                    "1",
                    "m",
                    "STORE",
                    "g4:d2",
                ],
                int(0),
            ),
            (&["EXISTS", "g4:d2"], int(0)),
            (
                &[
                    "GEOSEARCHSTORE",
                    "g4:d3",
                    "g4:missing",
                    "FROMMEMBER",
                    "x",
                    "BYRADIUS",
                    "1",
                    "km",
                ],
                int(0),
            ),
            (&["EXISTS", "g4:d3"], int(0)),
            // The source may be its own destination.
            (
                &[
                    "GEOSEARCHSTORE",
                    "g4:s",
                    "g4:s",
                    "FROMMEMBER",
                    "Palermo",
                    "BYRADIUS",
                    "100",
                    "km",
                ],
                int(2),
            ),
            (
                &["ZRANGE", "g4:s", "0", "-1"],
                bulks(&["Agrigento", "Palermo"]),
            ),
        ],
    );
}

#[test]
fn store_forms_notify_wake_waiters_and_break_watches() {
    let s = server();
    let mut r = s.raw();
    sicily(&mut r, "g5:s");
    for k in ["g5:w1", "g5:w2", "g5:w3"] {
        r.cmd(&["DEL", k]);
    }
    r.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Kgz"]);
    let mut sub = s.raw();
    // Keyspace channels of this test's keys only (the shared server runs
    // other tests meanwhile).
    sub.cmd(&["PSUBSCRIBE", "__keyspace@0__:g5:w*"]);
    let event = |sub: &mut common::Raw| match sub.read_frame() {
        Frame::Array(v) | Frame::Push(v) => (v[2].clone(), v[3].clone()),
        other => panic!("not a pmessage: {other:?}"),
    };
    // One command, then its event (a read takes one frame at a time).
    r.cmd(&["GEOADD", "g5:w1", "1", "1", "a"]);
    assert_eq!(
        event(&mut sub),
        (bulk("__keyspace@0__:g5:w1"), bulk("zadd"))
    );
    r.cmd(&[
        "GEORADIUS",
        "g5:s",
        "15",
        "37",
        "200",
        "km",
        "STORE",
        "g5:w2",
    ]);
    assert_eq!(
        event(&mut sub),
        (bulk("__keyspace@0__:g5:w2"), bulk("georadiusstore"))
    );
    r.cmd(&[
        "GEOSEARCHSTORE",
        "g5:w3",
        "g5:s",
        "FROMLONLAT",
        "15",
        "37",
        "BYRADIUS",
        "200",
        "km",
    ]);
    assert_eq!(
        event(&mut sub),
        (bulk("__keyspace@0__:g5:w3"), bulk("geosearchstore"))
    );
    r.cmd(&["GEORADIUS", "g5:s", "0", "0", "1", "m", "STORE", "g5:w3"]);
    assert_eq!(event(&mut sub), (bulk("__keyspace@0__:g5:w3"), bulk("del")));
    r.cmd(&["CONFIG", "SET", "notify-keyspace-events", ""]);
    // A client blocked on the destination is served by the store.
    r.cmd(&["DEL", "g5:w2"]);
    let mut waiter = s.raw();
    waiter.send(&Frame::command(&["BZPOPMIN", "g5:w2", "5"]));
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(
        r.cmd(&[
            "GEORADIUS",
            "g5:s",
            "15",
            "37",
            "60",
            "km",
            "STOREDIST",
            "g5:w2"
        ]),
        int(1)
    );
    assert_eq!(
        waiter.read_frame(),
        bulks(&["g5:w2", "Catania", "56.441257870158204"])
    );
    // A WATCH on the destination breaks; one on the source does not.
    let mut w = s.raw();
    w.cmd(&["WATCH", "g5:w3"]);
    w.cmd(&["MULTI"]);
    w.cmd(&["PING"]);
    r.cmd(&[
        "GEORADIUS",
        "g5:s",
        "15",
        "37",
        "200",
        "km",
        "STORE",
        "g5:w3",
    ]);
    assert_eq!(w.cmd(&["EXEC"]), Frame::Null);
    w.cmd(&["WATCH", "g5:s"]);
    w.cmd(&["MULTI"]);
    w.cmd(&["PING"]);
    r.cmd(&[
        "GEORADIUS",
        "g5:s",
        "15",
        "37",
        "200",
        "km",
        "STORE",
        "g5:w3",
    ]);
    r.cmd(&[
        "GEOSEARCHSTORE",
        "g5:w3",
        "g5:s",
        "FROMLONLAT",
        "15",
        "37",
        "BYRADIUS",
        "200",
        "km",
    ]);
    assert_eq!(w.cmd(&["EXEC"]), arr(vec![Frame::Simple(b"PONG".to_vec())]));
}

#[test]
fn resp3_replies_are_redis_bytes() {
    let s = server();
    let mut r = s.raw();
    sicily(&mut r, "g6:s");
    r.cmd(&["HELLO", "3"]);
    let bytes = |r: &mut common::Raw, args: &[&str]| {
        let (_, b) = r.try_cmd_bytes(args).unwrap();
        String::from_utf8(b).unwrap()
    };
    assert_eq!(
        bytes(&mut r, &["GEOPOS", "g6:s", "Palermo", "nope"]),
        "*2\r\n*2\r\n,13.36138933897018433\r\n,38.11555639549629859\r\n_\r\n"
    );
    assert_eq!(
        bytes(&mut r, &["GEOHASH", "g6:s", "Palermo", "nope"]),
        "*2\r\n$11\r\nsqc8b49rny0\r\n_\r\n"
    );
    assert_eq!(
        bytes(&mut r, &["GEODIST", "g6:s", "Palermo", "Catania"]),
        "$11\r\n166274.1516\r\n"
    );
    assert_eq!(bytes(&mut r, &["GEODIST", "g6:s", "Palermo", "x"]), "_\r\n");
    assert_eq!(
        bytes(
            &mut r,
            &["GEORADIUS", "g6:s", "15", "37", "60", "km", "WITHDIST", "WITHHASH", "WITHCOORD"]
        ),
        "*1\r\n*4\r\n$7\r\nCatania\r\n$7\r\n56.4413\r\n:3479447370796909\r\n*2\r\n,15.08726745843887329\r\n,37.50266842333162032\r\n"
    );
    assert_eq!(
        bytes(
            &mut r,
            &[
                "GEOSEARCH",
                "g6:s",
                "FROMLONLAT",
                "0",
                "0",
                "BYRADIUS",
                "1",
                "m"
            ]
        ),
        "*0\r\n"
    );
}

#[test]
fn command_getkeys_finds_the_store_keys() {
    let s = server();
    let mut r = s.raw();
    check(
        &mut r,
        &[
            (
                &[
                    "COMMAND",
                    "GETKEYS",
                    "GEORADIUS",
                    "k",
                    "1",
                    "2",
                    "3",
                    "km",
                    "STOREDIST",
                    "b",
                    "STORE",
                    "a",
                ],
                bulks(&["k", "a", "b"]),
            ),
            (
                &[
                    "COMMAND",
                    "GETKEYS",
                    "GEORADIUS",
                    "k",
                    "1",
                    "2",
                    "3",
                    "km",
                    "STORE",
                    "a",
                    "STORE",
                    "c",
                ],
                bulks(&["k", "a"]),
            ),
            (
                &[
                    "COMMAND",
                    "GETKEYS",
                    "GEORADIUS",
                    "k",
                    "1",
                    "2",
                    "3",
                    "km",
                    "STORE",
                ],
                bulks(&["k"]),
            ),
            (
                &[
                    "COMMAND",
                    "GETKEYS",
                    "GEORADIUSBYMEMBER",
                    "k",
                    "m",
                    "3",
                    "km",
                    "store",
                    "a",
                ],
                bulks(&["k", "a"]),
            ),
            (
                &[
                    "COMMAND",
                    "GETKEYS",
                    "GEORADIUS_RO",
                    "k",
                    "1",
                    "2",
                    "3",
                    "km",
                    "STORE",
                    "a",
                ],
                bulks(&["k"]),
            ),
            (
                &[
                    "COMMAND",
                    "GETKEYS",
                    "GEOSEARCHSTORE",
                    "d",
                    "s",
                    "FROMMEMBER",
                    "m",
                    "BYRADIUS",
                    "1",
                    "km",
                ],
                bulks(&["d", "s"]),
            ),
            (
                &["COMMAND", "GETKEYS", "GEOADD", "k", "1", "2", "m"],
                bulks(&["k"]),
            ),
        ],
    );
}

/// The incremental AOF file's text (both servers write Redis 7's layout).
use common::aof_text;

#[test]
fn geoadd_is_propagated_as_zadd_and_searches_only_when_they_store() {
    let p = if against_redis() {
        ServerProcess::redis(&["--appendonly", "yes"])
    } else {
        ServerProcess::ferrokv(&["--appendonly", "yes"])
    };
    let mut r = p.raw();
    assert_eq!(
        r.cmd(&["GEOADD", "g8:a", "CH", "13.361389", "38.115556", "Palermo"]),
        int(1)
    );
    // Nothing changes: nothing is written.
    assert_eq!(
        r.cmd(&["GEOADD", "g8:a", "13.361389", "38.115556", "Palermo"]),
        int(0)
    );
    r.cmd(&["GEORADIUS", "g8:a", "13", "38", "100", "km"]);
    r.cmd(&[
        "GEORADIUS",
        "g8:a",
        "13",
        "38",
        "100",
        "km",
        "STORE",
        "g8:b",
    ]);
    r.cmd(&[
        "GEOSEARCHSTORE",
        "g8:c",
        "g8:a",
        "FROMMEMBER",
        "Palermo",
        "BYRADIUS",
        "1",
        "m",
    ]);
    r.cmd(&["PING"]);
    let text = aof_text(&p).to_ascii_lowercase();
    assert!(
        text.contains(
            "$4\r\nzadd\r\n$4\r\ng8:a\r\n$2\r\nch\r\n$16\r\n3479099956230698\r\n$7\r\npalermo\r\n"
        ),
        "{text:?}"
    );
    assert_eq!(text.matches("zadd").count(), 1, "{text:?}");
    assert!(!text.contains("geoadd"), "{text:?}");
    assert_eq!(text.matches("georadius").count(), 1, "{text:?}");
    assert!(text.contains("$5\r\nstore\r\n$4\r\ng8:b\r\n"), "{text:?}");
    assert!(text.contains("geosearchstore"), "{text:?}");
}
