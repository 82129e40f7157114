//! ACL SETUSER GETUSER DELUSER LIST USERS WHOAMI CAT LOG SAVE LOAD GENPASS
//! DRYRUN HELP, with Redis 7.0's replies and error texts.

use super::user::{bad_name, merge_selector_args};
use super::{Acl, Denied, UserId, CATEGORIES, DEFAULT_USER};
use crate::commands::flags::*;
use crate::commands::{is, reply_help, CommandSpec, Ctx};
use crate::net::client::Client;
use crate::server::Server;
use ferrokv_resp::Args;

const fn cmd(
    name: &'static str,
    arity: i32,
    flags: u32,
    h: crate::commands::Handler,
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h)
        .group("server")
        .since("6.0.0")
}

const ADMIN_SUB: u32 = ADMIN | NOSCRIPT | LOADING | STALE;

pub static COMMANDS: &[CommandSpec] = &[cmd("acl", -2, 0, acl_help)
    .doc("A container for Access List Control commands ", "")
    .complexity("Depends on subcommand.")
    .subs(SUBS)];

static SUBS: &[CommandSpec] = &[
    cmd("acl|cat", -2, NOSCRIPT | LOADING | STALE, acl_cat).doc(
        "List the ACL categories or the commands inside a category",
        "[categoryname]",
    ),
    cmd("acl|deluser", -3, ADMIN_SUB, acl_deluser)
        .complexity("O(1) amortized time considering the typical user.")
        .doc(
            "Remove the specified ACL users and the associated rules",
            "username [username ...]",
        ),
    cmd("acl|dryrun", -4, ADMIN_SUB, acl_dryrun)
        .since("7.0.0")
        .doc(
            "Returns whether the user can execute the given command without executing the command.",
            "username command [arg [arg ...]]",
        ),
    cmd("acl|genpass", -2, NOSCRIPT | LOADING | STALE, acl_genpass).doc(
        "Generate a pseudorandom secure password to use for ACL users",
        "[bits]",
    ),
    cmd("acl|getuser", 3, ADMIN_SUB, acl_getuser)
        .complexity(
            "O(N). Where N is the number of password, command and pattern rules that the user has.",
        )
        .doc("Get the rules for a specific ACL user", "username"),
    cmd("acl|help", 2, LOADING | STALE, acl_help)
        .doc("Show helpful text about the different subcommands", ""),
    cmd("acl|list", 2, ADMIN_SUB, acl_list)
        .complexity("O(N). Where N is the number of configured users.")
        .doc("List the current ACL rules in ACL config file format", ""),
    cmd("acl|load", 2, ADMIN_SUB, acl_load)
        .complexity("O(N). Where N is the number of configured users.")
        .doc("Reload the ACLs from the configured ACL file", ""),
    cmd("acl|log", -2, ADMIN_SUB, acl_log)
        .complexity("O(N) with N being the number of entries shown.")
        .doc(
            "List latest events denied because of ACLs in place",
            "[count|RESET]",
        ),
    cmd("acl|save", 2, ADMIN_SUB, acl_save)
        .complexity("O(N). Where N is the number of configured users.")
        .doc("Save the current ACL rules in the configured ACL file", ""),
    cmd("acl|setuser", -3, ADMIN_SUB, acl_setuser)
        .complexity("O(N). Where N is the number of rules provided.")
        .doc(
            "Modify or create the rules for a specific ACL user",
            "username [rule [rule ...]]",
        ),
    cmd("acl|users", 2, ADMIN_SUB, acl_users)
        .complexity("O(N). Where N is the number of configured users.")
        .doc("List the username of all the configured ACL rules", ""),
    cmd("acl|whoami", 2, NOSCRIPT | LOADING | STALE, acl_whoami).doc(
        "Return the name of the user associated to the current connection",
        "",
    ),
];

const HELP: &[&str] = &[
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
];

/// Redis's `addReplySubcommandSyntaxError`.
fn subcommand_syntax(ctx: &mut Ctx, args: &Args) {
    ctx.error(&format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
        String::from_utf8_lossy(crate::server::c_str(args.get(1), 128))
    ));
}

/// ACL HELP
fn acl_help(ctx: &mut Ctx, _args: Args) {
    reply_help(ctx, "ACL", HELP);
}

/// ACL SETUSER username [rule [rule ...]]
fn acl_setuser(ctx: &mut Ctx, args: Args) {
    let name = args.get(2);
    if bad_name(name) {
        ctx.error("ERR Usernames can't contain spaces or null characters");
        return;
    }
    let rules: Vec<&[u8]> = (3..args.len()).map(|i| args.get(i)).collect();
    let merged = match merge_selector_args(&rules) {
        Ok(m) => m,
        Err(j) => {
            ctx.error(&format!(
                "ERR Unmatched parenthesis in acl selector starting at '{}'.",
                String::from_utf8_lossy(rules[j])
            ));
            return;
        }
    };
    let acl = &ctx.srv.acl;
    let existing = acl.by_name(name);
    // Applied to a copy: the user changes only if every rule is valid.
    let mut u = match existing.and_then(|id| acl.user(id)) {
        Some(u) => u.clone(),
        None => acl.blank_user(name),
    };
    for r in &merged {
        if let Err(e) = u.apply(&acl.catalog, acl.pubsub_default_all, r) {
            ctx.error(&format!(
                "ERR Error in ACL SETUSER modifier '{}': {}",
                String::from_utf8_lossy(r),
                e.text()
            ));
            return;
        }
    }
    let (shrunk, disabled) = match existing.and_then(|id| acl.user(id)) {
        Some(old) => (old.channels_shrunk(&u), old.enabled && !u.enabled),
        None => (false, false),
    };
    let id = ctx.srv.acl.put(u);
    if disabled {
        // A user switched off loses its connections (Redis 7.0 keeps them
        // until they reconnect; 7.2 and ferrokv disconnect them).
        kill_user_clients(ctx.srv, ctx.client, id);
    } else if shrunk {
        kill_pubsub_clients_if_needed(ctx.srv, ctx.client, id);
    }
    ctx.client.out.ok();
}

/// Closes every connection authenticated as `id` (the caller after its
/// reply), first moving them to an unauthenticated default user.
pub fn kill_user_clients(srv: &mut Server, me: &mut Client, id: UserId) {
    close_clients_of(srv, Some(me), |u| u == id);
}

/// Closes the connections whose user `doomed` picks (the caller, if
/// picked, after its reply), moving them to an unauthenticated default
/// user first, as Redis's `ACLFreeUserAndKillClients`.
fn close_clients_of(srv: &mut Server, me: Option<&mut Client>, doomed: impl Fn(UserId) -> bool) {
    let mut tokens = Vec::new();
    for (t, c) in srv.clients.iter_mut() {
        if let Some(c) = c {
            if doomed(c.user) && c.conn.stream.is_some() {
                c.user = DEFAULT_USER;
                c.authenticated = false;
                tokens.push(t);
            }
        }
    }
    srv.close_queue.extend(tokens);
    if let Some(me) = me {
        if doomed(me.user) {
            me.user = DEFAULT_USER;
            me.authenticated = false;
            me.close_after_reply = true;
        }
    }
}

/// After `id` lost channels: closes its pub/sub connections subscribed to
/// something it may no longer see (Redis's `ACLKillPubsubClientsIfNeeded`).
fn kill_pubsub_clients_if_needed(srv: &mut Server, me: &mut Client, id: UserId) {
    let Some(user) = srv.acl.user(id) else { return };
    let mut doomed = Vec::new();
    for (t, c) in srv.clients.iter() {
        if let Some(c) = c {
            if c.user == id && c.subs.any() && !user.allows_subscriptions(&c.subs) {
                doomed.push(t);
            }
        }
    }
    if me.user == id && me.subs.any() && !user.allows_subscriptions(&me.subs) {
        me.close_after_reply = true;
    }
    srv.close_queue.extend(doomed);
}

/// ACL DELUSER username [username ...]
fn acl_deluser(ctx: &mut Ctx, args: Args) {
    let mut deleted = 0;
    for i in 2..args.len() {
        let name = args.get(i);
        if name == b"default" {
            ctx.error("ERR The 'default' user cannot be removed");
            return;
        }
    }
    for i in 2..args.len() {
        if let Some(id) = ctx.srv.acl.by_name(args.get(i)) {
            kill_user_clients(ctx.srv, ctx.client, id);
            ctx.srv.acl.remove(id);
            deleted += 1;
        }
    }
    ctx.client.out.int(deleted);
}

/// ACL GETUSER username
fn acl_getuser(ctx: &mut Ctx, args: Args) {
    let acl = &ctx.srv.acl;
    let Some(u) = acl.by_name(args.get(2)).and_then(|id| acl.user(id)) else {
        ctx.client.out.null();
        return;
    };
    let out = &mut ctx.client.out;
    out.map(6);
    out.bulk(b"flags");
    let flags = u.flags();
    out.array(flags.len());
    for f in flags {
        out.bulk(f.as_bytes());
    }
    out.bulk(b"passwords");
    out.array(u.passwords.len());
    for p in &u.passwords {
        out.bulk(p.as_bytes());
    }
    let root = &u.selectors[0];
    out.bulk(b"commands");
    out.bulk(root.describe_commands(&acl.catalog).as_bytes());
    out.bulk(b"keys");
    out.bulk(root.describe_keys().as_bytes());
    out.bulk(b"channels");
    out.bulk(root.describe_channels().as_bytes());
    out.bulk(b"selectors");
    out.array(u.selectors.len() - 1);
    for s in &u.selectors[1..] {
        out.map(3);
        out.bulk(b"commands");
        out.bulk(s.describe_commands(&acl.catalog).as_bytes());
        out.bulk(b"keys");
        out.bulk(s.describe_keys().as_bytes());
        out.bulk(b"channels");
        out.bulk(s.describe_channels().as_bytes());
    }
}

/// ACL LIST
fn acl_list(ctx: &mut Ctx, _args: Args) {
    let acl = &ctx.srv.acl;
    let lines: Vec<String> = acl
        .users()
        .map(|(_, u)| {
            format!(
                "user {} {}",
                String::from_utf8_lossy(&u.name),
                u.describe(&acl.catalog)
            )
        })
        .collect();
    ctx.client.out.array(lines.len());
    for l in lines {
        ctx.client.out.bulk(l.as_bytes());
    }
}

/// ACL USERS
fn acl_users(ctx: &mut Ctx, _args: Args) {
    let names: Vec<Vec<u8>> = ctx.srv.acl.users().map(|(_, u)| u.name.clone()).collect();
    ctx.client.out.array(names.len());
    for n in names {
        ctx.client.out.bulk(&n);
    }
}

/// ACL WHOAMI
fn acl_whoami(ctx: &mut Ctx, _args: Args) {
    let name = user_name(&ctx.srv.acl, ctx.client.user);
    ctx.client.out.bulk(&name);
}

/// The name of a client's user.
pub fn user_name(acl: &Acl, id: UserId) -> Vec<u8> {
    acl.user(id)
        .map_or_else(|| b"default".to_vec(), |u| u.name.clone())
}

/// ACL CAT [category]
fn acl_cat(ctx: &mut Ctx, args: Args) {
    if args.len() > 3 {
        subcommand_syntax(ctx, &args);
        return;
    }
    if args.len() == 2 {
        ctx.client.out.array(CATEGORIES.len());
        for c in CATEGORIES {
            ctx.client.out.bulk(c.as_bytes());
        }
        return;
    }
    let Some(bit) = super::category_bit(args.get(2)) else {
        ctx.error(&format!(
            "ERR Unknown category '{}'",
            String::from_utf8_lossy(crate::server::c_str(args.get(2), 128))
        ));
        return;
    };
    let names: Vec<&str> = ctx
        .srv
        .acl
        .catalog
        .cmds
        .iter()
        .filter(|c| c.cats & bit != 0)
        .map(|c| c.name)
        .collect();
    ctx.client.out.array(names.len());
    for n in names {
        ctx.client.out.bulk(n.as_bytes());
    }
}

/// ACL LOG [count|RESET]
fn acl_log(ctx: &mut Ctx, args: Args) {
    if args.len() > 3 {
        subcommand_syntax(ctx, &args);
        return;
    }
    let mut count = 10usize;
    if args.len() == 3 {
        if is(args.get(2), "reset") {
            ctx.srv.acl.log.reset();
            ctx.client.out.ok();
            return;
        }
        match ferrokv_resp::parse_i64(args.get(2)) {
            Some(n) => count = n.max(0) as usize,
            None => {
                ctx.error(crate::commands::err::NOT_INTEGER);
                return;
            }
        }
    }
    let entries: Vec<super::log::Entry> = ctx
        .srv
        .acl
        .log
        .entries
        .iter()
        .take(count)
        .cloned()
        .collect();
    let out = &mut ctx.client.out;
    out.array(entries.len());
    for e in entries {
        out.map(7);
        out.bulk(b"count");
        out.int(e.count as i64);
        out.bulk(b"reason");
        out.bulk(e.reason.reason().as_bytes());
        out.bulk(b"context");
        out.bulk(e.context.name().as_bytes());
        out.bulk(b"object");
        out.bulk(&e.object);
        out.bulk(b"username");
        out.bulk(&e.username);
        out.bulk(b"age-seconds");
        out.double(e.created.elapsed().as_millis() as f64 / 1000.0);
        out.bulk(b"client-info");
        out.bulk(e.client_info.as_bytes());
    }
}

const NO_ACLFILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

/// ACL SAVE
fn acl_save(ctx: &mut Ctx, _args: Args) {
    let Some(path) = ctx.srv.config.aclfile.clone() else {
        ctx.error(NO_ACLFILE);
        return;
    };
    let body = super::file::render(&ctx.srv.acl);
    match crate::persistence::write_atomically(&path, &body) {
        Ok(()) => ctx.client.out.ok(),
        Err(e) => {
            tracing::warn!("Failed saving ACLs to {path}: {e}");
            ctx.error("ERR There was an error trying to save the ACLs. Please check the server logs for more information");
        }
    }
}

/// ACL LOAD
fn acl_load(ctx: &mut Ctx, _args: Args) {
    let Some(path) = ctx.srv.config.aclfile.clone() else {
        ctx.error(NO_ACLFILE);
        return;
    };
    match load_file(ctx.srv, Some(ctx.client), &path) {
        Ok(()) => ctx.client.out.ok(),
        Err(e) => ctx.error(&format!("ERR {e}")),
    }
}

/// Loads `path` as the whole user set; on success every connection of a
/// user other than `default` is closed (as Redis, whose users are all new
/// objects after a load).
pub fn load_file(srv: &mut Server, me: Option<&mut Client>, path: &str) -> Result<(), String> {
    let text = std::fs::read(path)
        .map_err(|e| format!("Error loading ACLs, opening file '{path}': {e}"))?;
    let set = super::file::parse(&text, path, &srv.acl.catalog, srv.acl.pubsub_default_all)?;
    let old = srv.acl.replace_all(set);
    close_clients_of(srv, me, |u| u != DEFAULT_USER && old.contains(&u));
    Ok(())
}

/// ACL GENPASS [bits]
fn acl_genpass(ctx: &mut Ctx, args: Args) {
    if args.len() > 3 {
        subcommand_syntax(ctx, &args);
        return;
    }
    let bits = if args.len() == 3 {
        match ferrokv_resp::parse_i64(args.get(2)) {
            Some(b) if (1..=4096).contains(&b) => b as usize,
            None => {
                ctx.error(crate::commands::err::NOT_INTEGER);
                return;
            }
            Some(_) => {
                ctx.error("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096");
                return;
            }
        }
    } else {
        256
    };
    let chars = bits.div_ceil(4);
    let mut bytes = vec![0u8; chars.div_ceil(2)];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut bytes);
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        use std::fmt::Write;
        let _ = write!(s, "{b:02x}");
    }
    s.truncate(chars);
    ctx.client.out.bulk(s.as_bytes());
}

/// ACL DRYRUN username command [arg ...]
fn acl_dryrun(ctx: &mut Ctx, args: Args) {
    let name = args.get(2);
    let Some(id) = ctx.srv.acl.by_name(name) else {
        ctx.error(&format!(
            "ERR User '{}' not found",
            String::from_utf8_lossy(name)
        ));
        return;
    };
    let cmd_name = args.get(3);
    let srv = &*ctx.srv;
    let Some(mut idx) = srv
        .commands
        .lookup(cmd_name)
        .filter(|&i| !srv.commands.specs[i].name.contains('|'))
    else {
        ctx.error(&format!(
            "ERR Command '{}' not found",
            String::from_utf8_lossy(cmd_name)
        ));
        return;
    };
    let spec = srv.commands.specs[idx];
    if !spec.subcommands.is_empty() && args.len() >= 5 {
        if let Some(sub) = srv.commands.lookup_sub(spec.name, args.get(4)) {
            idx = sub;
        }
    }
    let spec = srv.commands.specs[idx];
    let sub = args.skip(3);
    if !spec.arity_ok(sub.len()) {
        ctx.error(&format!(
            "ERR wrong number of arguments for '{}' command",
            spec.name
        ));
        return;
    }
    match srv.acl.check(id, idx, &sub) {
        Ok(()) => ctx.client.out.ok(),
        Err((why, pos)) => {
            let text = match why {
                Denied::Cmd => format!(
                    "This user has no permissions to run the '{}' command",
                    spec.name
                ),
                Denied::Key => format!(
                    "This user has no permissions to access the '{}' key",
                    String::from_utf8_lossy(sub.get(pos))
                ),
                Denied::Channel => format!(
                    "This user has no permissions to access the '{}' channel",
                    String::from_utf8_lossy(sub.get(pos))
                ),
                Denied::Auth => "no permission".into(),
            };
            ctx.client.out.bulk(text.as_bytes());
        }
    }
}
