//! SIGTERM and SIGINT end the server the way `SHUTDOWN` does, as Redis's
//! `sigShutdownHandler`: the handler only records the signal; the event
//! loop (woken by the interrupted `epoll_wait`, or at the next cron tick)
//! sees it and exits cleanly, so the pid file goes and the status is 0.

use std::sync::atomic::{AtomicI32, Ordering};

static RECEIVED: AtomicI32 = AtomicI32::new(0);

extern "C" fn record(sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    RECEIVED.store(sig, Ordering::Relaxed);
}

/// Installs the handler for SIGTERM and SIGINT.
pub fn install() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: `record` is an `extern "C" fn(c_int)` that only stores to
        // an atomic, which is what a signal handler may do.
        unsafe {
            libc::signal(
                sig,
                record as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
}

/// The name of a shutdown signal received since the last call, if any.
pub fn take() -> Option<&'static str> {
    match RECEIVED.swap(0, Ordering::Relaxed) {
        0 => None,
        libc::SIGINT => Some("SIGINT"),
        _ => Some("SIGTERM"),
    }
}
