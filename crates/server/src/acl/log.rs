//! `ACL LOG`: the latest denied commands and failed logins, as Redis 7.0
//! keeps them. An entry equal to a recent one (same reason, context,
//! object and user, within 60 s, among the 10 newest) is counted again and
//! moved to the front instead of being added; the log holds at most
//! `acllog-max-len` entries.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Where the denied command came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    Toplevel,
    Multi,
    Lua,
}

impl Context {
    pub fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Entry {
    pub count: u64,
    pub reason: super::Denied,
    pub context: Context,
    pub object: Vec<u8>,
    pub username: Vec<u8>,
    pub created: Instant,
    pub client_info: String,
}

/// Entries this close in time group together.
const GROUPING: Duration = Duration::from_secs(60);
/// How many of the newest entries are searched for one to group with.
const SEARCH: usize = 10;

#[derive(Default, Debug)]
pub struct AclLog {
    /// Newest first.
    pub entries: VecDeque<Entry>,
}

impl AclLog {
    /// Adds an entry, or counts it again on a recent equal one.
    pub fn add(&mut self, e: Entry, max_len: usize) {
        let now = e.created;
        let found = self.entries.iter().take(SEARCH).position(|o| {
            o.reason == e.reason
                && o.context == e.context
                && o.object == e.object
                && o.username == e.username
                && now.saturating_duration_since(o.created) < GROUPING
        });
        match found {
            Some(i) => {
                let mut o = self.entries.remove(i).expect("entry found");
                o.count += 1;
                o.created = now;
                o.client_info = e.client_info;
                self.entries.push_front(o);
            }
            None => self.entries.push_front(e),
        }
        self.entries.truncate(max_len);
    }

    pub fn reset(&mut self) {
        self.entries.clear();
    }
}
