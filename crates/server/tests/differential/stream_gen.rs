//! The stream part of the generator: XADD (explicit IDs, bare `<ms>`,
//! `<ms>-*`, NOMKSTREAM, MAXLEN/MINID with `=`/`~`/LIMIT), XTRIM, XDEL,
//! XLEN, XRANGE/XREVRANGE (exclusive bounds, `-`/`+`, COUNT), XSETID
//! (ENTRIESADDED, MAXDELETEDID) and XREAD (several streams, `$`, COUNT;
//! no BLOCK), over a few stream
//! keys, with small node limits set now and then (so approximate trims
//! meet node boundaries) and the main generator's keys of other types.
//!
//! `*` is left out: the generated ID is the clock's, which the two servers
//! read at different moments. IDs come from a small space (ms 0..40, seq
//! 0..4) so that collisions, "equal or smaller" errors and deleted
//! neighbours are common.

use super::{Check, Command, Generator, KEYS};
use rand::Rng;

const SKEYS: &[&[u8]] = &[b"st0", b"st1", b"st2"];

/// The share of generated commands that are stream commands: 5%, or
/// `FERROKV_DIFF_STREAM` (0..1) to focus a run on the family.
pub fn share() -> f64 {
    std::env::var("FERROKV_DIFF_STREAM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.05)
}

impl Generator {
    fn skey(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..14) {
            0 => KEYS[self.rng.gen_range(0..KEYS.len())].to_vec(),
            1 => b"stnone".to_vec(),
            _ => SKEYS[self.rng.gen_range(0..SKEYS.len())].to_vec(),
        }
    }

    fn sid(&mut self) -> Vec<u8> {
        let ms = self.rng.gen_range(0..40u32);
        match self.rng.gen_range(0..20) {
            0 => ms.to_string().into_bytes(),
            1 => b"18446744073709551615-18446744073709551615".to_vec(),
            2 => self
                .pick(&["0-0", "x", "1-", "-1", "1-1-1", " 1", "01-1"])
                .into(),
            _ => format!("{ms}-{}", self.rng.gen_range(0..4u32)).into_bytes(),
        }
    }

    fn bound(&mut self, start: bool) -> Vec<u8> {
        match self.rng.gen_range(0..10) {
            0 => {
                if start {
                    b"-".to_vec()
                } else {
                    b"+".to_vec()
                }
            }
            1 => {
                if start {
                    b"+".to_vec()
                } else {
                    b"-".to_vec()
                }
            }
            2..=3 => {
                let mut v = b"(".to_vec();
                v.extend(self.sid());
                v
            }
            _ => self.sid(),
        }
    }

    fn trim_clause(&mut self, a: &mut Vec<Vec<u8>>) {
        let b = |s: &str| s.as_bytes().to_vec();
        let maxlen = self.chance(0.6);
        a.push(b(if maxlen { "MAXLEN" } else { "MINID" }));
        let approx = self.chance(0.5);
        if approx {
            a.push(b("~"));
        } else if self.chance(0.5) {
            a.push(b("="));
        }
        if maxlen {
            a.push(self.rng.gen_range(0..12u32).to_string().into_bytes());
        } else {
            a.push(self.sid());
        }
        if self.chance(0.25) {
            a.push(b("LIMIT"));
            a.push(self.pick(&["0", "1", "3", "100", "-1"]).into());
        }
    }

    /// One stream command.
    pub(super) fn stream_command(&mut self) -> Command {
        let b = |s: &str| s.as_bytes().to_vec();
        let args: Vec<Vec<u8>> = match self.rng.gen_range(0..44) {
            40..=43 => return self.stream_group_command(),
            0..=13 => {
                let mut a = vec![b("XADD"), self.skey()];
                if self.chance(0.1) {
                    a.push(b("NOMKSTREAM"));
                }
                if self.chance(0.25) {
                    self.trim_clause(&mut a);
                }
                if self.chance(0.15) {
                    a.push(format!("{}-*", self.rng.gen_range(0..40u32)).into_bytes());
                } else {
                    a.push(self.sid());
                }
                let n = if self.chance(0.05) {
                    0
                } else {
                    self.rng.gen_range(1..4)
                };
                for _ in 0..n {
                    a.push(self.pick(&["f", "g", "h", "f1"]).into());
                    let v = self.rng.gen_range(0..1000u32).to_string();
                    a.push(if self.chance(0.2) {
                        b("")
                    } else {
                        v.into_bytes()
                    });
                }
                if self.chance(0.03) {
                    a.push(b("odd"));
                }
                a
            }
            14..=19 => {
                let rev = self.chance(0.3);
                let mut a = vec![b(if rev { "XREVRANGE" } else { "XRANGE" }), self.skey()];
                a.push(self.bound(!rev));
                a.push(self.bound(rev));
                if self.chance(0.4) {
                    a.push(b("COUNT"));
                    a.push(self.pick(&["0", "1", "2", "5", "-1", "x"]).into());
                }
                a
            }
            20..=22 => {
                let mut a = vec![b("XDEL"), self.skey()];
                for _ in 0..self.rng.gen_range(1..4) {
                    a.push(self.sid());
                }
                a
            }
            23..=25 => {
                let mut a = vec![b("XTRIM"), self.skey()];
                self.trim_clause(&mut a);
                a
            }
            26..=27 => vec![b("XLEN"), self.skey()],
            28..=29 => {
                let mut a = vec![b("XSETID"), self.skey(), self.sid()];
                if self.chance(0.3) {
                    a.push(b("ENTRIESADDED"));
                    a.push(self.rng.gen_range(-1..30i32).to_string().into_bytes());
                }
                if self.chance(0.3) {
                    a.push(b("MAXDELETEDID"));
                    a.push(self.sid());
                }
                a
            }
            30..=35 => {
                let mut a = vec![b("XREAD")];
                if self.chance(0.4) {
                    a.push(b("COUNT"));
                    a.push(self.pick(&["0", "1", "3", "-2"]).into());
                }
                // No BLOCK: a command may go to either connection after it
                // is made, so whether it would run inside MULTI (where it
                // answers at once) is not known here; tests/streams.rs
                // covers it.
                let block = false;
                a.push(b("STREAMS"));
                let n = self.rng.gen_range(1..3);
                let keys: Vec<Vec<u8>> = (0..n).map(|_| self.skey()).collect();
                a.extend(keys);
                for _ in 0..n {
                    let id = if self.chance(0.2) { b("$") } else { self.sid() };
                    a.push(id);
                }
                if !block && self.chance(0.03) {
                    a.pop();
                }
                a
            }
            36 => vec![
                b("CONFIG"),
                b("SET"),
                b("stream-node-max-entries"),
                b(self.pick(&["100", "100", "2", "3", "0"])),
            ],
            37 => vec![
                b("CONFIG"),
                b("SET"),
                b("stream-node-max-bytes"),
                b(self.pick(&["4096", "4096", "60", "0"])),
            ],
            38 => vec![b("TYPE"), self.skey()],
            39 => return self.stream_group_command(),
            _ => vec![b("XADD"), self.skey()],
        };
        Command::new(args, Check::Exact)
    }

    /// One consumer-group command whose reply holds no time: XGROUP's
    /// subcommands, XREADGROUP (`>`, history, NOACK), XACK, XPENDING's
    /// summary, XCLAIM and XAUTOCLAIM with no idle time (JUSTID, or the
    /// entries), XINFO STREAM and GROUPS (not CONSUMERS, whose idle times
    /// differ, nor XPENDING's extended form).
    fn stream_group_command(&mut self) -> Command {
        let b = |s: &str| s.as_bytes().to_vec();
        let g = b(self.pick(&["g1", "g2", "nog"]));
        let c = b(self.pick(&["c1", "c2", "c3"]));
        let args: Vec<Vec<u8>> = match self.rng.gen_range(0..14) {
            0..=1 => {
                let mut a = vec![b("XGROUP"), b("CREATE"), self.skey(), g];
                a.push(if self.chance(0.3) { b("$") } else { self.sid() });
                if self.chance(0.3) {
                    a.push(b("MKSTREAM"));
                }
                if self.chance(0.2) {
                    a.push(b("ENTRIESREAD"));
                    a.push(self.rng.gen_range(-2..20i32).to_string().into_bytes());
                }
                a
            }
            2 => vec![b("XGROUP"), b("SETID"), self.skey(), g, self.sid()],
            3 => vec![b("XGROUP"), b("DESTROY"), self.skey(), g],
            4 => vec![b("XGROUP"), b("CREATECONSUMER"), self.skey(), g, c],
            5 => vec![b("XGROUP"), b("DELCONSUMER"), self.skey(), g, c],
            6..=8 => {
                let mut a = vec![b("XREADGROUP"), b("GROUP"), g, c];
                if self.chance(0.5) {
                    a.push(b("COUNT"));
                    a.push(self.pick(&["1", "2", "0"]).into());
                }
                if self.chance(0.15) {
                    a.push(b("NOACK"));
                }
                a.push(b("STREAMS"));
                a.push(self.skey());
                a.push(if self.chance(0.7) { b(">") } else { self.sid() });
                a
            }
            9 => {
                let mut a = vec![b("XACK"), self.skey(), g];
                for _ in 0..self.rng.gen_range(1..3) {
                    a.push(self.sid());
                }
                a
            }
            10 => vec![b("XPENDING"), self.skey(), g],
            11 => {
                let mut a = vec![b("XCLAIM"), self.skey(), g, c, b("0"), self.sid()];
                if self.chance(0.5) {
                    a.push(b("JUSTID"));
                }
                a
            }
            12 => {
                let mut a = vec![b("XAUTOCLAIM"), self.skey(), g, c, b("0"), self.sid()];
                if self.chance(0.5) {
                    a.push(b("COUNT"));
                    a.push(self.pick(&["1", "3", "0"]).into());
                }
                if self.chance(0.5) {
                    a.push(b("JUSTID"));
                }
                a
            }
            _ => vec![b("XINFO"), b(self.pick(&["STREAM", "GROUPS"])), self.skey()],
        };
        Command::new(args, Check::Exact)
    }
}
