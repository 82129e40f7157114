//! RESTORE in the generator, with payloads `DUMP` wrote on redis-server
//! 7.0.15 (a string, an integer, a listpack list, hash and sorted set, an
//! intset, an empty string), the same payloads with a flipped byte (a
//! CRC64 mismatch) or cut short, and every option: REPLACE, ABSTTL (past
//! and future), IDLETIME, FREQ and their errors; RESTORE-ASKING alike.
//! DUMP is compared by shape only: a hashtable's payload lists members in
//! each server's own order (tests/dump.rs checks DUMP's bytes both ways).

use super::{Check, Command, Generator, ABSOLUTE_EPOCH_S};
use rand::Rng;

pub const PAYLOADS: &[&[u8]] = &[
    b"\x00\x05\x68\x65\x6c\x6c\x6f\x0a\x00\x63\x72\xdf\x76\x65\x34\x20\x0a",
    b"\x00\xc1\x39\x30\x0a\x00\x9d\x94\xea\x27\x93\xfc\x08\xb9",
    b"\x12\x01\x02\x0f\x0f\x00\x00\x00\x03\x00\x81\x61\x02\x81\x62\x02\x03\x01\xff\x0a\x00\xdc\xa1\xe6\x7d\x50\x05\x50\x48",
    b"\x10\x12\x12\x00\x00\x00\x04\x00\x81\x66\x02\x81\x76\x02\x81\x6e\x02\x01\x01\xff\x0a\x00\xfc\xe4\x08\xf1\x79\x22\xe0\x16",
    b"\x0b\x0e\x02\x00\x00\x00\x03\x00\x00\x00\x01\x00\x02\x00\x03\x00\x0a\x00\xa5\x02\x5c\xe2\x6d\x6e\x4d\x1b",
    b"\x11\x14\x14\x00\x00\x00\x04\x00\x81\x61\x02\x01\x01\x81\x62\x02\x83\x32\x2e\x35\x04\xff\x0a\x00\xd4\x4c\x6e\xa4\xf6\x44\xd9\xd7",
    b"\x00\x00\x0a\x00\x5d\x9b\x5c\x40\x0f\x7f\xa2\xda",
];

impl Generator {
    fn payload(&mut self) -> Vec<u8> {
        let mut p = PAYLOADS[self.rng.gen_range(0..PAYLOADS.len())].to_vec();
        match self.rng.gen_range(0..10) {
            0 => {
                let i = self.rng.gen_range(0..p.len());
                p[i] ^= 0x20;
            }
            1 => p.truncate(self.rng.gen_range(0..p.len())),
            _ => {}
        }
        p
    }

    /// One RESTORE (or RESTORE-ASKING, the same outside a cluster), or a
    /// DUMP compared by shape: a payload or nil, never an error (its bytes
    /// may differ, see above).
    pub(super) fn restore_command(&mut self) -> Command {
        let b = |s: &str| s.as_bytes().to_vec();
        if self.chance(0.2) {
            return Command::new(vec![b("DUMP"), self.key()], Check::RandomShape);
        }
        let name = if self.chance(0.15) {
            "RESTORE-ASKING"
        } else {
            "RESTORE"
        };
        let mut a = vec![b(name), self.key()];
        let absttl = self.chance(0.2);
        let ttl = if absttl {
            // Absolute: in the past (nothing created) or after the epoch
            // the relative ones never reach (comparable TTL classes).
            if self.chance(0.5) {
                self.rng.gen_range(1..1_000_000i64).to_string()
            } else {
                ((ABSOLUTE_EPOCH_S + self.rng.gen_range(0..1000)) * 1000).to_string()
            }
        } else if self.chance(0.7) {
            "0".into()
        } else {
            self.pick(&["-1", "x", "100000000"]).into()
        };
        a.push(ttl.into_bytes());
        a.push(self.payload());
        if self.chance(0.4) {
            a.push(b("REPLACE"));
        }
        if absttl {
            a.push(b("ABSTTL"));
        }
        match self.rng.gen_range(0..10) {
            0 => {
                a.push(b("IDLETIME"));
                a.push(b(self.pick(&["0", "100", "-1", "x"])));
            }
            1 => {
                a.push(b("FREQ"));
                a.push(b(self.pick(&["0", "5", "255", "256", "-1"])));
            }
            2 => a.push(b(self.pick(&["BOGUS", "IDLETIME", "FREQ"]))),
            _ => {}
        }
        Command::new(a, Check::Exact)
    }
}
