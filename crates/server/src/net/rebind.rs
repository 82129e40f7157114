//! `CONFIG SET port`, `tls-port` and `bind` at run time, as Redis 7.0's
//! `changeListenPort` and `changeBindAddr`: the listeners of the kind that
//! changed (plain TCP, TLS) are closed, new ones bound on the new port or
//! addresses, and the event loop watches them from its next turn. When a
//! new listener cannot be bound (the port is taken, an address is not
//! this host's), the old ones are bound again and the `CONFIG SET` fails
//! with Redis's words; the Unix socket and the connections already
//! accepted are never touched.

use crate::net::conn::Listener;
use crate::net::reactor::LISTENER_BASE;
use crate::server::Server;
use mio::{Interest, Token};

/// The addresses and ports the listeners are bound from.
#[derive(Clone, PartialEq)]
pub struct Endpoints {
    pub bind: Vec<String>,
    pub port: u16,
    pub tls_port: u16,
}

/// A `bind` entry and a port as a socket address: a leading `-` (Redis's
/// "optional address") dropped, `*` for every IPv4 address, IPv6 in
/// brackets.
fn bind_addr(host: &str, port: u16) -> std::io::Result<std::net::SocketAddr> {
    let host = host.trim_start_matches('-');
    let host = if host == "*" { "0.0.0.0" } else { host };
    let text = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    text.parse().map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("bad bind address {host}: {e}"),
        )
    })
}

/// Binds `port` (`tls`: as TLS listeners) on every address of `bind`;
/// port 0 binds nothing (Redis: not listening on TCP).
pub(crate) fn bind_kind(
    bind: &[String],
    port: u16,
    tls: bool,
    backlog: i32,
) -> std::io::Result<Vec<Listener>> {
    let mut out = Vec::new();
    if port == 0 {
        return Ok(out);
    }
    for host in bind {
        let addr = bind_addr(host, port)?;
        out.push(if tls {
            Listener::bind_tls(addr, backlog)?
        } else {
            Listener::bind_tcp(addr, backlog)?
        });
    }
    Ok(out)
}

/// The plain TCP port listened on (`INFO`'s `tcp_port`), 0 for none.
pub(crate) fn tcp_port_of(listeners: &[Listener]) -> u16 {
    listeners
        .iter()
        .find_map(|l| match l {
            Listener::Tcp(_) => l.tcp_port(),
            _ => None,
        })
        .unwrap_or(0)
}

/// Which option a failure is reported under, and why (Redis's words,
/// then the system's reason in parentheses).
type Failure = (&'static str, String);

/// The new listeners of the kinds that changed: (TCP, TLS).
fn bind_new(
    new: &Endpoints,
    tcp: bool,
    tls: bool,
    bind_changed: bool,
    backlog: i32,
) -> Result<(Vec<Listener>, Vec<Listener>), Failure> {
    let fail = |opt: &'static str, e: std::io::Error| -> Failure {
        if bind_changed {
            (
                "bind",
                format!("Failed to bind to specified addresses. ({e})"),
            )
        } else {
            (
                opt,
                format!("Unable to listen on this port. Check server logs. ({e})"),
            )
        }
    };
    let t = if tcp {
        bind_kind(&new.bind, new.port, false, backlog).map_err(|e| fail("port", e))?
    } else {
        Vec::new()
    };
    let s = if tls {
        bind_kind(&new.bind, new.tls_port, true, backlog).map_err(|e| fail("tls-port", e))?
    } else {
        Vec::new()
    };
    Ok((t, s))
}

/// Moves the listeners from `old` to `new`. On an error, the listeners of
/// `old` are bound again and the error says which option failed.
pub fn rebind(srv: &mut Server, old: &Endpoints, new: &Endpoints) -> Result<(), Failure> {
    let bind_changed = old.bind != new.bind;
    let tcp = bind_changed || old.port != new.port;
    let tls = bind_changed || old.tls_port != new.tls_port;
    if !tcp && !tls {
        return Ok(());
    }
    let Some(reg) = srv.repl.registry.take() else {
        // No event loop to watch new listeners (a server embedded
        // without one): refused, nothing changed.
        let opt = if bind_changed {
            "bind"
        } else if tcp {
            "port"
        } else {
            "tls-port"
        };
        return Err((opt, "no event loop listens here".into()));
    };
    let backlog = srv.config.tcp_backlog as i32;
    // Every listener leaves the poll; those of a changed kind are closed
    // (dropped) so that the new ones may take their port.
    let (mut kept_tcp, mut kept_tls, mut unix) = (Vec::new(), Vec::new(), Vec::new());
    for mut l in std::mem::take(&mut srv.listeners) {
        let _ = reg.deregister(&mut l);
        match l {
            Listener::Tcp(_) if !tcp => kept_tcp.push(l),
            Listener::Tls(_) if !tls => kept_tls.push(l),
            Listener::Unix { .. } => unix.push(l),
            _ => drop(l),
        }
    }
    let (result, (t, s)) = match bind_new(new, tcp, tls, bind_changed, backlog) {
        Ok(v) => (Ok(()), v),
        Err(e) => {
            // Back to what was listening before (its ports were ours a
            // moment ago; should one be taken since, it is logged).
            let restore = |port: u16, is_tls: bool, on: bool| -> Vec<Listener> {
                if !on {
                    return Vec::new();
                }
                bind_kind(&old.bind, port, is_tls, backlog).unwrap_or_else(|err| {
                    tracing::warn!(
                        "Could not listen again on port {port} after a failed CONFIG SET: {err}"
                    );
                    Vec::new()
                })
            };
            let t = restore(old.port, false, tcp);
            let s = restore(old.tls_port, true, tls);
            (Err(e), (t, s))
        }
    };
    kept_tcp.extend(t);
    kept_tls.extend(s);
    // Redis's order: TCP, TLS, then the Unix socket.
    let mut all = kept_tcp;
    all.append(&mut kept_tls);
    all.append(&mut unix);
    for (i, l) in all.iter_mut().enumerate() {
        if let Err(e) = reg.register(l, Token(LISTENER_BASE + i), Interest::READABLE) {
            tracing::warn!("Could not watch a listener: {e}");
        }
    }
    srv.tcp_port = tcp_port_of(&all);
    srv.listeners = all;
    srv.repl.registry = Some(reg);
    if result.is_ok() {
        if tcp && new.port != 0 {
            tracing::info!("Listening on port {} ({})", new.port, new.bind.join(" "));
        }
        if tls && new.tls_port != 0 {
            tracing::info!(
                "Listening for TLS on port {} ({})",
                new.tls_port,
                new.bind.join(" ")
            );
        }
    }
    result
}
