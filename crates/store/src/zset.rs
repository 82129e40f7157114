//! Sorted sets: members ordered by (score, member bytes), as Redis orders them.
//!
//! Two encodings, as in Redis 7.0:
//! - [`Listpack`]: every (score, member) pair in one byte buffer, sorted, for
//!   sets of at most `zset-max-listpack-entries` members of at most
//!   `zset-max-listpack-value` bytes. One allocation; every operation is a
//!   linear walk, which for 128 short entries beats any pointer structure.
//! - [`Skiplist`]: a member → node map (a hashbrown table of arena indices,
//!   so a member's bytes are stored once) plus Redis's skiplist with *spans*
//!   over an index arena. Spans make it an order-statistic structure: rank
//!   of a member, member at a rank and "how many scores below x" are all
//!   O(log n), so ZRANK, ZRANGE by rank and ZCOUNT never walk the set.
//!
//! A set starts as a listpack and becomes a skiplist when it outgrows the
//! limits; like Redis it never converts back by itself (only loading a file
//! or building a store destination chooses the compact form again).
//!
//! Ranges are expressed as *rank intervals*: a score or lex bound turns into
//! the number of members that sort before it, so counting, reading and
//! removing a range all share one search.

use crate::bytes::SmallBytes;
use hashbrown::HashTable;
use std::hash::BuildHasher;

/// The compact-encoding thresholds (`zset-max-listpack-*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZsetLimits {
    pub max_listpack_entries: usize,
    pub max_listpack_value: usize,
}

impl Default for ZsetLimits {
    fn default() -> Self {
        ZsetLimits {
            max_listpack_entries: 128,
            max_listpack_value: 64,
        }
    }
}

impl ZsetLimits {
    /// Whether a set of `len` members, the longest `max_member` bytes, fits
    /// the compact encoding.
    pub fn fits_listpack(&self, len: usize, max_member: usize) -> bool {
        len <= self.max_listpack_entries && max_member <= self.max_listpack_value
    }
}

/// One end of a lexicographic range (`-`, `+`, `[m`, `(m`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LexBound<'a> {
    NegInf,
    PosInf,
    Incl(&'a [u8]),
    Excl(&'a [u8]),
}

impl LexBound<'_> {
    /// Redis's `zslLexValueGteMin`: `m` is at or after this lower bound.
    pub fn admits_as_min(&self, m: &[u8]) -> bool {
        match *self {
            LexBound::NegInf => true,
            LexBound::PosInf => false,
            LexBound::Incl(b) => m >= b,
            LexBound::Excl(b) => m > b,
        }
    }
    /// Redis's `zslLexValueLteMax`: `m` is at or before this upper bound.
    pub fn admits_as_max(&self, m: &[u8]) -> bool {
        match *self {
            LexBound::NegInf => false,
            LexBound::PosInf => true,
            LexBound::Incl(b) => m <= b,
            LexBound::Excl(b) => m < b,
        }
    }
}

/// A score range with exclusive ends marked (`(1 5`, `-inf +inf`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreRange {
    pub min: f64,
    pub max: f64,
    pub minex: bool,
    pub maxex: bool,
}

impl ScoreRange {
    pub fn contains(&self, s: f64) -> bool {
        (if self.minex {
            s > self.min
        } else {
            s >= self.min
        }) && (if self.maxex {
            s < self.max
        } else {
            s <= self.max
        })
    }
}

/// (score, member) order: by score, then by member bytes (`memcmp`, the
/// shorter first on a common prefix).
#[inline]
fn before(s1: f64, m1: &[u8], s2: f64, m2: &[u8]) -> bool {
    s1 < s2 || (s1 == s2 && m1 < m2)
}

/// Appends a score as Redis 7.0 prints doubles (`%.17g`, `inf`, `-inf`):
/// in replies, in the digest and in propagated commands. Integral scores
/// (the common case) take a fast path without float formatting.
pub fn write_score(out: &mut Vec<u8>, v: f64) {
    if v.is_infinite() {
        out.extend_from_slice(if v > 0.0 { b"inf" } else { b"-inf" });
        return;
    }
    if v.is_nan() {
        out.extend_from_slice(b"nan");
        return;
    }
    if v == v.trunc() && v.abs() < 1e15 {
        if v == 0.0 && v.is_sign_negative() {
            out.extend_from_slice(b"-0");
            return;
        }
        let mut b = crate::value::itoa_buf::Buf::new();
        out.extend_from_slice(b.format(v as i64));
        return;
    }
    // Scientific form with 16 fractional digits gives the exponent after
    // rounding, which decides between the %e and %f styles of %g.
    let sci = format!("{v:.16e}");
    let (mant, exp) = sci.split_once('e').expect("exponent");
    let exp: i32 = exp.parse().expect("exponent digits");
    if !(-4..17).contains(&exp) {
        out.extend_from_slice(strip_zeros(mant).as_bytes());
        out.push(b'e');
        out.push(if exp < 0 { b'-' } else { b'+' });
        if exp.abs() < 10 {
            out.push(b'0');
        }
        out.extend_from_slice(exp.abs().to_string().as_bytes());
    } else {
        let decimals = (16 - exp).max(0) as usize;
        out.extend_from_slice(strip_zeros(&format!("{v:.decimals$}")).as_bytes());
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// [`write_score`] into a new string.
pub fn format_score(v: f64) -> String {
    let mut out = Vec::with_capacity(24);
    write_score(&mut out, v);
    String::from_utf8(out).expect("ascii")
}

/// What an insert did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Inserted {
    Added,
    /// The member was there with this other score.
    Updated(f64),
    /// The member was there with the same score: nothing changed.
    Unchanged,
}

// ---------------------------------------------------------------------------
// Listpack
// ---------------------------------------------------------------------------

/// The compact encoding: entries `[score: f64 LE][member length: LEB128][member]`
/// back to back in (score, member) order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Listpack {
    buf: Vec<u8>,
    len: u32,
}

/// A decoded listpack entry and where it sits.
#[derive(Clone, Copy)]
struct LpEntry<'a> {
    score: f64,
    member: &'a [u8],
    at: usize,
    size: usize,
}

fn varint_len(mut n: usize) -> usize {
    let mut l = 1;
    while n >= 0x80 {
        n >>= 7;
        l += 1;
    }
    l
}

impl Listpack {
    fn entry_at(&self, at: usize) -> LpEntry<'_> {
        let b = &self.buf;
        let score = f64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        let mut p = at + 8;
        let mut len = 0usize;
        let mut shift = 0;
        loop {
            let c = b[p];
            p += 1;
            len |= ((c & 0x7f) as usize) << shift;
            if c < 0x80 {
                break;
            }
            shift += 7;
        }
        LpEntry {
            score,
            member: &b[p..p + len],
            at,
            size: p + len - at,
        }
    }

    fn entries(&self) -> impl Iterator<Item = LpEntry<'_>> + '_ {
        let mut at = 0;
        std::iter::from_fn(move || {
            if at >= self.buf.len() {
                return None;
            }
            let e = self.entry_at(at);
            at += e.size;
            Some(e)
        })
    }

    fn find(&self, member: &[u8]) -> Option<LpEntry<'_>> {
        self.entries().find(|e| e.member == member)
    }

    /// Inserts a member that is not present, at its sorted place.
    fn insert_new(&mut self, member: &[u8], score: f64) {
        // Redis's listpack stores an integral score as an integer, so -0
        // comes back as 0 (a skiplist keeps the sign).
        let score = if score == 0.0 { 0.0 } else { score };
        let at = self
            .entries()
            .find(|e| before(score, member, e.score, e.member))
            .map_or(self.buf.len(), |e| e.at);
        let size = 8 + varint_len(member.len()) + member.len();
        let old = self.buf.len();
        self.buf.resize(old + size, 0);
        self.buf.copy_within(at..old, at + size);
        let dst = &mut self.buf[at..at + size];
        dst[..8].copy_from_slice(&score.to_le_bytes());
        let mut p = 8;
        let mut n = member.len();
        loop {
            let c = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                dst[p] = c;
                p += 1;
                break;
            }
            dst[p] = c | 0x80;
            p += 1;
        }
        dst[p..].copy_from_slice(member);
        self.len += 1;
    }

    fn remove_bytes(&mut self, from: usize, to: usize, n: u32) {
        self.buf.drain(from..to);
        self.len -= n;
    }

    /// The byte offset of the entry at `rank` (or the end).
    fn offset_of_rank(&self, rank: usize) -> usize {
        self.entries().nth(rank).map_or(self.buf.len(), |e| e.at)
    }
}

// ---------------------------------------------------------------------------
// Skiplist
// ---------------------------------------------------------------------------

const MAX_LEVEL: usize = 32;
/// Arena index 0 is the header; as a link it means "none".
const NONE: u32 = 0;
/// `backward` of a free arena slot.
const FREED: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Level {
    forward: u32,
    /// Nodes skipped by following `forward` (the order statistic).
    span: u32,
}

#[derive(Debug, Clone)]
struct Node {
    score: f64,
    member: SmallBytes,
    backward: u32,
    /// Level 0 inline: three nodes in four have no other level, so most
    /// nodes own no second allocation.
    level0: Level,
    upper: Vec<Level>,
}

impl Node {
    #[inline]
    fn lvl(&self, i: usize) -> Level {
        if i == 0 {
            self.level0
        } else {
            self.upper[i - 1]
        }
    }
    #[inline]
    fn lvl_mut(&mut self, i: usize) -> &mut Level {
        if i == 0 {
            &mut self.level0
        } else {
            &mut self.upper[i - 1]
        }
    }
    fn height(&self) -> usize {
        1 + self.upper.len()
    }
}

/// Redis's `zskiplist` (p = 1/4, 32 levels) with nodes in an arena, plus
/// the member → node table.
#[derive(Clone)]
pub struct Skiplist {
    nodes: Vec<Node>,
    free: Vec<u32>,
    tail: u32,
    level: usize,
    len: usize,
    index: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
    rng: u64,
}

impl std::fmt::Debug for Skiplist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for Skiplist {
    fn eq(&self, o: &Self) -> bool {
        self.len == o.len && self.iter().eq(o.iter())
    }
}

impl Default for Skiplist {
    fn default() -> Self {
        Self::new()
    }
}

impl Skiplist {
    pub fn new() -> Self {
        let header = Node {
            score: 0.0,
            member: SmallBytes::default(),
            backward: NONE,
            level0: Level::default(),
            upper: vec![Level::default(); MAX_LEVEL - 1],
        };
        Skiplist {
            nodes: vec![header],
            free: Vec::new(),
            tail: NONE,
            level: 1,
            len: 0,
            index: HashTable::new(),
            hasher: foldhash::fast::RandomState::default(),
            rng: 0x9e37_79b9_7f4a_7c15,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn random_level(&mut self) -> usize {
        // xorshift64*: Redis's p = 1/4 per extra level.
        let mut level = 1;
        loop {
            self.rng ^= self.rng >> 12;
            self.rng ^= self.rng << 25;
            self.rng ^= self.rng >> 27;
            let r = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32;
            if r & 0xffff < 0x4000 && level < MAX_LEVEL {
                level += 1;
            } else {
                return level;
            }
        }
    }

    fn node_of(&self, member: &[u8]) -> Option<u32> {
        let h = self.hasher.hash_one(member);
        let nodes = &self.nodes;
        self.index
            .find(h, |&i| nodes[i as usize].member.as_slice() == member)
            .copied()
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.node_of(member).map(|i| self.nodes[i as usize].score)
    }

    /// Adds a member known to be absent.
    fn insert_new(&mut self, member: &[u8], score: f64) {
        let mut update = [0u32; MAX_LEVEL];
        let mut rank = [0u32; MAX_LEVEL];
        let mut x = 0u32;
        for i in (0..self.level).rev() {
            rank[i] = if i == self.level - 1 { 0 } else { rank[i + 1] };
            loop {
                let l = self.nodes[x as usize].lvl(i);
                if l.forward != NONE {
                    let f = &self.nodes[l.forward as usize];
                    if before(f.score, &f.member, score, member) {
                        rank[i] += l.span;
                        x = l.forward;
                        continue;
                    }
                }
                break;
            }
            update[i] = x;
        }
        let height = self.random_level();
        if height > self.level {
            for i in self.level..height {
                rank[i] = 0;
                update[i] = 0;
                self.nodes[0].lvl_mut(i).span = self.len as u32;
            }
            self.level = height;
        }
        let node = Node {
            score,
            member: SmallBytes::new(member),
            backward: if update[0] == 0 { NONE } else { update[0] },
            level0: Level::default(),
            upper: vec![Level::default(); height - 1],
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.nodes[id as usize] = node;
                id
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        for i in 0..height {
            let u = self.nodes[update[i] as usize].lvl(i);
            let new_span = u.span - (rank[0] - rank[i]);
            *self.nodes[id as usize].lvl_mut(i) = Level {
                forward: u.forward,
                span: new_span,
            };
            *self.nodes[update[i] as usize].lvl_mut(i) = Level {
                forward: id,
                span: rank[0] - rank[i] + 1,
            };
        }
        for (i, &u) in update.iter().enumerate().take(self.level).skip(height) {
            self.nodes[u as usize].lvl_mut(i).span += 1;
        }
        let fwd = self.nodes[id as usize].level0.forward;
        if fwd != NONE {
            self.nodes[fwd as usize].backward = id;
        } else {
            self.tail = id;
        }
        self.len += 1;
        let h = self.hasher.hash_one(member);
        let (nodes, hasher) = (&self.nodes, &self.hasher);
        self.index.insert_unique(h, id, |&i| {
            hasher.hash_one(nodes[i as usize].member.as_slice())
        });
    }

    /// The nodes before (score, member) at every level.
    fn predecessors(&self, score: f64, member: &[u8]) -> [u32; MAX_LEVEL] {
        let mut update = [0u32; MAX_LEVEL];
        let mut x = 0u32;
        for i in (0..self.level).rev() {
            loop {
                let f = self.nodes[x as usize].lvl(i).forward;
                if f != NONE {
                    let n = &self.nodes[f as usize];
                    if before(n.score, &n.member, score, member) {
                        x = f;
                        continue;
                    }
                }
                break;
            }
            update[i] = x;
        }
        update
    }

    /// Unlinks node `x` given its predecessors (Redis's `zslDeleteNode`);
    /// the caller frees it and drops it from the index.
    fn unlink(&mut self, x: u32, update: &[u32; MAX_LEVEL]) {
        for (i, &u) in update.iter().enumerate().take(self.level) {
            let xl = if i < self.nodes[x as usize].height() {
                Some(self.nodes[x as usize].lvl(i))
            } else {
                None
            };
            let ul = self.nodes[u as usize].lvl_mut(i);
            match xl {
                Some(xl) if ul.forward == x => {
                    ul.span += xl.span;
                    ul.span -= 1;
                    ul.forward = xl.forward;
                }
                _ => ul.span -= 1,
            }
        }
        let fwd = self.nodes[x as usize].level0.forward;
        let back = self.nodes[x as usize].backward;
        if fwd != NONE {
            self.nodes[fwd as usize].backward = back;
        } else {
            self.tail = back;
        }
        while self.level > 1 && self.nodes[0].lvl(self.level - 1).forward == NONE {
            self.level -= 1;
        }
        self.len -= 1;
    }

    /// Frees an unlinked node and drops it from the member table.
    fn release(&mut self, x: u32) {
        let n = &mut self.nodes[x as usize];
        let member = std::mem::take(&mut n.member);
        n.upper = Vec::new();
        n.backward = FREED;
        let h = self.hasher.hash_one(member.as_slice());
        if let Ok(e) = self.index.find_entry(h, |&i| i == x) {
            e.remove();
        }
        self.free.push(x);
    }

    fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let x = self.node_of(member)?;
        let score = self.nodes[x as usize].score;
        let update = self.predecessors(score, member);
        self.unlink(x, &update);
        self.release(x);
        Some(score)
    }

    fn update_score(&mut self, x: u32, new: f64) {
        let n = &self.nodes[x as usize];
        let (back, fwd) = (n.backward, n.level0.forward);
        // Stays in place when still between its neighbours (Redis's shortcut).
        if (back == NONE || self.nodes[back as usize].score < new)
            && (fwd == NONE || self.nodes[fwd as usize].score > new)
        {
            self.nodes[x as usize].score = new;
            return;
        }
        let member = n.member.clone();
        let update = self.predecessors(n.score, &member);
        self.unlink(x, &update);
        self.release(x);
        self.insert_new(&member, new);
    }

    /// 0-based rank of a member.
    fn rank_of(&self, score: f64, member: &[u8]) -> usize {
        let mut rank = 0usize;
        let mut x = 0u32;
        for i in (0..self.level).rev() {
            loop {
                let l = self.nodes[x as usize].lvl(i);
                if l.forward != NONE {
                    let n = &self.nodes[l.forward as usize];
                    if before(n.score, &n.member, score, member) || n.member.as_slice() == member {
                        rank += l.span as usize;
                        x = l.forward;
                        if n.member.as_slice() == member {
                            return rank - 1;
                        }
                        continue;
                    }
                }
                break;
            }
        }
        unreachable!("rank_of a member not in the skiplist")
    }

    /// The node at 0-based `rank` (< len).
    fn node_at(&self, rank: usize) -> u32 {
        let target = rank + 1;
        let mut traversed = 0usize;
        let mut x = 0u32;
        for i in (0..self.level).rev() {
            loop {
                let l = self.nodes[x as usize].lvl(i);
                if l.forward != NONE && traversed + l.span as usize <= target {
                    traversed += l.span as usize;
                    x = l.forward;
                    continue;
                }
                break;
            }
            if traversed == target {
                return x;
            }
        }
        unreachable!("node_at beyond the length")
    }

    /// How many leading nodes satisfy `pred` (which must hold for a prefix
    /// of the order, as "score below x" does).
    fn count_prefix(&self, pred: impl Fn(&Node) -> bool) -> usize {
        let mut rank = 0usize;
        let mut x = 0u32;
        for i in (0..self.level).rev() {
            loop {
                let l = self.nodes[x as usize].lvl(i);
                if l.forward != NONE && pred(&self.nodes[l.forward as usize]) {
                    rank += l.span as usize;
                    x = l.forward;
                    continue;
                }
                break;
            }
        }
        rank
    }

    /// Removes the members of ranks `from..to`.
    fn remove_ranks(&mut self, from: usize, to: usize) {
        if from >= to {
            return;
        }
        let mut update = [0u32; MAX_LEVEL];
        let mut traversed = 0usize;
        let mut x = 0u32;
        for i in (0..self.level).rev() {
            loop {
                let l = self.nodes[x as usize].lvl(i);
                if l.forward != NONE && traversed + (l.span as usize) <= from {
                    traversed += l.span as usize;
                    x = l.forward;
                    continue;
                }
                break;
            }
            update[i] = x;
        }
        let mut cur = self.nodes[x as usize].level0.forward;
        for _ in from..to {
            let next = self.nodes[cur as usize].level0.forward;
            self.unlink(cur, &update);
            self.release(cur);
            cur = next;
        }
    }

    /// Visits ranks `from..to` in order (or reverse order).
    fn visit(&self, from: usize, to: usize, rev: bool, mut f: impl FnMut(&[u8], f64)) {
        if from >= to {
            return;
        }
        if rev {
            let mut x = self.node_at(to - 1);
            for _ in from..to {
                let n = &self.nodes[x as usize];
                f(&n.member, n.score);
                x = n.backward;
            }
        } else {
            let mut x = self.node_at(from);
            for _ in from..to {
                let n = &self.nodes[x as usize];
                f(&n.member, n.score);
                x = n.level0.forward;
            }
        }
    }

    fn iter(&self) -> impl Iterator<Item = (&[u8], f64)> + '_ {
        let mut x = self.nodes[0].level0.forward;
        std::iter::from_fn(move || {
            if x == NONE {
                return None;
            }
            let n = &self.nodes[x as usize];
            x = n.level0.forward;
            Some((n.member.as_slice(), n.score))
        })
    }

    fn heap_size(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + self
                .nodes
                .iter()
                .map(|n| n.member.heap_size() + n.upper.capacity() * 8)
                .sum::<usize>()
            + self.index.capacity() * 5
            + self.free.capacity() * 4
    }
}

// ---------------------------------------------------------------------------
// ZSet
// ---------------------------------------------------------------------------

/// A sorted set in either encoding.
#[derive(Debug, Clone, PartialEq)]
pub enum ZSet {
    Listpack(Listpack),
    Skiplist(Box<Skiplist>),
}

impl Default for ZSet {
    fn default() -> Self {
        ZSet::Listpack(Listpack::default())
    }
}

impl ZSet {
    /// An empty set in the compact encoding.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty set in the skiplist encoding.
    pub fn new_skiplist() -> Self {
        ZSet::Skiplist(Box::default())
    }

    /// Builds a set from (member, score) pairs (members distinct), in the
    /// encoding their count and longest member call for.
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a [u8], f64)>,
        len_hint: usize,
        max_member: usize,
        limits: &ZsetLimits,
    ) -> ZSet {
        let mut z = if limits.fits_listpack(len_hint, max_member) {
            ZSet::new()
        } else {
            ZSet::new_skiplist()
        };
        for (m, s) in pairs {
            z.insert(m, s, limits);
        }
        z
    }

    pub fn len(&self) -> usize {
        match self {
            ZSet::Listpack(l) => l.len as usize,
            ZSet::Skiplist(s) => s.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What `OBJECT ENCODING` says.
    pub fn encoding(&self) -> &'static str {
        match self {
            ZSet::Listpack(_) => "listpack",
            ZSet::Skiplist(_) => "skiplist",
        }
    }

    pub fn is_listpack(&self) -> bool {
        matches!(self, ZSet::Listpack(_))
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match self {
            ZSet::Listpack(l) => l.find(member).map(|e| e.score),
            ZSet::Skiplist(s) => s.score(member),
        }
    }

    /// Converts to the skiplist encoding (no-op if already one).
    pub fn convert_to_skiplist(&mut self) {
        if let ZSet::Listpack(l) = self {
            let mut s = Skiplist::new();
            for e in l.entries() {
                s.insert_new(e.member, e.score);
            }
            *self = ZSet::Skiplist(Box::new(s));
        }
    }

    /// Converts to the listpack encoding (no-op if already one).
    pub fn convert_to_listpack(&mut self) {
        if let ZSet::Skiplist(s) = self {
            let mut l = Listpack::default();
            for (m, sc) in s.iter() {
                // In order already: append.
                let at = l.buf.len();
                l.insert_at_end(m, sc, at);
            }
            *self = ZSet::Listpack(l);
        }
    }

    /// Sets `member`'s score, adding it if absent; converts to a skiplist
    /// first when the listpack would outgrow `limits`.
    pub fn insert(&mut self, member: &[u8], score: f64, limits: &ZsetLimits) -> Inserted {
        if let ZSet::Listpack(l) = self {
            if let Some(e) = l.find(member) {
                if e.score == score {
                    return Inserted::Unchanged;
                }
                let old = e.score;
                let (from, to) = (e.at, e.at + e.size);
                l.remove_bytes(from, to, 1);
                l.insert_new(member, score);
                return Inserted::Updated(old);
            }
            if l.len as usize >= limits.max_listpack_entries
                || member.len() > limits.max_listpack_value
            {
                self.convert_to_skiplist();
            } else {
                l.insert_new(member, score);
                return Inserted::Added;
            }
        }
        let ZSet::Skiplist(s) = self else {
            unreachable!()
        };
        match s.node_of(member) {
            Some(x) => {
                let old = s.nodes[x as usize].score;
                if old == score {
                    return Inserted::Unchanged;
                }
                s.update_score(x, score);
                Inserted::Updated(old)
            }
            None => {
                s.insert_new(member, score);
                Inserted::Added
            }
        }
    }

    /// Removes a member, returning its score.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        match self {
            ZSet::Listpack(l) => {
                let e = l.find(member)?;
                let (score, from, to) = (e.score, e.at, e.at + e.size);
                l.remove_bytes(from, to, 1);
                Some(score)
            }
            ZSet::Skiplist(s) => s.remove(member),
        }
    }

    /// A member's 0-based rank in ascending order, with its score.
    pub fn rank(&self, member: &[u8]) -> Option<(usize, f64)> {
        match self {
            ZSet::Listpack(l) => l
                .entries()
                .enumerate()
                .find(|(_, e)| e.member == member)
                .map(|(i, e)| (i, e.score)),
            ZSet::Skiplist(s) => {
                let x = s.node_of(member)?;
                let score = s.nodes[x as usize].score;
                Some((s.rank_of(score, member), score))
            }
        }
    }

    /// The member and score at a 0-based rank.
    pub fn at_rank(&self, rank: usize) -> Option<(&[u8], f64)> {
        if rank >= self.len() {
            return None;
        }
        match self {
            ZSet::Listpack(l) => l.entries().nth(rank).map(|e| (e.member, e.score)),
            ZSet::Skiplist(s) => {
                let n = &s.nodes[s.node_at(rank) as usize];
                Some((n.member.as_slice(), n.score))
            }
        }
    }

    /// Members whose score is below `x` (at or below it when `inclusive`).
    pub fn count_score_below(&self, x: f64, inclusive: bool) -> usize {
        let below = |s: f64| if inclusive { s <= x } else { s < x };
        match self {
            ZSet::Listpack(l) => l.entries().take_while(|e| below(e.score)).count(),
            ZSet::Skiplist(s) => s.count_prefix(|n| below(n.score)),
        }
    }

    /// The ranks `from..to` of the members within a score range.
    pub fn score_range_ranks(&self, r: &ScoreRange) -> (usize, usize) {
        let from = self.count_score_below(r.min, r.minex);
        let to = self.count_score_below(r.max, !r.maxex);
        (from, to.max(from))
    }

    /// The ranks `from..to` of the members within a lex range (meaningful
    /// when all scores are equal, as in Redis): the first member at or
    /// after `min`, then the run of members up to `max`.
    pub fn lex_range_ranks(&self, min: &LexBound, max: &LexBound) -> (usize, usize) {
        match self {
            ZSet::Listpack(l) => {
                let mut from = 0;
                let mut it = l.entries();
                for e in it.by_ref() {
                    if min.admits_as_min(e.member) {
                        if !max.admits_as_max(e.member) {
                            return (from, from);
                        }
                        let n = 1 + it.take_while(|e| max.admits_as_max(e.member)).count();
                        return (from, from + n);
                    }
                    from += 1;
                }
                (from, from)
            }
            ZSet::Skiplist(s) => {
                let from = s.count_prefix(|n| !min.admits_as_min(&n.member));
                let to = s.count_prefix(|n| max.admits_as_max(&n.member));
                (from, to.max(from))
            }
        }
    }

    /// Calls `f` on ranks `from..to` (clamped), ascending or, with `rev`,
    /// descending.
    pub fn visit_ranks(&self, from: usize, to: usize, rev: bool, mut f: impl FnMut(&[u8], f64)) {
        let to = to.min(self.len());
        if from >= to {
            return;
        }
        match self {
            ZSet::Listpack(l) => {
                if rev {
                    // Collect the offsets once; sets here are small.
                    let mut offs: Vec<usize> = l
                        .entries()
                        .skip(from)
                        .take(to - from)
                        .map(|e| e.at)
                        .collect();
                    offs.reverse();
                    for at in offs {
                        let e = l.entry_at(at);
                        f(e.member, e.score);
                    }
                } else {
                    for e in l.entries().skip(from).take(to - from) {
                        f(e.member, e.score);
                    }
                }
            }
            ZSet::Skiplist(s) => s.visit(from, to, rev, f),
        }
    }

    /// Removes ranks `from..to` (clamped); returns how many went.
    pub fn remove_ranks(&mut self, from: usize, to: usize) -> usize {
        let to = to.min(self.len());
        if from >= to {
            return 0;
        }
        match self {
            ZSet::Listpack(l) => {
                let a = l.offset_of_rank(from);
                let b = l.offset_of_rank(to);
                l.remove_bytes(a, b, (to - from) as u32);
            }
            ZSet::Skiplist(s) => s.remove_ranks(from, to),
        }
        to - from
    }

    /// Every (member, score) in ascending order.
    pub fn iter(&self) -> Iter<'_> {
        match self {
            ZSet::Listpack(l) => Iter::Listpack(l, 0),
            ZSet::Skiplist(s) => Iter::Skiplist(s, s.nodes[0].level0.forward),
        }
    }

    /// One step of `ZSCAN`: visits up to about `count` members from
    /// `cursor` and returns the next cursor (0: done). A listpack is
    /// returned whole, as Redis does. A skiplist's cursor is an arena slot:
    /// a node keeps its slot for life, so every member present for the
    /// whole scan is returned exactly once.
    pub fn scan<'a>(&'a self, cursor: u64, count: usize, mut f: impl FnMut(&'a [u8], f64)) -> u64 {
        match self {
            ZSet::Listpack(l) => {
                for e in l.entries() {
                    f(e.member, e.score);
                }
                0
            }
            ZSet::Skiplist(s) => {
                let mut slot = (cursor as usize).max(1);
                let mut seen = 0;
                while slot < s.nodes.len() && seen < count {
                    let n = &s.nodes[slot];
                    if n.backward != FREED {
                        f(&n.member, n.score);
                        seen += 1;
                    }
                    slot += 1;
                }
                if slot >= s.nodes.len() {
                    0
                } else {
                    slot as u64
                }
            }
        }
    }

    /// Length of the longest member (for choosing an encoding).
    pub fn max_member_len(&self) -> usize {
        self.iter().map(|(m, _)| m.len()).max().unwrap_or(0)
    }

    /// Heap bytes owned (memory accounting).
    pub fn heap_size(&self) -> usize {
        match self {
            ZSet::Listpack(l) => l.buf.capacity(),
            ZSet::Skiplist(s) => std::mem::size_of::<Skiplist>() + s.heap_size(),
        }
    }
}

/// Ascending iteration over either encoding (cheap to clone).
#[derive(Clone)]
pub enum Iter<'a> {
    Listpack(&'a Listpack, usize),
    Skiplist(&'a Skiplist, u32),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], f64);
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Listpack(l, at) => {
                if *at >= l.buf.len() {
                    return None;
                }
                let e = l.entry_at(*at);
                *at += e.size;
                Some((e.member, e.score))
            }
            Iter::Skiplist(s, x) => {
                if *x == NONE {
                    return None;
                }
                let n = &s.nodes[*x as usize];
                *x = n.level0.forward;
                Some((n.member.as_slice(), n.score))
            }
        }
    }
}

impl Listpack {
    fn insert_at_end(&mut self, member: &[u8], score: f64, _at: usize) {
        // Appending keeps order when the caller feeds sorted pairs.
        self.buf.extend_from_slice(&score.to_le_bytes());
        let mut n = member.len();
        loop {
            let c = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                self.buf.push(c);
                break;
            }
            self.buf.push(c | 0x80);
        }
        self.buf.extend_from_slice(member);
        self.len += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeSet, HashMap};

    /// The model: member → score, plus the (score, member) order.
    #[derive(Default)]
    struct Model {
        scores: HashMap<Vec<u8>, f64>,
        order: BTreeSet<(OrdF64, Vec<u8>)>,
    }

    #[derive(Clone, Copy, PartialEq, Debug)]
    struct OrdF64(f64);
    impl Eq for OrdF64 {}
    impl PartialOrd for OrdF64 {
        fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
            Some(self.cmp(o))
        }
    }
    impl Ord for OrdF64 {
        fn cmp(&self, o: &Self) -> std::cmp::Ordering {
            self.0.partial_cmp(&o.0).expect("no NaN")
        }
    }

    impl Model {
        fn insert(&mut self, m: &[u8], s: f64) {
            if let Some(old) = self.scores.insert(m.to_vec(), s) {
                self.order.remove(&(OrdF64(old), m.to_vec()));
            }
            self.order.insert((OrdF64(s), m.to_vec()));
        }
        fn remove(&mut self, m: &[u8]) -> Option<f64> {
            let s = self.scores.remove(m)?;
            self.order.remove(&(OrdF64(s), m.to_vec()));
            Some(s)
        }
        fn sorted(&self) -> Vec<(Vec<u8>, f64)> {
            self.order.iter().map(|(s, m)| (m.clone(), s.0)).collect()
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8, i8),
        Remove(u8),
        RemoveRanks(u8, u8),
        RemoveScores(i8, i8, bool, bool),
    }

    fn member(i: u8) -> Vec<u8> {
        // Some members are long enough to force the skiplist encoding.
        if i.is_multiple_of(37) {
            vec![b'x'; 70 + i as usize % 5]
        } else {
            format!("m{i}").into_bytes()
        }
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (any::<u8>(), -20i8..20).prop_map(|(m, s)| Op::Insert(m, s)),
            2 => any::<u8>().prop_map(Op::Remove),
            1 => (0u8..40, 0u8..40).prop_map(|(a, b)| Op::RemoveRanks(a, b)),
            1 => (-20i8..20, -20i8..20, any::<bool>(), any::<bool>())
                .prop_map(|(a, b, x, y)| Op::RemoveScores(a, b, x, y)),
        ]
    }

    fn check(z: &ZSet, m: &Model) {
        let sorted = m.sorted();
        assert_eq!(z.len(), sorted.len());
        let got: Vec<(Vec<u8>, f64)> = z.iter().map(|(a, b)| (a.to_vec(), b)).collect();
        assert_eq!(got, sorted);
        for (i, (mem, s)) in sorted.iter().enumerate() {
            assert_eq!(z.rank(mem), Some((i, *s)));
            assert_eq!(z.at_rank(i), Some((mem.as_slice(), *s)));
            assert_eq!(z.score(mem), Some(*s));
        }
        // Reverse visits agree with the forward order.
        let mut rev = Vec::new();
        z.visit_ranks(0, z.len(), true, |m, s| rev.push((m.to_vec(), s)));
        rev.reverse();
        assert_eq!(rev, sorted);
        for x in -21..21 {
            let x = x as f64;
            let below = sorted.iter().filter(|(_, s)| *s < x).count();
            let at_or_below = sorted.iter().filter(|(_, s)| *s <= x).count();
            assert_eq!(z.count_score_below(x, false), below);
            assert_eq!(z.count_score_below(x, true), at_or_below);
        }
    }

    fn run(ops: Vec<Op>, limits: ZsetLimits) {
        let mut z = ZSet::new();
        let mut m = Model::default();
        for op in ops {
            match op {
                Op::Insert(i, s) => {
                    let mem = member(i);
                    let expect = match m.scores.get(&mem) {
                        None => Inserted::Added,
                        Some(&o) if o == s as f64 => Inserted::Unchanged,
                        Some(&o) => Inserted::Updated(o),
                    };
                    assert_eq!(z.insert(&mem, s as f64, &limits), expect);
                    m.insert(&mem, s as f64);
                }
                Op::Remove(i) => {
                    let mem = member(i);
                    assert_eq!(z.remove(&mem), m.remove(&mem));
                }
                Op::RemoveRanks(a, b) => {
                    let (a, b) = (a as usize, b as usize);
                    let sorted = m.sorted();
                    let gone: Vec<_> = sorted.iter().skip(a).take(b.saturating_sub(a)).collect();
                    assert_eq!(z.remove_ranks(a, b), gone.len());
                    for (mem, _) in gone {
                        m.remove(mem);
                    }
                }
                Op::RemoveScores(a, b, minex, maxex) => {
                    let r = ScoreRange {
                        min: a as f64,
                        max: b as f64,
                        minex,
                        maxex,
                    };
                    let (from, to) = z.score_range_ranks(&r);
                    let inside: Vec<Vec<u8>> = m
                        .sorted()
                        .into_iter()
                        .filter(|(_, s)| r.contains(*s))
                        .map(|(mem, _)| mem)
                        .collect();
                    assert_eq!(to - from, inside.len());
                    let mut seen = Vec::new();
                    z.visit_ranks(from, to, false, |mem, _| seen.push(mem.to_vec()));
                    assert_eq!(seen, inside);
                    z.remove_ranks(from, to);
                    for mem in inside {
                        m.remove(&mem);
                    }
                }
            }
            check(&z, &m);
        }
    }

    proptest! {
        #[test]
        fn matches_model_default_limits(ops in proptest::collection::vec(op(), 1..200)) {
            run(ops, ZsetLimits::default());
        }

        #[test]
        fn matches_model_skiplist(ops in proptest::collection::vec(op(), 1..300)) {
            run(ops, ZsetLimits { max_listpack_entries: 0, max_listpack_value: 0 });
        }

        #[test]
        fn lex_ranges_match_model(members in proptest::collection::btree_set("[a-e]{0,3}", 0..40),
                                  lo in "[a-e]{0,3}", hi in "[a-e]{0,3}",
                                  loex in any::<bool>(), hiex in any::<bool>(), skip in any::<bool>()) {
            let limits = if skip { ZsetLimits { max_listpack_entries: 0, max_listpack_value: 0 } } else { ZsetLimits::default() };
            let mut z = ZSet::new();
            for m in &members {
                z.insert(m.as_bytes(), 0.0, &limits);
            }
            let min = if loex { LexBound::Excl(lo.as_bytes()) } else { LexBound::Incl(lo.as_bytes()) };
            let max = if hiex { LexBound::Excl(hi.as_bytes()) } else { LexBound::Incl(hi.as_bytes()) };
            let want: Vec<&[u8]> = members.iter().map(|m| m.as_bytes())
                .filter(|m| min.admits_as_min(m) && max.admits_as_max(m)).collect();
            let (from, to) = z.lex_range_ranks(&min, &max);
            let mut got = Vec::new();
            z.visit_ranks(from, to, false, |m, _| got.push(m.to_vec()));
            prop_assert_eq!(got.iter().map(|v| v.as_slice()).collect::<Vec<_>>(), want);
            let (f2, t2) = z.lex_range_ranks(&LexBound::NegInf, &LexBound::PosInf);
            prop_assert_eq!((f2, t2), (0, members.len()));
        }
    }

    #[test]
    fn scores_print_as_printf_17g() {
        for (v, t) in [
            (1.5, "1.5"),
            (0.1, "0.10000000000000001"),
            (3.0, "3"),
            (-3.0, "-3"),
            (1e20, "1e+20"),
            (1e15, "1000000000000000"),
            (1e17, "1e+17"),
            (123456789012345.0, "123456789012345"),
            (1.0e-5, "1.0000000000000001e-05"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (0.0001, "0.0001"),
            (-0.0, "-0"),
            (1e100, "1e+100"),
            (1.0 / 3.0, "0.33333333333333331"),
        ] {
            assert_eq!(format_score(v), t);
        }
    }

    #[test]
    fn converts_past_the_limits_and_back() {
        let limits = ZsetLimits::default();
        let mut z = ZSet::new();
        for i in 0..128 {
            z.insert(format!("{i}").as_bytes(), i as f64, &limits);
        }
        assert_eq!(z.encoding(), "listpack");
        z.insert(b"one more", 1.0, &limits);
        assert_eq!(z.encoding(), "skiplist");
        let mut y = ZSet::new();
        y.insert(&[b'a'; 65], 1.0, &limits);
        assert_eq!(y.encoding(), "skiplist");
        let before: Vec<_> = z.iter().map(|(m, s)| (m.to_vec(), s)).collect();
        z.convert_to_listpack();
        assert_eq!(z.encoding(), "listpack");
        let after: Vec<_> = z.iter().map(|(m, s)| (m.to_vec(), s)).collect();
        assert_eq!(before, after);
    }

    #[test]
    fn large_skiplist_ranks() {
        let limits = ZsetLimits::default();
        let mut z = ZSet::new();
        for i in 0..20_000u32 {
            z.insert(format!("m{i}").as_bytes(), (i % 1000) as f64, &limits);
        }
        assert_eq!(z.len(), 20_000);
        let (r, s) = z.rank(b"m12345").unwrap();
        assert_eq!(s, 345.0);
        assert_eq!(z.at_rank(r).unwrap().0, b"m12345");
        assert_eq!(z.count_score_below(500.0, false), 10_000);
        assert_eq!(z.remove_ranks(0, 10_000), 10_000);
        assert_eq!(z.count_score_below(500.0, false), 0);
        assert_eq!(z.len(), 10_000);
    }
}
