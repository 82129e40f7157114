//! A stream node as Redis's listpack: the exact bytes Redis would hold
//! (for `RDB_TYPE_STREAM_LISTPACKS_2` and `DUMP`), the reverse with
//! `streamValidateListpackIntegrity`'s checks and more, and the element
//! size rules Redis's node boundaries depend on.
//!
//! Listpack (`listpack.c`): `<total u32 LE> <count u16 LE> <element>* 0xFF`,
//! an element being `<encoding+data> <backlen>`. A string that
//! `lpStringToInt64` accepts (canonical decimal `i64`) is stored as the
//! smallest of the 7-bit unsigned, 13/16/24/32/64-bit signed integer
//! encodings; other strings take a 1 (len < 64), 2 (< 4096) or 5-byte
//! header. The backlen is the size of encoding+data in 7-bit groups (1..=5
//! bytes). The stream crate keeps its own copy of these few rules (the rdb
//! crate's are private to it, and neither crate depends on the other).
//!
//! # Hostile input
//! [`node_from_listpack`] reads bytes from a file or a `RESTORE` payload:
//! every length is checked against the buffer before use, counts never
//! size an allocation, and any inconsistency is an `Err`.

use super::node::{Node, FLAG_SAMEFIELDS};
use super::StreamId;

/// `<total-bytes u32> <num-elements u16>`.
pub(crate) const LP_HEADER_SIZE: usize = 6;
const LP_EOF: u8 = 0xFF;

/// Strict decimal `i64` as `lpStringToInt64` accepts it: no `+`, no
/// leading zeros, no `-0`, no spaces, at most 20 bytes.
pub(crate) fn lp_string_to_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((d - b'0') as u64)?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            return None;
        }
        Some((v as i64).wrapping_neg())
    } else {
        i64::try_from(v).ok()
    }
}

fn backlen_size(l: usize) -> usize {
    if l <= 127 {
        1
    } else if l < 16383 {
        2
    } else if l < 2_097_151 {
        3
    } else if l < 268_435_455 {
        4
    } else {
        5
    }
}

fn int_encoding_size(v: i64) -> usize {
    if (0..=127).contains(&v) {
        1
    } else if (-4096..=4095).contains(&v) {
        2
    } else if (-32768..=32767).contains(&v) {
        3
    } else if (-8_388_608..=8_388_607).contains(&v) {
        4
    } else if (-2_147_483_648..=2_147_483_647).contains(&v) {
        5
    } else {
        9
    }
}

/// Bytes an integer element takes in a listpack, backlen included.
pub(crate) fn lp_int_size(v: i64) -> usize {
    let e = int_encoding_size(v);
    e + backlen_size(e)
}

/// Bytes a string element takes in a listpack, backlen included (as an
/// integer if it is one).
pub(crate) fn lp_str_size(s: &[u8]) -> usize {
    if let Some(v) = lp_string_to_i64(s) {
        return lp_int_size(v);
    }
    let e = if s.len() < 64 {
        1 + s.len()
    } else if s.len() < 4096 {
        2 + s.len()
    } else {
        5 + s.len()
    };
    e + backlen_size(e)
}

fn push_backlen(buf: &mut Vec<u8>, l: usize) {
    let n = backlen_size(l);
    for i in (0..n).rev() {
        let mut b = ((l >> (7 * i)) & 127) as u8;
        if i + 1 != n {
            b |= 128;
        }
        // The first byte written holds the highest bits; every byte but
        // that first one has its high bit set (`lpEncodeBacklen`).
        buf.push(b);
    }
}

fn push_int(buf: &mut Vec<u8>, v: i64) {
    let start = buf.len();
    match int_encoding_size(v) {
        1 => buf.push(v as u8),
        2 => {
            let u = (v as u64) & 0x1FFF;
            buf.push(0xC0 | (u >> 8) as u8);
            buf.push(u as u8);
        }
        3 => {
            buf.push(0xF1);
            buf.extend_from_slice(&(v as i16).to_le_bytes());
        }
        4 => {
            buf.push(0xF2);
            buf.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        }
        5 => {
            buf.push(0xF3);
            buf.extend_from_slice(&(v as i32).to_le_bytes());
        }
        _ => {
            buf.push(0xF4);
            buf.extend_from_slice(&v.to_le_bytes());
        }
    }
    let l = buf.len() - start;
    push_backlen(buf, l);
}

fn push_str(buf: &mut Vec<u8>, s: &[u8]) {
    if let Some(v) = lp_string_to_i64(s) {
        return push_int(buf, v);
    }
    let start = buf.len();
    let len = s.len();
    if len < 64 {
        buf.push(0x80 | len as u8);
    } else if len < 4096 {
        buf.push(0xE0 | (len >> 8) as u8);
        buf.push(len as u8);
    } else {
        buf.push(0xF0);
        buf.extend_from_slice(&(len as u32).to_le_bytes());
    }
    buf.extend_from_slice(s);
    let l = buf.len() - start;
    push_backlen(buf, l);
}

/// The listpack Redis holds for this node (`master` is the node's key).
pub fn node_to_listpack(master: StreamId, node: &Node) -> Vec<u8> {
    let mut buf = Vec::with_capacity(node.lp_bytes());
    buf.extend_from_slice(&[0; LP_HEADER_SIZE]);
    let mut count = 0usize;
    push_int(&mut buf, node.live() as i64);
    push_int(&mut buf, node.deleted() as i64);
    push_int(&mut buf, node.master_fields().len() as i64);
    count += 3;
    for f in node.master_fields() {
        push_str(&mut buf, f);
        count += 1;
    }
    push_int(&mut buf, 0);
    count += 1;
    let mut pos = node.entries_start();
    while let Some(e) = node.entry_at(master, pos) {
        let same = e.flags & FLAG_SAMEFIELDS != 0;
        push_int(&mut buf, e.flags as i64);
        push_int(&mut buf, e.id.ms.wrapping_sub(master.ms) as i64);
        push_int(&mut buf, e.id.seq.wrapping_sub(master.seq) as i64);
        count += 3;
        let mut lp_count = e.nfields as i64 + 3;
        if !same {
            push_int(&mut buf, e.nfields as i64);
            count += 1;
            lp_count += e.nfields as i64 + 1;
        }
        for (f, v) in node.pairs(&e) {
            if !same {
                push_str(&mut buf, f);
                count += 1;
            }
            push_str(&mut buf, v);
            count += 1;
        }
        push_int(&mut buf, lp_count);
        count += 1;
        pos = e.end;
    }
    buf.push(LP_EOF);
    let total = buf.len() as u32;
    buf[0..4].copy_from_slice(&total.to_le_bytes());
    let numele = count.min(u16::MAX as usize) as u16;
    buf[4..6].copy_from_slice(&numele.to_le_bytes());
    debug_assert_eq!(buf.len(), node.lp_bytes());
    buf
}

/// Why a listpack is not a valid stream node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListpackError {
    /// The listpack framing itself is broken (header, an element, a
    /// backlen, the terminator), at this byte offset.
    Malformed(usize),
    /// The elements do not form a stream node (master entry, entry
    /// layout, flags, IDs, counts).
    BadNode(&'static str),
}

impl std::fmt::Display for ListpackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListpackError::Malformed(at) => write!(f, "malformed listpack at byte {at}"),
            ListpackError::BadNode(why) => write!(f, "invalid stream node: {why}"),
        }
    }
}

impl std::error::Error for ListpackError {}

/// One listpack element.
#[derive(Clone, Copy)]
enum Elem<'a> {
    Int(i64),
    Str(&'a [u8]),
}

/// Walks the elements of a listpack, checking each one's framing.
struct Reader<'a> {
    lp: &'a [u8],
    pos: usize,
    seen: usize,
}

impl<'a> Reader<'a> {
    fn new(lp: &'a [u8]) -> Result<Self, ListpackError> {
        if lp.len() < LP_HEADER_SIZE + 1 {
            return Err(ListpackError::Malformed(0));
        }
        let total = u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]) as usize;
        if total != lp.len() || lp[lp.len() - 1] != LP_EOF {
            return Err(ListpackError::Malformed(0));
        }
        Ok(Reader {
            lp,
            pos: LP_HEADER_SIZE,
            seen: 0,
        })
    }

    fn at_end(&self) -> bool {
        self.lp[self.pos] == LP_EOF
    }

    fn need(&self, n: usize) -> Result<&'a [u8], ListpackError> {
        // The terminator is not data: an element must end before it.
        let end = self
            .pos
            .checked_add(n)
            .ok_or(ListpackError::Malformed(self.pos))?;
        if end > self.lp.len() - 1 {
            return Err(ListpackError::Malformed(self.pos));
        }
        Ok(&self.lp[self.pos..end])
    }

    fn next(&mut self) -> Result<Elem<'a>, ListpackError> {
        let at = self.pos;
        let b = self.lp[at];
        let bad = ListpackError::Malformed(at);
        let (elem, enc_len) = if b & 0x80 == 0 {
            (Elem::Int((b & 0x7F) as i64), 1)
        } else if b & 0xC0 == 0x80 {
            let len = (b & 0x3F) as usize;
            (Elem::Str(&self.need(1 + len)?[1..]), 1 + len)
        } else if b & 0xE0 == 0xC0 {
            let e = self.need(2)?;
            let u = (((e[0] & 0x1F) as i64) << 8) | e[1] as i64;
            (Elem::Int(if u >= 1 << 12 { u - (1 << 13) } else { u }), 2)
        } else if b & 0xF0 == 0xE0 {
            let e = self.need(2)?;
            let len = (((e[0] & 0x0F) as usize) << 8) | e[1] as usize;
            (Elem::Str(&self.need(2 + len)?[2..]), 2 + len)
        } else {
            match b {
                0xF0 => {
                    let e = self.need(5)?;
                    let len = u32::from_le_bytes([e[1], e[2], e[3], e[4]]) as usize;
                    let n = len.checked_add(5).ok_or(bad)?;
                    (Elem::Str(&self.need(n)?[5..]), n)
                }
                0xF1 => {
                    let e = self.need(3)?;
                    (Elem::Int(i16::from_le_bytes([e[1], e[2]]) as i64), 3)
                }
                0xF2 => {
                    let e = self.need(4)?;
                    (
                        Elem::Int((i32::from_le_bytes([0, e[1], e[2], e[3]]) >> 8) as i64),
                        4,
                    )
                }
                0xF3 => {
                    let e = self.need(5)?;
                    (
                        Elem::Int(i32::from_le_bytes([e[1], e[2], e[3], e[4]]) as i64),
                        5,
                    )
                }
                0xF4 => {
                    let e = self.need(9)?;
                    let mut v = [0u8; 8];
                    v.copy_from_slice(&e[1..9]);
                    (Elem::Int(i64::from_le_bytes(v)), 9)
                }
                _ => return Err(bad),
            }
        };
        let bl = backlen_size(enc_len);
        self.pos += enc_len;
        let back = self.need(bl)?;
        // Decode the backlen (highest bits first, every byte but the first
        // flagged) and compare.
        let mut val = 0usize;
        for (i, &c) in back.iter().enumerate() {
            if (c & 128 == 0) != (i == 0) {
                return Err(bad);
            }
            val = (val << 7) | (c & 127) as usize;
        }
        if val != enc_len {
            return Err(bad);
        }
        self.pos += bl;
        self.seen += 1;
        Ok(elem)
    }

    fn int(&mut self, what: &'static str) -> Result<i64, ListpackError> {
        if self.at_end() {
            return Err(ListpackError::BadNode(what));
        }
        match self.next()? {
            Elem::Int(v) => Ok(v),
            // `lpGetIntegerIfValid` also accepts a string holding an
            // integer; Redis never writes one, but a valid file may.
            Elem::Str(s) => std::str::from_utf8(s)
                .ok()
                .and_then(|t| t.parse::<i64>().ok())
                .filter(|v| lp_string_to_i64(s) == Some(*v))
                .ok_or(ListpackError::BadNode(what)),
        }
    }
}

fn itoa_buf(v: i64) -> ([u8; 20], usize) {
    let mut out = [0u8; 20];
    let mut tmp = [0u8; 20];
    let neg = v < 0;
    let mut u = v.unsigned_abs();
    let mut n = 0;
    loop {
        tmp[n] = b'0' + (u % 10) as u8;
        u /= 10;
        n += 1;
        if u == 0 {
            break;
        }
    }
    let mut k = 0;
    if neg {
        out[0] = b'-';
        k = 1;
    }
    for i in 0..n {
        out[k + i] = tmp[n - 1 - i];
    }
    (out, k + n)
}

/// Text of one element, owned when it was an integer.
fn elem_text(e: Elem<'_>) -> std::borrow::Cow<'_, [u8]> {
    match e {
        Elem::Str(s) => std::borrow::Cow::Borrowed(s),
        Elem::Int(v) => {
            let (b, n) = itoa_buf(v);
            std::borrow::Cow::Owned(b[..n].to_vec())
        }
    }
}

/// Reads a node listpack from an RDB or `RESTORE` payload. `master` is the
/// node's radix-tree key. Checks, beyond the listpack framing: the master
/// entry (`count`, `deleted`, field count, fields, the 0 terminator), every
/// entry's layout (flags 0..=3, deltas, field count, `lp-count`), IDs
/// strictly increasing and not below `master`, `count`/`deleted` equal to
/// the flags seen, at least one entry, and nothing after the last entry.
pub fn node_from_listpack(master: StreamId, lp: &[u8]) -> Result<Node, ListpackError> {
    let mut r = Reader::new(lp)?;
    let bad = ListpackError::BadNode;
    let count = r.int("master count")?;
    let deleted = r.int("master deleted count")?;
    let nfields = r.int("master field count")?;
    if count < 0 || deleted < 0 || nfields < 0 {
        return Err(bad("negative master entry count"));
    }
    // Each field takes at least two bytes: the count cannot outgrow the
    // buffer, so it never sizes anything large.
    if nfields as u64 > lp.len() as u64 / 2 {
        return Err(bad("master field count larger than the listpack"));
    }
    let mut master_fields: Vec<std::borrow::Cow<'_, [u8]>> = Vec::with_capacity(nfields as usize);
    for _ in 0..nfields {
        if r.at_end() {
            return Err(bad("master fields cut short"));
        }
        master_fields.push(elem_text(r.next()?));
    }
    if r.int("master terminator")? != 0 {
        return Err(bad("master terminator is not 0"));
    }
    let refs: Vec<&[u8]> = master_fields.iter().map(|c| &c[..]).collect();
    let mut node = Node::from_master_fields(&refs, master);
    let mut prev: Option<StreamId> = None;
    let mut field_buf: Vec<std::borrow::Cow<'_, [u8]>> = Vec::new();
    while !r.at_end() {
        let flags = r.int("entry flags")?;
        if !(0..=3).contains(&flags) {
            return Err(bad("unknown entry flags"));
        }
        let flags = flags as u8;
        let ms = master.ms.wrapping_add(r.int("entry ms delta")? as u64);
        let seq = master.seq.wrapping_add(r.int("entry seq delta")? as u64);
        let id = StreamId::new(ms, seq);
        if id < master || prev.is_some_and(|p| id <= p) {
            return Err(bad("entry IDs not increasing from the master ID"));
        }
        if prev.is_none() && id != master {
            return Err(bad("first entry ID is not the node's key"));
        }
        prev = Some(id);
        let same = flags & FLAG_SAMEFIELDS != 0;
        let n = if same {
            nfields
        } else {
            let n = r.int("entry field count")?;
            if n < 0 || n as u64 > lp.len() as u64 / 4 {
                return Err(bad("entry field count out of range"));
            }
            n
        };
        field_buf.clear();
        for _ in 0..n {
            if !same {
                if r.at_end() {
                    return Err(bad("entry cut short"));
                }
                field_buf.push(elem_text(r.next()?));
            }
            if r.at_end() {
                return Err(bad("entry cut short"));
            }
            field_buf.push(elem_text(r.next()?));
        }
        let mut expect = n + 3;
        if !same {
            expect += n + 1;
        }
        if r.int("entry lp-count")? != expect {
            return Err(bad("entry lp-count does not match its fields"));
        }
        if same {
            let pairs = refs.iter().zip(field_buf.iter()).map(|(f, v)| (*f, &v[..]));
            node.push_entry(master, id, flags, n as usize, pairs);
        } else {
            let pairs = field_buf.chunks_exact(2).map(|p| (&p[0][..], &p[1][..]));
            node.push_entry(master, id, flags, n as usize, pairs);
        }
    }
    if r.pos != lp.len() - 1 {
        return Err(ListpackError::Malformed(r.pos));
    }
    let numele = u16::from_le_bytes([lp[4], lp[5]]) as usize;
    if numele != u16::MAX as usize && numele != r.seen {
        return Err(ListpackError::Malformed(4));
    }
    if prev.is_none() {
        return Err(bad("node without entries"));
    }
    if node.live() != count as u64 || node.deleted() != deleted as u64 {
        return Err(bad("master counts do not match the entries' flags"));
    }
    node.shrink();
    Ok(node)
}
