//! The list type: a deque of chunks of packed elements (Redis's quicklist of
//! listpacks, re-thought for Rust).
//!
//! # Why this shape
//! - Memory: a `VecDeque<SmallBytes>` costs 24 bytes per element however
//!   short it is; Redis's listpack costs the element plus about two bytes.
//!   Here a chunk is one byte buffer holding its elements back to back, each
//!   as `[len varint][bytes][len varint, reversed]` — for elements shorter
//!   than 128 bytes that is the element plus two bytes, as in a listpack.
//! - Speed at both ends: a chunk keeps free room *before* its first element
//!   (`head`), so pushing to the front writes into that room and popping from
//!   the front just moves `head`; the back is an ordinary `Vec` end. The
//!   trailing length lets the last element be found from the end. A chunk
//!   holds at most [`CHUNK_BYTES`] of data (the default node size of Redis's
//!   `list-max-listpack-size -2`), so a front push that has no room, or an
//!   insert in the middle, moves at most that much.
//! - Reads (`LRANGE`, `LINDEX`) skip whole chunks by their element counts,
//!   then walk one chunk's bytes; a range is a linear scan of contiguous
//!   memory.
//!
//! Elements are bytes: Redis stores integer-looking elements as integers in
//! its listpacks, but every reply and the digest use their text, so keeping
//! the text is indistinguishable from outside.

use std::collections::VecDeque;

/// Most data bytes in one chunk (an element longer than this gets a chunk
/// of its own).
pub const CHUNK_BYTES: usize = 8192;

/// A list of binary-safe elements.
#[derive(Clone, Default)]
pub struct List {
    chunks: VecDeque<Chunk>,
    len: usize,
}

/// Elements packed into one buffer: `buf[head..]` is the data.
#[derive(Clone)]
struct Chunk {
    buf: Vec<u8>,
    head: u32,
    count: u32,
}

fn varint_len(n: usize) -> usize {
    let mut k = 1;
    let mut n = n >> 7;
    while n > 0 {
        k += 1;
        n >>= 7;
    }
    k
}

/// Bytes one element takes in a chunk.
fn entry_size(s: &[u8]) -> usize {
    s.len() + 2 * varint_len(s.len())
}

/// Writes `[len][bytes][len reversed]` into `dst`, which is exactly
/// `entry_size(s)` long.
fn write_entry(dst: &mut [u8], s: &[u8]) {
    let k = varint_len(s.len());
    let mut n = s.len();
    for i in 0..k {
        let mut b = (n & 0x7f) as u8;
        n >>= 7;
        if i + 1 < k {
            b |= 0x80;
        }
        dst[i] = b;
        // The trailing copy is reversed so that reading backwards from the
        // end meets the low bits first.
        dst[dst.len() - 1 - i] = b;
    }
    dst[k..k + s.len()].copy_from_slice(s);
}

fn encode_entry(s: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; entry_size(s)];
    write_entry(&mut v, s);
    v
}

/// The element starting at `pos`: (data start, data end, next entry start).
#[inline]
fn read_fwd(buf: &[u8], pos: usize) -> (usize, usize, usize) {
    let mut n = 0usize;
    let mut shift = 0;
    let mut p = pos;
    loop {
        let b = buf[p];
        p += 1;
        n |= ((b & 0x7f) as usize) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    let k = p - pos;
    (p, p + n, p + n + k)
}

/// The element ending at `end`: (entry start, data start, data end).
#[inline]
fn read_back(buf: &[u8], end: usize) -> (usize, usize, usize) {
    let mut n = 0usize;
    let mut shift = 0;
    let mut p = end;
    loop {
        p -= 1;
        let b = buf[p];
        n |= ((b & 0x7f) as usize) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    let k = end - p;
    let data_end = p;
    let data_start = data_end - n;
    (data_start - k, data_start, data_end)
}

impl Chunk {
    fn with_back(s: &[u8]) -> Chunk {
        let mut buf = Vec::with_capacity(entry_size(s).max(16));
        buf.resize(entry_size(s), 0);
        write_entry(&mut buf, s);
        Chunk {
            buf,
            head: 0,
            count: 1,
        }
    }

    fn with_front(s: &[u8]) -> Chunk {
        // Room before the element for more front pushes.
        let need = entry_size(s);
        let room = if need < 256 { 64 } else { 0 };
        let mut buf = vec![0u8; room + need];
        write_entry(&mut buf[room..], s);
        Chunk {
            buf,
            head: room as u32,
            count: 1,
        }
    }

    #[inline]
    fn data_len(&self) -> usize {
        self.buf.len() - self.head as usize
    }

    fn push_back(&mut self, s: &[u8]) {
        let head = self.head as usize;
        if head >= 1024 && head > self.data_len() {
            // A queue (push back, pop front) would otherwise keep the
            // consumed prefix forever.
            self.buf.drain(..head);
            self.head = 0;
        }
        let at = self.buf.len();
        self.buf.resize(at + entry_size(s), 0);
        write_entry(&mut self.buf[at..], s);
        self.count += 1;
    }

    fn push_front(&mut self, s: &[u8]) {
        let need = entry_size(s);
        let head = self.head as usize;
        if head < need {
            // Move the data up, leaving room before it (as much again as
            // the data, within the chunk size), so front pushes amortize.
            let data = self.data_len();
            let room = need + data.clamp(16, CHUNK_BYTES.saturating_sub(data + need).max(16));
            let mut buf = Vec::with_capacity(room + data);
            buf.resize(room, 0);
            buf.extend_from_slice(&self.buf[head..]);
            self.buf = buf;
            self.head = room as u32;
        }
        let head = self.head as usize;
        write_entry(&mut self.buf[head - need..head], s);
        self.head = (head - need) as u32;
        self.count += 1;
    }

    #[inline]
    fn front(&self) -> &[u8] {
        let (a, b, _) = read_fwd(&self.buf, self.head as usize);
        &self.buf[a..b]
    }

    #[inline]
    fn back(&self) -> &[u8] {
        let (_, a, b) = read_back(&self.buf, self.buf.len());
        &self.buf[a..b]
    }

    fn drop_front(&mut self) {
        let (_, _, next) = read_fwd(&self.buf, self.head as usize);
        self.head = next as u32;
        self.count -= 1;
    }

    fn drop_back(&mut self) {
        let (start, _, _) = read_back(&self.buf, self.buf.len());
        self.buf.truncate(start);
        self.count -= 1;
    }

    /// Byte offset of element `i` (0-based within the chunk), walking from
    /// the nearer end.
    fn offset_of(&self, i: usize) -> usize {
        let count = self.count as usize;
        if i <= count / 2 {
            let mut p = self.head as usize;
            for _ in 0..i {
                p = read_fwd(&self.buf, p).2;
            }
            p
        } else {
            let mut end = self.buf.len();
            for _ in i..count {
                end = read_back(&self.buf, end).0;
            }
            end
        }
    }

    fn get(&self, i: usize) -> &[u8] {
        let (a, b, _) = read_fwd(&self.buf, self.offset_of(i));
        &self.buf[a..b]
    }

    /// Splits off the elements from `i` on into a new chunk.
    fn split_off(&mut self, i: usize) -> Chunk {
        let off = self.offset_of(i);
        let tail = self.buf[off..].to_vec();
        self.buf.truncate(off);
        let moved = self.count - i as u32;
        self.count = i as u32;
        Chunk {
            buf: tail,
            head: 0,
            count: moved,
        }
    }

    fn heap_size(&self) -> usize {
        self.buf.capacity()
    }
}

impl List {
    pub fn new() -> List {
        List::default()
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push_back(&mut self, s: &[u8]) {
        match self.chunks.back_mut() {
            Some(c) if c.data_len() + entry_size(s) <= CHUNK_BYTES => c.push_back(s),
            _ => self.chunks.push_back(Chunk::with_back(s)),
        }
        self.len += 1;
    }

    pub fn push_front(&mut self, s: &[u8]) {
        match self.chunks.front_mut() {
            Some(c) if c.data_len() + entry_size(s) <= CHUNK_BYTES => c.push_front(s),
            _ => self.chunks.push_front(Chunk::with_front(s)),
        }
        self.len += 1;
    }

    pub fn front(&self) -> Option<&[u8]> {
        self.chunks.front().map(Chunk::front)
    }

    pub fn back(&self) -> Option<&[u8]> {
        self.chunks.back().map(Chunk::back)
    }

    /// Removes the first element (see [`front`](Self::front) to read it
    /// first without a copy).
    pub fn drop_front(&mut self) {
        if let Some(c) = self.chunks.front_mut() {
            c.drop_front();
            self.len -= 1;
            if c.count == 0 {
                self.chunks.pop_front();
            }
        }
    }

    pub fn drop_back(&mut self) {
        if let Some(c) = self.chunks.back_mut() {
            c.drop_back();
            self.len -= 1;
            if c.count == 0 {
                self.chunks.pop_back();
            }
        }
    }

    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        let v = self.front()?.to_vec();
        self.drop_front();
        Some(v)
    }

    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        let v = self.back()?.to_vec();
        self.drop_back();
        Some(v)
    }

    /// The chunk holding element `i` and its index within that chunk,
    /// walking chunk counts from the nearer end.
    fn locate(&self, i: usize) -> (usize, usize) {
        debug_assert!(i < self.len);
        if i < self.len / 2 {
            let mut i = i;
            for (ci, c) in self.chunks.iter().enumerate() {
                if i < c.count as usize {
                    return (ci, i);
                }
                i -= c.count as usize;
            }
        } else {
            let mut from_end = self.len - i; // >= 1
            for (ci, c) in self.chunks.iter().enumerate().rev() {
                if from_end <= c.count as usize {
                    return (ci, c.count as usize - from_end);
                }
                from_end -= c.count as usize;
            }
        }
        unreachable!("index within the list")
    }

    pub fn get(&self, i: usize) -> Option<&[u8]> {
        if i >= self.len {
            return None;
        }
        let (ci, j) = self.locate(i);
        Some(self.chunks[ci].get(j))
    }

    /// Replaces element `i`; false when out of range.
    pub fn set(&mut self, i: usize, s: &[u8]) -> bool {
        if i >= self.len {
            return false;
        }
        let (ci, j) = self.locate(i);
        let c = &mut self.chunks[ci];
        let off = c.offset_of(j);
        let (_, _, next) = read_fwd(&c.buf, off);
        c.buf.splice(off..next, encode_entry(s));
        self.split_if_big(ci);
        true
    }

    /// Inserts `s` so that it becomes element `i` (`i == len` appends).
    pub fn insert(&mut self, i: usize, s: &[u8]) {
        if i == 0 {
            return self.push_front(s);
        }
        if i >= self.len {
            return self.push_back(s);
        }
        let (ci, j) = self.locate(i);
        let c = &mut self.chunks[ci];
        let off = c.offset_of(j);
        c.buf.splice(off..off, encode_entry(s));
        c.count += 1;
        self.len += 1;
        self.split_if_big(ci);
    }

    /// Keeps chunks within their size after a middle edit.
    fn split_if_big(&mut self, ci: usize) {
        let c = &mut self.chunks[ci];
        if c.data_len() > CHUNK_BYTES && c.count >= 2 {
            let half = c.count as usize / 2;
            let tail = c.split_off(half);
            self.chunks.insert(ci + 1, tail);
        }
    }

    /// Removes the first `n` elements (all of them when `n >= len`).
    pub fn remove_front(&mut self, mut n: usize) {
        n = n.min(self.len);
        while n > 0 {
            let c = self.chunks.front_mut().expect("len > 0");
            if c.count as usize <= n {
                n -= c.count as usize;
                self.len -= c.count as usize;
                self.chunks.pop_front();
            } else {
                for _ in 0..n {
                    c.drop_front();
                }
                self.len -= n;
                n = 0;
            }
        }
    }

    /// Removes the last `n` elements.
    pub fn remove_back(&mut self, mut n: usize) {
        n = n.min(self.len);
        while n > 0 {
            let c = self.chunks.back_mut().expect("len > 0");
            if c.count as usize <= n {
                n -= c.count as usize;
                self.len -= c.count as usize;
                self.chunks.pop_back();
            } else {
                for _ in 0..n {
                    c.drop_back();
                }
                self.len -= n;
                n = 0;
            }
        }
    }

    /// Removes up to `limit` elements equal to `s` (0 = all), scanning from
    /// the head, or from the tail when `from_tail`. Returns how many went.
    pub fn remove_matching(&mut self, s: &[u8], limit: usize, from_tail: bool) -> usize {
        let mut removed = 0;
        let mut out = List::new();
        if from_tail {
            for e in self.iter().rev() {
                if e == s && (limit == 0 || removed < limit) {
                    removed += 1;
                } else {
                    out.push_front(e);
                }
            }
        } else {
            for e in self.iter() {
                if e == s && (limit == 0 || removed < limit) {
                    removed += 1;
                } else {
                    out.push_back(e);
                }
            }
        }
        if removed > 0 {
            *self = out;
        }
        removed
    }

    /// Every element, head to tail (reversible).
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            list: self,
            front: (0, self.chunks.front().map_or(0, |c| c.head as usize)),
            back: (
                self.chunks.len(),
                0, // set lazily: the end of the chunk before `back.0`
            ),
            remaining: self.len,
        }
    }

    /// The elements from index `start` on (head to tail).
    pub fn iter_from(&self, start: usize) -> Iter<'_> {
        if start >= self.len {
            let mut it = self.iter();
            it.remaining = 0;
            return it;
        }
        let (ci, j) = self.locate(start);
        Iter {
            list: self,
            front: (ci, self.chunks[ci].offset_of(j)),
            back: (self.chunks.len(), 0),
            remaining: self.len - start,
        }
    }

    /// Heap bytes owned (for memory accounting).
    pub fn heap_size(&self) -> usize {
        self.chunks.capacity() * std::mem::size_of::<Chunk>()
            + self.chunks.iter().map(Chunk::heap_size).sum::<usize>()
    }

    /// How many chunks hold the elements (for tests and `DEBUG`).
    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }
}

impl<T: AsRef<[u8]>> FromIterator<T> for List {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> List {
        let mut l = List::new();
        for i in items {
            l.push_back(i.as_ref());
        }
        l
    }
}

impl PartialEq for List {
    fn eq(&self, other: &List) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl std::fmt::Debug for List {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(String::from_utf8_lossy))
            .finish()
    }
}

/// Iterator over a list's elements; `rev()` walks from the tail. Front
/// position: (chunk, byte offset); back position: (chunk index + 1 of the
/// chunk being walked, byte end within it), `back.0 == chunks.len()` with
/// `back.1 == 0` meaning "not started".
#[derive(Clone)]
pub struct Iter<'a> {
    list: &'a List,
    front: (usize, usize),
    back: (usize, usize),
    remaining: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.remaining == 0 {
            return None;
        }
        let chunks = &self.list.chunks;
        let mut c = &chunks[self.front.0];
        if self.front.1 >= c.buf.len() {
            self.front.0 += 1;
            c = &chunks[self.front.0];
            self.front.1 = c.head as usize;
        }
        let (a, b, next) = read_fwd(&c.buf, self.front.1);
        self.front.1 = next;
        self.remaining -= 1;
        Some(&c.buf[a..b])
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> DoubleEndedIterator for Iter<'a> {
    fn next_back(&mut self) -> Option<&'a [u8]> {
        if self.remaining == 0 {
            return None;
        }
        let chunks = &self.list.chunks;
        if self.back.1 == 0 {
            // Not started, or at the start of a chunk: step to the previous one.
            self.back.0 -= 1;
            self.back.1 = chunks[self.back.0].buf.len();
        }
        let c = &chunks[self.back.0];
        let (start, a, b) = read_back(&c.buf, self.back.1);
        self.back.1 = if start == c.head as usize { 0 } else { start };
        self.remaining -= 1;
        Some(&c.buf[a..b])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        PushFront(Vec<u8>),
        PushBack(Vec<u8>),
        PopFront,
        PopBack,
        Set(usize, Vec<u8>),
        Insert(usize, Vec<u8>),
        RemoveFront(usize),
        RemoveBack(usize),
        RemoveMatching(Vec<u8>, usize, bool),
    }

    fn element() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            8 => proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), any::<u8>()], 0..4),
            1 => proptest::collection::vec(any::<u8>(), 100..300),
            1 => proptest::collection::vec(any::<u8>(), 3000..9000),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => element().prop_map(Op::PushFront),
            6 => element().prop_map(Op::PushBack),
            3 => Just(Op::PopFront),
            3 => Just(Op::PopBack),
            2 => (any::<usize>(), element()).prop_map(|(i, e)| Op::Set(i, e)),
            2 => (any::<usize>(), element()).prop_map(|(i, e)| Op::Insert(i, e)),
            1 => (0usize..20).prop_map(Op::RemoveFront),
            1 => (0usize..20).prop_map(Op::RemoveBack),
            1 => (element(), 0usize..3, any::<bool>()).prop_map(|(e, n, t)| Op::RemoveMatching(e, n, t)),
        ]
    }

    fn check(list: &List, model: &VecDeque<Vec<u8>>) {
        assert_eq!(list.len(), model.len());
        let fwd: Vec<&[u8]> = list.iter().collect();
        let want: Vec<&[u8]> = model.iter().map(|v| v.as_slice()).collect();
        assert_eq!(fwd, want);
        let back: Vec<&[u8]> = list.iter().rev().collect();
        let want_back: Vec<&[u8]> = model.iter().rev().map(|v| v.as_slice()).collect();
        assert_eq!(back, want_back);
        for (i, v) in model.iter().enumerate() {
            assert_eq!(list.get(i), Some(v.as_slice()));
        }
        assert_eq!(list.get(model.len()), None);
        for start in [0, 1, model.len() / 2, model.len().saturating_sub(1)] {
            let got: Vec<&[u8]> = list.iter_from(start).collect();
            let want: Vec<&[u8]> = model.iter().skip(start).map(|v| v.as_slice()).collect();
            assert_eq!(got, want);
        }
        // Mixed ends meet in the middle.
        let mut it = list.iter();
        let mut got = Vec::new();
        let mut back_part = Vec::new();
        while let Some(x) = it.next() {
            got.push(x);
            match it.next_back() {
                Some(x) => back_part.push(x),
                None => break,
            }
        }
        got.extend(back_part.into_iter().rev());
        assert_eq!(got, want);
        assert!(list.chunks.iter().all(|c| c.count > 0));
        assert_eq!(
            list.chunks.iter().map(|c| c.count as usize).sum::<usize>(),
            list.len()
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn list_behaves_like_a_vecdeque(ops in proptest::collection::vec(op(), 0..200)) {
            let mut list = List::new();
            let mut model: VecDeque<Vec<u8>> = VecDeque::new();
            for op in ops {
                match op {
                    Op::PushFront(e) => { list.push_front(&e); model.push_front(e); }
                    Op::PushBack(e) => { list.push_back(&e); model.push_back(e); }
                    Op::PopFront => prop_assert_eq!(list.pop_front(), model.pop_front()),
                    Op::PopBack => prop_assert_eq!(list.pop_back(), model.pop_back()),
                    Op::Set(i, e) => {
                        let i = if model.is_empty() { i % 2 } else { i % (model.len() + 1) };
                        let ok = list.set(i, &e);
                        prop_assert_eq!(ok, i < model.len());
                        if ok { model[i] = e; }
                    }
                    Op::Insert(i, e) => {
                        let i = i % (model.len() + 1);
                        list.insert(i, &e);
                        model.insert(i, e);
                    }
                    Op::RemoveFront(n) => {
                        list.remove_front(n);
                        for _ in 0..n.min(model.len()) { model.pop_front(); }
                    }
                    Op::RemoveBack(n) => {
                        list.remove_back(n);
                        for _ in 0..n.min(model.len()) { model.pop_back(); }
                    }
                    Op::RemoveMatching(e, n, tail) => {
                        let got = list.remove_matching(&e, n, tail);
                        let mut removed = 0;
                        let mut keep: VecDeque<Vec<u8>> = VecDeque::new();
                        if tail {
                            for v in model.iter().rev() {
                                if *v == e && (n == 0 || removed < n) { removed += 1 } else { keep.push_front(v.clone()) }
                            }
                        } else {
                            for v in model.iter() {
                                if *v == e && (n == 0 || removed < n) { removed += 1 } else { keep.push_back(v.clone()) }
                            }
                        }
                        model = keep;
                        prop_assert_eq!(got, removed);
                    }
                }
                check(&list, &model);
            }
        }
    }

    #[test]
    fn long_lengths_use_multi_byte_varints_both_ways() {
        let mut l = List::new();
        let big = vec![7u8; 20_000];
        l.push_back(b"x");
        l.push_back(&big);
        l.push_front(&big);
        l.push_back(b"y");
        assert_eq!(l.len(), 4);
        assert_eq!(l.back(), Some(&b"y"[..]));
        assert_eq!(l.get(1), Some(&b"x"[..]));
        assert_eq!(l.get(2), Some(&big[..]));
        assert_eq!(l.iter().rev().nth(1), Some(&big[..]));
    }

    #[test]
    fn small_elements_cost_about_two_bytes_each() {
        let l: List = (0..100_000).map(|i| format!("{:03}", i % 1000)).collect();
        // 3 bytes + 2 of framing per element, chunks within a few percent.
        assert!(l.heap_size() < 100_000 * 6, "{}", l.heap_size());
        assert!(l.chunk_count() <= 100_000 * 5 / CHUNK_BYTES + 2);
    }

    #[test]
    fn queue_usage_frees_consumed_chunks() {
        let mut l = List::new();
        for i in 0..50_000 {
            l.push_back(format!("{i}").as_bytes());
            if i % 2 == 1 {
                l.drop_front();
            }
        }
        assert_eq!(l.len(), 25_000);
        assert_eq!(l.front(), Some(&b"25000"[..]));
        assert!(l.heap_size() < 25_000 * 8 + 4 * CHUNK_BYTES);
    }
}
