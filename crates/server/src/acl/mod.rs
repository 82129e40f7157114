//! Access control lists, as Redis 7.0: users, their passwords and
//! permissions, and the check every command passes at the dispatch choke
//! point.
//!
//! - [`user`]: a user and its selectors (commands, keys, channels), the
//!   rule language of `ACL SETUSER` and the config file, and its
//!   description (`ACL LIST`, `ACL GETUSER`).
//! - [`log`]: the `ACL LOG` of denied commands and failed logins.
//! - [`file`]: `aclfile` loading and `ACL SAVE`, and the config file's
//!   `user` lines.
//! - [`command`]: the `ACL` command and its subcommands.
//!
//! # Cost on the data path
//!
//! A user's permissions are precomputed into bitmaps over the command
//! table's indexes (one bit per command and subcommand), so the check is a
//! few loads: the default user, and any user with a selector that allows
//! all commands, keys and channels, is marked `unrestricted` and passes in
//! one branch. For a restricted user the command's bit is tested, then its
//! keys: commands whose keys sit at fixed positions (GET, SET, HSET, ...)
//! are checked from precomputed positions without allocating; others
//! through the key specs (`COMMAND GETKEYS`'s finder).
//!
//! # Hostile input
//!
//! A rule's work is linear in its length (a category walks the command
//! table once); patterns are matched by the store's polynomial glob
//! (`ferrokv_store::pattern`), so no key or channel pattern a user is given
//! can make a check slow; `ACL LOG` keeps `acllog-max-len` entries and
//! `ACL GENPASS` at most 4096 bits. `ACL SETUSER`'s arguments are redacted
//! in `MONITOR` and `SLOWLOG`. The hostile-input sweep runs every ACL
//! subcommand (tests/hostile/table.rs takes them from the command table).

pub mod command;
pub mod file;
pub mod log;
pub mod user;

use crate::commands::keyspecs::{self, Begin, Find};
use crate::commands::{CommandSpec, CommandTable};
use hashbrown::HashMap;
use std::collections::BTreeMap;
pub use user::{Selector, User};

/// Redis 7.0's command categories, in its order (`ACL CAT`, and the order
/// `ACL LIST` tries them in when it describes a user).
pub const CATEGORIES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The category's bit, by name in any case.
pub fn category_bit(name: &[u8]) -> Option<u32> {
    CATEGORIES
        .iter()
        .position(|c| c.as_bytes().eq_ignore_ascii_case(name))
        .map(|i| 1 << i)
}

/// Why a command was refused (Redis's `ACL_DENIED_*`, whose numbers order
/// them when several selectors refuse for different reasons).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Denied {
    Cmd = 1,
    Key = 2,
    Auth = 3,
    Channel = 4,
}

impl Denied {
    /// `ACL LOG`'s `reason`.
    pub fn reason(self) -> &'static str {
        match self {
            Denied::Cmd => "command",
            Denied::Key => "key",
            Denied::Auth => "auth",
            Denied::Channel => "channel",
        }
    }

    /// The error a client gets (`cmd`: the command's full name).
    pub fn error(self, cmd: &str) -> String {
        match self {
            Denied::Cmd => {
                format!("NOPERM this user has no permissions to run the '{cmd}' command")
            }
            Denied::Key => {
                "NOPERM this user has no permissions to access one of the keys used as arguments"
                    .into()
            }
            Denied::Channel => "NOPERM this user has no permissions to access one of the channels used as arguments".into(),
            Denied::Auth => "NOPERM no permission".into(),
        }
    }
}

/// Read and write permission of a key pattern (`%R~`, `%W~`, `~`).
pub const PERM_READ: u8 = 1;
pub const PERM_WRITE: u8 = 2;
pub const PERM_ALL: u8 = PERM_READ | PERM_WRITE;

/// The permission a key of these key-spec flags needs (Redis's
/// `ACLSelectorCheckKey`).
pub fn key_perm(flags: u16) -> u8 {
    let mut p = 0;
    if flags & keyspecs::K_ACCESS != 0 {
        p |= PERM_READ;
    }
    if flags & (keyspecs::K_INSERT | keyspecs::K_DELETE | keyspecs::K_UPDATE) != 0 {
        p |= PERM_WRITE;
    }
    p
}

/// How a command names channels, for the channel check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channels {
    None,
    /// PUBLISH, SPUBLISH: the first argument.
    Publish,
    /// SUBSCRIBE, SSUBSCRIBE: every argument, matched by the patterns.
    Subscribe,
    /// PSUBSCRIBE: every argument, a pattern equal to one of the user's.
    Patterns,
}

/// What the ACL knows of one row of the command table.
#[derive(Clone)]
pub struct CmdInfo {
    pub name: &'static str,
    pub spec: &'static CommandSpec,
    /// Category bits ([`CATEGORIES`]).
    pub cats: u32,
    /// The container of a subcommand.
    pub parent: Option<u32>,
    /// A container's subcommands: the rows right after it.
    pub subs: std::ops::Range<u32>,
    /// Keys at fixed positions with one permission: (first, last (negative
    /// from the end), step, permission).
    pub fixed_keys: Option<(i32, i32, i32, u8)>,
    /// SET: its key is written, and read too when a `GET` follows (the
    /// command's own key finder, Redis's `setGetKeys`, without its
    /// allocations).
    pub set_like: bool,
    /// Whether the command has keys at all (Redis's `doesCommandHaveKeys`).
    pub has_keys: bool,
    pub channels: Channels,
    pub no_auth: bool,
    /// Added after Redis 7.0 (`WAITAOF`, the `HEXPIRE` family, ...): left
    /// out of the counts that choose the categories of a description, so
    /// rules read back as Redis 7.0 writes them (such a command appears as
    /// its own `+name`/`-name` where the categories do not already say it).
    pub newer: bool,
}

/// The command table as the ACL sees it.
pub struct Catalog {
    pub cmds: Vec<CmdInfo>,
    /// `u64` words of a command bitmap.
    pub words: usize,
    by_name: HashMap<String, u32>,
}

/// Whether a `since` version (`"7.4.0"`) is after Redis 7.0.
fn newer_than_7_0(since: &str) -> bool {
    let mut parts = since.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) > (7, 0)
}

impl Catalog {
    pub fn new(table: &CommandTable) -> Catalog {
        let mut cmds = Vec::with_capacity(table.len());
        let mut container = 0u32;
        for (i, spec) in table.specs.iter().enumerate() {
            let i = i as u32;
            let parent = if spec.name.contains('|') {
                Some(container)
            } else {
                container = i;
                None
            };
            let n = spec.subcommands.len() as u32;
            cmds.push(CmdInfo {
                name: spec.name,
                spec,
                cats: categories_of(spec),
                parent,
                subs: i + 1..i + 1 + n,
                fixed_keys: fixed_keys(spec),
                set_like: spec.name == "set",
                has_keys: has_keys(spec),
                channels: match spec.name {
                    "publish" | "spublish" => Channels::Publish,
                    "subscribe" | "ssubscribe" => Channels::Subscribe,
                    "psubscribe" => Channels::Patterns,
                    _ => Channels::None,
                },
                no_auth: spec.has(crate::commands::flags::NO_AUTH),
                newer: newer_than_7_0(spec.since),
            });
        }
        let by_name = cmds
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.to_string(), i as u32))
            .collect();
        Catalog {
            words: cmds.len().div_ceil(64),
            cmds,
            by_name,
        }
    }

    /// A command or `container|subcommand` by name, in any case (Redis's
    /// `ACLLookupCommand`).
    pub fn lookup(&self, name: &[u8]) -> Option<u32> {
        let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
        self.by_name.get(&lower).copied()
    }

    pub fn len(&self) -> usize {
        self.cmds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cmds.is_empty()
    }
}

fn categories_of(spec: &CommandSpec) -> u32 {
    crate::commands::docs::categories(spec)
        .iter()
        .filter_map(|c| category_bit(c.trim_start_matches('@').as_bytes()))
        .fold(0, |a, b| a | b)
}

fn has_keys(spec: &CommandSpec) -> bool {
    match keyspecs::of(spec.name) {
        Some(specs) => specs.iter().any(|s| s.flags & keyspecs::K_NOT_KEY == 0),
        None => spec.keys.0 > 0,
    }
}

/// One key spec that starts at an index and takes a range, with flags that
/// do not vary: the keys a call names follow from its argument count.
pub(crate) fn fixed_keys(spec: &CommandSpec) -> Option<(i32, i32, i32, u8)> {
    let specs = keyspecs::of(spec.name)?;
    let [s] = specs else { return None };
    let bad = keyspecs::K_NOT_KEY | keyspecs::K_INCOMPLETE | keyspecs::K_VARIABLE_FLAGS;
    if s.flags & bad != 0 || crate::commands::flags::SCRIPT_FLAGS & spec.flags != 0 {
        return None;
    }
    match (s.begin, s.find) {
        (
            Begin::Index(first),
            Find::Range {
                lastkey,
                keystep,
                limit: 0,
            },
        ) if first > 0 && keystep > 0 => Some((
            first,
            if lastkey >= 0 {
                first + lastkey
            } else {
                lastkey
            },
            keystep,
            key_perm(s.flags),
        )),
        _ => None,
    }
}

pub type UserId = u32;

/// The users, the log, and what the check needs.
pub struct Acl {
    pub catalog: Catalog,
    /// Users by slot; slot 0 is `default`, never removed.
    users: slab::Slab<User>,
    /// Slots by name, sorted as `ACL LIST` and `ACL USERS` show them.
    names: BTreeMap<Vec<u8>, UserId>,
    pub log: log::AclLog,
    /// `acl-pubsub-default allchannels`: new users get `&*`.
    pub pubsub_default_all: bool,
    pub stats: AclStats,
}

/// `INFO stats` counters.
#[derive(Default, Clone, Copy, Debug)]
pub struct AclStats {
    pub denied_auth: u64,
    pub denied_cmd: u64,
    pub denied_key: u64,
    pub denied_channel: u64,
}

pub const DEFAULT_USER: UserId = 0;
/// The user of the server's own clients (the master's stream, the AOF
/// loader): every command passes, as Redis's clients with no user.
pub const NO_USER: UserId = UserId::MAX;

impl Acl {
    pub fn new(table: &CommandTable) -> Acl {
        let catalog = Catalog::new(table);
        let mut users = slab::Slab::new();
        let default = User::new_default(&catalog);
        let id = users.insert(default) as UserId;
        debug_assert_eq!(id, DEFAULT_USER);
        let mut names = BTreeMap::new();
        names.insert(b"default".to_vec(), DEFAULT_USER);
        Acl {
            catalog,
            users,
            names,
            log: log::AclLog::default(),
            pubsub_default_all: false,
            stats: AclStats::default(),
        }
    }

    pub fn user(&self, id: UserId) -> Option<&User> {
        self.users.get(id as usize)
    }

    pub fn default_user(&self) -> &User {
        &self.users[DEFAULT_USER as usize]
    }

    /// Whether a new connection is authenticated as `default` without
    /// `AUTH` (Redis's `authRequired` false): `default` is on and nopass.
    pub fn default_open(&self) -> bool {
        let d = self.default_user();
        d.enabled && d.nopass
    }

    pub fn by_name(&self, name: &[u8]) -> Option<UserId> {
        self.names.get(name).copied()
    }

    /// Users in name order.
    pub fn users(&self) -> impl Iterator<Item = (UserId, &User)> {
        self.names
            .values()
            .map(move |&id| (id, &self.users[id as usize]))
    }

    /// A new user with Redis's defaults (off, no passwords, no
    /// permissions; `&*` when `acl-pubsub-default` is `allchannels`),
    /// not yet in the set.
    pub fn blank_user(&self, name: &[u8]) -> User {
        User::new(name, &self.catalog, self.pubsub_default_all)
    }

    /// Installs `user` under its name: replaces the user of that name in
    /// place (its clients keep their slot) or adds it.
    pub fn put(&mut self, user: User) -> UserId {
        match self.names.get(&user.name) {
            Some(&id) => {
                self.users[id as usize] = user;
                id
            }
            None => {
                let name = user.name.clone();
                let id = self.users.insert(user) as UserId;
                self.names.insert(name, id);
                id
            }
        }
    }

    /// Removes a user (not `default`).
    pub fn remove(&mut self, id: UserId) -> Option<User> {
        if id == DEFAULT_USER {
            return None;
        }
        let u = self.users.try_remove(id as usize)?;
        self.names.remove(&u.name);
        Some(u)
    }

    /// Replaces every user with `set` (`ACL LOAD`, `aclfile` at start-up):
    /// `default` keeps slot 0, taking the set's `default` or a fresh one.
    /// Returns the slots of the users that were replaced (their clients
    /// must go).
    pub fn replace_all(&mut self, set: Vec<User>) -> Vec<UserId> {
        let old: Vec<UserId> = self
            .names
            .values()
            .copied()
            .filter(|&id| id != DEFAULT_USER)
            .collect();
        for &id in &old {
            self.users.remove(id as usize);
        }
        self.names.clear();
        self.names.insert(b"default".to_vec(), DEFAULT_USER);
        let mut default = User::new_default(&self.catalog);
        for u in set {
            if u.name == b"default" {
                default = u;
            } else {
                self.put(u);
            }
        }
        self.users[DEFAULT_USER as usize] = default;
        old
    }

    /// `requirepass`: the default user's password (Redis's
    /// `ACLUpdateDefaultUserPassword`).
    pub fn set_requirepass(&mut self, pass: Option<&[u8]>) {
        let mut u = self.default_user().clone();
        let mut rule = Vec::new();
        let _ = u.apply(&self.catalog, self.pubsub_default_all, b"resetpass");
        match pass {
            Some(p) => {
                rule.push(b'>');
                rule.extend_from_slice(p);
            }
            None => rule.extend_from_slice(b"nopass"),
        }
        let _ = u.apply(&self.catalog, self.pubsub_default_all, &rule);
        self.users[DEFAULT_USER as usize] = u;
    }

    /// The user `name` if it exists, is on and takes `pass` (Redis's
    /// `ACLCheckUserCredentials`).
    pub fn authenticate(&self, name: &[u8], pass: &[u8]) -> Option<UserId> {
        let id = self.by_name(name)?;
        let u = &self.users[id as usize];
        (u.enabled && (u.nopass || u.password_ok(pass))).then_some(id)
    }

    /// Whether user `id` may run command `idx` with `argv` (the name
    /// first): `Err` with the reason and the argument it is about.
    #[inline]
    pub fn check(
        &self,
        id: UserId,
        idx: usize,
        argv: &ferrokv_resp::Args,
    ) -> Result<(), (Denied, usize)> {
        match self.users.get(id as usize) {
            Some(u) if u.unrestricted => Ok(()),
            Some(u) => u.check(&self.catalog, idx, argv),
            None if id == NO_USER => Ok(()),
            None => Err((Denied::Cmd, 0)),
        }
    }

    /// Counts a denial for `INFO stats`.
    pub fn count_denial(&mut self, why: Denied) {
        match why {
            Denied::Auth => self.stats.denied_auth += 1,
            Denied::Cmd => self.stats.denied_cmd += 1,
            Denied::Key => self.stats.denied_key += 1,
            Denied::Channel => self.stats.denied_channel += 1,
        }
    }

    pub fn len(&self) -> usize {
        self.users.len()
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

impl crate::server::Server {
    /// The users of the config file's `user` lines or of `aclfile`, as
    /// Redis's `ACLLoadUsersAtStartup`: a refused rule or file stops the
    /// start.
    pub fn load_acl_at_startup(&mut self) -> Result<(), String> {
        if !self.config.users.is_empty() && self.config.aclfile.is_some() {
            return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
        }
        if !self.config.users.is_empty() {
            let set = file::from_config_lines(
                &self.config.users,
                &self.acl.catalog,
                self.acl.pubsub_default_all,
            )?;
            for u in set {
                self.acl.put(u);
            }
        }
        if let Some(path) = self.config.aclfile.clone() {
            command::load_file(self, None, &path)
                .map_err(|e| format!("Aborting Redis startup because of ACL errors: {e}"))?;
        }
        Ok(())
    }

    /// The `user` lines `CONFIG REWRITE` writes (none with an `aclfile`,
    /// which holds the users instead).
    pub fn acl_config_lines(&self) -> Option<Vec<String>> {
        if self.config.aclfile.is_some() {
            return None;
        }
        Some(
            self.acl
                .users()
                .map(|(_, u)| {
                    format!(
                        "user {} {}",
                        String::from_utf8_lossy(&u.name),
                        u.describe(&self.acl.catalog)
                    )
                })
                .collect(),
        )
    }

    /// Records a refused command: the `INFO` counter and an `ACL LOG`
    /// entry naming the command, key or channel.
    pub fn acl_denied(
        &mut self,
        client: &mut crate::net::client::Client,
        idx: usize,
        args: &ferrokv_resp::Args,
        why: Denied,
        pos: usize,
        context: log::Context,
    ) {
        self.acl.count_denial(why);
        let object = match why {
            Denied::Cmd | Denied::Auth => self.commands.specs[idx].name.as_bytes().to_vec(),
            Denied::Key | Denied::Channel => args.get(pos).to_vec(),
        };
        let before = client.last_cmd;
        client.last_cmd = self.commands.specs[idx].name;
        self.acl_log(client, why, context, object, None);
        client.last_cmd = before;
    }

    /// Adds an `ACL LOG` entry for `client` (`username`: the name tried,
    /// for a failed `AUTH`).
    pub fn acl_log(
        &mut self,
        client: &crate::net::client::Client,
        why: Denied,
        context: log::Context,
        object: Vec<u8>,
        username: Option<Vec<u8>>,
    ) {
        let username = username.unwrap_or_else(|| command::user_name(&self.acl, client.user));
        let info = crate::commands::connection::client_line(client, true, self);
        let max = self.config.acllog_max_len as usize;
        self.acl.log.add(
            log::Entry {
                count: 1,
                reason: why,
                context,
                object,
                username,
                created: std::time::Instant::now(),
                client_info: info,
            },
            max,
        );
    }
}
