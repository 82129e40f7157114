//! SORT and SORT_RO in the generator, over every key of the main generator
//! (lists, sets, sorted sets, strings, missing): numeric and ALPHA orders,
//! DESC, LIMIT, BY and GET patterns that hit the generator's own keys
//! (`k*` turns element `0` into `k0`), hash fields, STORE, and the errors.
//!
//! Three things Redis leaves to a set's or hash table's iteration order are
//! never compared: a set left unsorted (`BY nosort`) is always stored
//! (then both servers sort it ALPHA), ALPHA is never combined with a BY
//! pattern (equal BY values would keep each server's own order), and an
//! ALPHA sort that replies (no STORE) is compared as a sorted list: it
//! compares C strings (`strcoll`, cut at the first NUL), so a set holding
//! `""` and `"\0\xff"` has two members that tie and come out in each
//! server's iteration order. The stored form compares whole strings (no
//! ties), and the digest after it checks its order exactly.
//!
//! Numeric sorts are not generated either (tests/sort.rs covers them):
//! Redis 7.0 rejects a score when `errno` is `ERANGE` after its `strtod`
//! without clearing `errno` first, so an overflow in any earlier parse
//! (`ZRANGE k 1e400 ...`) can make its next numeric SORT fail, depending
//! on what else ran in between. So every generated sort is ALPHA or
//! unsorted (`BY` without `*`).

use super::{Check, Command, Generator};
use rand::Rng;

impl Generator {
    /// One SORT or SORT_RO.
    pub(super) fn sort_command(&mut self) -> Command {
        let b = |s: &str| s.as_bytes().to_vec();
        let ro = self.chance(0.2);
        let mut a = vec![b(if ro { "SORT_RO" } else { "SORT" }), self.key()];
        let mut nosort = false;
        let mut by = false;
        if self.chance(0.8) {
            a.push(b("ALPHA"));
        } else {
            nosort = true;
            by = true;
            a.push(b("BY"));
            a.push(b("nosort"));
        }
        for _ in 0..self.rng.gen_range(0..4) {
            match self.rng.gen_range(0..12) {
                0 if !by => {
                    // Patterns without `*` only: a BY pattern with ALPHA
                    // could tie (see above).
                    a.push(b("BY"));
                    a.push(b(self.pick(&["nosort", "x", "k0"])));
                    nosort = true;
                    by = true;
                }
                1 | 2 => {
                    a.push(b("GET"));
                    a.push(b(self.pick(&["#", "k*", "k*->f", "*", "nokey"])));
                }
                3 | 4 => {
                    a.push(b("LIMIT"));
                    a.push(b(self.pick(&["0", "1", "2", "-1", "5", "100", "x"])));
                    a.push(b(self.pick(&["0", "1", "2", "-1", "3", "x"])));
                }
                5 => a.push(b(self.pick(&["ASC", "DESC", "desc"]))),
                6 => a.push(b("ALPHA")),
                7 => {
                    // A stray token ends the command (what follows it
                    // would be read as its argument).
                    a.push(b(self.pick(&["FOO", "LIMIT", "BY", "GET"])));
                    return Command::new(a, Check::Exact);
                }
                _ => {}
            }
        }
        if nosort || (!ro && self.chance(0.3)) {
            a.push(b("STORE"));
            a.push(self.key());
            return Command::new(a, Check::Exact);
        }
        Command::new(a, Check::Sorted)
    }
}
