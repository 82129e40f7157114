//! The module family: MODULE LIST | LOAD | LOADEX | UNLOAD | HELP.
//!
//! ferrokv has no Redis module ABI (modules are C shared objects written
//! against Redis's internals), so no module is ever loaded: LIST is empty,
//! LOAD and LOADEX fail as Redis fails on a library it cannot load, and
//! UNLOAD finds nothing. What the family does do as Redis 7.0 does is the
//! gate: LOAD, LOADEX and UNLOAD are protected commands, refused in
//! dispatch (`Server::refusal`) unless `enable-module-command` allows them
//! for this client (`MODULE LOAD` of a
//! file the attacker wrote is remote code execution on a real Redis, so
//! clients and scanners probe for it).

use super::flags::*;
use super::{reply_help, CommandSpec, Ctx};
use ferrokv_resp::Args;
use tracing::warn;

const fn cmd(name: &'static str, arity: i32, flags: u32, h: super::Handler) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h).group("server")
}

pub static COMMANDS: &[CommandSpec] = &[cmd("module", -2, 0, module_help)
    .since("4.0.0")
    .doc("A container for module commands.", "")
    .subs(MODULE_SUBS)];

static MODULE_SUBS: &[CommandSpec] = &[
    cmd("module|list", 2, ADMIN | NOSCRIPT, module_list)
        .since("4.0.0")
        .complexity("O(N) where N is the number of loaded modules.")
        .doc("Returns all loaded modules.", ""),
    cmd("module|load", -3, ADMIN | NOSCRIPT | PROTECTED, module_load)
        .since("4.0.0")
        .doc("Loads a module.", "path [arg [arg ...]]"),
    cmd(
        "module|loadex",
        -3,
        ADMIN | NOSCRIPT | PROTECTED,
        module_load,
    )
    .since("7.0.0")
    .doc(
        "Loads a module using extended parameters.",
        "path [CONFIG name value [CONFIG name value ...]] [ARGS args [args ...]]",
    ),
    cmd(
        "module|unload",
        3,
        ADMIN | NOSCRIPT | PROTECTED,
        module_unload,
    )
    .since("4.0.0")
    .doc("Unloads a module.", "name"),
    cmd("module|help", 2, LOADING | STALE, module_help)
        .since("5.0.0")
        .doc("Returns helpful text about the different subcommands.", ""),
];

/// MODULE LIST
fn module_list(ctx: &mut Ctx, _args: Args) {
    ctx.client.out.array(0);
}

/// MODULE LOAD path [arg ...]
/// MODULE LOADEX path [CONFIG name value ...] [ARGS args ...]
fn module_load(ctx: &mut Ctx, args: Args) {
    warn!(
        "Module {} failed to load: ferrokv does not load Redis modules",
        String::from_utf8_lossy(args.get(2))
    );
    ctx.error("ERR Error loading the extension. Please check the server logs.");
}

/// MODULE UNLOAD name
fn module_unload(ctx: &mut Ctx, _args: Args) {
    ctx.error("ERR Error unloading module: no such module with that name");
}

/// MODULE HELP
fn module_help(ctx: &mut Ctx, _args: Args) {
    reply_help(
        ctx,
        "MODULE",
        &[
            "LIST",
            "    Return a list of loaded modules.",
            "LOAD <path> [<arg> ...]",
            "    Load a module library from <path>, passing to it any optional arguments.",
            "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
            "    Load a module library from <path>, while passing it module configurations and optional arguments.",
            "UNLOAD <name>",
            "    Unload a module.",
        ],
    );
}
