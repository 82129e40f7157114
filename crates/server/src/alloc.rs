//! The global allocator: mimalloc (made for servers: thread-local free
//! lists, low fragmentation), wrapped to count the bytes in use so that
//! `INFO memory` (and later `maxmemory`) can report and bound them, as
//! Redis's `zmalloc` does.

use mimalloc::MiMalloc;
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct CountingAlloc;

static USED: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to MiMalloc with the caller's arguments
// unchanged, so the GlobalAlloc contract is MiMalloc's; the counter only
// observes sizes.
unsafe impl GlobalAlloc for CountingAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        USED.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded contract (see above).
        unsafe { MiMalloc.alloc(layout) }
    }
    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        USED.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded contract (see above).
        unsafe { MiMalloc.dealloc(ptr, layout) }
    }
    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        USED.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded contract (see above).
        unsafe { MiMalloc.alloc_zeroed(layout) }
    }
    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        USED.fetch_add(new_size, Ordering::Relaxed);
        USED.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded contract (see above).
        unsafe { MiMalloc.realloc(ptr, layout, new_size) }
    }
}

/// Bytes currently allocated by the process through Rust's allocator.
pub fn used_memory() -> usize {
    USED.load(Ordering::Relaxed)
}

/// Resident set size of the process, from /proc (0 where unavailable).
pub fn rss_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<usize>().ok())
        })
        .map(|pages| pages * 4096)
        .unwrap_or(0)
}
