//! The generator of the differential run against Redis 7.4
//! (`newer_forms_match_redis_7_4`): the forms Redis 7.2 and 7.4 added
//! without changing 7.0's — `ZRANK`/`ZREVRANK … WITHSCORE`, `HSCAN …
//! NOVALUES` (and the other SCANs refusing it), `XREAD … +` (and
//! `XREADGROUP` refusing it), `CLIENT KILL MAXAGE`, `CLIENT NO-TOUCH`,
//! `WAITAOF` (its refusals and answers without an AOF), hash-field
//! expiration (`HEXPIRE` and its family with absolute deadlines or past
//! ones, whose replies do not depend on the clock; `HPERSIST`,
//! `H[P]EXPIRETIME`, and the hash reads whose order `listpackex` sets) —
//! over hashes, sorted sets and streams that the same sequence writes, and
//! wrong types from the main generator's keys.
//!
//! Only these families: the rest of the surface is compared with Redis
//! 7.0, the version ferrokv reports, and 7.4 changed some of its visible
//! behaviour (doubles printed shortest-first, a few error texts, listpack
//! sets) that ferrokv takes with the version switch (docs/compatibility.md).
//! Scores here are small integers, halves and infinities, which both
//! versions print alike.

use super::{Check, Command, Generator, KEYS};
use rand::Rng;

const NKEYS: &[&[u8]] = &[b"nh0", b"nh1", b"nz0", b"nz1", b"ns0", b"ns1"];
const MEMBERS: &[&str] = &["a", "b", "c", "d", "e", "", "1", "-1", "\u{e9}"];

impl Generator {
    fn nkey(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..10) {
            0 => KEYS[self.rng.gen_range(0..KEYS.len())].to_vec(),
            1 => b"nnone".to_vec(),
            _ => NKEYS[self.rng.gen_range(0..NKEYS.len())].to_vec(),
        }
    }

    fn nmember(&mut self) -> Vec<u8> {
        if self.chance(0.2) {
            format!("m{}", self.rng.gen_range(0..300u32)).into_bytes()
        } else {
            self.pick(MEMBERS).into()
        }
    }

    fn nscore(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..12) {
            0 => b"inf".to_vec(),
            1 => b"-inf".to_vec(),
            2..=4 => format!("{}.5", self.rng.gen_range(-5..5i32)).into_bytes(),
            _ => self.rng.gen_range(-5..10i32).to_string().into_bytes(),
        }
    }

    fn nid(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..10) {
            0..=3 => b"+".to_vec(),
            4 => b"$".to_vec(),
            5 => b"0".to_vec(),
            _ => format!(
                "{}-{}",
                self.rng.gen_range(0..30u32),
                self.rng.gen_range(0..3u32)
            )
            .into_bytes(),
        }
    }

    /// Some words where an option is expected: the option, a near miss,
    /// nothing.
    fn maybe(&mut self, option: &str, a: &mut Vec<Vec<u8>>) {
        match self.rng.gen_range(0..10) {
            0..=5 => a.push(option.as_bytes().to_vec()),
            6 => a.push(format!("{option}S").into_bytes()),
            7 => {
                a.push(option.as_bytes().to_vec());
                a.push(b"x".to_vec());
            }
            _ => {}
        }
    }

    /// `FIELDS numfields field...`, the count now and then wrong or the
    /// word missing.
    fn fields_block(&mut self, a: &mut Vec<Vec<u8>>) {
        let n = self.rng.gen_range(1..4usize);
        match self.rng.gen_range(0..12) {
            0 => {}
            1 => a.push(b"FIELD".to_vec()),
            _ => a.push(b"FIELDS".to_vec()),
        }
        let count = match self.rng.gen_range(0..12) {
            0 => (n + 1).to_string(),
            1 => "0".to_string(),
            _ => n.to_string(),
        };
        a.push(count.into_bytes());
        for _ in 0..n {
            a.push(self.nmember());
        }
    }

    /// One command of the Redis 7.2/7.4 forms, or a write that feeds them.
    pub(super) fn newer_command(&mut self) -> Command {
        let b = |s: &str| s.as_bytes().to_vec();
        let k = self.nkey();
        let args: Vec<Vec<u8>> = match self.rng.gen_range(0..75) {
            0..=7 => {
                let mut a = vec![b("ZADD"), k];
                for _ in 0..self.rng.gen_range(1..5) {
                    a.push(self.nscore());
                    a.push(self.nmember());
                }
                a
            }
            8..=9 => vec![b("ZREM"), k, self.nmember()],
            10..=17 => {
                let mut a = vec![b(self.pick(&["ZRANK", "ZREVRANK"])), k, self.nmember()];
                self.maybe("WITHSCORE", &mut a);
                a
            }
            18..=25 => {
                let mut a = vec![b("HSET"), k];
                for _ in 0..self.rng.gen_range(1..5) {
                    a.push(self.nmember());
                    a.push(self.nmember());
                }
                a
            }
            26..=27 => vec![b("HDEL"), k, self.nmember()],
            28..=35 => {
                let scan = self.pick(&["HSCAN", "HSCAN", "HSCAN", "SSCAN", "ZSCAN", "SCAN"]);
                let mut a = vec![b(scan)];
                if scan != "SCAN" {
                    a.push(k);
                }
                a.push(b"0".to_vec());
                for _ in 0..self.rng.gen_range(0..3) {
                    match self.rng.gen_range(0..5) {
                        0 => {
                            a.push(b("MATCH"));
                            a.push(b(self.pick(&["*", "a*", "?", "[a-c]", "m1*"])));
                        }
                        1 => {
                            a.push(b("COUNT"));
                            a.push(b(self.pick(&["1", "5", "1000", "0", "x"])));
                        }
                        2 if scan == "SCAN" => {
                            a.push(b("TYPE"));
                            a.push(b(self.pick(&["hash", "zset", "string"])));
                        }
                        _ => a.push(b("NOVALUES")),
                    }
                }
                // SCAN's order of keys is its table's: compared only where
                // it refuses NOVALUES. (The hashes and sorted sets here
                // stay listpacks, which every server walks in order.)
                if scan == "SCAN" {
                    a.push(b("NOVALUES"));
                }
                a
            }
            36..=41 => {
                // Explicit IDs: `*` takes the clock's.
                let id = match self.rng.gen_range(0..10) {
                    0 => format!("{}-*", self.rng.gen_range(1..30u32)),
                    _ => format!(
                        "{}-{}",
                        self.rng.gen_range(1..30u32),
                        self.rng.gen_range(0..3u32)
                    ),
                };
                let mut a = vec![b("XADD"), k, id.into_bytes()];
                a.push(self.nmember());
                a.push(self.nmember());
                a
            }
            // No XDEL and no MKSTREAM: `XREAD … +` after the last entry
            // was deleted, or on a stream that never had one, is where
            // Redis 7.4.1 differs from later Redis (a nil, an error) and
            // ferrokv follows the later (tests/surface_7x.rs).
            42..=43 => vec![b("XLEN"), k],
            44..=51 => {
                let mut a = vec![b("XREAD")];
                if self.chance(0.3) {
                    a.push(b("COUNT"));
                    a.push(self.rng.gen_range(1..4u32).to_string().into_bytes());
                }
                a.push(b("STREAMS"));
                let n = self.rng.gen_range(1..3);
                for _ in 0..n {
                    a.push(self.nkey());
                }
                for _ in 0..n {
                    a.push(self.nid());
                }
                a
            }
            52 => {
                vec![b("XGROUP"), b("CREATE"), k, b("g"), b("0")]
            }
            53 => vec![
                b("XREADGROUP"),
                b("GROUP"),
                b("g"),
                b("c"),
                b("STREAMS"),
                k,
                self.nid(),
            ],
            54..=55 => {
                let v = self.pick(&["ON", "OFF", "on", "maybe"]);
                vec![b("CLIENT"), b("NO-TOUCH"), b(v)]
            }
            56..=57 => {
                // Never old enough to kill one of the session's connections.
                let age = self.pick(&["100000000", "0", "-5", "x", "1.5", "9223372036854775807"]);
                let mut a = vec![b("CLIENT"), b("KILL"), b("MAXAGE"), b(age)];
                if self.chance(0.3) {
                    a.extend([b("ID"), b("999999")]);
                }
                a
            }
            58 => {
                // The servers run without AOF: the refusals, and waits for
                // replicas that are not there end by a short timeout.
                let local = self.pick(&["0", "1", "2", "x"]);
                let replicas = self.pick(&["0", "1", "-1"]);
                let timeout = match (replicas, self.rng.gen_range(0..4)) {
                    (_, 0) => "-1",
                    (_, 1) => "x",
                    ("0", _) => "0",
                    _ => "1",
                };
                vec![b("WAITAOF"), b(local), b(replicas), b(timeout)]
            }
            59..=64 => {
                // Deadlines far ahead (a few, so GT/LT compare), in the
                // past (the field is deleted), or refused.
                let (cmd, t) = match self.rng.gen_range(0..8) {
                    0 => (
                        "HPEXPIREAT",
                        self.pick(&["4102444800000", "4102444800500", "4102444801000"]),
                    ),
                    1 => ("HEXPIREAT", self.pick(&["4102444800", "4102444801", "1"])),
                    // Relative deadlines only where the reply and what
                    // follows do not depend on the clock.
                    2 => ("HPEXPIRE", self.pick(&["0", "-1", "x"])),
                    3 => ("HEXPIRE", self.pick(&["0", "70368744178"])),
                    4 => ("HPEXPIREAT", self.pick(&["1", "70368744177664", "x"])),
                    _ => ("HPEXPIREAT", self.pick(&["4102444800000", "4102444802000"])),
                };
                let mut a = vec![b(cmd), k, b(t)];
                if self.chance(0.4) {
                    a.push(b(self.pick(&["NX", "XX", "GT", "LT", "gt", "ZZ"])));
                }
                self.fields_block(&mut a);
                a
            }
            65..=66 => {
                let cmd = self.pick(&["HPERSIST", "HPEXPIRETIME", "HEXPIRETIME"]);
                let mut a = vec![b(cmd), k];
                self.fields_block(&mut a);
                a
            }
            67..=70 => match self.rng.gen_range(0..6) {
                0 => vec![b("HGETALL"), k],
                1 => vec![b("HKEYS"), k],
                2 => vec![b("HLEN"), k],
                3 => vec![b("OBJECT"), b("ENCODING"), k],
                4 => vec![b("HINCRBY"), k, self.nmember(), b("1")],
                _ => vec![b("HMGET"), k, self.nmember(), self.nmember()],
            },
            71 => vec![b("HSETNX"), k, self.nmember(), self.nmember()],
            _ => vec![b(self.pick(&["DEL", "TYPE"])), k],
        };
        Command::new(args, Check::Exact)
    }
}
