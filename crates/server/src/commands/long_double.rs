//! `INCRBYFLOAT` arithmetic exactly as Redis does it on x86-64: both
//! operands parsed with `strtold` into an 80-bit x87 `long double` (64-bit
//! mantissa), added with one rounding, printed with `"%.17Lf"` and trailing
//! zeros removed. With `f64` instead, `3000 + 0.1` prints `3000.1` where
//! Redis prints `3000.10000000000000009`, and large results lose digits.
//!
//! Rust has no 80-bit float, so values are kept as `mantissa * 2^exp` and
//! every step (decimal parsing, the addition, the `%.17Lf` digits) is done
//! exactly on big integers and rounded once, half to even, as the FPU and
//! glibc do. Operands are short, so the big integers stay small.

use std::cmp::Ordering;

/// An unsigned big integer, little-endian 32-bit limbs, no leading zeros.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn zero() -> Big {
        Big(Vec::new())
    }
    fn from_u128(mut v: u128) -> Big {
        let mut l = Vec::new();
        while v > 0 {
            l.push(v as u32);
            v >>= 32;
        }
        Big(l)
    }
    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }
    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }
    fn bits(&self) -> u64 {
        match self.0.last() {
            None => 0,
            Some(&top) => (self.0.len() as u64 - 1) * 32 + (32 - top.leading_zeros()) as u64,
        }
    }
    fn bit(&self, i: u64) -> bool {
        let (w, b) = ((i / 32) as usize, i % 32);
        self.0.get(w).is_some_and(|x| x >> b & 1 == 1)
    }
    /// Whether any bit below `i` is set.
    fn any_below(&self, i: u64) -> bool {
        let (w, b) = ((i / 32) as usize, i % 32);
        self.0.iter().take(w).any(|&x| x != 0)
            || (b > 0 && self.0.get(w).is_some_and(|&x| x & ((1u32 << b) - 1) != 0))
    }
    fn mul_add_small(&mut self, m: u32, a: u32) {
        let mut carry = a as u64;
        for l in self.0.iter_mut() {
            let v = *l as u64 * m as u64 + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
    }
    fn mul_pow10(&mut self, mut n: u32) {
        while n >= 9 {
            self.mul_add_small(1_000_000_000, 0);
            n -= 9;
        }
        if n > 0 {
            self.mul_add_small(10u32.pow(n), 0);
        }
        self.trim();
    }
    fn shl(&self, n: u64) -> Big {
        if self.is_zero() {
            return Big::zero();
        }
        let (w, b) = ((n / 32) as usize, n % 32);
        let mut l = vec![0u32; w];
        let mut carry = 0u32;
        for &x in &self.0 {
            if b == 0 {
                l.push(x);
            } else {
                l.push(x << b | carry);
                carry = x >> (32 - b);
            }
        }
        if carry > 0 {
            l.push(carry);
        }
        Big(l)
    }
    fn shr(&self, n: u64) -> Big {
        let (w, b) = ((n / 32) as usize, n % 32);
        if w >= self.0.len() {
            return Big::zero();
        }
        let src = &self.0[w..];
        let mut l = Vec::with_capacity(src.len());
        for i in 0..src.len() {
            let lo = src[i] >> b;
            let hi = if b > 0 && i + 1 < src.len() {
                src[i + 1] << (32 - b)
            } else {
                0
            };
            l.push(lo | hi);
        }
        let mut r = Big(l);
        r.trim();
        r
    }
    fn cmp(&self, o: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&o.0.len())
            .then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
    }
    fn add(&self, o: &Big) -> Big {
        let mut l = Vec::with_capacity(self.0.len().max(o.0.len()) + 1);
        let mut carry = 0u64;
        for i in 0..self.0.len().max(o.0.len()) {
            let v = *self.0.get(i).unwrap_or(&0) as u64 + *o.0.get(i).unwrap_or(&0) as u64 + carry;
            l.push(v as u32);
            carry = v >> 32;
        }
        if carry > 0 {
            l.push(carry as u32);
        }
        Big(l)
    }
    /// `self - o`, which must not be negative.
    fn sub(&self, o: &Big) -> Big {
        let mut l = Vec::with_capacity(self.0.len());
        let mut borrow = 0i64;
        for i in 0..self.0.len() {
            let mut v = self.0[i] as i64 - *o.0.get(i).unwrap_or(&0) as i64 - borrow;
            borrow = 0;
            if v < 0 {
                v += 1 << 32;
                borrow = 1;
            }
            l.push(v as u32);
        }
        let mut r = Big(l);
        r.trim();
        r
    }
    /// Floor division by `d`; also whether the remainder is non-zero.
    /// The quotient must fit in 128 bits.
    fn div(&self, d: &Big) -> (u128, bool) {
        let mut rem = self.clone();
        let mut q = 0u128;
        if rem.bits() >= d.bits() {
            let top = rem.bits() - d.bits();
            for i in (0..=top).rev() {
                let s = d.shl(i);
                if rem.cmp(&s) != Ordering::Less {
                    rem = rem.sub(&s);
                    q |= 1u128 << i;
                }
            }
        }
        (q, !rem.is_zero())
    }
    fn to_decimal(&self) -> String {
        let mut limbs = self.0.clone();
        let mut chunks = Vec::new();
        while !limbs.is_empty() {
            let mut r = 0u64;
            for l in limbs.iter_mut().rev() {
                let v = (r << 32) | *l as u64;
                *l = (v / 1_000_000_000) as u32;
                r = v % 1_000_000_000;
            }
            chunks.push(r as u32);
            while limbs.last() == Some(&0) {
                limbs.pop();
            }
        }
        let mut s = chunks.pop().map_or("0".to_string(), |c| c.to_string());
        for c in chunks.iter().rev() {
            s.push_str(&format!("{c:09}"));
        }
        s
    }
}

/// Largest binary exponent of a finite x87 long double (`LDBL_MAX_EXP`).
const MAX_EXP: i64 = 16384;
/// Smallest exponent of a normal long double (`LDBL_MIN_EXP`).
const MIN_EXP: i64 = -16381;

/// A finite 80-bit long double: `(-1)^neg * mant * 2^exp`, `mant` normalised
/// to its top bit (or zero).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LongDouble {
    neg: bool,
    mant: u64,
    exp: i64,
}

impl LongDouble {
    pub const ZERO: LongDouble = LongDouble {
        neg: false,
        mant: 0,
        exp: 0,
    };

    /// Rounds `n * 2^exp` (plus a sticky bit for lost lower bits) to 64
    /// mantissa bits, half to even. `None` on overflow.
    fn round(neg: bool, n: &Big, exp: i64, sticky: bool) -> Option<LongDouble> {
        if n.is_zero() {
            return Some(LongDouble { neg, ..Self::ZERO });
        }
        let b = n.bits();
        let (mut mant, mut exp) = if b <= 64 {
            (n.shl(64 - b), exp - (64 - b) as i64)
        } else {
            (n.shr(b - 64), exp + (b - 64) as i64)
        };
        if b > 64 {
            let shift = b - 64;
            let half = n.bit(shift - 1);
            let rest = sticky || n.any_below(shift - 1);
            if half && (rest || mant.bit(0)) {
                mant = mant.add(&Big::from_u128(1));
                if mant.bits() > 64 {
                    mant = mant.shr(1);
                    exp += 1;
                }
            }
        }
        let m = mant
            .0
            .iter()
            .rev()
            .fold(0u64, |acc, &l| (acc << 32) | l as u64);
        // The value is m * 2^exp with m in [2^63, 2^64): its binary exponent
        // in C's frexp sense is exp + 64.
        if exp + 64 > MAX_EXP {
            return None;
        }
        if exp + 64 < MIN_EXP - 63 {
            // Far below even the subnormals: zero.
            return Some(LongDouble { neg, ..Self::ZERO });
        }
        Some(LongDouble { neg, mant: m, exp })
    }

    /// `strtold` of a decimal number (`[+-]digits[.digits][e[+-]digits]`),
    /// as Redis's `string2ld` accepts it; `None` when not a valid finite
    /// number (overflow, underflow to zero, NaN, trailing garbage). `inf`
    /// and hexadecimal forms come through `fallback` as an `f64`.
    pub fn parse(s: &[u8], fallback: Option<f64>) -> Option<LongDouble> {
        if s.is_empty() || s.len() >= 5 * 1024 {
            return None;
        }
        let text = std::str::from_utf8(s).ok()?;
        let (neg, body) = match text.as_bytes()[0] {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        let lower = body.to_ascii_lowercase();
        if lower.starts_with("0x") || lower.starts_with("inf") || lower.starts_with("nan") {
            return Self::from_f64(fallback?);
        }
        let (mant_s, exp_s) = match lower.find('e') {
            Some(i) => (&body[..i], Some(&body[i + 1..])),
            None => (body, None),
        };
        let (int_s, frac_s) = mant_s.split_once('.').unwrap_or((mant_s, ""));
        if (int_s.is_empty() && frac_s.is_empty())
            || !int_s
                .bytes()
                .chain(frac_s.bytes())
                .all(|c| c.is_ascii_digit())
        {
            return None;
        }
        let mut exp10: i64 = match exp_s {
            None => 0,
            Some(e) => {
                let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
                if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
                    return None;
                }
                // Huge exponents saturate; the range checks below decide.
                let v: i64 = digits.parse().unwrap_or(1_000_000);
                let v = v.min(1_000_000);
                if e.starts_with('-') {
                    -v
                } else {
                    v
                }
            }
        };
        let mut d = Big::zero();
        for c in int_s.bytes().chain(frac_s.bytes()) {
            d.mul_add_small(10, (c - b'0') as u32);
        }
        d.trim();
        exp10 -= frac_s.len() as i64;
        if d.is_zero() {
            return Some(LongDouble { neg, ..Self::ZERO });
        }
        // Out of range whatever the digits: let strtold's ERANGE show.
        let digits = d.to_decimal().len() as i64;
        if digits + exp10 > 4934 {
            return None;
        }
        if digits + exp10 < -4952 {
            return None;
        }
        let r = if exp10 >= 0 {
            let mut n = d;
            n.mul_pow10(exp10 as u32);
            Self::round(neg, &n, 0, false)?
        } else {
            let mut den = Big::from_u128(1);
            den.mul_pow10((-exp10) as u32);
            // Scale so the quotient has ~67 significant bits (it must fit
            // in 128): up when the digits are short, down when they are
            // long (`922337203685477580892233720368547758061.50`).
            let k = 66 + den.bits() as i64 - d.bits() as i64 + 1;
            let (q, inexact) = if k >= 0 {
                d.shl(k as u64).div(&den)
            } else {
                d.div(&den.shl((-k) as u64))
            };
            Self::round(neg, &Big::from_u128(q), -k, inexact)?
        };
        (r.mant != 0).then_some(r)
    }

    pub fn from_f64(v: f64) -> Option<LongDouble> {
        if !v.is_finite() {
            return None;
        }
        if v == 0.0 {
            return Some(LongDouble {
                neg: v.is_sign_negative(),
                ..Self::ZERO
            });
        }
        let bits = v.to_bits();
        let e = ((bits >> 52) & 0x7ff) as i64;
        let f = bits & ((1 << 52) - 1);
        let (m, e) = if e == 0 {
            (f, -1074)
        } else {
            (f | 1 << 52, e - 1075)
        };
        Self::round(v < 0.0, &Big::from_u128(m as u128), e, false)
    }

    /// The exactly rounded sum; `None` when it overflows (Redis's "would
    /// produce NaN or Infinity").
    pub fn checked_add(self, o: LongDouble) -> Option<LongDouble> {
        if self.mant == 0 {
            return Some(if o.mant == 0 {
                LongDouble {
                    neg: self.neg && o.neg,
                    ..Self::ZERO
                }
            } else {
                o
            });
        }
        if o.mant == 0 {
            return Some(self);
        }
        let base = self.exp.min(o.exp);
        let a = Big::from_u128(self.mant as u128).shl((self.exp - base) as u64);
        let b = Big::from_u128(o.mant as u128).shl((o.exp - base) as u64);
        if self.neg == o.neg {
            return Self::round(self.neg, &a.add(&b), base, false);
        }
        match a.cmp(&b) {
            Ordering::Equal => Some(Self::ZERO),
            Ordering::Greater => Self::round(self.neg, &a.sub(&b), base, false),
            Ordering::Less => Self::round(o.neg, &b.sub(&a), base, false),
        }
    }

    /// `"%.17Lf"` with trailing zeros (and a bare `.`) removed and `-0`
    /// printed as `0`: Redis's `ld2string(..., LD_STR_HUMAN)`.
    pub fn to_human_string(self) -> String {
        // round(|v| * 10^17), half to even.
        let mut n = Big::from_u128(self.mant as u128);
        n.mul_pow10(17);
        let scaled = if self.exp >= 0 {
            n.shl(self.exp as u64)
        } else {
            let s = (-self.exp) as u64;
            let mut q = n.shr(s);
            if s >= 1 && n.bit(s - 1) && (n.any_below(s - 1) || q.bit(0)) {
                q = q.add(&Big::from_u128(1));
            }
            q
        };
        let digits = scaled.to_decimal();
        let digits = format!("{digits:0>18}");
        let (int, frac) = digits.split_at(digits.len() - 17);
        let frac = frac.trim_end_matches('0');
        let mut s = String::new();
        if self.neg {
            s.push('-');
        }
        s.push_str(int);
        if !frac.is_empty() {
            s.push('.');
            s.push_str(frac);
        }
        if s == "-0" {
            s = "0".into();
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::LongDouble;

    fn incr(cur: &str, by: &str) -> Option<String> {
        let a = LongDouble::parse(cur.as_bytes(), cur.parse().ok())?;
        let b = LongDouble::parse(by.as_bytes(), by.parse().ok())?;
        Some(a.checked_add(b)?.to_human_string())
    }

    /// Every expected string was produced by redis-server 7.0.15 on x86-64.
    #[test]
    fn incrbyfloat_matches_redis_long_double() {
        assert_eq!(incr("10.50", "0.1").unwrap(), "10.6");
        assert_eq!(incr("5.0e3", "2.0e2").unwrap(), "5200");
        assert_eq!(incr("3000", "0.1").unwrap(), "3000.10000000000000009");
        assert_eq!(
            incr("0", "1.23456789012345678901").unwrap(),
            "1.23456789012345679"
        );
        assert_eq!(incr("0", "5.0e-10").unwrap(), "0.0000000005");
        assert_eq!(incr("0.0000000005", "-5.0e-10").unwrap(), "0");
        assert_eq!(incr("0.1", "0.2").unwrap(), "0.3");
        assert_eq!(incr("0", "-0.1").unwrap(), "-0.1");
        assert_eq!(incr("0", "-1e-30").unwrap(), "0");
        assert_eq!(incr("5200", "1e-30").unwrap(), "5200");
        assert_eq!(
            incr("0", "1.7976931348623157e308").unwrap()[..20],
            *"17976931348623156999"
        );
        assert!(incr("0", "1e4000")
            .unwrap()
            .starts_with("99999999999999999999654638730996237849"));
        assert_eq!(
            incr("0", "1e308").unwrap(),
            "99999999999999999996685879655845645660560099847415567207797047994921734868838061872100126921888539320446747225054013223152134749593960583597420814430196418767959100019603190778663109604507106667939153395788938914560543563061268364901618630217086589253444881623791300855757318142424510452728255046343928578048"
        );
        assert_eq!(incr("0", "1e5000"), None);
        assert_eq!(incr("0", "1e-5000"), None);
        assert_eq!(incr("0", "1e"), None);
        assert_eq!(incr("0", "."), None);
        assert_eq!(incr("0", "1.5x"), None);
    }

    /// A fraction with more than 128 bits of digits once scaled: the
    /// quotient used to overflow (found by the differential test).
    #[test]
    fn long_decimal_with_a_fraction_parses() {
        assert_eq!(
            incr("922337203685477580892233720368547758061.50", "-1.1").unwrap(),
            "922337203685477580873786976294838206464"
        );
        assert_eq!(
            incr("1234567890123456789012345678901234567890.123456789", "0.5").unwrap(),
            "1234567890123456788999898750329779388416"
        );
    }
}
