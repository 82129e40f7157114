//! The `tls-*` configs (Redis 7.0's names, defaults and checks; docs/tls.md).
//! The setters only store and check a value; the rustls configurations are
//! built from all of them together (`crates/net/src/tls.rs`, `TlsContext::build`) at
//! start-up and after a `CONFIG SET` of any of them, which the server
//! undoes when the build fails (Redis: "Unable to update TLS
//! configuration").

use super::{one, parse_bool, parse_int, yes_no, Config, ConfigOption};
use crate::net::tls::AuthClients;

macro_rules! tls_str {
    ($name:literal, $field:ident) => {
        opt!(
            $name,
            "",
            true,
            |c, a| {
                c.tls.$field = one(a)?.to_string();
                Ok(())
            },
            |c| c.tls.$field.clone()
        )
    };
}

macro_rules! tls_bool {
    ($name:literal, $default:literal, $field:ident) => {
        opt!(
            $name,
            $default,
            true,
            |c, a| {
                c.tls.$field = parse_bool(a)?;
                Ok(())
            },
            |c| yes_no(c.tls.$field)
        )
    };
}

pub static TLS_OPTIONS: &[ConfigOption] = &[
    // Rebound at run time, like `port` (net/rebind.rs).
    opt!(
        "tls-port",
        "0",
        true,
        |c, a| {
            c.tls.port = parse_int(a, 0, 65535)? as u16;
            Ok(())
        },
        |c| c.tls.port.to_string()
    ),
    tls_str!("tls-cert-file", cert_file),
    tls_str!("tls-key-file", key_file),
    tls_str!("tls-key-file-pass", key_file_pass),
    tls_str!("tls-client-cert-file", client_cert_file),
    tls_str!("tls-client-key-file", client_key_file),
    tls_str!("tls-client-key-file-pass", client_key_file_pass),
    tls_str!("tls-ca-cert-file", ca_cert_file),
    tls_str!("tls-ca-cert-dir", ca_cert_dir),
    // rustls has no finite-field Diffie-Hellman: accepted, not used.
    tls_str!("tls-dh-params-file", dh_params_file),
    tls_str!("tls-protocols", protocols),
    opt!(
        "tls-ciphers",
        "",
        true,
        |c, a| {
            let v = one(a)?;
            crate::net::tls::check_suites(v, false)?;
            c.tls.ciphers = v.to_string();
            Ok(())
        },
        |c| c.tls.ciphers.clone()
    ),
    opt!(
        "tls-ciphersuites",
        "",
        true,
        |c, a| {
            let v = one(a)?;
            crate::net::tls::check_suites(v, true)?;
            c.tls.ciphersuites = v.to_string();
            Ok(())
        },
        |c| c.tls.ciphersuites.clone()
    ),
    opt!(
        "tls-auth-clients",
        "yes",
        true,
        |c, a| {
            c.tls.auth_clients = match one(a)?.to_ascii_lowercase().as_str() {
                "yes" => AuthClients::Yes,
                "no" => AuthClients::No,
                "optional" => AuthClients::Optional,
                _ => {
                    return Err(
                        "argument(s) must be one of the following: no, yes, optional".into(),
                    )
                }
            };
            Ok(())
        },
        |c| match c.tls.auth_clients {
            AuthClients::Yes => "yes",
            AuthClients::No => "no",
            AuthClients::Optional => "optional",
        }
        .to_string()
    ),
    tls_bool!("tls-prefer-server-ciphers", "no", prefer_server_ciphers),
    tls_bool!("tls-session-caching", "yes", session_caching),
    opt!(
        "tls-session-cache-size",
        "20480",
        true,
        |c, a| {
            c.tls.session_cache_size = parse_int(a, 0, i32::MAX as u64)?;
            Ok(())
        },
        |c| c.tls.session_cache_size.to_string()
    ),
    opt!(
        "tls-session-cache-timeout",
        "300",
        true,
        |c, a| {
            c.tls.session_cache_timeout = parse_int(a, 0, i32::MAX as u64)?;
            Ok(())
        },
        |c| c.tls.session_cache_timeout.to_string()
    ),
    tls_bool!("tls-replication", "no", replication),
    // The bus itself stays plain TCP (docs/cluster.md): with it, the TLS
    // port is the one announced to clients.
    tls_bool!("tls-cluster", "no", cluster),
];

/// Whether `name` is one of the options above (a `CONFIG SET` of it
/// rebuilds the TLS configurations).
pub fn is_tls_option(name: &str) -> bool {
    TLS_OPTIONS
        .iter()
        .any(|o| o.name.eq_ignore_ascii_case(name))
}

impl Config {
    /// Checks the TLS settings can be built (`CONFIG SET` of a `tls-*`
    /// option, before the change is kept).
    pub fn tls_context(&self) -> Result<crate::net::tls::TlsContext, String> {
        crate::net::tls::TlsContext::build(&self.tls)
    }
}
