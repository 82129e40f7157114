//! Glob matching with the results of Redis 7.0's `stringmatchlen` and a
//! polynomial worst case: every glob user (KEYS, the SCAN family's MATCH,
//! PSUBSCRIBE on PUBLISH, PUBSUB CHANNELS, CONFIG GET, COMMAND LIST FILTERBY
//! PATTERN) goes through [`glob_match`] or [`glob_match_nocase`], and a
//! client chooses the pattern, so no pattern may cost more than
//! O(pattern length × subject length) time (issue #15: `a*a*…a*b` used to
//! hang the event loop). Extra memory is O(1) and nothing is allocated, so
//! KEYS over a million keys re-reads the pattern per key rather than
//! compiling it.
//!
//! # Dialect (Redis's, quirks included)
//! - `*` any run of bytes, `?` one byte, `\x` the byte `x` (a `\` that ends
//!   the pattern is a literal `\`).
//! - `[...]` one byte from a class, `[^...]` one byte not in it; `a-z` a
//!   range, reversed bounds swap; `\x` inside a class is `x` compared
//!   case-sensitively even in the nocase mode; a `]` right after `[` (or
//!   `[^`) closes an empty class. A range's bounds and the subject byte
//!   compare as C's signed `char` (`[a-\xff]` is -1..=97), and in the nocase
//!   mode they are lowered after the swap (so `[Z-a]` is empty there).
//! - A class that is never closed runs to the end of the pattern.
//! - An empty subject matches only the empty pattern (not `*`: KEYS and
//!   SCAN answer a bare `*` without asking the matcher, as Redis does).
//! - At most 1000 star groups are honoured: a pattern whose 1001st run of
//!   `*` is followed by anything matches nothing (Redis's nesting limit,
//!   present in Debian's 7.0.15 build, checked in
//!   `crates/server/tests/patterns.rs`).
//!
//! # Why one saved star is enough
//! Every token but `*` consumes exactly one byte, so between two stars the
//! pattern is a fixed-length segment. When the matcher reaches a star, the
//! segment before it has been placed at its leftmost possible position; any
//! match that placed it later could be rewritten to place it there and let
//! the new star absorb the difference. So on a mismatch only the last star
//! needs to take one more byte: each subject position is the start of at
//! most one attempt per star, and an attempt reads each pattern byte once
//! (a class is re-parsed per subject byte, which keeps it O(|p|) per byte
//! without an allocation). `reference.rs`, the old exponential matcher,
//! is the oracle the property tests compare this against.

/// Redis's bound on nested star recursion (`nesting > 1000` answers "no
/// match"): the 1001st non-final star group can never be passed.
const MAX_STAR_GROUPS: usize = 1000;

/// True when `subject` matches `pattern`.
pub fn glob_match(pattern: &[u8], subject: &[u8]) -> bool {
    matches::<false>(pattern, subject)
}

/// Case-insensitive variant (ASCII letters only, as C's `tolower` in the C
/// locale).
pub fn glob_match_nocase(pattern: &[u8], subject: &[u8]) -> bool {
    matches::<true>(pattern, subject)
}

/// Bytes that start something other than a literal token.
fn is_special(b: u8) -> bool {
    matches!(b, b'*' | b'?' | b'[' | b'\\')
}

/// One function per case mode, so the per-byte comparison carries no
/// branch on it.
fn matches<const NOCASE: bool>(p: &[u8], s: &[u8]) -> bool {
    if s.is_empty() {
        return p.is_empty();
    }
    // The literal prefix (`user:` of `user:*`), byte against byte, giving up
    // at the first difference.
    let mut i = 0;
    while i < p.len() && i < s.len() && !is_special(p[i]) {
        if !same(p[i], s[i], NOCASE) {
            return false;
        }
        i += 1;
    }
    let (mut pi, mut si) = (i, i);
    // The last star passed: where the pattern resumes after it, and where in
    // the subject the current attempt of that rest began.
    let mut star: Option<(usize, usize)> = None;
    let mut star_groups = 0;
    while si < s.len() {
        if pi < p.len() {
            if p[pi] == b'*' {
                while pi < p.len() && p[pi] == b'*' {
                    pi += 1;
                }
                if pi == p.len() {
                    return true;
                }
                star_groups += 1;
                if star_groups > MAX_STAR_GROUPS {
                    return false;
                }
                match next_start(p, pi, s, si, NOCASE) {
                    Some(start) => si = start,
                    None => return false,
                }
                star = Some((pi, si));
                continue;
            }
            let (hit, next) = token(p, pi, s[si], NOCASE);
            if hit {
                pi = next;
                si += 1;
                continue;
            }
        }
        // A mismatch, or pattern left over with subject remaining: the last
        // star takes one more byte, or there is no match.
        let Some((rest, start)) = star else {
            return false;
        };
        match next_start(p, rest, s, start + 1, NOCASE) {
            Some(start) => {
                star = Some((rest, start));
                pi = rest;
                si = start;
            }
            None => return false,
        }
    }
    // The subject ran out: only stars may be left.
    p[pi..].iter().all(|&b| b == b'*')
}

/// The first subject position at or after `from` where the pattern's rest
/// at `pi` (which follows a star and is not a star) could begin, or `None`
/// when there is none. A plain literal byte is found with `memchr`; any
/// other token just needs one byte left.
fn next_start(p: &[u8], pi: usize, s: &[u8], from: usize, nocase: bool) -> Option<usize> {
    if from >= s.len() {
        return None;
    }
    let b = p[pi];
    if is_special(b) {
        return Some(from);
    }
    let hay = &s[from..];
    let found = if nocase && b.is_ascii_alphabetic() {
        memchr::memchr2(b.to_ascii_lowercase(), b.to_ascii_uppercase(), hay)
    } else {
        memchr::memchr(b, hay)
    };
    found.map(|i| from + i)
}

/// Matches the one-byte token at `p[i]` (anything but `*`) against `c`:
/// whether it matched, and where the next token begins.
#[inline]
fn token(p: &[u8], i: usize, c: u8, nocase: bool) -> (bool, usize) {
    match p[i] {
        b'?' => (true, i + 1),
        b'[' => class(p, i + 1, c, nocase),
        b'\\' if i + 1 < p.len() => (same(p[i + 1], c, nocase), i + 2),
        literal => (same(literal, c, nocase), i + 1),
    }
}

/// A class whose body starts at `p[j]` (just after `[`).
fn class(p: &[u8], mut j: usize, c: u8, nocase: bool) -> (bool, usize) {
    let negated = p.get(j) == Some(&b'^');
    if negated {
        j += 1;
    }
    let mut found = false;
    loop {
        let Some(&b) = p.get(j) else {
            // Never closed: the class took the rest of the pattern.
            return (found != negated, p.len());
        };
        let left = p.len() - j;
        if b == b'\\' && left >= 2 {
            j += 1;
            found |= p[j] == c;
        } else if b == b']' {
            return (found != negated, j + 1);
        } else if left >= 3 && p[j + 1] == b'-' {
            found |= in_range(b, p[j + 2], c, nocase);
            j += 2;
        } else {
            found |= same(b, c, nocase);
        }
        j += 1;
    }
}

#[inline]
fn same(a: u8, b: u8, nocase: bool) -> bool {
    if nocase {
        a.eq_ignore_ascii_case(&b)
    } else {
        a == b
    }
}

/// Redis compares a range as C `char`s, signed on the platforms it ships
/// for, swapping reversed bounds before lowering them.
fn in_range(from: u8, to: u8, c: u8, nocase: bool) -> bool {
    let (mut lo, mut hi, mut c) = (from as i8, to as i8, c as i8);
    if lo > hi {
        std::mem::swap(&mut lo, &mut hi);
    }
    if nocase {
        let lower = |x: i8| (x as u8).to_ascii_lowercase() as i8;
        (lo, hi, c) = (lower(lo), lower(hi), lower(c));
    }
    lo <= c && c <= hi
}

#[cfg(test)]
pub(crate) mod reference;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn stars_questions_and_classes_match_as_in_redis() {
        assert!(glob_match(b"h?llo", b"hello"));
        assert!(glob_match(b"h*llo", b"heeeello"));
        assert!(glob_match(b"h*llo", b"hllo"));
        assert!(glob_match(b"h[ae]llo", b"hallo"));
        assert!(!glob_match(b"h[^e]llo", b"hello"));
        assert!(glob_match(b"h[a-b]llo", b"hbllo"));
        assert!(glob_match(b"h[b-a]llo", b"hallo"));
        assert!(glob_match(b"a\\*b", b"a*b"));
        assert!(!glob_match(b"a\\*b", b"axb"));
        assert!(glob_match(b"user:*:name", b"user:\x00\r\n:name"));
        assert!(!glob_match(b"abc", b"ab"));
        assert!(!glob_match(b"ab", b"abc"));
        assert!(glob_match(b"*b*", b"abc"));
        assert!(!glob_match(b"*b*d", b"abc"));
    }

    #[test]
    fn empty_subject_matches_only_the_empty_pattern() {
        assert!(glob_match(b"", b""));
        assert!(!glob_match(b"*", b""));
        assert!(!glob_match(b"**", b""));
        assert!(!glob_match(b"", b"a"));
        assert!(glob_match(b"a**", b"a"));
    }

    #[test]
    fn class_edge_cases_follow_redis() {
        // `[]` is an empty class, `[^]` any byte.
        assert!(!glob_match(b"[]", b"]"));
        assert!(glob_match(b"[^]", b"x"));
        // `[]a]`: an empty class, then `a]`.
        assert!(!glob_match(b"[]a]", b"a]"));
        // Unterminated: the class runs to the end of the pattern.
        assert!(glob_match(b"[ab", b"b"));
        assert!(!glob_match(b"[ab", b"["));
        assert!(!glob_match(b"[", b"["));
        assert!(glob_match(b"[^", b"q"));
        assert!(glob_match(b"[a-", b"-"));
        // `[a-]` is the range `]`..=`a`, left unterminated.
        assert!(glob_match(b"[a-]", b"]"));
        assert!(glob_match(b"[a-]", b"_"));
        assert!(!glob_match(b"[a-]", b"-"));
        // A `\` ending a class is itself; `[\]` holds `]` and never closes.
        assert!(glob_match(b"[\\", b"\\"));
        assert!(glob_match(b"[\\]", b"]"));
        assert!(glob_match(b"[\\]]", b"]"));
        assert!(glob_match(b"x\\", b"x\\"));
    }

    #[test]
    fn ranges_compare_as_signed_chars() {
        // -1..=97: `\x00`, `-`, `a` and `\xff` are in, `b`, `\x7f`, `\x80` out
        // (seen on redis-server 7.0.15).
        for c in [0x00u8, b'-', b'A', b'a', 0xff] {
            assert!(glob_match(b"[a-\xff]", &[c]), "{c:#x}");
        }
        for c in [b'b', 0x7f, 0x80] {
            assert!(!glob_match(b"[a-\xff]", &[c]), "{c:#x}");
        }
        assert!(glob_match(b"[\x7f-\x80]", b"q"));
        assert!(glob_match(b"[\x80-\xff]", b"\x80"));
    }

    #[test]
    fn nocase_lowers_range_bounds_after_swapping() {
        assert!(glob_match_nocase(b"[A-D]ir", b"DIR"));
        assert!(glob_match_nocase(b"ABC*", b"abcdef"));
        // `[A-z]` is `a`..=`z` without case, `A`..=`z` with it.
        assert!(glob_match(b"[A-z]", b"_"));
        assert!(!glob_match_nocase(b"[A-z]", b"_"));
        // `[Z-a]` lowers to the empty `z`..=`a`.
        assert!(glob_match(b"[Z-a]", b"_"));
        assert!(!glob_match_nocase(b"[Z-a]", b"_"));
        // An escape inside a class stays case-sensitive.
        assert!(!glob_match_nocase(b"[\\A]", b"a"));
        assert!(glob_match_nocase(b"\\A", b"a"));
    }

    #[test]
    fn the_1001st_star_group_is_never_passed() {
        let subject = vec![b'a'; 1200];
        let stars = |n: usize, tail: &[u8]| [b"a*".repeat(n), tail.to_vec()].concat();
        assert!(glob_match(&stars(1000, b"a"), &subject));
        assert!(!glob_match(&stars(1001, b"a"), &subject));
        // A final star group is a match without nesting further.
        assert!(glob_match(&stars(1000, b"*"), &subject));
        assert!(glob_match(&stars(1000, b"**"), &subject));
    }

    #[test]
    fn many_stars_against_a_near_miss_finish() {
        // Exponential for the old matcher: 20 stars, 40 bytes, no `b`.
        let pattern = [b"a*".repeat(20), b"b".to_vec()].concat();
        assert!(!glob_match(&pattern, &[b'a'; 40]));
        let pattern = [b"*a".repeat(2000), b"*b".to_vec()].concat();
        assert!(!glob_match(&pattern, &[b'a'; 5000]));
        let pattern = [b"*?".repeat(500), b"*[b]".to_vec()].concat();
        assert!(!glob_match_nocase(&pattern, &[b'a'; 5000]));
    }

    /// Bytes with a meaning in patterns, and the ones the subjects use.
    const PATTERN_BYTES: &[u8] = b"*?[]^-\\aAbZ_\xff";
    const SUBJECT_BYTES: &[u8] = b"aAbZ_-]\\*\xff";

    fn bytes_from(alphabet: &'static [u8], max: usize) -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(proptest::sample::select(alphabet), 0..=max)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        #[test]
        fn agrees_with_the_reference_matcher(
            pattern in bytes_from(PATTERN_BYTES, 12),
            subject in bytes_from(SUBJECT_BYTES, 10),
        ) {
            prop_assert_eq!(
                glob_match(&pattern, &subject),
                reference::glob_match(&pattern, &subject)
            );
            prop_assert_eq!(
                glob_match_nocase(&pattern, &subject),
                reference::glob_match_nocase(&pattern, &subject)
            );
        }

        #[test]
        fn agrees_with_the_reference_on_star_heavy_patterns(
            pattern in proptest::collection::vec(
                proptest::sample::select(&b"***?ab[]\\"[..]), 0..=10),
            subject in bytes_from(b"ab", 14),
        ) {
            prop_assert_eq!(
                glob_match(&pattern, &subject),
                reference::glob_match(&pattern, &subject)
            );
        }
    }
}
