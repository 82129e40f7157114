//! `COMMAND INFO` and `COMMAND DOCS` replies.
//!
//! For every command Redis 7.0 has, the docs (summary, since, group,
//! complexity, history, doc flags, the argument tree with its key-spec
//! indexes) and the ACL categories and tips are Redis's own, from the
//! table `docs_table.rs` that `scripts/gen_command_docs.py` generates from
//! redis-server; a container lists only the subcommands ferrokv has.
//!
//! A command of ferrokv's own carries its syntax in the notation of the
//! Redis docs (`key value [NX|XX] [EX seconds|PX milliseconds]`); this
//! module parses it into Redis 7's argument tree so that `redis-cli` can
//! show hints and complete commands as it does against Redis.

use super::{flags, CommandSpec};
use crate::net::client::Reply;

/// A piece of a `COMMAND DOCS` reply as Redis types it.
#[derive(Debug)]
pub enum Doc {
    Map(&'static [(&'static str, Doc)]),
    Arr(&'static [Doc]),
    Set(&'static [Doc]),
    Bulk(&'static str),
    Simple(&'static str),
    Int(i64),
}

/// Redis's docs for `name` (`"config|get"`: from its container's
/// `subcommands`).
fn redis_docs(name: &str) -> Option<&'static Doc> {
    let t = super::docs_table::DOCS;
    let top = name.split('|').next().unwrap_or(name);
    let d = t
        .binary_search_by(|(n, _)| (*n).cmp(top))
        .ok()
        .map(|i| &t[i].1)?;
    if top == name {
        return Some(d);
    }
    let Doc::Map(fields) = d else { return None };
    let (_, Doc::Map(subs)) = fields.iter().find(|(k, _)| *k == "subcommands")? else {
        return None;
    };
    subs.iter().find(|(n, _)| *n == name).map(|(_, d)| d)
}

/// What `COMMAND INFO` says of a command Redis 7.0 has.
#[derive(Debug)]
pub struct Meta {
    pub name: &'static str,
    pub flags: &'static [&'static str],
    /// The legacy first key, last key and step.
    pub keys: (i32, i32, i32),
    pub acl: &'static [&'static str],
    pub tips: &'static [&'static str],
}

/// Redis's `COMMAND INFO` metadata for `name` (`"config|get"` for a
/// subcommand).
pub fn redis_meta(name: &str) -> Option<&'static Meta> {
    let t = super::docs_table::META;
    t.binary_search_by(|m| m.name.cmp(name)).ok().map(|i| &t[i])
}

/// Writes `d`; in a `subcommands` map, only the subcommands `spec` has.
fn write_doc(out: &mut Reply, d: &Doc, spec: &CommandSpec) {
    match d {
        Doc::Map(fields) => {
            out.map(fields.len());
            for (k, v) in *fields {
                out.bulk(k.as_bytes());
                match (*k, v) {
                    ("subcommands", Doc::Map(subs)) => {
                        let ours: Vec<_> = subs
                            .iter()
                            .filter_map(|(n, d)| {
                                spec.subcommands
                                    .iter()
                                    .find(|s| s.name == *n)
                                    .map(|s| (n, d, s))
                            })
                            .collect();
                        out.map(ours.len());
                        for (n, d, s) in ours {
                            out.bulk(n.as_bytes());
                            write_doc(out, d, s);
                        }
                    }
                    _ => write_doc(out, v, spec),
                }
            }
        }
        Doc::Arr(items) => {
            out.array(items.len());
            for i in *items {
                write_doc(out, i, spec);
            }
        }
        Doc::Set(items) => {
            out.set(items.len());
            for i in *items {
                write_doc(out, i, spec);
            }
        }
        Doc::Bulk(s) => out.bulk(s.as_bytes()),
        Doc::Simple(s) => out.simple(s),
        Doc::Int(n) => out.int(*n),
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Arg {
    pub name: String,
    pub kind: &'static str,
    pub token: Option<String>,
    pub optional: bool,
    pub multiple: bool,
    pub children: Vec<Arg>,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Open,
    Close,
    Bar,
    Dots,
    Word(String),
}

fn lex(s: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut word = String::new();
    let flush = |w: &mut String, out: &mut Vec<Tok>| {
        if !w.is_empty() {
            if w == "..." {
                out.push(Tok::Dots);
            } else {
                out.push(Tok::Word(std::mem::take(w)));
            }
            w.clear();
        }
    };
    for c in s.chars() {
        match c {
            '[' | ']' | '|' | ' ' => {
                flush(&mut word, &mut out);
                match c {
                    '[' => out.push(Tok::Open),
                    ']' => out.push(Tok::Close),
                    '|' => out.push(Tok::Bar),
                    _ => {}
                }
            }
            _ => word.push(c),
        }
    }
    flush(&mut word, &mut out);
    out
}

fn is_token(w: &str) -> bool {
    w.chars().any(|c| c.is_ascii_uppercase()) && !w.chars().any(|c| c.is_ascii_lowercase())
}

fn kind_of(name: &str) -> &'static str {
    match name {
        "key" | "key1" | "key2" | "source" | "destination" | "newkey" => "key",
        "pattern" => "pattern",
        n if n.starts_with("unix-time") => "unix-time",
        "seconds" | "milliseconds" | "count" | "index" | "offset" | "start" | "end"
        | "increment" | "decrement" | "db" | "destination-db" | "timeout" | "numkeys"
        | "min-match-len" | "client-id" | "maxage" | "cursor" | "index1" | "index2"
        | "protover" | "number-of-commands" => "integer",
        _ => "string",
    }
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    /// Alternatives separated by `|` until `]` or the end.
    fn alts(&mut self) -> Vec<Vec<Arg>> {
        let mut alts = vec![self.seq()];
        while self.peek() == Some(&Tok::Bar) {
            self.pos += 1;
            alts.push(self.seq());
        }
        alts
    }

    fn seq(&mut self) -> Vec<Arg> {
        let mut seq: Vec<Arg> = Vec::new();
        while let Some(t) = self.peek().cloned() {
            match t {
                Tok::Close | Tok::Bar => break,
                Tok::Dots => {
                    self.pos += 1;
                    if let Some(last) = seq.last_mut() {
                        last.multiple = true;
                    }
                }
                Tok::Open => {
                    self.pos += 1;
                    let alts = self.alts();
                    if self.peek() == Some(&Tok::Close) {
                        self.pos += 1;
                    }
                    // `[x ...]` after `x`: the previous arguments repeat.
                    if alts.len() == 1 {
                        let inner = &alts[0];
                        if inner.last().is_some_and(|a| a.multiple) {
                            let n = inner.len();
                            let mut plain: Vec<Arg> = inner.clone();
                            plain.last_mut().unwrap().multiple = false;
                            if seq.len() >= n && seq[seq.len() - n..] == plain[..] {
                                if n == 1 {
                                    seq.last_mut().unwrap().multiple = true;
                                } else {
                                    let block = Arg {
                                        name: "data".into(),
                                        kind: "block",
                                        token: None,
                                        optional: false,
                                        multiple: true,
                                        children: seq.split_off(seq.len() - n),
                                    };
                                    seq.push(block);
                                }
                                continue;
                            }
                        }
                    }
                    let mut arg = group(alts);
                    arg.optional = true;
                    seq.push(arg);
                }
                Tok::Word(w) => {
                    self.pos += 1;
                    if is_token(&w) {
                        // `EX seconds`: a token followed by its value.
                        if let Some(Tok::Word(v)) = self.peek().cloned() {
                            if !is_token(&v) {
                                self.pos += 1;
                                seq.push(Arg {
                                    name: v.clone(),
                                    kind: kind_of(&v),
                                    token: Some(w),
                                    optional: false,
                                    multiple: false,
                                    children: vec![],
                                });
                                continue;
                            }
                        }
                        seq.push(Arg {
                            name: w.to_ascii_lowercase(),
                            kind: "pure-token",
                            token: Some(w),
                            optional: false,
                            multiple: false,
                            children: vec![],
                        });
                    } else {
                        seq.push(Arg {
                            name: w.clone(),
                            kind: kind_of(&w),
                            token: None,
                            optional: false,
                            multiple: false,
                            children: vec![],
                        });
                    }
                }
            }
        }
        seq
    }
}

fn group(alts: Vec<Vec<Arg>>) -> Arg {
    let as_one = |mut seq: Vec<Arg>| -> Arg {
        if seq.len() == 1 {
            seq.pop().unwrap()
        } else {
            Arg {
                name: seq
                    .iter()
                    .map(|a| a.name.clone())
                    .collect::<Vec<_>>()
                    .join("-"),
                kind: "block",
                token: None,
                optional: false,
                multiple: false,
                children: seq,
            }
        }
    };
    if alts.len() == 1 {
        return as_one(alts.into_iter().next().unwrap());
    }
    let children: Vec<Arg> = alts.into_iter().map(as_one).collect();
    Arg {
        name: children
            .iter()
            .map(|a| a.name.clone())
            .collect::<Vec<_>>()
            .join("-"),
        kind: "oneof",
        token: None,
        optional: false,
        multiple: false,
        children,
    }
}

/// Parses a syntax string into Redis's argument tree.
pub fn parse_syntax(s: &str) -> Vec<Arg> {
    let mut p = Parser {
        toks: lex(s),
        pos: 0,
    };
    let mut all = Vec::new();
    loop {
        all.extend(p.seq());
        match p.peek() {
            None => break,
            _ => p.pos += 1,
        }
    }
    all
}

/// A command's ACL categories (`@read`, ...): Redis's own for the
/// commands Redis 7.0 has, derived from the row for ferrokv's others.
pub fn categories(spec: &CommandSpec) -> Vec<String> {
    match redis_meta(spec.name) {
        Some(m) => m.acl.iter().map(|c| c.to_string()).collect(),
        None => acl_categories(spec),
    }
}

fn acl_categories(spec: &CommandSpec) -> Vec<String> {
    let mut v = Vec::new();
    if spec.has(flags::WRITE) {
        v.push("@write".to_string());
    }
    if spec.has(flags::READONLY) {
        v.push("@read".into());
    }
    // READONLY/READWRITE are documented in the cluster group but Redis
    // files them under @connection.
    let g = match spec.name {
        "readonly" | "readwrite" => "connection",
        _ => spec.group,
    };
    if g != "server" && g != "connection" && g != "transactions" {
        v.push(format!("@{g}"));
    }
    if spec.keys.0 > 0 || g == "generic" {
        v.push("@keyspace".into());
    }
    if spec.has(flags::ADMIN) {
        v.push("@admin".into());
        v.push("@dangerous".into());
    }
    if g == "connection" {
        v.push("@connection".into());
    }
    v.push(
        if spec.has(flags::FAST) {
            "@fast"
        } else {
            "@slow"
        }
        .into(),
    );
    // Redis lists its explicit `@transaction` after the flag-derived ones.
    if g == "transactions" {
        v.push("@transaction".into());
    }
    v
}

/// One `COMMAND INFO` entry.
pub fn command_info(out: &mut Reply, spec: &CommandSpec) {
    out.array(10);
    out.bulk(spec.name.as_bytes());
    out.int(spec.arity as i64);
    if let Some(m) = redis_meta(spec.name) {
        // Redis's own figures; the table rows hold what ferrokv acts on
        // (`tests/command_keys.rs` checks that they agree).
        out.set(m.flags.len());
        for f in m.flags {
            out.simple(f);
        }
        out.int(m.keys.0 as i64);
        out.int(m.keys.1 as i64);
        out.int(m.keys.2 as i64);
        out.set(m.acl.len());
        for c in m.acl {
            out.simple(c);
        }
        out.set(m.tips.len());
        for t in m.tips {
            out.bulk(t.as_bytes());
        }
    } else {
        let names: Vec<&str> = flags::NAMES
            .iter()
            .filter(|(f, _)| spec.has(*f))
            .map(|(_, n)| *n)
            .collect();
        out.set(names.len());
        for n in names {
            out.simple(n);
        }
        out.int(spec.keys.0 as i64);
        out.int(spec.keys.1 as i64);
        out.int(spec.keys.2 as i64);
        let cats = acl_categories(spec);
        out.set(cats.len());
        for c in &cats {
            out.simple(c);
        }
        out.set(0); // tips
    }
    match super::keyspecs::of(spec.name) {
        Some(specs) => {
            out.set(specs.len());
            for k in specs {
                key_spec_info(out, k);
            }
        }
        None if spec.keys.0 > 0 => {
            // A command of ferrokv's own: one spec from the legacy range,
            // as Redis derives them for modules.
            out.set(1);
            key_spec_info(
                out,
                &super::keyspecs::KeySpec {
                    flags: 0,
                    begin: super::keyspecs::Begin::Index(spec.keys.0),
                    find: super::keyspecs::Find::Range {
                        lastkey: if spec.keys.1 < 0 {
                            spec.keys.1
                        } else {
                            spec.keys.1 - spec.keys.0
                        },
                        keystep: spec.keys.2,
                        limit: 0,
                    },
                    notes: "",
                },
            );
        }
        None => out.set(0),
    }
    // Redis's addReplyCommandSubCommands: an empty set, or an array.
    if spec.subcommands.is_empty() {
        out.set(0);
    } else {
        out.array(spec.subcommands.len());
    }
    for s in spec.subcommands {
        command_info(out, s);
    }
}

/// One key specification as `COMMAND INFO` shows it (Redis's
/// `addReplyCommandKeySpecs`).
fn key_spec_info(out: &mut Reply, k: &super::keyspecs::KeySpec) {
    use super::keyspecs::{flag_names, Begin, Find};
    let with_notes = !k.notes.is_empty();
    out.map(3 + usize::from(with_notes));
    if with_notes {
        out.bulk(b"notes");
        out.bulk(k.notes.as_bytes());
    }
    out.bulk(b"flags");
    let names: Vec<&str> = flag_names(k.flags).collect();
    out.set(names.len());
    for n in names {
        out.simple(n);
    }
    out.bulk(b"begin_search");
    out.map(2);
    out.bulk(b"type");
    match k.begin {
        Begin::Index(i) => {
            out.bulk(b"index");
            out.bulk(b"spec");
            out.map(1);
            out.bulk(b"index");
            out.int(i64::from(i));
        }
        Begin::Keyword(kw, startfrom) => {
            out.bulk(b"keyword");
            out.bulk(b"spec");
            out.map(2);
            out.bulk(b"keyword");
            out.bulk(kw.as_bytes());
            out.bulk(b"startfrom");
            out.int(i64::from(startfrom));
        }
        Begin::Unknown => {
            out.bulk(b"unknown");
            out.bulk(b"spec");
            out.map(0);
        }
    }
    out.bulk(b"find_keys");
    out.map(2);
    out.bulk(b"type");
    match k.find {
        Find::Range {
            lastkey,
            keystep,
            limit,
        } => {
            out.bulk(b"range");
            out.bulk(b"spec");
            out.map(3);
            out.bulk(b"lastkey");
            out.int(i64::from(lastkey));
            out.bulk(b"keystep");
            out.int(i64::from(keystep));
            out.bulk(b"limit");
            out.int(i64::from(limit));
        }
        Find::Keynum {
            keynumidx,
            firstkey,
            keystep,
        } => {
            out.bulk(b"keynum");
            out.bulk(b"spec");
            out.map(3);
            out.bulk(b"keynumidx");
            out.int(i64::from(keynumidx));
            out.bulk(b"firstkey");
            out.int(i64::from(firstkey));
            out.bulk(b"keystep");
            out.int(i64::from(keystep));
        }
        Find::Unknown => {
            out.bulk(b"unknown");
            out.bulk(b"spec");
            out.map(0);
        }
    }
}

fn write_arg(out: &mut Reply, a: &Arg) {
    let mut n = 2;
    if a.kind == "key" {
        n += 1;
    }
    if a.token.is_some() {
        n += 1;
    }
    let has_flags = a.optional || a.multiple;
    if has_flags {
        n += 1;
    }
    if !a.children.is_empty() {
        n += 1;
    }
    out.map(n);
    out.bulk(b"name");
    out.bulk(a.name.as_bytes());
    out.bulk(b"type");
    out.bulk(a.kind.as_bytes());
    if a.kind == "key" {
        out.bulk(b"key_spec_index");
        out.int(0);
    }
    if let Some(t) = &a.token {
        out.bulk(b"token");
        out.bulk(t.as_bytes());
    }
    if has_flags {
        out.bulk(b"flags");
        let fl: Vec<&str> = [(a.optional, "optional"), (a.multiple, "multiple")]
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, n)| *n)
            .collect();
        out.set(fl.len());
        for f in fl {
            out.simple(f);
        }
    }
    if !a.children.is_empty() {
        out.bulk(b"arguments");
        out.array(a.children.len());
        for c in &a.children {
            write_arg(out, c);
        }
    }
}

/// One `COMMAND DOCS` entry (the value of the map; the caller writes the name).
pub fn command_docs(out: &mut Reply, spec: &CommandSpec) {
    if let Some(d) = redis_docs(spec.name) {
        return write_doc(out, d, spec);
    }
    own_docs(out, spec)
}

/// [`command_docs`] of a command Redis 7.0 does not have, from its row.
fn own_docs(out: &mut Reply, spec: &CommandSpec) {
    let args = parse_syntax(spec.syntax);
    // Redis leaves `complexity` out where its docs give none (MONITOR, SYNC).
    let mut n = if spec.complexity.is_empty() { 3 } else { 4 };
    if !args.is_empty() {
        n += 1;
    }
    if !spec.subcommands.is_empty() {
        n += 1;
    }
    out.map(n);
    out.bulk(b"summary");
    out.bulk(spec.summary.as_bytes());
    out.bulk(b"since");
    out.bulk(spec.since.as_bytes());
    out.bulk(b"group");
    out.bulk(spec.group.as_bytes());
    if !spec.complexity.is_empty() {
        out.bulk(b"complexity");
        out.bulk(spec.complexity.as_bytes());
    }
    if !args.is_empty() {
        out.bulk(b"arguments");
        out.array(args.len());
        for a in &args {
            write_arg(out, a);
        }
    }
    if !spec.subcommands.is_empty() {
        out.bulk(b"subcommands");
        out.map(spec.subcommands.len());
        for s in spec.subcommands {
            out.bulk(s.name.as_bytes());
            own_docs(out, s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_ferrokv_acts_on_are_redis_s() {
        // For every command Redis 7.0 has: the flags in the table rows
        // (what dispatch, MULTI, scripts and replication act on) are the
        // ones Redis's COMMAND INFO reports, among those ferrokv models.
        // ferrokv marks EVAL, EVALSHA, FCALL, PUBLISH, SPUBLISH and
        // PFCOUNT `may_replicate` where 7.0.15's COMMAND INFO does not show
        // it (its table has it; 7.2 shows it): CLIENT PAUSE WRITE holds
        // them, as it holds writes, and read-only scripts refuse them.
        let extra_ok = |name: &str, f: &str| {
            f == "may_replicate"
                && matches!(
                    name,
                    "eval" | "evalsha" | "fcall" | "publish" | "spublish" | "pfcount"
                )
        };
        let table = crate::commands::CommandTable::new();
        let mut wrong = Vec::new();
        for spec in &table.specs {
            let Some(m) = redis_meta(spec.name) else {
                continue;
            };
            for (bit, f) in flags::NAMES {
                let ours = spec.has(*bit);
                let theirs = m.flags.contains(f);
                if ours != theirs && !(ours && extra_ok(spec.name, f)) {
                    wrong.push(format!("{} {}{f}", spec.name, if ours { "+" } else { "-" }));
                }
            }
        }
        assert!(wrong.is_empty(), "{wrong:?}");
    }

    #[test]
    fn parses_set_syntax() {
        let a = parse_syntax(
            "key value [NX|XX] [GET] [EX seconds|PX milliseconds|EXAT unix-time-seconds|PXAT unix-time-milliseconds|KEEPTTL]",
        );
        assert_eq!(a.len(), 5);
        assert_eq!(a[0].kind, "key");
        assert_eq!(a[2].kind, "oneof");
        assert!(a[2].optional);
        assert_eq!(a[3].token.as_deref(), Some("GET"));
        assert_eq!(a[4].children[0].token.as_deref(), Some("EX"));
        assert_eq!(a[4].children[0].name, "seconds");
        assert_eq!(a[4].children[4].kind, "pure-token");
    }

    #[test]
    fn repeated_arguments_become_multiple() {
        let a = parse_syntax("key [key ...]");
        assert_eq!(a.len(), 1);
        assert!(a[0].multiple);
        let a = parse_syntax("key value [key value ...]");
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].kind, "block");
        assert!(a[0].multiple);
    }
}
