//! The matcher ferrokv had before issue #15, kept as the test oracle for
//! [`super::glob_match`]: a plain recursive backtracking matcher, easy to
//! check against Redis's `stringmatchlen` by reading, and exponential in the
//! number of `*` (so only tests and the before/after benchmark use it).
//!
//! Two corrections were made to it when it became the oracle, each checked
//! against redis-server 7.0.15 (the differential test in
//! `crates/server/tests/patterns.rs` runs both shapes):
//! - an empty subject matches only the empty pattern (`KEYS **` does not
//!   return the key `""`: Redis's loop never runs on an empty subject, so its
//!   trailing-star strip never fires); it used to match any all-star pattern;
//! - the bounds of a range and the subject byte compare as C's signed `char`
//!   on x86-64 (`[a-\xff]` is the range -1..=97, so it holds `\x00` and
//!   `\xff` but not `b`); it used to compare unsigned bytes.

/// True when `s` matches `pattern`, the slow way.
pub fn glob_match(pattern: &[u8], s: &[u8]) -> bool {
    if s.is_empty() {
        return pattern.is_empty();
    }
    glob(pattern, s, false, 0)
}

/// Case-insensitive variant, the slow way.
pub fn glob_match_nocase(pattern: &[u8], s: &[u8]) -> bool {
    if s.is_empty() {
        return pattern.is_empty();
    }
    glob(pattern, s, true, 0)
}

fn eq(a: u8, b: u8, nocase: bool) -> bool {
    if nocase {
        a.eq_ignore_ascii_case(&b)
    } else {
        a == b
    }
}

/// C's `tolower` on a signed `char` in the C locale.
fn lower(c: i8) -> i8 {
    (c as u8).to_ascii_lowercase() as i8
}

fn glob(mut p: &[u8], mut s: &[u8], nocase: bool, depth: usize) -> bool {
    // Redis returns "no match" below 1000 nested stars.
    if depth > 1000 {
        return false;
    }
    while !p.is_empty() && !s.is_empty() {
        match p[0] {
            b'*' => {
                while p.len() > 1 && p[1] == b'*' {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return true;
                }
                for i in 0..s.len() {
                    if glob(&p[1..], &s[i..], nocase, depth + 1) {
                        return true;
                    }
                }
                return false;
            }
            b'?' => {
                s = &s[1..];
            }
            b'[' => {
                p = &p[1..];
                let not = p.first() == Some(&b'^');
                if not {
                    p = &p[1..];
                }
                let mut matched = false;
                loop {
                    if p.is_empty() {
                        break;
                    }
                    if p[0] == b'\\' && p.len() >= 2 {
                        p = &p[1..];
                        if p[0] == s[0] {
                            matched = true;
                        }
                    } else if p[0] == b']' {
                        break;
                    } else if p.len() >= 3 && p[1] == b'-' {
                        let (mut start, mut end) = (p[0] as i8, p[2] as i8);
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        let mut c = s[0] as i8;
                        if nocase {
                            (start, end, c) = (lower(start), lower(end), lower(c));
                        }
                        p = &p[2..];
                        if c >= start && c <= end {
                            matched = true;
                        }
                    } else if eq(p[0], s[0], nocase) {
                        matched = true;
                    }
                    p = &p[1..];
                }
                if p.is_empty() {
                    // Unterminated class: Redis treats the end as the end.
                    if matched != not {
                        s = &s[1..];
                        return s.is_empty();
                    }
                    return false;
                }
                if matched == not {
                    return false;
                }
                s = &s[1..];
            }
            b'\\' if p.len() >= 2 => {
                p = &p[1..];
                if !eq(p[0], s[0], nocase) {
                    return false;
                }
                s = &s[1..];
            }
            c => {
                if !eq(c, s[0], nocase) {
                    return false;
                }
                s = &s[1..];
            }
        }
        p = &p[1..];
    }
    if s.is_empty() {
        while p.first() == Some(&b'*') {
            p = &p[1..];
        }
    }
    p.is_empty() && s.is_empty()
}
