//! A user, its selectors, the rule language that changes them and the
//! description that prints them back, as Redis 7.0's `ACLSetUser`,
//! `ACLSetSelector` and `ACLDescribeUser`.
//!
//! A user holds flags (`on`/`off`, `nopass`, payload sanitizing), its
//! passwords as SHA-256 hex digests, and selectors: the root selector,
//! changed by the rules given outside parentheses, and any number of
//! `(...)` selectors. A command runs when one selector allows the command,
//! all its keys and all its channels.

use super::{Catalog, Channels, Denied, CATEGORIES, PERM_ALL, PERM_READ, PERM_WRITE};
use ferrokv_store::pattern::glob_match;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// Why a rule was refused, with Redis's texts (`ACLSetUserStringError`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleError {
    /// ENOENT
    Unknown,
    /// EINVAL
    Syntax,
    /// EEXIST
    KeyAfterAll,
    /// EISDIR
    ChannelAfterAll,
    /// ENODEV
    NoSuchPassword,
    /// EBADMSG
    BadHash,
    /// ECHILD
    SubcommandFirstArg,
}

impl RuleError {
    pub fn text(self) -> &'static str {
        match self {
            RuleError::Unknown => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::KeyAfterAll => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::ChannelAfterAll => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::SubcommandFirstArg => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPattern {
    pub pattern: Vec<u8>,
    /// [`PERM_READ`] | [`PERM_WRITE`].
    pub perm: u8,
}

/// One set of permissions: commands, keys, channels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    pub all_keys: bool,
    pub all_channels: bool,
    /// Every command, now and any added later (`+@all`, `allcommands`;
    /// cleared by any command taken away).
    pub all_commands: bool,
    /// Commands added later would be allowed (`+@all` without a `-@all`
    /// since): how `ACL LIST` starts, `+@all` or `-@all`.
    pub future: bool,
    /// One bit per row of the command table.
    pub allowed: Vec<u64>,
    /// First arguments allowed for a command whose bit is off
    /// (`+select|0`), by command row, in the order given.
    pub firstargs: BTreeMap<u32, Vec<Vec<u8>>>,
    pub keys: Vec<KeyPattern>,
    pub channels: Vec<Vec<u8>>,
}

impl Selector {
    pub fn new(catalog: &Catalog, all_channels: bool) -> Selector {
        Selector {
            all_keys: false,
            all_channels,
            all_commands: false,
            future: false,
            allowed: vec![0; catalog.words],
            firstargs: BTreeMap::new(),
            keys: Vec::new(),
            channels: Vec::new(),
        }
    }

    #[inline]
    pub fn bit(&self, id: u32) -> bool {
        self.allowed[(id / 64) as usize] & (1 << (id % 64)) != 0
    }

    fn set_bit(&mut self, id: u32, on: bool) {
        let w = &mut self.allowed[(id / 64) as usize];
        if on {
            *w |= 1 << (id % 64);
        } else {
            *w &= !(1 << (id % 64));
            self.all_commands = false;
        }
    }

    /// `+cmd` / `-cmd`: the command, its first-args gone, and all its
    /// subcommands (Redis's `ACLChangeSelectorPerm`).
    fn change(&mut self, catalog: &Catalog, id: u32, on: bool) {
        self.set_bit(id, on);
        self.firstargs.remove(&id);
        for sub in catalog.cmds[id as usize].subs.clone() {
            self.set_bit(sub, on);
        }
    }

    /// `+@cat` / `-@cat`.
    fn change_category(&mut self, catalog: &Catalog, cat: u32, on: bool) {
        for (i, c) in catalog.cmds.iter().enumerate() {
            if c.cats & cat != 0 {
                self.change(catalog, i as u32, on);
            }
        }
    }

    fn set_all(&mut self, on: bool) {
        let v = if on { u64::MAX } else { 0 };
        self.allowed.iter_mut().for_each(|w| *w = v);
        self.all_commands = on;
        self.future = on;
        self.firstargs.clear();
    }

    /// Applies one selector rule (Redis's `ACLSetSelector`).
    pub fn apply(&mut self, catalog: &Catalog, op: &[u8]) -> Result<(), RuleError> {
        let lower = op.to_ascii_lowercase();
        match &lower[..] {
            b"allkeys" | b"~*" => {
                self.all_keys = true;
                self.keys.clear();
                return Ok(());
            }
            b"resetkeys" => {
                self.all_keys = false;
                self.keys.clear();
                return Ok(());
            }
            b"allchannels" | b"&*" => {
                self.all_channels = true;
                self.channels.clear();
                return Ok(());
            }
            b"resetchannels" => {
                self.all_channels = false;
                self.channels.clear();
                return Ok(());
            }
            b"allcommands" | b"+@all" => {
                self.set_all(true);
                return Ok(());
            }
            b"nocommands" | b"-@all" => {
                self.set_all(false);
                return Ok(());
            }
            _ => {}
        }
        match op.first() {
            Some(b'~') | Some(b'%') => self.add_key_pattern(op),
            Some(b'&') => {
                if self.all_channels {
                    return Err(RuleError::ChannelAfterAll);
                }
                let p = op[1..].to_vec();
                if !self.channels.contains(&p) {
                    self.channels.push(p);
                }
                Ok(())
            }
            Some(&sign @ (b'+' | b'-')) if op.get(1) == Some(&b'@') => {
                let cat = super::category_bit(&op[2..]).ok_or(RuleError::Unknown)?;
                self.change_category(catalog, cat, sign == b'+');
                Ok(())
            }
            Some(b'+') => self.allow_command(catalog, &op[1..]),
            Some(b'-') => {
                let id = catalog.lookup(&op[1..]).ok_or(RuleError::Unknown)?;
                self.change(catalog, id, false);
                Ok(())
            }
            _ => Err(RuleError::Syntax),
        }
    }

    fn add_key_pattern(&mut self, op: &[u8]) -> Result<(), RuleError> {
        if self.all_keys {
            return Err(RuleError::KeyAfterAll);
        }
        let (perm, offset) = if op[0] == b'%' {
            let mut perm = 0;
            let mut offset = 1;
            while offset < op.len() {
                match op[offset] {
                    b'R' | b'r' if perm & PERM_READ == 0 => perm |= PERM_READ,
                    b'W' | b'w' if perm & PERM_WRITE == 0 => perm |= PERM_WRITE,
                    b'~' => {
                        offset += 1;
                        break;
                    }
                    _ => return Err(RuleError::Syntax),
                }
                offset += 1;
            }
            if perm == 0 {
                return Err(RuleError::Syntax);
            }
            (perm, offset)
        } else {
            (PERM_ALL, 1)
        };
        let pattern = op[offset.min(op.len())..].to_vec();
        match self.keys.iter_mut().find(|k| k.pattern == pattern) {
            Some(k) => k.perm |= perm,
            None => self.keys.push(KeyPattern { pattern, perm }),
        }
        Ok(())
    }

    fn allow_command(&mut self, catalog: &Catalog, name: &[u8]) -> Result<(), RuleError> {
        let Some(bar) = name.iter().rposition(|&c| c == b'|') else {
            let id = catalog.lookup(name).ok_or(RuleError::Unknown)?;
            self.change(catalog, id, true);
            return Ok(());
        };
        let (base, sub) = (&name[..bar], &name[bar + 1..]);
        let id = catalog.lookup(base).ok_or(RuleError::Unknown)?;
        let info = &catalog.cmds[id as usize];
        if info.parent.is_some() {
            return Err(RuleError::SubcommandFirstArg);
        }
        if sub.is_empty() {
            return Err(RuleError::Syntax);
        }
        if !info.subs.is_empty() {
            let sub_id = catalog.lookup(name).ok_or(RuleError::Unknown)?;
            self.change(catalog, sub_id, true);
        } else {
            tracing::warn!(
                "Deprecation warning: Allowing a first arg of an otherwise blocked command is a misuse of ACL and may get disabled in the future (offender: +{})",
                String::from_utf8_lossy(name)
            );
            let list = self.firstargs.entry(id).or_default();
            if !list.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
                list.push(sub.to_vec());
            }
        }
        Ok(())
    }

    /// Whether this selector allows the command (Redis's
    /// `ACLSelectorCheckCmd`): `Err` with the reason and argument index.
    fn check(
        &self,
        catalog: &Catalog,
        idx: usize,
        argv: &ferrokv_resp::Args,
    ) -> Result<(), (Denied, usize)> {
        let info = &catalog.cmds[idx];
        if !self.all_commands && !info.no_auth && !self.bit(idx as u32) {
            let arg = if info.parent.is_some() { 2 } else { 1 };
            let ok = argv.len() > arg
                && self
                    .firstargs
                    .get(&(idx as u32))
                    .is_some_and(|l| l.iter().any(|a| a.eq_ignore_ascii_case(argv.get(arg))));
            if !ok {
                return Err((Denied::Cmd, 0));
            }
        }
        if !self.all_keys && info.has_keys {
            if info.set_like && argv.len() >= 2 {
                let get = (3..argv.len()).any(|i| argv.get(i).eq_ignore_ascii_case(b"get"));
                let perm = if get { PERM_ALL } else { PERM_WRITE };
                if !self.key_ok(argv.get(1), perm) {
                    return Err((Denied::Key, 1));
                }
            } else if let Some((first, last, step, perm)) = info.fixed_keys {
                let n = argv.len() as i32;
                let last = if last < 0 { n + last } else { last.min(n - 1) };
                let mut i = first;
                while i <= last {
                    if !self.key_ok(argv.get(i as usize), perm) {
                        return Err((Denied::Key, i as usize));
                    }
                    i += step;
                }
            } else {
                let v: Vec<&[u8]> = argv.iter().collect();
                for (pos, flags) in crate::commands::server::key_positions(info.spec, &v) {
                    if !self.key_ok(v[pos], super::key_perm(flags)) {
                        return Err((Denied::Key, pos));
                    }
                }
            }
        }
        if !self.all_channels && info.channels != Channels::None {
            let range = match info.channels {
                Channels::Publish => 1..2.min(argv.len()),
                _ => 1..argv.len(),
            };
            let literal = info.channels == Channels::Patterns;
            for i in range {
                if !channel_allowed(&self.channels, argv.get(i), literal) {
                    return Err((Denied::Channel, i));
                }
            }
        }
        Ok(())
    }

    fn key_ok(&self, key: &[u8], perm: u8) -> bool {
        self.all_keys
            || self
                .keys
                .iter()
                .any(|k| k.perm & perm == perm && glob_match(&k.pattern, key))
    }

    /// Keys as `ACL LIST` shows them.
    pub fn describe_keys(&self) -> String {
        if self.all_keys {
            return "~*".into();
        }
        let v: Vec<String> = self.keys.iter().map(describe_key).collect();
        v.join(" ")
    }

    /// Channels as `ACL GETUSER` shows them.
    pub fn describe_channels(&self) -> String {
        if self.all_channels {
            return "&*".into();
        }
        let v: Vec<String> = self
            .channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect();
        v.join(" ")
    }

    /// The command rules (Redis 7.0's `ACLDescribeSelectorCommandRules`):
    /// start from `+@all` or `-@all`, then, greedily, the category that
    /// best describes what is left — among those covering more of the
    /// remaining commands in the user's state than not, the one with the
    /// fewest exceptions, then the most commands — until none is left;
    /// then single commands, with the first-args last for each command.
    /// So `+@all -@read` reads back as written, not as a list of every
    /// category that happens to hold more reads than writes.
    pub fn describe_commands(&self, catalog: &Catalog) -> String {
        let additive = !self.future;
        let mut rules = String::from(if additive { "-@all " } else { "+@all " });
        let mut fake = Selector::new(catalog, false);
        fake.set_all(!additive);
        // What is still to describe: each chosen category is flipped
        // here, so the commands it covered no longer count for the next.
        let mut left = self.clone();
        let mut applied = [false; CATEGORIES.len()];
        loop {
            // (category, exceptions, covered)
            let mut best: Option<(usize, usize, usize)> = None;
            for (j, done) in applied.iter().enumerate() {
                if *done {
                    continue;
                }
                let cat = 1u32 << j;
                let (mut on, mut off) = (0, 0);
                for (i, c) in catalog.cmds.iter().enumerate() {
                    if c.cats & cat != 0 && !c.newer {
                        if left.bit(i as u32) {
                            on += 1;
                        } else {
                            off += 1;
                        }
                    }
                }
                let (same, diff) = if additive { (on, off) } else { (off, on) };
                let better = match best {
                    None => true,
                    Some((_, d, s)) => diff < d || (diff == d && same > s),
                };
                if same > diff && better {
                    best = Some((j, diff, same));
                }
            }
            let Some((j, _, _)) = best else { break };
            applied[j] = true;
            let cat = 1u32 << j;
            fake.change_category(catalog, cat, additive);
            left.change_category(catalog, cat, !additive);
            rules.push_str(if additive { "+@" } else { "-@" });
            rules.push_str(CATEGORIES[j]);
            rules.push(' ');
        }
        for (i, c) in catalog.cmds.iter().enumerate() {
            let id = i as u32;
            let (user, f) = (self.bit(id), fake.bit(id));
            if user != f {
                rules.push(if user { '+' } else { '-' });
                rules.push_str(c.name);
                rules.push(' ');
                fake.change(catalog, id, user);
            }
            if !user {
                if let Some(args) = self.firstargs.get(&id) {
                    for a in args {
                        rules.push('+');
                        rules.push_str(c.name);
                        rules.push('|');
                        rules.push_str(&String::from_utf8_lossy(a));
                        rules.push(' ');
                    }
                }
            }
        }
        debug_assert!(
            fake.allowed == self.allowed,
            "ACL description lost a command"
        );
        rules.pop();
        rules
    }

    /// The whole selector (Redis's `ACLDescribeSelector`).
    pub fn describe(&self, catalog: &Catalog) -> String {
        let mut s = String::new();
        let keys = self.describe_keys();
        if !keys.is_empty() {
            s.push_str(&keys);
            s.push(' ');
        }
        if self.all_channels {
            s.push_str("&* ");
        } else {
            s.push_str("resetchannels ");
            for c in &self.channels {
                s.push('&');
                s.push_str(&String::from_utf8_lossy(c));
                s.push(' ');
            }
        }
        s.push_str(&self.describe_commands(catalog));
        s
    }

    fn unrestricted(&self) -> bool {
        self.all_commands && self.all_keys && self.all_channels
    }
}

fn describe_key(k: &KeyPattern) -> String {
    let p = String::from_utf8_lossy(&k.pattern);
    match k.perm {
        PERM_ALL => format!("~{p}"),
        PERM_READ => format!("%R~{p}"),
        _ => format!("%W~{p}"),
    }
}

/// Whether a channel (or, `literal`, a pattern a client subscribes to) is
/// in a list of channel patterns (Redis's `ACLCheckChannelAgainstList`).
pub fn channel_allowed(list: &[Vec<u8>], channel: &[u8], literal: bool) -> bool {
    list.iter().any(|p| {
        if literal {
            p == channel
        } else {
            glob_match(p, channel)
        }
    })
}

/// Payload sanitizing of `RESTORE` for the user (`sanitize-payload`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sanitize {
    Unset,
    Skip,
    Sanitize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub name: Vec<u8>,
    pub enabled: bool,
    pub nopass: bool,
    pub sanitize: Sanitize,
    /// SHA-256 digests in lowercase hex, in the order added.
    pub passwords: Vec<String>,
    /// `selectors[0]` is the root selector.
    pub selectors: Vec<Selector>,
    /// A selector allows every command, key and channel: the check is one
    /// branch.
    pub unrestricted: bool,
}

/// The SHA-256 of a password in lowercase hex, as ACL files hold them.
pub fn hash_password(p: &[u8]) -> String {
    let d = Sha256::digest(p);
    let mut s = String::with_capacity(64);
    for b in d {
        use std::fmt::Write;
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn valid_hash(h: &[u8]) -> bool {
    h.len() == 64 && h.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

impl User {
    /// A new user: off, no passwords, no permissions.
    pub fn new(name: &[u8], catalog: &Catalog, all_channels: bool) -> User {
        User {
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            sanitize: Sanitize::Unset,
            passwords: Vec::new(),
            selectors: vec![Selector::new(catalog, all_channels)],
            unrestricted: false,
        }
    }

    /// `default`: `on nopass ~* &* +@all`.
    pub fn new_default(catalog: &Catalog) -> User {
        let mut u = User::new(b"default", catalog, false);
        for r in [&b"+@all"[..], b"~*", b"&*", b"on", b"nopass"] {
            u.apply(catalog, false, r).expect("default user rules");
        }
        u
    }

    pub fn password_ok(&self, pass: &[u8]) -> bool {
        let h = hash_password(pass);
        // Compare every stored digest in full, so the time does not tell
        // where a guess went wrong.
        self.passwords.iter().fold(false, |ok, p| {
            ok | (p.len() == h.len()
                && p.bytes().zip(h.bytes()).fold(0u8, |a, (x, y)| a | (x ^ y)) == 0)
        })
    }

    fn refresh(&mut self) {
        self.unrestricted = self.selectors.iter().any(|s| s.unrestricted());
    }

    /// Applies one rule (Redis's `ACLSetUser`); `all_channels` is
    /// `acl-pubsub-default` for `reset` and new selectors.
    pub fn apply(
        &mut self,
        catalog: &Catalog,
        all_channels: bool,
        op: &[u8],
    ) -> Result<(), RuleError> {
        let r = self.apply_inner(catalog, all_channels, op);
        self.refresh();
        r
    }

    fn apply_inner(
        &mut self,
        catalog: &Catalog,
        all_channels: bool,
        op: &[u8],
    ) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let lower = op.to_ascii_lowercase();
        match &lower[..] {
            b"on" => self.enabled = true,
            b"off" => self.enabled = false,
            b"skip-sanitize-payload" => self.sanitize = Sanitize::Skip,
            b"sanitize-payload" => self.sanitize = Sanitize::Sanitize,
            b"nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            b"resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            b"clearselectors" => self.selectors.truncate(1),
            b"reset" => {
                for r in [&b"resetpass"[..], b"resetkeys", b"resetchannels"] {
                    self.apply_inner(catalog, all_channels, r)?;
                }
                if all_channels {
                    self.apply_inner(catalog, all_channels, b"allchannels")?;
                }
                for r in [
                    &b"off"[..],
                    b"sanitize-payload",
                    b"clearselectors",
                    b"-@all",
                ] {
                    self.apply_inner(catalog, all_channels, r)?;
                }
            }
            _ => match op[0] {
                b'>' => {
                    let h = hash_password(&op[1..]);
                    if !self.passwords.contains(&h) {
                        self.passwords.push(h);
                    }
                    self.nopass = false;
                }
                b'#' => {
                    if !valid_hash(&op[1..]) {
                        return Err(RuleError::BadHash);
                    }
                    let h = String::from_utf8_lossy(&op[1..]).into_owned();
                    if !self.passwords.contains(&h) {
                        self.passwords.push(h);
                    }
                    self.nopass = false;
                }
                b'<' => {
                    let h = hash_password(&op[1..]);
                    let before = self.passwords.len();
                    self.passwords.retain(|p| *p != h);
                    if self.passwords.len() == before {
                        return Err(RuleError::NoSuchPassword);
                    }
                }
                b'!' => {
                    if !valid_hash(&op[1..]) {
                        return Err(RuleError::BadHash);
                    }
                    let h = String::from_utf8_lossy(&op[1..]).into_owned();
                    let before = self.passwords.len();
                    self.passwords.retain(|p| *p != h);
                    if self.passwords.len() == before {
                        return Err(RuleError::NoSuchPassword);
                    }
                }
                b'(' if op.len() >= 2 && op[op.len() - 1] == b')' => {
                    let inner = &op[1..op.len() - 1];
                    let mut buf = Vec::new();
                    let mut ranges = Vec::new();
                    ferrokv_resp::request::split_args(inner, &mut buf, &mut ranges)
                        .map_err(|_| RuleError::Syntax)?;
                    let mut s = Selector::new(catalog, all_channels);
                    for &(st, len) in &ranges {
                        s.apply(catalog, &buf[st..st + len])?;
                    }
                    self.selectors.push(s);
                }
                _ => self.selectors[0].apply(catalog, op)?,
            },
        }
        Ok(())
    }

    /// `ACL LIST`'s line after `user <name> `.
    pub fn describe(&self, catalog: &Catalog) -> String {
        let mut s = String::new();
        s.push_str(if self.enabled { "on " } else { "off " });
        if self.nopass {
            s.push_str("nopass ");
        }
        match self.sanitize {
            Sanitize::Skip => s.push_str("skip-sanitize-payload "),
            Sanitize::Sanitize => s.push_str("sanitize-payload "),
            Sanitize::Unset => {}
        }
        for p in &self.passwords {
            s.push('#');
            s.push_str(p);
            s.push(' ');
        }
        for (i, sel) in self.selectors.iter().enumerate() {
            let d = sel.describe(catalog);
            if i == 0 {
                s.push_str(&d);
            } else {
                s.push_str(" (");
                s.push_str(&d);
                s.push(')');
            }
        }
        s
    }

    /// `ACL GETUSER`'s flags, in Redis's order.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        match self.sanitize {
            Sanitize::Skip => f.push("skip-sanitize-payload"),
            Sanitize::Sanitize => f.push("sanitize-payload"),
            Sanitize::Unset => {}
        }
        f
    }

    /// Whether the user may run the command (Redis's
    /// `ACLCheckAllUserCommandPerm`): when every selector refuses, the
    /// reason reported is a command refusal only if all refused the
    /// command, else the highest reason at the last argument.
    pub fn check(
        &self,
        catalog: &Catalog,
        idx: usize,
        argv: &ferrokv_resp::Args,
    ) -> Result<(), (Denied, usize)> {
        let mut worst = (Denied::Cmd, 0usize);
        for s in &self.selectors {
            match s.check(catalog, idx, argv) {
                Ok(()) => return Ok(()),
                Err((why, pos)) => {
                    if why > worst.0 || (why == worst.0 && pos > worst.1) {
                        worst = (why, pos);
                    }
                }
            }
        }
        Err(worst)
    }

    /// Whether every channel the subscriptions name is still allowed
    /// (after a change that took channels away).
    pub fn allows_subscriptions(&self, subs: &crate::pubsub::Subscriptions) -> bool {
        if self.selectors.iter().any(|s| s.all_channels) {
            return true;
        }
        let all: Vec<Vec<u8>> = self
            .selectors
            .iter()
            .flat_map(|s| s.channels.iter().cloned())
            .collect();
        subs.patterns.iter().all(|p| channel_allowed(&all, p, true))
            && subs
                .channels
                .iter()
                .chain(subs.shard_channels.iter())
                .all(|c| channel_allowed(&all, c, false))
    }

    /// Whether `new` may take channels away from what `self` allowed
    /// (Redis's `ACLKillPubsubClientsIfNeeded` shortcut): no when `new`
    /// allows all channels, or keeps every pattern `self` had.
    pub fn channels_shrunk(&self, new: &User) -> bool {
        if new.selectors.iter().any(|s| s.all_channels) {
            return false;
        }
        if self.selectors.iter().any(|s| s.all_channels) {
            return true;
        }
        let upcoming: Vec<&Vec<u8>> = new
            .selectors
            .iter()
            .flat_map(|s| s.channels.iter())
            .collect();
        self.selectors
            .iter()
            .flat_map(|s| s.channels.iter())
            .any(|c| !upcoming.contains(&c))
    }
}

/// Joins arguments of a `(...)` selector split over several arguments
/// (Redis's `ACLMergeSelectorArguments`): `Err(i)` names the argument
/// whose parenthesis is never closed.
pub fn merge_selector_args(args: &[&[u8]]) -> Result<Vec<Vec<u8>>, usize> {
    let mut out = Vec::with_capacity(args.len());
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (j, &op) in args.iter().enumerate() {
        if let Some((_, cur)) = open.as_mut() {
            cur.push(b' ');
            cur.extend_from_slice(op);
            if op.last() == Some(&b')') {
                out.push(open.take().unwrap().1);
            }
            continue;
        }
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((j, op.to_vec()));
            continue;
        }
        out.push(op.to_vec());
    }
    match open {
        Some((j, _)) => Err(j),
        None => Ok(out),
    }
}

/// Whether a user name is refused (Redis's `ACLStringHasSpaces`).
pub fn bad_name(name: &[u8]) -> bool {
    name.iter()
        .any(|&c| c.is_ascii_whitespace() || c == 0 || c == 0x0b)
}
