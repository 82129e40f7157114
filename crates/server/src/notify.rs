//! Keyspace notifications (Redis's `notify.c`): the event classes, the
//! `notify-keyspace-events` flag string, and the publishing of one event.
//!
//! A command that changed a key calls [`Ctx::notify`] with the event's
//! class and name (`NOTIFY_STRING, "set"`), exactly where Redis calls
//! `notifyKeyspaceEvent`. When the class is enabled the event is published
//! on `__keyspace@<db>__:<key>` (message: the event name) and/or
//! `__keyevent@<db>__:<event>` (message: the key), through the ordinary
//! pub/sub delivery, so subscribers see them as any other message.
//!
//! Keys found expired inside a lookup cannot publish there (the lookup
//! holds a borrow of the keyspace): they are queued in [`PendingEvents`]
//! and flushed right after, before the command's own events, which is the
//! order Redis produces.
//!
//! [`Ctx::notify`]: crate::commands::Ctx::notify

use crate::server::Server;

pub const NOTIFY_KEYSPACE: u32 = 1 << 0; // K
pub const NOTIFY_KEYEVENT: u32 = 1 << 1; // E
pub const NOTIFY_GENERIC: u32 = 1 << 2; // g
pub const NOTIFY_STRING: u32 = 1 << 3; // $
pub const NOTIFY_LIST: u32 = 1 << 4; // l
pub const NOTIFY_SET: u32 = 1 << 5; // s
pub const NOTIFY_HASH: u32 = 1 << 6; // h
pub const NOTIFY_ZSET: u32 = 1 << 7; // z
pub const NOTIFY_EXPIRED: u32 = 1 << 8; // x
pub const NOTIFY_EVICTED: u32 = 1 << 9; // e
pub const NOTIFY_STREAM: u32 = 1 << 10; // t
pub const NOTIFY_KEY_MISS: u32 = 1 << 11; // m (not part of A)
pub const NOTIFY_LOADED: u32 = 1 << 12; // module only
pub const NOTIFY_MODULE: u32 = 1 << 13; // d
pub const NOTIFY_NEW: u32 = 1 << 14; // n (not part of A)
/// `A`: every class but key-miss and new-key events.
pub const NOTIFY_ALL: u32 = NOTIFY_GENERIC
    | NOTIFY_STRING
    | NOTIFY_LIST
    | NOTIFY_SET
    | NOTIFY_HASH
    | NOTIFY_ZSET
    | NOTIFY_EXPIRED
    | NOTIFY_EVICTED
    | NOTIFY_STREAM
    | NOTIFY_MODULE;

/// The error `CONFIG SET notify-keyspace-events` gives for a bad letter.
pub const INVALID_FLAGS: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

/// Parses a `notify-keyspace-events` string (Redis's
/// `keyspaceEventsStringToFlags`). `None` for an unknown letter.
pub fn parse_flags(s: &str) -> Option<u32> {
    let mut flags = 0;
    for c in s.chars() {
        flags |= match c {
            'A' => NOTIFY_ALL,
            'g' => NOTIFY_GENERIC,
            '$' => NOTIFY_STRING,
            'l' => NOTIFY_LIST,
            's' => NOTIFY_SET,
            'h' => NOTIFY_HASH,
            'z' => NOTIFY_ZSET,
            'x' => NOTIFY_EXPIRED,
            'e' => NOTIFY_EVICTED,
            'K' => NOTIFY_KEYSPACE,
            'E' => NOTIFY_KEYEVENT,
            't' => NOTIFY_STREAM,
            'm' => NOTIFY_KEY_MISS,
            'd' => NOTIFY_MODULE,
            'n' => NOTIFY_NEW,
            _ => return None,
        };
    }
    Some(flags)
}

/// The canonical string `CONFIG GET` shows (Redis's
/// `keyspaceEventsFlagsToString`): `A` stands for all of its classes and
/// then hides `n`, as Redis 7.0 does.
pub fn flags_to_string(flags: u32) -> String {
    let mut s = String::new();
    if flags & NOTIFY_ALL == NOTIFY_ALL {
        s.push('A');
    } else {
        for (bit, c) in [
            (NOTIFY_GENERIC, 'g'),
            (NOTIFY_STRING, '$'),
            (NOTIFY_LIST, 'l'),
            (NOTIFY_SET, 's'),
            (NOTIFY_HASH, 'h'),
            (NOTIFY_ZSET, 'z'),
            (NOTIFY_EXPIRED, 'x'),
            (NOTIFY_EVICTED, 'e'),
            (NOTIFY_STREAM, 't'),
            (NOTIFY_MODULE, 'd'),
            (NOTIFY_NEW, 'n'),
        ] {
            if flags & bit != 0 {
                s.push(c);
            }
        }
    }
    for (bit, c) in [
        (NOTIFY_KEYSPACE, 'K'),
        (NOTIFY_KEYEVENT, 'E'),
        (NOTIFY_KEY_MISS, 'm'),
    ] {
        if flags & bit != 0 {
            s.push(c);
        }
    }
    s
}

/// Keys that expired (or were missed) inside a lookup, waiting to be
/// announced and to invalidate WATCHes.
#[derive(Default)]
pub struct PendingEvents {
    /// (db, key) of keys a lookup found expired and deleted.
    pub expired: Vec<(usize, Vec<u8>)>,
    /// (db, key) of read lookups that found nothing (`keymiss`).
    pub missed: Vec<(usize, Vec<u8>)>,
}

impl PendingEvents {
    pub fn is_empty(&self) -> bool {
        self.expired.is_empty() && self.missed.is_empty()
    }
}

impl Server {
    /// Publishes one keyspace event, if its class is enabled (Redis's
    /// `notifyKeyspaceEvent`).
    pub fn notify_keyspace_event(
        &mut self,
        current: Option<&mut crate::net::client::Client>,
        class: u32,
        event: &str,
        key: &[u8],
        db: usize,
    ) {
        let flags = self.config.notify_keyspace_events;
        if flags & class == 0 {
            return;
        }
        let mut current = current;
        if flags & NOTIFY_KEYSPACE != 0 {
            let mut chan = Vec::with_capacity(16 + key.len());
            chan.extend_from_slice(b"__keyspace@");
            chan.extend_from_slice(db.to_string().as_bytes());
            chan.extend_from_slice(b"__:");
            chan.extend_from_slice(key);
            self.publish(current.as_deref_mut(), &chan, event.as_bytes());
        }
        if flags & NOTIFY_KEYEVENT != 0 {
            let mut chan = Vec::with_capacity(16 + event.len());
            chan.extend_from_slice(b"__keyevent@");
            chan.extend_from_slice(db.to_string().as_bytes());
            chan.extend_from_slice(b"__:");
            chan.extend_from_slice(event.as_bytes());
            self.publish(current, &chan, key);
        }
    }

    /// Announces the keys lookups found expired or missing since the last
    /// flush, and invalidates the WATCHes on the expired ones.
    pub fn flush_pending_events(&mut self, mut current: Option<&mut crate::net::client::Client>) {
        if self.pending_events.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending_events);
        for (db, key) in &pending.expired {
            self.touch_watched_key(*db, key);
            self.notify_keyspace_event(current.as_deref_mut(), NOTIFY_EXPIRED, "expired", key, *db);
        }
        for (db, key) in &pending.missed {
            self.notify_keyspace_event(
                current.as_deref_mut(),
                NOTIFY_KEY_MISS,
                "keymiss",
                key,
                *db,
            );
        }
    }

    /// Whether lookups must queue what they find expired or missing.
    #[inline]
    pub fn wants_expired_events(&self) -> bool {
        self.config.notify_keyspace_events & NOTIFY_EXPIRED != 0
            || !self.watches.is_empty()
            || self.tracking.active()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_strings_round_trip_as_redis_prints_them() {
        let f = |s| flags_to_string(parse_flags(s).unwrap());
        assert_eq!(f("KAn"), "AK");
        assert_eq!(f("Kgn"), "gnK");
        assert_eq!(f("KEA"), "AKE");
        assert_eq!(f("Eml"), "lEm");
        assert_eq!(f(""), "");
        assert_eq!(f("Kg$lshzxetd"), "AK");
        assert_eq!(parse_flags("X"), None);
    }
}
