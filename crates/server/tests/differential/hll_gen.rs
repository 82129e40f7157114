//! The HyperLogLog part of the generator: PFADD PFCOUNT PFMERGE PFDEBUG
//! on a few HLL keys that grow from sparse to dense, with `GET` and
//! `GETRANGE` of their bytes (so every opcode split and merge, the cached
//! cardinality and its stale bit are compared byte for byte), changes of
//! `hll-sparse-max-bytes`, strings corrupted under the `HYLL` magic, and
//! the string keys of the main generator (integers and texts that are no
//! HLL, wrong types from the other families).

use super::{Check, Command, Generator, KEYS};
use rand::Rng;

const HKEYS: &[&[u8]] = &[b"hll0", b"hll1", b"hll2"];

const ELEMENTS: &[&str] = &["", "a", "b", "c", "0", "1", "-1", "foo", "\u{e9}", "a b"];

impl Generator {
    fn hkey(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..12) {
            0..=1 => KEYS[self.rng.gen_range(0..KEYS.len())].to_vec(),
            2 => b"hllnone".to_vec(),
            _ => HKEYS[self.rng.gen_range(0..HKEYS.len())].to_vec(),
        }
    }

    fn hll_element(&mut self) -> Vec<u8> {
        if self.chance(0.8) {
            // Many distinct elements, so that HLLs reach the dense form.
            format!("e{}", self.rng.gen_range(0..200_000u32)).into_bytes()
        } else {
            self.pick(ELEMENTS).into()
        }
    }

    /// One HyperLogLog command.
    pub(super) fn hll_command(&mut self) -> Command {
        let b = |s: &str| s.as_bytes().to_vec();
        let args: Vec<Vec<u8>> = match self.rng.gen_range(0..40) {
            0..=14 => {
                let mut a = vec![b("PFADD"), self.hkey()];
                let n = match self.rng.gen_range(0..10) {
                    0 => 0,
                    1..=6 => self.rng.gen_range(1..6),
                    _ => self.rng.gen_range(50..400),
                };
                for _ in 0..n {
                    a.push(self.hll_element());
                }
                a
            }
            15..=21 => {
                let mut a = vec![b("PFCOUNT")];
                for _ in 0..self.rng.gen_range(1..4) {
                    a.push(self.hkey());
                }
                a
            }
            22..=25 => {
                let mut a = vec![b("PFMERGE")];
                for _ in 0..self.rng.gen_range(1..4) {
                    a.push(self.hkey());
                }
                a
            }
            26..=29 => {
                let sub = self.pick(&[
                    "ENCODING", "DECODE", "GETREG", "TODENSE", "encoding", "BOGUS",
                ]);
                vec![b("PFDEBUG"), b(sub), self.hkey()]
            }
            30..=33 => vec![b("GET"), self.hkey()],
            34..=35 => vec![b("GETRANGE"), self.hkey(), b("8"), b("15")],
            36 => vec![
                b("CONFIG"),
                b("SET"),
                b("hll-sparse-max-bytes"),
                b(self.pick(&["3000", "3000", "200", "0", "20000"])),
            ],
            37 => {
                // A byte changed past the header: corrupt opcodes or
                // registers, which both servers must detect (or not) alike.
                let at = self.rng.gen_range(16..40u32).to_string();
                let byte = [self.rng.gen::<u8>()];
                vec![b("SETRANGE"), self.hkey(), at.into_bytes(), byte.to_vec()]
            }
            38 => vec![b("APPEND"), self.hkey(), b(self.pick(&["x", "\u{1}\u{2}"]))],
            _ => vec![b("PFADD")],
        };
        Command::new(args, Check::Exact)
    }
}
