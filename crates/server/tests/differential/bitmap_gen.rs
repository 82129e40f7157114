//! The bitmap part of the generator: SETBIT GETBIT BITCOUNT BITPOS BITOP
//! BITFIELD BITFIELD_RO with their edge cases — negative and huge offsets,
//! bit and byte ranges that cross the string's ends, `#` offsets, every
//! overflow mode, bad types and sizes, missing keys, and the string keys of
//! the main generator (integers and texts turning into bitmaps, wrong
//! types from the other families).

use super::{Check, Command, Generator, KEYS};
use rand::Rng;

const BKEYS: &[&[u8]] = &[b"bm0", b"bm1", b"bm2"];

const OFFSETS: &[&str] = &[
    "0",
    "1",
    "7",
    "8",
    "9",
    "15",
    "16",
    "31",
    "63",
    "64",
    "100",
    "255",
    "1000",
    "-1",
    "abc",
    "1048575",
    "4294967296",
    "9223372036854775807",
    "",
    "1.5",
    "08",
];

const RANGE: &[&str] = &[
    "0",
    "1",
    "2",
    "-1",
    "-2",
    "-3",
    "3",
    "5",
    "7",
    "8",
    "15",
    "16",
    "17",
    "100",
    "-100",
    "9223372036854775807",
    "-9223372036854775808",
    "x",
];

const TYPES: &[&str] = &[
    "u1", "u2", "u3", "u7", "u8", "u9", "u16", "u31", "u32", "u63", "u64", "i1", "i2", "i5", "i8",
    "i16", "i32", "i63", "i64", "i65", "u0", "x8", "i", "U8", "8",
];

const VALUES: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "7",
    "100",
    "127",
    "128",
    "255",
    "256",
    "-128",
    "-129",
    "1000",
    "65535",
    "9223372036854775807",
    "-9223372036854775808",
    "abc",
    "1.5",
];

impl Generator {
    fn bkey(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..12) {
            // String keys of the main generator (integers, texts, other
            // types, missing).
            0..=2 => KEYS[self.rng.gen_range(0..KEYS.len())].to_vec(),
            3 => b"bmnone".to_vec(),
            _ => BKEYS[self.rng.gen_range(0..BKEYS.len())].to_vec(),
        }
    }

    fn bit_offset(&mut self) -> Vec<u8> {
        if self.chance(0.7) {
            self.rng.gen_range(0..200u32).to_string().into_bytes()
        } else {
            self.pick(OFFSETS).into()
        }
    }

    fn bit_range(&mut self) -> Vec<u8> {
        if self.chance(0.5) {
            self.rng.gen_range(-30..60i32).to_string().into_bytes()
        } else {
            self.pick(RANGE).into()
        }
    }

    fn bit_unit(&mut self) -> Vec<u8> {
        self.pick(&["BIT", "BYTE", "bit", "byte", "BITS"]).into()
    }

    fn bit_field(&mut self, a: &mut Vec<Vec<u8>>) {
        a.push(self.pick(TYPES).into());
        let off = if self.chance(0.3) {
            format!("#{}", self.rng.gen_range(0..12u32)).into_bytes()
        } else if self.chance(0.1) {
            self.pick(&["#-1", "#x", "-1", "#9999999999", "abc"]).into()
        } else {
            self.rng.gen_range(0..120u32).to_string().into_bytes()
        };
        a.push(off);
    }

    /// One bitmap command.
    pub(super) fn bitmap_command(&mut self) -> Command {
        let b = |s: &str| s.as_bytes().to_vec();
        let args: Vec<Vec<u8>> = match self.rng.gen_range(0..40) {
            0..=9 => {
                let bit = if self.chance(0.95) {
                    self.pick(&["0", "1"])
                } else {
                    self.pick(&["2", "-1", "x", ""])
                };
                vec![b("SETBIT"), self.bkey(), self.bit_offset(), b(bit)]
            }
            10..=13 => vec![b("GETBIT"), self.bkey(), self.bit_offset()],
            14..=18 => {
                let mut a = vec![b("BITCOUNT"), self.bkey()];
                match self.rng.gen_range(0..10) {
                    0 => {}
                    1 => a.push(self.bit_range()),
                    2..=5 => {
                        a.push(self.bit_range());
                        a.push(self.bit_range());
                    }
                    _ => {
                        a.push(self.bit_range());
                        a.push(self.bit_range());
                        a.push(self.bit_unit());
                    }
                }
                a
            }
            19..=24 => {
                let bit = if self.chance(0.95) {
                    self.pick(&["0", "1"])
                } else {
                    self.pick(&["2", "x"])
                };
                let mut a = vec![b("BITPOS"), self.bkey(), b(bit)];
                let extra = self.rng.gen_range(0..4);
                if extra >= 1 {
                    a.push(self.bit_range());
                }
                if extra >= 2 {
                    a.push(self.bit_range());
                }
                if extra >= 3 {
                    a.push(self.bit_unit());
                }
                a
            }
            25..=28 => {
                let op = self.pick(&["AND", "OR", "XOR", "NOT", "and", "not", "NAND"]);
                let mut a = vec![b("BITOP"), b(op), self.bkey()];
                let n = if op.eq_ignore_ascii_case("not") && self.chance(0.8) {
                    1
                } else {
                    self.rng.gen_range(1..4)
                };
                for _ in 0..n {
                    a.push(self.bkey());
                }
                a
            }
            _ => {
                let ro = self.chance(0.2);
                let mut a = vec![b(if ro { "BITFIELD_RO" } else { "BITFIELD" }), self.bkey()];
                for _ in 0..self.rng.gen_range(0..4) {
                    match self.rng.gen_range(0..10) {
                        0..=2 => {
                            a.push(b("GET"));
                            self.bit_field(&mut a);
                        }
                        3..=4 => {
                            a.push(b("SET"));
                            self.bit_field(&mut a);
                            a.push(self.pick(VALUES).into());
                        }
                        5..=7 => {
                            a.push(b("INCRBY"));
                            self.bit_field(&mut a);
                            a.push(self.pick(VALUES).into());
                        }
                        8 => {
                            a.push(b("OVERFLOW"));
                            a.push(self.pick(&["WRAP", "SAT", "FAIL", "sat", "BAD"]).into());
                        }
                        _ => a.push(self.pick(&["GET", "SET", "FOO"]).into()),
                    }
                }
                a
            }
        };
        Command::new(args, Check::Exact)
    }
}
