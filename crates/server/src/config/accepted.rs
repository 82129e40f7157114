//! Redis 7.0 configs that ferrokv accepts, validates and returns but does
//! not act on, so that a Redis config file, `CONFIG SET` from a tool and
//! `CONFIG GET *` work unchanged (docs/config.md says, for each, why
//! nothing depends on it here). Each is checked as Redis checks it, with
//! Redis's error texts; values live in [`Config::accepted`].
//!
//! Not here: the `tls-*` and `cluster-*` configs (acted on;
//! `config/tls.rs`, `config/cluster.rs`). Kept here though acted on:
//! `oom-score-adj` and `oom-score-adj-values` (read by `oom.rs`),
//! `shutdown-timeout`, `shutdown-on-sigterm` and `shutdown-on-sigint`
//! (read by `shutdown.rs`).

use super::{Config, ConfigOption};

/// How a value is checked.
pub enum Kind {
    Bool,
    /// An integer in `[min, max]`.
    Int(i64, i64),
    /// A memory value (`100mb`), at least 0.
    Memory,
    /// One of these words.
    Enum(&'static [&'static str]),
    /// Any string.
    Str,
    /// `oom-score-adj-values`: three integers in [-2000, 2000].
    OomValues,
    /// `shutdown-on-sig*`: `default` or flags (`crate::shutdown::Flags`).
    ShutdownFlags,
}

/// Checks `a` (the words given) against `kind`: the value to store, or
/// Redis's reason for refusing it.
pub fn check(kind: &Kind, a: &[String]) -> Result<String, String> {
    let one = || -> Result<&str, String> {
        match a {
            [v] => Ok(v.as_str()),
            _ => Err("wrong number of arguments".into()),
        }
    };
    match kind {
        Kind::Bool => match one()?.to_ascii_lowercase().as_str() {
            v @ ("yes" | "no") => Ok(v.to_string()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Int(min, max) => {
            let v: i64 = one()?
                .parse()
                .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
            if v < *min || v > *max {
                return Err(format!(
                    "argument must be between {min} and {max} inclusive"
                ));
            }
            Ok(v.to_string())
        }
        Kind::Memory => {
            let v = super::parse_memory(one()?)
                .map_err(|_| "argument must be a memory value".to_string())?;
            Ok(v.to_string())
        }
        Kind::Enum(words) => {
            let v = one()?.to_ascii_lowercase();
            if words.contains(&v.as_str()) {
                Ok(v)
            } else {
                Err(format!(
                    "argument(s) must be one of the following: {}",
                    words.join(", ")
                ))
            }
        }
        Kind::Str => Ok(one()?.to_string()),
        Kind::OomValues => {
            let words: Vec<String> = a.iter().flat_map(|x| super::split(x)).collect();
            let ok = words.len() == 3
                && words
                    .iter()
                    .all(|w| w.parse::<i64>().is_ok_and(|v| (-2000..=2000).contains(&v)));
            if !ok {
                return Err("Invalid oom-score-adj-values".into());
            }
            Ok(words.join(" "))
        }
        Kind::ShutdownFlags => {
            let words: Vec<String> = a.iter().flat_map(|x| super::split(x)).collect();
            crate::shutdown::Flags::parse_config(&words.join(" ")).map(|f| f.config_string())
        }
    }
}

impl Config {
    /// `shutdown-timeout`, seconds.
    pub fn shutdown_timeout(&self) -> u64 {
        self.accepted
            .get("shutdown-timeout")
            .and_then(|v| v.parse().ok())
            .unwrap_or(10)
    }

    /// The flags a shutdown signal (`SIGTERM` or `SIGINT`) shuts down with.
    pub fn shutdown_on_signal(&self, sig: &str) -> crate::shutdown::Flags {
        let name = if sig == "SIGINT" {
            "shutdown-on-sigint"
        } else {
            "shutdown-on-sigterm"
        };
        self.accepted
            .get(name)
            .and_then(|v| crate::shutdown::Flags::parse_config(v).ok())
            .unwrap_or_default()
    }
}

macro_rules! accepted {
    ($name:literal, $default:literal, $mutable:expr, $kind:expr) => {
        ConfigOption {
            name: $name,
            default: $default,
            mutable: $mutable,
            set: |c: &mut Config, a: &[String]| -> Result<(), String> {
                let v = check(&$kind, a)?;
                c.accepted.insert($name, v);
                Ok(())
            },
            get: |c: &Config| -> String {
                c.accepted
                    .get($name)
                    .cloned()
                    .unwrap_or_else(|| $default.to_string())
            },
            protected: false,
            alias_of: None,
        }
    };
}

const B: Kind = Kind::Bool;
const INT_MAX: i64 = i32::MAX as i64;

pub static ACCEPTED: &[ConfigOption] = &[
    accepted!("active-defrag-cycle-max", "25", true, Kind::Int(1, 99)),
    accepted!("active-defrag-cycle-min", "1", true, Kind::Int(1, 99)),
    accepted!(
        "active-defrag-ignore-bytes",
        "104857600",
        true,
        Kind::Memory
    ),
    accepted!(
        "active-defrag-max-scan-fields",
        "1000",
        true,
        Kind::Int(1, i64::MAX)
    ),
    accepted!(
        "active-defrag-threshold-lower",
        "10",
        true,
        Kind::Int(0, 1000)
    ),
    accepted!(
        "active-defrag-threshold-upper",
        "100",
        true,
        Kind::Int(0, 1000)
    ),
    accepted!("active-expire-effort", "1", true, Kind::Int(1, 10)),
    accepted!("activedefrag", "no", true, B),
    accepted!("activerehashing", "yes", true, B),
    accepted!("always-show-logo", "no", false, B),
    accepted!("aof-disable-auto-gc", "no", true, B),
    accepted!("aof-rewrite-incremental-fsync", "yes", true, B),
    accepted!("aof-timestamp-enabled", "no", true, B),
    accepted!("aof-use-rdb-preamble", "yes", true, B),
    accepted!("aof_rewrite_cpulist", "", false, Kind::Str),
    accepted!("bgsave_cpulist", "", false, Kind::Str),
    accepted!("bind-source-addr", "", true, Kind::Str),
    accepted!("bio_cpulist", "", false, Kind::Str),
    accepted!("crash-log-enabled", "yes", true, B),
    accepted!("crash-memcheck-enabled", "yes", true, B),
    accepted!("daemonize", "no", false, B),
    accepted!("disable-thp", "yes", false, B),
    accepted!("dynamic-hz", "yes", true, B),
    accepted!("ignore-warnings", "", true, Kind::Str),
    accepted!("jemalloc-bg-thread", "yes", true, B),
    accepted!("lazyfree-lazy-expire", "no", true, B),
    accepted!("lazyfree-lazy-server-del", "no", true, B),
    accepted!("lazyfree-lazy-user-del", "no", true, B),
    accepted!("lazyfree-lazy-user-flush", "no", true, B),
    accepted!("no-appendfsync-on-rewrite", "no", true, B),
    accepted!(
        "oom-score-adj",
        "no",
        true,
        Kind::Enum(&["no", "yes", "relative", "absolute"])
    ),
    accepted!("oom-score-adj-values", "0 200 800", true, Kind::OomValues),
    accepted!(
        "proc-title-template",
        "{title} {listen-addr} {server-mode}",
        true,
        Kind::Str
    ),
    accepted!(
        "propagation-error-behavior",
        "ignore",
        true,
        Kind::Enum(&["ignore", "panic", "panic-on-replicas"])
    ),
    accepted!("rdb-del-sync-files", "no", true, B),
    accepted!("rdb-save-incremental-fsync", "yes", true, B),
    accepted!("repl-disable-tcp-nodelay", "no", true, B),
    accepted!("replica-ignore-disk-write-errors", "no", true, B),
    accepted!("replica-ignore-maxmemory", "yes", true, B),
    accepted!("replica-lazy-flush", "no", true, B),
    accepted!("server_cpulist", "", false, Kind::Str),
    accepted!("set-proc-title", "yes", false, B),
    accepted!("shutdown-on-sigint", "default", true, Kind::ShutdownFlags),
    accepted!("shutdown-on-sigterm", "default", true, Kind::ShutdownFlags),
    accepted!("shutdown-timeout", "10", true, Kind::Int(0, INT_MAX)),
    alias!("slave-announce-ip", "replica-announce-ip"),
    alias!("slave-announce-port", "replica-announce-port"),
    alias!("slave-ignore-maxmemory", "replica-ignore-maxmemory"),
    alias!("slave-lazy-flush", "replica-lazy-flush"),
    accepted!("socket-mark-id", "0", false, Kind::Int(0, u32::MAX as i64)),
    accepted!(
        "supervised",
        "no",
        false,
        Kind::Enum(&["upstart", "systemd", "auto", "no"])
    ),
    accepted!("syslog-enabled", "no", false, B),
    accepted!(
        "syslog-facility",
        "local0",
        false,
        Kind::Enum(&[
            "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"
        ])
    ),
    accepted!("syslog-ident", "redis", false, Kind::Str),
];
