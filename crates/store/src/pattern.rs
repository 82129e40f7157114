//! Glob matching as Redis's `stringmatchlen` does it (`KEYS`, `SCAN MATCH`,
//! `PSUBSCRIBE`): `*`, `?`, `[abc]`, `[^a-z]`, `\x` escapes; binary-safe.

/// True when `s` matches `pattern`.
pub fn glob_match(pattern: &[u8], s: &[u8]) -> bool {
    glob(pattern, s, false, 0)
}

/// Case-insensitive variant.
pub fn glob_match_nocase(pattern: &[u8], s: &[u8]) -> bool {
    glob(pattern, s, true, 0)
}

fn eq(a: u8, b: u8, nocase: bool) -> bool {
    if nocase {
        a.eq_ignore_ascii_case(&b)
    } else {
        a == b
    }
}

fn glob(mut p: &[u8], mut s: &[u8], nocase: bool, depth: usize) -> bool {
    // Redis caps recursion the same way (a pattern of many stars would
    // otherwise be exponential).
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
                        let (mut start, mut end) = (p[0], p[2]);
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        let c = if nocase {
                            s[0].to_ascii_lowercase()
                        } else {
                            s[0]
                        };
                        let (st, en) = if nocase {
                            (start.to_ascii_lowercase(), end.to_ascii_lowercase())
                        } else {
                            (start, end)
                        };
                        p = &p[2..];
                        if c >= st && c <= en {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match(b"*", b""));
        assert!(glob_match(b"h?llo", b"hello"));
        assert!(glob_match(b"h*llo", b"heeeello"));
        assert!(glob_match(b"h[ae]llo", b"hallo"));
        assert!(!glob_match(b"h[^e]llo", b"hello"));
        assert!(glob_match(b"h[a-b]llo", b"hbllo"));
        assert!(glob_match(b"a\\*b", b"a*b"));
        assert!(!glob_match(b"a\\*b", b"axb"));
        assert!(glob_match(b"user:*:name", b"user:\x00\r\n:name"));
        assert!(!glob_match(b"abc", b"ab"));
        assert!(glob_match_nocase(b"ABC*", b"abcdef"));
    }
}
