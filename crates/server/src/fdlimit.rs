//! Fitting `maxclients` to the open-files limit, as Redis's
//! `adjustOpenFilesLimit`: each client is a descriptor, so a `maxclients`
//! above `RLIMIT_NOFILE` means clients past the limit are never accepted
//! (EMFILE) and hang, instead of getting `max number of clients reached`.

/// Descriptors kept for everything but clients (listeners, epoll, files),
/// Redis's `CONFIG_MIN_RESERVED_FDS`.
pub const RESERVED_FDS: u64 = 32;

/// What [`fit_open_files`] did.
#[derive(Debug)]
pub enum Fit {
    /// The limit was already high enough.
    Already,
    /// The limit was raised from `from`.
    Raised { from: u64 },
    /// The limit could not be raised enough: it is now `limit`.
    Reduced {
        limit: u64,
        error: Option<std::io::Error>,
    },
    /// The limit could not be read.
    Unknown(std::io::Error),
}

/// Raises `RLIMIT_NOFILE` to `maxclients + RESERVED_FDS` when it can (both
/// limits when privileged, else the soft one up to the hard one).
// `rlim_t` is not `u64` on every target.
#[allow(clippy::unnecessary_cast)]
pub fn fit_open_files(maxclients: u64) -> Fit {
    let want = maxclients.saturating_add(RESERVED_FDS);
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit struct through a valid pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Fit::Unknown(std::io::Error::last_os_error());
    }
    let old = lim.rlim_cur as u64;
    if old >= want {
        return Fit::Already;
    }
    let hard = lim.rlim_max as u64;
    let mut error = None;
    for (cur, max) in [(want, want.max(hard)), (want.min(hard), hard)] {
        if cur <= old {
            continue;
        }
        let new = libc::rlimit {
            rlim_cur: cur as libc::rlim_t,
            rlim_max: max as libc::rlim_t,
        };
        // SAFETY: setrlimit reads one rlimit struct through a valid pointer.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) } == 0 {
            if cur >= want {
                return Fit::Raised { from: old };
            }
            return Fit::Reduced { limit: cur, error };
        }
        error = Some(std::io::Error::last_os_error());
    }
    Fit::Reduced { limit: old, error }
}
