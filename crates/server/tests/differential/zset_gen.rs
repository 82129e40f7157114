//! The sorted-set part of the generator: every command of the family with
//! its edge cases — score and lex bounds (exclusive, infinite, invalid),
//! LIMIT offsets (negative, past the end), REV with BYSCORE/BYLEX (which
//! swaps min and max), WEIGHTS/AGGREGATE errors, NaN results, pops with
//! counts, set algebra on missing and wrong-typed keys, and sets that cross
//! the listpack/skiplist threshold (bulk ZADDs, long members, CONFIG SET
//! of `zset-max-listpack-entries`).
//!
//! Lex commands only ever meet [`LEX_KEY`], whose members all have score 0:
//! Redis leaves lex ranges over mixed scores unspecified (the answer
//! depends on its skiplist's random levels).
//! ZSCAN is compared as a set of (member, score) pairs after iterating to
//! completion, ZRANDMEMBER by shape only (see [`Check`]).

use super::{Check, Command, Generator, KEYS};
use rand::seq::SliceRandom;
use rand::Rng;

/// Holds only score-0 members (lex ranges are defined on it).
pub const LEX_KEY: &[u8] = b"zlex";

const ZKEYS: &[&[u8]] = &[b"z0", b"z1", b"z2"];

const SCORES: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "2.5",
    "-0.25",
    "10",
    "100",
    "1e20",
    "0.1",
    "1.5e-7",
    "inf",
    "-inf",
    "+inf",
    "-0",
    "123456789.123",
    "12345678901234567890",
    "0x10",
    "5.",
    ".5",
];

const BAD_SCORES: &[&str] = &["abc", "nan", "", "1e400", " 1", "1x", "inf1"];

const MEMBERS: &[&str] = &[
    "a", "b", "c", "d", "e", "f", "m1", "m2", "m10", "1", "2", "10", "-1", "", "aa", "ab",
];

const SCORE_BOUNDS: &[&str] = &[
    "-inf", "+inf", "inf", "0", "1", "(1", "2", "(2", "2.5", "(2.5", "3", "(3", "10", "(10", "-1",
    "(-1", "1e20", "(1e20", "(-inf", "(+inf", "", "(", "abc", "nan", "(nan", "1e400", " 5", "0x10",
    "((1",
];

const LEX_BOUNDS: &[&str] = &[
    "-", "+", "[a", "(a", "[b", "(b", "[c", "(c", "[m", "(m1", "[", "(", "[z", "a", "+a", "-b", "",
    "[aa", "(ab",
];

const RANKS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "-1",
    "-2",
    "-3",
    "5",
    "10",
    "-100",
    "100",
    "abc",
    "9223372036854775807",
    "-9223372036854775808",
];

const COUNTS: &[&str] = &["0", "1", "2", "3", "5", "10", "-1", "-2", "-5", "abc", ""];

impl Generator {
    fn zkey(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..20) {
            0 => LEX_KEY.to_vec(),
            // String keys of the main generator: WRONGTYPE paths.
            1 | 2 => KEYS[self.rng.gen_range(0..3)].to_vec(),
            3 => b"znone".to_vec(),
            _ => ZKEYS[self.rng.gen_range(0..ZKEYS.len())].to_vec(),
        }
    }

    /// A key that is never [`LEX_KEY`] (for writes that set scores).
    fn zkey_scored(&mut self) -> Vec<u8> {
        loop {
            let k = self.zkey();
            if k != LEX_KEY {
                return k;
            }
        }
    }

    fn zmember(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..30) {
            // Longer than zset-max-listpack-value: forces the skiplist.
            0 => vec![b'L'; 65 + self.rng.gen_range(0..3)],
            1 => b"\x00\xff\r\n".to_vec(),
            _ => self.pick(MEMBERS).into(),
        }
    }

    fn score(&mut self) -> Vec<u8> {
        if self.chance(0.05) {
            self.pick(BAD_SCORES).into()
        } else {
            self.pick(SCORES).into()
        }
    }

    fn opt_limit(&mut self, a: &mut Vec<Vec<u8>>) {
        if self.chance(0.3) {
            a.push(b"LIMIT".to_vec());
            a.push(self.pick(&["0", "1", "2", "-1", "5", "100", "abc"]).into());
            a.push(self.pick(&["0", "1", "2", "-1", "-5", "10", "abc"]).into());
        }
    }

    /// One sorted-set command.
    pub(super) fn zset_command(&mut self) -> Command {
        use Check::*;
        let b = |s: &str| s.as_bytes().to_vec();
        let args: Vec<Vec<u8>> = match self.rng.gen_range(0..60) {
            0..=7 => {
                let k = self.zkey();
                let lex = k == LEX_KEY;
                let mut a = vec![b("ZADD"), k];
                let flags = ["NX", "XX", "GT", "LT", "CH", "INCR"];
                for _ in 0..self.rng.gen_range(0..3) {
                    a.push(b(self.pick(&flags)));
                }
                let n = if self.chance(0.8) {
                    1
                } else {
                    self.rng.gen_range(2..6)
                };
                for _ in 0..n {
                    a.push(if lex { b("0") } else { self.score() });
                    a.push(self.zmember());
                }
                if self.chance(0.03) {
                    a.push(b("5"));
                }
                a
            }
            8 => {
                // Enough members at once to cross the listpack limit.
                let k = self.zkey();
                let lex = k == LEX_KEY;
                let mut a = vec![b("ZADD"), k];
                let base = self.rng.gen_range(0..50);
                for i in 0..self.rng.gen_range(100..200) {
                    let s = if lex { 0 } else { (i * 7) % 23 };
                    a.push(s.to_string().into_bytes());
                    a.push(format!("n{}", base + i).into_bytes());
                }
                a
            }
            9..=10 => {
                let sc = if self.chance(0.1) {
                    self.pick(BAD_SCORES).into()
                } else {
                    self.pick(SCORES).into()
                };
                vec![b("ZINCRBY"), self.zkey_scored(), sc, self.zmember()]
            }
            11..=12 => {
                let mut a = vec![b("ZREM"), self.zkey()];
                for _ in 0..self.rng.gen_range(1..4) {
                    a.push(self.zmember());
                }
                a
            }
            13 => vec![b("ZSCORE"), self.zkey(), self.zmember()],
            14 => {
                let mut a = vec![b("ZMSCORE"), self.zkey()];
                for _ in 0..self.rng.gen_range(1..4) {
                    a.push(self.zmember());
                }
                a
            }
            15 => vec![b("ZCARD"), self.zkey()],
            16..=17 => vec![
                b("ZCOUNT"),
                self.zkey(),
                self.pick(SCORE_BOUNDS).into(),
                self.pick(SCORE_BOUNDS).into(),
            ],
            18 => vec![
                b("ZLEXCOUNT"),
                LEX_KEY.to_vec(),
                self.pick(LEX_BOUNDS).into(),
                self.pick(LEX_BOUNDS).into(),
            ],
            19..=24 => self.zrange(false),
            25..=26 => self.zrange(true),
            27..=28 => {
                let name = self.pick(&["ZRANGEBYSCORE", "ZREVRANGEBYSCORE"]);
                let mut a = vec![
                    b(name),
                    self.zkey(),
                    self.pick(SCORE_BOUNDS).into(),
                    self.pick(SCORE_BOUNDS).into(),
                ];
                if self.chance(0.4) {
                    a.push(b("WITHSCORES"));
                }
                self.opt_limit(&mut a);
                if self.chance(0.05) {
                    a.push(b(self.pick(&["BYSCORE", "REV", "FOO"])));
                }
                a
            }
            29 => {
                let name = self.pick(&["ZRANGEBYLEX", "ZREVRANGEBYLEX"]);
                let mut a = vec![
                    b(name),
                    LEX_KEY.to_vec(),
                    self.pick(LEX_BOUNDS).into(),
                    self.pick(LEX_BOUNDS).into(),
                ];
                self.opt_limit(&mut a);
                if self.chance(0.05) {
                    a.push(b("WITHSCORES"));
                }
                a
            }
            30 => {
                let mut a = vec![
                    b("ZREVRANGE"),
                    self.zkey(),
                    self.pick(RANKS).into(),
                    self.pick(RANKS).into(),
                ];
                if self.chance(0.5) {
                    a.push(b("WITHSCORES"));
                }
                a
            }
            31..=32 => vec![
                b(self.pick(&["ZRANK", "ZREVRANK"])),
                self.zkey(),
                self.zmember(),
            ],
            33 => vec![
                b("ZREMRANGEBYRANK"),
                self.zkey(),
                self.pick(RANKS).into(),
                self.pick(RANKS).into(),
            ],
            34 => vec![
                b("ZREMRANGEBYSCORE"),
                self.zkey(),
                self.pick(SCORE_BOUNDS).into(),
                self.pick(SCORE_BOUNDS).into(),
            ],
            35 => vec![
                b("ZREMRANGEBYLEX"),
                LEX_KEY.to_vec(),
                self.pick(LEX_BOUNDS).into(),
                self.pick(LEX_BOUNDS).into(),
            ],
            36..=38 => {
                let mut a = vec![b(self.pick(&["ZPOPMIN", "ZPOPMAX"])), self.zkey()];
                if self.chance(0.5) {
                    a.push(self.pick(COUNTS).into());
                }
                a
            }
            39..=40 => {
                let n = self.rng.gen_range(1..4);
                let mut a = vec![b("ZMPOP"), n.to_string().into_bytes()];
                if self.chance(0.05) {
                    a[1] = b(self.pick(&["0", "-1", "abc", "5"]));
                }
                for _ in 0..n {
                    a.push(self.zkey());
                }
                a.push(b(self.pick(&["MIN", "MAX", "min", "FOO"])));
                if self.chance(0.5) {
                    a.push(b("COUNT"));
                    a.push(self.pick(COUNTS).into());
                }
                a
            }
            41..=46 => self.zsetop(),
            47 => {
                let mut a = vec![b("ZRANDMEMBER"), self.zkey()];
                if self.chance(0.7) {
                    a.push(self.pick(COUNTS).into());
                    if self.chance(0.4) {
                        a.push(b(self.pick(&["WITHSCORES", "WITHSCORES", "FOO"])));
                    }
                }
                return Command::new(a, RandomMembers);
            }
            48..=49 => {
                let mut a = vec![b("ZSCAN"), self.zkey(), b("0")];
                if self.chance(0.05) {
                    a[2] = b(self.pick(&["abc", "-", "1x"]));
                }
                if self.chance(0.4) {
                    a.push(b("MATCH"));
                    a.push(b(self.pick(&["*", "m*", "?", "[ab]*", "n1*"])));
                }
                if self.chance(0.4) {
                    a.push(b("COUNT"));
                    a.push(b(self.pick(&["1", "5", "100", "0", "abc"])));
                }
                return Command::new(a, ZScan);
            }
            50..=51 => vec![b("OBJECT"), b("ENCODING"), self.zkey()],
            52 => vec![b("DEBUG"), b("DIGEST-VALUE"), self.zkey(), self.zkey()],
            53 if self.chance(0.3) => {
                // Moves the listpack threshold (both servers alike).
                vec![
                    b("CONFIG"),
                    b("SET"),
                    b(self.pick(&["zset-max-listpack-entries", "zset-max-ziplist-entries"])),
                    b(self.pick(&["4", "16", "128", "128"])),
                ]
            }
            54 => vec![b("TYPE"), self.zkey()],
            55 => vec![b("DEL"), self.zkey()],
            56 => vec![b("RENAME"), self.zkey_scored(), self.zkey_scored()],
            _ => {
                let k = self.zkey();
                let lex = k == LEX_KEY;
                vec![
                    b("ZADD"),
                    k,
                    if lex {
                        b("0")
                    } else {
                        self.pick(SCORES).into()
                    },
                    self.zmember(),
                ]
            }
        };
        Command::new(args, Check::Exact)
    }

    /// ZRANGE (or ZRANGESTORE) with any mix of BYSCORE/BYLEX/REV/LIMIT/WITHSCORES.
    fn zrange(&mut self, store: bool) -> Vec<Vec<u8>> {
        let b = |s: &str| s.as_bytes().to_vec();
        let kind = self.rng.gen_range(0..3);
        let src = if kind == 2 {
            LEX_KEY.to_vec()
        } else {
            self.zkey()
        };
        let mut a = if store {
            vec![b("ZRANGESTORE"), self.zkey_scored(), src]
        } else {
            vec![b("ZRANGE"), src]
        };
        let bounds: &[&str] = match kind {
            0 => RANKS,
            1 => SCORE_BOUNDS,
            _ => LEX_BOUNDS,
        };
        a.push(self.pick(bounds).into());
        a.push(self.pick(bounds).into());
        let mut opts: Vec<Vec<Vec<u8>>> = Vec::new();
        match kind {
            1 => opts.push(vec![b("BYSCORE")]),
            2 => opts.push(vec![b("BYLEX")]),
            _ => {}
        }
        if self.chance(0.4) {
            opts.push(vec![b("REV")]);
        }
        if !store && self.chance(0.4) {
            opts.push(vec![b("WITHSCORES")]);
        }
        if self.chance(0.3) {
            let mut l = Vec::new();
            self.opt_limit(&mut l);
            if !l.is_empty() {
                opts.push(l);
            }
        }
        if self.chance(0.04) {
            opts.push(vec![b(self.pick(&[
                "REV",
                "BYSCORE",
                "FOO",
                "LIMIT",
                "WITHSCORES",
            ]))]);
        }
        opts.shuffle(&mut self.rng);
        for o in opts {
            a.extend(o);
        }
        a
    }

    /// ZINTERCARD numkeys key [key ...] [LIMIT limit].
    fn zintercard(&mut self) -> Vec<Vec<u8>> {
        let b = |s: &str| s.as_bytes().to_vec();
        let n = self.rng.gen_range(1..4);
        let mut a = vec![b("ZINTERCARD")];
        a.push(if self.chance(0.05) {
            b(self.pick(&["0", "-1", "abc", "9"]))
        } else {
            n.to_string().into_bytes()
        });
        for _ in 0..n {
            a.push(self.zkey());
        }
        if self.chance(0.4) {
            a.push(b("LIMIT"));
            a.push(b(self.pick(&["0", "1", "2", "-1", "abc", "100"])));
        } else if self.chance(0.05) {
            a.push(b(self.pick(&["LIMIT", "WITHSCORES"])));
        }
        a
    }

    /// ZUNION/ZINTER/ZDIFF and their STORE forms, with WEIGHTS/AGGREGATE.
    fn zsetop(&mut self) -> Vec<Vec<u8>> {
        if self.chance(0.15) {
            return self.zintercard();
        }
        let b = |s: &str| s.as_bytes().to_vec();
        let name = self.pick(&[
            "ZUNION",
            "ZINTER",
            "ZDIFF",
            "ZUNIONSTORE",
            "ZINTERSTORE",
            "ZDIFFSTORE",
        ]);
        let store = name.ends_with("STORE");
        let mut a = vec![b(name)];
        if store {
            a.push(self.zkey_scored());
        }
        let n = self.rng.gen_range(1..4);
        a.push(if self.chance(0.05) {
            b(self.pick(&["0", "-1", "abc", "9"]))
        } else {
            n.to_string().into_bytes()
        });
        for _ in 0..n {
            // No lex key as an input: a union into it would give it scores.
            a.push(self.zkey_scored());
        }
        if self.chance(0.4) {
            a.push(b("WEIGHTS"));
            let w = if self.chance(0.1) { n + 1 } else { n };
            for _ in 0..w {
                a.push(b(
                    self.pick(&["1", "2", "-1", "0", "0.5", "inf", "abc", "-inf"])
                ));
            }
        }
        if self.chance(0.4) {
            a.push(b("AGGREGATE"));
            a.push(b(self.pick(&["SUM", "MIN", "MAX", "max", "AVG"])));
        }
        if self.chance(0.3) {
            a.push(b("WITHSCORES"));
        }
        a
    }
}
