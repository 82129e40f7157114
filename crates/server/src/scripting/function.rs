//! Redis 7.0 Functions: libraries of named functions, loaded once with
//! `FUNCTION LOAD` (their body runs with the library API only:
//! `redis.register_function`, `redis.log`), called with `FCALL` /
//! `FCALL_RO`, kept in the RDB and the AOF, moved with `FUNCTION DUMP` /
//! `RESTORE`.
//!
//! One Lua state holds every library; its environment switches between
//! the library API (while a body loads) and the visible globals (when a
//! function runs), as Redis swaps its globals' `__index`.

use super::api::error_table;
use super::engine::{Engine, Kind};
use super::sflags;
use mlua::{Lua, MultiValue, Value};
use std::time::{Duration, Instant};

/// How long a library's body may run while loading (Redis's 500 ms).
pub const LOAD_TIMEOUT: Duration = Duration::from_millis(500);

/// One function of a library.
pub struct FunctionDef {
    pub name: String,
    /// The callback, in the functions engine's registry (see
    /// `cache::Script::func`).
    pub func: mlua::RegistryKey,
    pub flags: u32,
    pub description: Option<Vec<u8>>,
}

/// A loaded library.
pub struct Library {
    pub name: String,
    pub code: Vec<u8>,
    pub functions: Vec<FunctionDef>,
}

/// Every library, and which library each function belongs to.
pub struct Functions {
    pub engine: Engine,
    /// Libraries in load order.
    pub libraries: Vec<Library>,
    /// Function name → (library, function) positions in `libraries`, so
    /// FCALL finds its function in one lookup; rebuilt when a library is
    /// loaded or deleted.
    by_name: hashbrown::HashMap<String, (usize, usize)>,
}

/// What `redis.register_function` collects while a body loads.
struct LoadCtx {
    start: Instant,
    registered: Vec<FunctionDef>,
}

impl Functions {
    /// No libraries; the engine's heap capped at `heap_limit` bytes.
    pub fn new(heap_limit: usize) -> mlua::Result<Self> {
        Ok(Functions {
            engine: Engine::new(Kind::Function, heap_limit)?,
            libraries: Vec::new(),
            by_name: Default::default(),
        })
    }

    /// Function `name`, of any library.
    pub fn find(&self, name: &str) -> Option<&FunctionDef> {
        let &(l, f) = self.by_name.get(name)?;
        Some(&self.libraries[l].functions[f])
    }

    fn reindex(&mut self) {
        self.by_name = self
            .libraries
            .iter()
            .enumerate()
            .flat_map(|(l, lib)| {
                lib.functions
                    .iter()
                    .enumerate()
                    .map(move |(f, def)| (def.name.clone(), (l, f)))
            })
            .collect();
    }

    pub fn library(&self, name: &str) -> Option<&Library> {
        self.libraries.iter().find(|l| l.name == name)
    }

    pub fn function_count(&self) -> usize {
        self.by_name.len()
    }

    /// Bytes of library code (`used_memory_functions`).
    pub fn code_bytes(&self) -> usize {
        self.libraries
            .iter()
            .map(|l| l.code.len() + l.name.len() + l.functions.len() * 64)
            .sum()
    }

    /// Drops every library (`FUNCTION FLUSH`): a fresh Lua state.
    pub fn flush(&mut self, heap_limit: usize) -> mlua::Result<()> {
        *self = Functions::new(heap_limit)?;
        Ok(())
    }

    /// `FUNCTION DELETE`.
    pub fn delete(&mut self, name: &str) -> bool {
        let before = self.libraries.len();
        self.libraries.retain(|l| l.name != name);
        self.reindex();
        self.libraries.len() != before
    }

    /// `FUNCTION LOAD [REPLACE] code`: the library's name, or Redis's error.
    pub fn load(&mut self, code: &[u8], replace: bool) -> Result<String, String> {
        let name = parse_metadata(code)?;
        if self.library(&name).is_some() && !replace {
            return Err(format!("ERR Library '{name}' already exists"));
        }
        let func = self
            .engine
            .compile(code, "@user_function")
            .map_err(|e| format!("ERR Error compiling function: {e}"))?;
        let lua = self.engine.lua.clone();
        self.engine
            .set_loading(true)
            .map_err(|e| format!("ERR {e}"))?;
        lua.set_app_data(LoadCtx {
            start: Instant::now(),
            registered: Vec::new(),
        });
        let r: mlua::Result<(bool, Value)> =
            self.engine.xpcall.call((func, self.engine.handler.clone()));
        let ctx = lua.remove_app_data::<LoadCtx>();
        let _ = self.engine.set_loading(false);
        let registered = match r {
            Ok((true, _)) => ctx.map(|c| c.registered).unwrap_or_default(),
            Ok((false, Value::Table(t))) => {
                let msg = t.raw_get::<String>("err").unwrap_or_default();
                return Err(format!("ERR Error registering functions: {msg}"));
            }
            Ok((false, _)) => return Err("ERR Error registering functions".into()),
            Err(e) => {
                return Err(format!(
                    "ERR Error registering functions: {}",
                    super::run::lua_error_text(&e)
                ))
            }
        };
        if registered.is_empty() {
            return Err("ERR No functions registered".into());
        }
        for f in &registered {
            let clash = self
                .by_name
                .get(&f.name)
                .is_some_and(|&(l, _)| self.libraries[l].name != name);
            if clash {
                return Err(format!("ERR Function {} already exists", f.name));
            }
        }
        let lib = Library {
            name: name.clone(),
            code: code.to_vec(),
            functions: registered,
        };
        match self.libraries.iter_mut().find(|l| l.name == name) {
            Some(old) => *old = lib,
            None => self.libraries.push(lib),
        }
        self.reindex();
        Ok(name)
    }
}

/// Whether a running library body is past its time: the hook asks.
pub fn load_timed_out(lua: &Lua) -> bool {
    lua.app_data_ref::<LoadCtx>()
        .is_some_and(|c| c.start.elapsed() > LOAD_TIMEOUT)
}

/// The library name from the `#!lua name=<name>` first line.
pub fn parse_metadata(code: &[u8]) -> Result<String, String> {
    if !code.starts_with(b"#!") {
        return Err("ERR Missing library metadata".into());
    }
    let line_end = code.iter().position(|&c| c == b'\n').unwrap_or(code.len());
    let line = String::from_utf8_lossy(&code[2..line_end]).into_owned();
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or("");
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("ERR Engine '{engine}' not found"));
    }
    let mut name = None;
    for p in parts {
        match p.strip_prefix("name=") {
            Some(n) => name = Some(n.to_string()),
            None => return Err(format!("ERR Invalid metadata value given: {p}")),
        }
    }
    let name = name.ok_or("ERR Library name was not given")?;
    if !valid_name(&name) {
        return Err(NAME_ERROR.into());
    }
    Ok(name)
}

const NAME_ERROR: &str = "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

fn valid_name(n: &str) -> bool {
    !n.is_empty() && n.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

fn raise(lua: &Lua, msg: &str) -> mlua::Result<MultiValue> {
    let t = error_table(lua, msg)?;
    Err(mlua::Error::external(super::api::RaisedTable(
        lua.create_registry_value(t)?,
    )))
}

/// `redis.register_function(name, callback)` or
/// `redis.register_function{function_name=, callback=, flags=, description=}`.
pub fn register_function(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    if lua.app_data_ref::<LoadCtx>().is_none() {
        return raise(
            lua,
            "redis.register_function can only be called on FUNCTION LOAD command",
        );
    }
    if args.is_empty() || args.len() > 2 {
        return raise(lua, "wrong number of arguments to redis.register_function");
    }
    let (name, callback, flags, description) = if args.len() == 1 {
        let Value::Table(t) = &args[0] else {
            return raise(lua, "calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).");
        };
        let mut name = None;
        let mut callback = None;
        let mut flags = 0;
        let mut description = None;
        for pair in t.clone().pairs::<Value, Value>() {
            let (k, v) = pair?;
            let Value::String(k) = k else {
                return raise(
                    lua,
                    "named argument key given to redis.register_function is not a string",
                );
            };
            match &*k.to_string_lossy() {
                "function_name" => match v {
                    Value::String(s) => name = Some(s.to_string_lossy()),
                    _ => return raise(
                        lua,
                        "function_name argument given to redis.register_function must be a string",
                    ),
                },
                "description" => match v {
                    Value::String(s) => description = Some(s.as_bytes().to_vec()),
                    _ => return raise(
                        lua,
                        "description argument given to redis.register_function must be a string",
                    ),
                },
                "callback" => {
                    match v {
                        Value::Function(f) => callback = Some(f),
                        _ => return raise(
                            lua,
                            "callback argument given to redis.register_function must be a function",
                        ),
                    }
                }
                "flags" => {
                    let Value::Table(ft) = v else {
                        return raise(
                            lua,
                            "flags argument to redis.register_function must be a table representing function flags",
                        );
                    };
                    for f in ft.sequence_values::<Value>() {
                        let f = f?;
                        let bit = match &f {
                            Value::String(s) => sflags::parse(&s.as_bytes()),
                            _ => None,
                        };
                        match bit {
                            Some(b) => flags |= b,
                            None => return raise(lua, "unknown flag given"),
                        }
                    }
                }
                _ => return raise(lua, "unknown argument given to redis.register_function"),
            }
        }
        let Some(name) = name else {
            return raise(
                lua,
                "redis.register_function must get a function name argument",
            );
        };
        let Some(callback) = callback else {
            return raise(lua, "redis.register_function must get a callback argument");
        };
        (name, callback, flags, description)
    } else {
        let Value::String(n) = &args[0] else {
            return raise(
                lua,
                "first argument to redis.register_function must be a string",
            );
        };
        let Value::Function(f) = &args[1] else {
            return raise(
                lua,
                "second argument to redis.register_function must be a function",
            );
        };
        (n.to_string_lossy(), f.clone(), 0, None)
    };
    if !valid_name(&name) {
        return raise(lua, NAME_ERROR.trim_start_matches("ERR "));
    }
    let mut ctx = lua
        .app_data_mut::<LoadCtx>()
        .ok_or_else(|| mlua::Error::runtime("not loading"))?;
    if ctx.registered.iter().any(|f| f.name == name) {
        drop(ctx);
        return raise(lua, "Function already exists in the library");
    }
    let func = lua.create_registry_value(callback)?;
    ctx.registered.push(FunctionDef {
        name,
        func,
        flags,
        description,
    });
    Ok(MultiValue::new())
}

/// The flags of a function as `FUNCTION LIST` shows them.
pub fn flag_names(flags: u32) -> Vec<&'static str> {
    sflags::NAMES
        .iter()
        .filter(|(f, _)| flags & f != 0)
        .map(|(_, n)| *n)
        .collect()
}
