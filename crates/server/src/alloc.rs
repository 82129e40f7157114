//! The global allocator: mimalloc (made for servers: thread-local free
//! lists, low fragmentation), wrapped to count the bytes in use so that
//! `INFO memory` (and later `maxmemory`) can report and bound them, as
//! Redis's `zmalloc` does.

use mimalloc::MiMalloc;
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct CountingAlloc;

static USED: AtomicUsize = AtomicUsize::new(0);

/// Each thread batches its changes to the count and publishes them when
/// they exceed this, so an allocation costs a thread-local add instead of a
/// locked instruction. The total is exact to within this much per thread.
const PUBLISH_EVERY: isize = 256 * 1024;

thread_local! {
    static DELTA: std::cell::Cell<isize> = const { std::cell::Cell::new(0) };
}

#[inline]
fn account(n: isize) {
    // `try_with`: during thread teardown the slot may be gone; count directly.
    let published = DELTA.try_with(|d| {
        let v = d.get() + n;
        if !(-PUBLISH_EVERY..=PUBLISH_EVERY).contains(&v) {
            d.set(0);
            publish(v);
        } else {
            d.set(v);
        }
    });
    if published.is_err() {
        publish(n);
    }
}

#[inline]
fn publish(v: isize) {
    if v >= 0 {
        USED.fetch_add(v as usize, Ordering::Relaxed);
    } else {
        USED.fetch_sub((-v) as usize, Ordering::Relaxed);
    }
}

// SAFETY: every method forwards to MiMalloc with the caller's arguments
// unchanged, so the GlobalAlloc contract is MiMalloc's; the counter only
// observes sizes.
unsafe impl GlobalAlloc for CountingAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        account(layout.size() as isize);
        // SAFETY: forwarded contract (see above).
        unsafe { MiMalloc.alloc(layout) }
    }
    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        account(-(layout.size() as isize));
        // SAFETY: forwarded contract (see above).
        unsafe { MiMalloc.dealloc(ptr, layout) }
    }
    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        account(layout.size() as isize);
        // SAFETY: forwarded contract (see above).
        unsafe { MiMalloc.alloc_zeroed(layout) }
    }
    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        account(new_size as isize - layout.size() as isize);
        // SAFETY: forwarded contract (see above).
        unsafe { MiMalloc.realloc(ptr, layout, new_size) }
    }
}

/// Returns freed memory to the operating system: mimalloc purges freed
/// pages lazily, from inside later allocator calls, so a server that
/// freed a lot (a big pipeline's buffers, a split table) and then went
/// quiet would keep them resident. Redis's jemalloc has a background
/// thread for this; the cron calls this once a second instead.
pub fn release_free_memory() {
    // SAFETY: `mi_collect` takes no pointers; it walks the calling
    // thread's own heap and purges pages that are already free.
    unsafe { libmimalloc_sys::mi_collect(false) }
}

/// Bytes currently allocated by the process through Rust's allocator
/// (the calling thread's unpublished share included).
pub fn used_memory() -> usize {
    let own = DELTA.try_with(|d| d.get()).unwrap_or(0);
    (USED.load(Ordering::Relaxed) as isize + own).max(0) as usize
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

/// Memory mimalloc holds committed for the process: its pages in use,
/// partly filled or kept for reuse (`allocator_active`). On Linux it is
/// also mimalloc's estimate of its resident memory.
pub fn allocator_committed() -> usize {
    let mut commit = 0usize;
    // SAFETY: every out-parameter is optional; the one given points to a
    // live usize on this stack frame.
    unsafe {
        libmimalloc_sys::mi_process_info(
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut commit,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    commit
}

/// mimalloc's statistics report as text (`MEMORY MALLOC-STATS`).
pub fn stats_report() -> String {
    use std::ffi::{c_char, c_void, CStr};
    unsafe extern "C" fn collect(msg: *const c_char, arg: *mut c_void) {
        // SAFETY: `arg` is the `String` passed below, alive for the whole
        // call; mimalloc hands a NUL-terminated message.
        unsafe {
            let out = &mut *(arg as *mut String);
            if !msg.is_null() {
                out.push_str(&CStr::from_ptr(msg).to_string_lossy());
            }
        }
    }
    let mut out = String::new();
    // SAFETY: the callback only appends to `out`, which outlives the call;
    // mimalloc calls it synchronously, on this thread.
    unsafe {
        libmimalloc_sys::mi_stats_print_out(Some(collect), &mut out as *mut String as *mut c_void)
    };
    out
}

/// Returns every free page to the system now (`MEMORY PURGE`).
pub fn purge() {
    // SAFETY: `mi_collect` takes no pointers.
    unsafe { libmimalloc_sys::mi_collect(true) }
}
