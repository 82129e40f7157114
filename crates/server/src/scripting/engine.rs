//! A Lua 5.1 state set up as Redis 7.0 sets up its own: the libraries it
//! loads and no others, the `redis` API, and the sandbox.
//!
//! Libraries: base (without `print`, `dofile`, `loadfile`, `getfenv`,
//! `setfenv`, `newproxy`, `module`, `require`), `table`, `string`, `math`
//! (with Redis's `random`), `coroutine`, and the bundled `bit`, `struct`,
//! `cjson`, `cmsgpack`. No `io`, `os`, `package` or `debug`.
//!
//! The sandbox. Redis 7.0 patches Lua's VM so that tables can be marked
//! read-only; our Lua is stock 5.1, so the same guarantees are built from
//! metatables:
//! - scripts run with an environment `ENV` that is an empty proxy: a read
//!   falls through to the table of visible globals (`V`, which holds the
//!   names Redis 7.0.15 shows, plus `KEYS`/`ARGV` for `EVAL`) and, for a
//!   name it does not hold, raises "Script attempted to access nonexistent
//!   global variable"; any write raises "Attempt to modify a readonly
//!   table", so no script can leave state behind for the next one;
//! - every library table is seen through such a proxy too (`string.rep =
//!   nil` is refused), and so is the strings' metatable;
//! - `rawset` and `setmetatable` refuse the proxies; `rawget`, `next`,
//!   `pairs` and `ipairs` see through them, so iterating `redis` or `_G`
//!   lists what Redis lists;
//! - `loadstring`/`load` compile text only (bytecode can break out of any
//!   Lua sandbox) and give the chunk the same environment.
//!
//! The error handler (`__redis__err__handler`) turns any error into
//! Redis's error table `{err=..., source=..., line=...}`, so that the reply
//! can name the script line (`... script: <sha>, on @user_script:1.`).

use mlua::{ffi, Function, HookTriggers, Lua, LuaOptions, RegistryKey, StdLib, Table, Value};

/// Chunk name of the sandbox's own Lua code: its frames are skipped when
/// an error is located.
pub const SANDBOX_CHUNK: &str = "=[sandbox]";

/// Instructions between two calls of the hook (Redis's count hook).
pub const HOOK_EVERY: u32 = 100_000;

/// Which API a state gets: `EVAL` scripts, or `FUNCTION` libraries.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Eval,
    Function,
}

/// A Lua state and the handles the runner needs.
pub struct Engine {
    pub lua: Lua,
    /// The environment scripts run in (the read-only proxy).
    pub env: Table,
    /// The visible globals behind it (`KEYS`/`ARGV` are set here).
    pub globals: Table,
    /// Redis's error handler, given to `xpcall`.
    pub handler: Function,
    /// `xpcall`, as loaded (the visible one may be any function).
    pub xpcall: Function,
    /// The environment's metatable: its `__index` is the visible globals,
    /// or the library API while a `FUNCTION LOAD` runs.
    env_mt: Table,
    /// The library API's globals (functions engine only).
    load_globals: Option<Table>,
    /// What a run needs to enter Lua through its C API.
    pub raw: RawEntry,
}

/// The handles a run enters Lua with, without mlua's per-call machinery
/// (handle clones, a protected closure per call): the main thread and
/// registry slots, read with `lua_rawgeti` (see `run::run`).
pub struct RawEntry {
    /// The state's main thread; valid as long as the `Lua` it came from.
    pub state: *mut ffi::lua_State,
    /// `run::entry`, a C function: builds `KEYS`/`ARGV` and calls the script.
    pub entry: RegistryKey,
    /// [`Engine::handler`].
    pub handler: RegistryKey,
    /// [`Engine::globals`].
    pub globals: RegistryKey,
    /// A slot a table result or an error value is handed to mlua through;
    /// it holds `true` between runs, so that storing into it never
    /// allocates (an existing registry key).
    pub slot: RegistryKey,
}

/// The sandbox, run once with the real globals: builds the visible
/// globals `V` and the proxy `ENV`, returns both.
const SANDBOX_LUA: &str = r#"
local handler, rehook, kind, unwrap_err, pcall = ...
local G = _G
local type, error, tostring, select = type, error, tostring, select
local rawget, rawset, rawequal = rawget, rawset, rawequal
local next, pairs, ipairs = next, pairs, ipairs
local setmetatable, getmetatable, setfenv = setmetatable, getmetatable, setfenv
local loadstring, load, xpcall = loadstring, load, xpcall
local concat = table.concat

-- proxy -> the table it shows
local originals = setmetatable({}, {__mode = 'k'})
local function readonly() error("Attempt to modify a readonly table", 2) end
local function protect(real)
  local proxy = {}
  originals[proxy] = real
  setmetatable(proxy, {__index = real, __newindex = readonly, __metatable = false})
  return proxy
end
local function unwrap(t) return originals[t] or t end

local V = {}
for _, name in ipairs({'assert', 'collectgarbage', 'error', 'gcinfo', 'rawequal',
                       'select', 'tonumber', 'tostring', 'type', 'unpack', 'xpcall'}) do
  V[name] = G[name]
end
V._VERSION = G._VERSION
for _, name in ipairs({'string', 'table', 'math', 'bit', 'struct',
                       'cjson', 'cmsgpack', 'redis'}) do
  V[name] = protect(G[name])
end

-- coroutine: mlua hooks one Lua thread at a time, so every switch hooks
-- the thread that runs next (a busy loop in a coroutine stays killable).
local rawcreate, rawresume, rawyield = coroutine.create, coroutine.resume, coroutine.yield
local function pack(...) return {n = select('#', ...), ...} end
local co = {}
for k, v in pairs(coroutine) do co[k] = v end
co.create = function(f)
  if type(f) ~= 'function' then return rawcreate(f) end
  return rawcreate(function(...) rehook() return f(...) end)
end
local function resumed(r) rehook() return unpack(r, 1, r.n) end
co.resume = function(c, ...) return resumed(pack(rawresume(c, ...))) end
co.yield = function(...) return resumed(pack(rawyield(...))) end
co.wrap = function(f)
  local c = co.create(f)
  return function(...)
    local r = pack(rawresume(c, ...))
    rehook()
    if not r[1] then error(r[2], 0) end
    return unpack(r, 2, r.n)
  end
end
V.coroutine = protect(co)
V.__redis__err__handler = handler

local function missing(_, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end
local ENV = {}
originals[ENV] = V
local ENV_MT = {__index = V, __newindex = readonly, __metatable = false}
setmetatable(ENV, ENV_MT)
setmetatable(V, {__index = missing})
V._G = ENV

V.next = function(t, k) return next(unwrap(t), k) end
V.pairs = function(t) return pairs(unwrap(t)) end
V.ipairs = function(t) return ipairs(unwrap(t)) end
V.rawget = function(t, k) return rawget(unwrap(t), k) end
V.rawset = function(t, k, v)
  if originals[t] then error("Attempt to modify a readonly table", 0) end
  return rawset(t, k, v)
end
V.setmetatable = function(t, mt)
  if originals[t] then error("Attempt to modify a readonly table", 0) end
  return setmetatable(t, mt)
end
V.getmetatable = getmetatable

-- Redis's pcall: an error table with an `err` string gives that string.
local function fix(ok, ...)
  if ok then return ok, ... end
  local e = ...
  if type(e) == 'userdata' then e = unwrap_err(e) end
  if type(e) == 'table' then
    local m = e.err
    if type(m) == 'string' or type(m) == 'number' then return false, m end
  end
  return false, e
end
V.pcall = function(f, ...) return fix(pcall(f, ...)) end

-- Text only, and the chunk runs in the sandbox.
local function compile(code, name)
  -- Redis's Lua parses everything as text: a binary chunk is a syntax
  -- error on its first byte, named as Lua names a string chunk.
  if type(code) == 'string' and code:byte(1) == 27 then
    local id = name
    if id == nil then
      id = code:match('^[^\n%z]*')
      if #id > 45 then id = id:sub(1, 42) .. '...' end
    end
    return nil, '[string "' .. id .. '"]:1: unexpected symbol near \'char(27)\''
  end
  local f, e = loadstring(code, name)
  if f then setfenv(f, ENV) end
  return f, e
end
V.loadstring = function(code, name) return compile(code, name) end
V.load = function(f, name)
  if type(f) ~= 'function' then return load(f, name) end
  local parts = {}
  while true do
    local p = f()
    if p == nil or p == '' then break end
    if type(p) ~= 'string' then return nil, "reader function must return a string" end
    parts[#parts + 1] = p
  end
  return compile(concat(parts), name or '=(load)')
end

-- The strings' metatable: its `__index` is the protected string table,
-- and getmetatable('') returns a read-only view of it.
local smt = getmetatable('')
smt.__index = V.string
smt.__metatable = protect(smt)

-- FUNCTION LOAD runs the library's body with only `redis.register_function`,
-- `redis.log` and the version fields (Redis 7.0's library API); any other
-- name is a missing global.
local LOAD = nil
if kind == 'function' then
  local r = G.redis
  local api = {register_function = r.register_function, log = r.log,
               REDIS_VERSION = r.REDIS_VERSION, REDIS_VERSION_NUM = r.REDIS_VERSION_NUM,
               LOG_DEBUG = r.LOG_DEBUG, LOG_VERBOSE = r.LOG_VERBOSE,
               LOG_NOTICE = r.LOG_NOTICE, LOG_WARNING = r.LOG_WARNING}
  setmetatable(api, {__index = missing, __newindex = readonly, __metatable = false})
  local api_proxy = {}
  originals[api_proxy] = api
  setmetatable(api_proxy, {__index = api, __newindex = readonly, __metatable = false})
  LOAD = setmetatable({redis = api_proxy}, {__index = missing})
end

return ENV, V, ENV_MT, LOAD
"#;

impl Engine {
    /// A fresh state of `kind`, its heap capped at `heap_limit` bytes (0:
    /// no cap; see [`Engine::set_heap_limit`]).
    pub fn new(kind: Kind, heap_limit: usize) -> mlua::Result<Engine> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::new(),
        )?;
        let g = lua.globals();
        super::libs::open(&lua)?;
        let redis = super::api::create(&lua, kind)?;
        g.raw_set("redis", redis)?;
        super::api::replace_math_random(&lua)?;
        let handler = lua.create_function(|lua, err: Value| super::run::error_handler(lua, err))?;
        let rehook = lua.create_function(|lua, ()| {
            super::run::rehook(lua);
            Ok(())
        })?;
        let kind_name = match kind {
            Kind::Eval => "eval",
            Kind::Function => "function",
        };
        // An error raised from Rust reaches Lua as userdata: this gives
        // back the error table it carries (or its text).
        let unwrap = lua.create_function(|lua, e: Value| super::run::unwrap_error(lua, e))?;
        let (env, globals, env_mt, load_globals): (Table, Table, Table, Option<Table>) =
            lua.load(SANDBOX_LUA).set_name(SANDBOX_CHUNK).call((
                handler.clone(),
                rehook,
                kind_name,
                unwrap,
                super::api::safe_pcall(&lua)?,
            ))?;
        let xpcall: Function = g.raw_get("xpcall")?;
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
            super::run::hook,
        );
        let mut state = std::ptr::null_mut();
        // SAFETY: only reads the state pointer.
        unsafe { lua.exec_raw::<()>((), |s| state = s)? };
        // SAFETY: `run::entry` follows the C function protocol.
        let entry = unsafe { lua.create_c_function(super::run::entry)? };
        let raw = RawEntry {
            state,
            entry: lua.create_registry_value(entry)?,
            handler: lua.create_registry_value(handler.clone())?,
            globals: lua.create_registry_value(globals.clone())?,
            slot: lua.create_registry_value(true)?,
        };
        let engine = Engine {
            lua,
            env,
            globals,
            env_mt,
            load_globals,
            handler,
            xpcall,
            raw,
        };
        engine.set_heap_limit(heap_limit);
        Ok(engine)
    }

    /// Switches the environment to the library API (`FUNCTION LOAD`) or
    /// back to the visible globals.
    pub fn set_loading(&self, loading: bool) -> mlua::Result<()> {
        match (&self.load_globals, loading) {
            (Some(l), true) => self.env_mt.raw_set("__index", l.clone()),
            _ => self.env_mt.raw_set("__index", self.globals.clone()),
        }
    }

    /// Caps the Lua heap (0: no cap). An allocation past it fails with
    /// Lua's "not enough memory", which the script sees as an error.
    pub fn set_heap_limit(&self, bytes: usize) {
        let _ = self.lua.set_memory_limit(bytes);
    }

    /// Compiles a script body as `@user_script` (text only) in the sandbox.
    /// A `#!` first line (the shebang) is Lua-invisible but still line 1.
    pub fn compile(&self, body: &[u8], chunk_name: &str) -> Result<Function, String> {
        let code: std::borrow::Cow<[u8]> = if body.starts_with(b"#!") {
            let end = body.iter().position(|&c| c == b'\n').unwrap_or(body.len());
            std::borrow::Cow::Owned(body[end..].to_vec())
        } else {
            std::borrow::Cow::Borrowed(body)
        };
        self.lua
            .load(&*code)
            .set_name(chunk_name)
            .set_mode(mlua::ChunkMode::Text)
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| super::run::lua_error_text(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(e: &Engine, code: &str) -> Result<Value, String> {
        let f = e.compile(code.as_bytes(), "@user_script")?;
        let (ok, v): (bool, Value) = e
            .xpcall
            .call((f, e.handler.clone()))
            .map_err(|e| e.to_string())?;
        if ok {
            Ok(v)
        } else {
            let t = v.as_table().expect("errors are tables").clone();
            Err(t.get::<String>("err").unwrap())
        }
    }

    #[test]
    fn globals_are_read_only_and_missing_ones_are_errors() {
        let e = Engine::new(Kind::Eval, 0).unwrap();
        assert_eq!(
            eval(&e, "return x").unwrap_err(),
            "ERR user_script:1: Script attempted to access nonexistent global variable 'x'"
        );
        assert_eq!(
            eval(&e, "x = 1").unwrap_err(),
            "ERR user_script:1: Attempt to modify a readonly table"
        );
        assert_eq!(
            eval(&e, "string.rep = nil").unwrap_err(),
            "ERR user_script:1: Attempt to modify a readonly table"
        );
        assert_eq!(
            eval(&e, "rawset(_G, 'y', 1)").unwrap_err(),
            "ERR Attempt to modify a readonly table"
        );
        assert!(eval(&e, "getmetatable('').__index.rep = nil").is_err());
        assert!(eval(&e, "return print").is_err());
        assert!(eval(&e, "return os").is_err());
        assert!(eval(&e, "return debug").is_err());
        assert!(eval(&e, "return setfenv").is_err());
        // Nothing leaked: the string library still works.
        let v = eval(&e, "return ('ab'):rep(2)").unwrap();
        assert_eq!(v.as_str().unwrap(), "abab");
        let v = eval(&e, "return getmetatable('').__index == string").unwrap();
        assert_eq!(v, Value::Boolean(true));
    }

    #[test]
    fn loadstring_compiles_text_in_the_sandbox_only() {
        let e = Engine::new(Kind::Eval, 0).unwrap();
        let v = eval(
            &e,
            "return loadstring(string.dump(function() return 1 end))",
        )
        .unwrap();
        assert_eq!(v, Value::Nil);
        assert!(eval(&e, "local f = loadstring('z = 1') f()")
            .unwrap_err()
            .contains("Attempt to modify a readonly table"));
        let v = eval(&e, "return tostring(loadstring('return 1 + 1')())").unwrap();
        assert_eq!(v.as_str().unwrap(), "2");
    }

    #[test]
    fn iterating_globals_lists_the_visible_names() {
        let e = Engine::new(Kind::Eval, 0).unwrap();
        let v = eval(
            &e,
            "local t = {} for k in pairs(_G) do t[#t+1] = k end table.sort(t) return table.concat(t, ' ')",
        )
        .unwrap();
        assert_eq!(
            v.as_str().unwrap(),
            "_G _VERSION __redis__err__handler assert bit cjson cmsgpack collectgarbage coroutine error gcinfo getmetatable ipairs load loadstring math next pairs pcall rawequal rawget rawset redis select setmetatable string struct table tonumber tostring type unpack xpcall"
        );
    }
}
