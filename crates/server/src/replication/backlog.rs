//! The replication backlog: a fixed-size ring holding the last
//! `repl-backlog-size` bytes of the replication stream, so that a replica
//! whose link dropped for a moment can continue from its offset (`+CONTINUE`)
//! instead of copying the whole data set again.
//!
//! Offsets are Redis's: the stream's first byte ever is offset 1, and the
//! ring holds the `histlen` bytes ending at the master's `master_repl_offset`.
//! One allocation of the configured size, made when the first replica
//! attaches (as Redis's `createReplicationBacklog`); appending copies the
//! bytes once, wrapping at the end.

/// The last bytes of the replication stream, with their offsets.
pub struct ReplicationBacklog {
    buf: Vec<u8>,
    /// Where the next byte goes.
    idx: usize,
    /// Bytes of history held (at most `buf.len()`).
    histlen: usize,
    /// Offset of the last byte appended (the master's replication offset).
    end_offset: i64,
}

impl ReplicationBacklog {
    /// An empty backlog of `size` bytes whose next byte will have offset
    /// `offset + 1`.
    pub fn new(size: usize, offset: i64) -> Self {
        ReplicationBacklog {
            buf: vec![0; size.max(1)],
            idx: 0,
            histlen: 0,
            end_offset: offset,
        }
    }

    pub fn size(&self) -> usize {
        self.buf.len()
    }

    pub fn histlen(&self) -> usize {
        self.histlen
    }

    /// Offset of the oldest byte held (`repl_backlog_first_byte_offset`).
    pub fn first_byte_offset(&self) -> i64 {
        self.end_offset - self.histlen as i64 + 1
    }

    /// Appends stream bytes, forgetting the oldest ones beyond the size.
    pub fn append(&mut self, mut data: &[u8]) {
        self.end_offset += data.len() as i64;
        let size = self.buf.len();
        if data.len() >= size {
            data = &data[data.len() - size..];
            self.buf.copy_from_slice(data);
            self.idx = 0;
            self.histlen = size;
            return;
        }
        let first = (size - self.idx).min(data.len());
        self.buf[self.idx..self.idx + first].copy_from_slice(&data[..first]);
        let rest = data.len() - first;
        self.buf[..rest].copy_from_slice(&data[first..]);
        self.idx = (self.idx + data.len()) % size;
        self.histlen = (self.histlen + data.len()).min(size);
    }

    /// Whether the stream from `offset` (the first byte the replica lacks)
    /// can be served from here.
    pub fn covers(&self, offset: i64) -> bool {
        offset >= self.first_byte_offset() && offset <= self.end_offset + 1
    }

    /// Appends the held bytes from `offset` to the end to `out`.
    /// `offset` must be covered.
    pub fn copy_from(&self, offset: i64, out: &mut Vec<u8>) {
        debug_assert!(self.covers(offset));
        let skip = (offset - self.first_byte_offset()) as usize;
        let len = self.histlen - skip;
        let size = self.buf.len();
        let start = (self.idx + size - self.histlen + skip) % size;
        let first = (size - start).min(len);
        out.extend_from_slice(&self.buf[start..start + first]);
        out.extend_from_slice(&self.buf[..len - first]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ring against a plain vector of the whole stream, across wraps.
    #[test]
    fn ring_returns_exactly_the_tail_of_the_stream() {
        let mut b = ReplicationBacklog::new(100, 0);
        let mut all = Vec::new();
        let mut x = 0u8;
        for round in 0..200 {
            let n = (round * 7) % 45 + 1;
            let chunk: Vec<u8> = (0..n)
                .map(|_| {
                    x = x.wrapping_add(1);
                    x
                })
                .collect();
            b.append(&chunk);
            all.extend_from_slice(&chunk);
            let end = all.len() as i64;
            assert_eq!(b.first_byte_offset(), end - b.histlen() as i64 + 1);
            for from in [b.first_byte_offset(), end - 3, end + 1] {
                if from < b.first_byte_offset() {
                    continue;
                }
                let mut got = Vec::new();
                b.copy_from(from, &mut got);
                assert_eq!(got, &all[(from - 1) as usize..]);
            }
            assert!(!b.covers(b.first_byte_offset() - 1));
            assert!(!b.covers(end + 2));
        }
        let mut big = ReplicationBacklog::new(10, 5);
        big.append(&[1; 25]);
        assert_eq!(big.first_byte_offset(), 21);
        assert_eq!(big.histlen(), 10);
    }
}
