//! A pool of connection buffers. Connections come and go (a short-link
//! service opens one per request); reusing their buffers spares the
//! allocator a 16 KB allocation and a page fault or two per connection.

use crate::buffer::READ_CHUNK;

pub struct BufferPool {
    free: Vec<Vec<u8>>,
    max: usize,
}

impl BufferPool {
    pub fn new(max: usize) -> Self {
        BufferPool {
            free: Vec::new(),
            max,
        }
    }

    /// A zero-filled buffer of `READ_CHUNK` bytes (an input buffer).
    pub fn take(&mut self) -> Vec<u8> {
        let mut b = self.free.pop().unwrap_or_default();
        b.clear();
        b.resize(READ_CHUNK, 0);
        b
    }

    /// An empty buffer with capacity (an output buffer).
    pub fn take_empty(&mut self) -> Vec<u8> {
        let mut b = self
            .free
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(READ_CHUNK));
        b.clear();
        b
    }

    pub fn give(&mut self, mut b: Vec<u8>) {
        // Only ordinary-sized buffers are worth keeping.
        if self.free.len() < self.max
            && b.capacity() >= READ_CHUNK
            && b.capacity() <= 4 * READ_CHUNK
        {
            b.clear();
            self.free.push(b);
        }
    }

    pub fn len(&self) -> usize {
        self.free.len()
    }

    pub fn is_empty(&self) -> bool {
        self.free.is_empty()
    }
}
