//! The bus links, on the reactor's poll: the listener on the bus port, one
//! outbound link to each node we know (on which we PING it, Redis's
//! `node->link`), and the links other nodes opened to us (on which we
//! answer PONG, `node->inbound_link`).
//!
//! A link reads whole messages (`bus::frame_len`, then the rest) and keeps
//! what it could not write; a message larger than [`MAX_MESSAGE`] or a
//! stream that is not the bus closes the link, and a link whose unsent
//! bytes pass `cluster-link-sendbuf-limit` is freed as Redis frees it.
//!
//! With `tls-cluster yes` every link is TLS, both ways, as Redis's: the
//! links we open present `tls-client-cert-file` (or the server's pair)
//! and check the peer's certificate against the CA and the address we
//! dialled; the links we accept follow `tls-auth-clients`. A link's
//! bytes go through the connection layer's `Conn` (`Tcp` or `Tls`).

use super::bus::{self, Name};
use crate::net::conn::{Conn, Transport};
use crate::net::tls::{TlsContext, TlsStream};
use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Registry, Token};
use std::io::{self, Read, Write};
use std::net::SocketAddr;

/// Tokens of the bus: its listeners first, then the links.
pub const TOKEN_BASE: usize = crate::net::rdma::PENDING_BASE - 70_000;
const LISTENERS: usize = 16;
pub const TOKEN_END: usize = crate::net::rdma::PENDING_BASE;

/// The largest message a link takes: a PUBLISH of a value of Redis's
/// largest bulk, and the header.
pub const MAX_MESSAGE: usize = 512 * 1024 * 1024 + 64 * 1024;

/// The largest message from a link no known node owns: a MEET or PING
/// with gossip about 10,000 nodes.
pub const MAX_UNKNOWN_MESSAGE: usize = bus::HEADER_LEN + 10_000 * bus::GOSSIP_LEN + 64 * 1024;

pub struct Link {
    pub stream: Conn,
    /// Outbound: the node we connected to.
    pub node: Option<Name>,
    /// Inbound: the node that announced itself on it.
    pub inbound_of: Option<Name>,
    pub peer: Option<SocketAddr>,
    pub ctime_ms: u64,
    /// An outbound link whose connect has not completed.
    pub connecting: bool,
    inbuf: Vec<u8>,
    out: Vec<u8>,
    out_pos: usize,
    pub closed: bool,
    pub sent_bytes: u64,
}

impl Link {
    pub fn pending_out(&self) -> usize {
        self.out.len() - self.out_pos
    }

    pub fn out_capacity(&self) -> usize {
        self.out.capacity()
    }

    /// The link's socket (addresses, a pending connect's error).
    pub fn sock(&self) -> socket2::SockRef<'_> {
        socket2::SockRef::from(&self.stream)
    }

    /// The local address of the socket (our ip as the peer sees it).
    pub fn local_ip(&self) -> Option<String> {
        self.sock()
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .map(|a| a.ip().to_string())
    }
}

#[derive(Default)]
pub struct Links {
    pub listeners: Vec<TcpListener>,
    pub links: slab::Slab<Link>,
    /// The outbound link of each node.
    pub outbound: std::collections::HashMap<Name, usize>,
    pub buffer_limit_exceeded: u64,
    /// `tls-cluster yes`: the configurations every link uses.
    pub tls: Option<TlsContext>,
}

pub enum Event {
    /// Whole messages read (their bytes).
    Messages(Vec<Vec<u8>>),
    /// The link failed or the peer closed it.
    Closed,
}

impl Links {
    /// Binds the bus port on each address (Redis binds it on `bind`'s).
    pub fn bind(&mut self, hosts: &[String], port: u16, registry: &Registry) -> io::Result<()> {
        for host in hosts.iter().take(LISTENERS) {
            let host = host.trim_start_matches('-');
            let ip: std::net::IpAddr = match host {
                "*" => "0.0.0.0".parse().unwrap(),
                "::*" => "::".parse().unwrap(),
                h => h.parse().map_err(|_| {
                    io::Error::new(io::ErrorKind::InvalidInput, format!("bad bind address {h}"))
                })?,
            };
            let std = std::net::TcpListener::bind((ip, port)).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("Could not bind the cluster bus port {host}:{port}: {e}"),
                )
            })?;
            std.set_nonblocking(true)?;
            let mut l = TcpListener::from_std(std);
            let t = TOKEN_BASE + self.listeners.len();
            registry.register(&mut l, Token(t), Interest::READABLE)?;
            self.listeners.push(l);
        }
        Ok(())
    }

    pub fn is_listener(token: usize) -> bool {
        (TOKEN_BASE..TOKEN_BASE + LISTENERS).contains(&token)
    }

    pub fn is_link(token: usize) -> bool {
        (TOKEN_BASE + LISTENERS..TOKEN_END).contains(&token)
    }

    fn token(id: usize) -> Token {
        Token(TOKEN_BASE + LISTENERS + id)
    }

    pub fn id_of(token: usize) -> usize {
        token - TOKEN_BASE - LISTENERS
    }

    /// Accepts what the listener has: new inbound links.
    pub fn accept(&mut self, li: usize, registry: &Registry, now: u64) {
        let Some(l) = self.listeners.get(li) else {
            return;
        };
        loop {
            match l.accept() {
                Ok((mut stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let entry = self.links.vacant_entry();
                    if TOKEN_BASE + LISTENERS + entry.key() >= TOKEN_END {
                        tracing::warn!("Too many cluster bus links: refusing {peer}");
                        continue;
                    }
                    if registry
                        .register(
                            &mut stream,
                            Self::token(entry.key()),
                            Interest::READABLE | Interest::WRITABLE,
                        )
                        .is_err()
                    {
                        continue;
                    }
                    let stream = match self.tls.as_ref().and_then(|t| t.server.clone()) {
                        None => Conn::Tcp(stream),
                        Some(cfg) => match TlsStream::accept(stream, cfg) {
                            Ok(t) => Conn::Tls(Box::new(t)),
                            Err(e) => {
                                tracing::warn!("Error accepting TLS cluster link from {peer}: {e}");
                                continue;
                            }
                        },
                    };
                    tracing::debug!("Accepting cluster node connection from {peer}");
                    entry.insert(Link::new(stream, None, Some(peer), now, false));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::warn!("Error accepting cluster node connection: {e}");
                    return;
                }
            }
        }
    }

    /// Opens the outbound link to `node` at `addr`.
    pub fn connect(
        &mut self,
        node: Name,
        addr: SocketAddr,
        registry: &Registry,
        now: u64,
    ) -> io::Result<usize> {
        let stream = TcpStream::connect(addr)?;
        let _ = stream.set_nodelay(true);
        let entry = self.links.vacant_entry();
        let id = entry.key();
        if TOKEN_BASE + LISTENERS + id >= TOKEN_END {
            return Err(io::Error::other("too many cluster bus links"));
        }
        let mut stream = match self.tls.as_ref().and_then(|t| t.client.clone()) {
            None => Conn::Tcp(stream),
            Some(cfg) => Conn::Tls(Box::new(TlsStream::connect(
                stream,
                &addr.ip().to_string(),
                cfg,
            )?)),
        };
        registry.register(
            &mut stream,
            Self::token(id),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        entry.insert(Link::new(stream, Some(node), Some(addr), now, true));
        self.outbound.insert(node, id);
        Ok(id)
    }

    pub fn outbound_of(&self, node: &Name) -> Option<usize> {
        self.outbound.get(node).copied()
    }

    /// Whether our link to `node` is up (CLUSTER NODES' `connected`).
    pub fn outbound_connected(&self, node: &Name) -> bool {
        self.outbound
            .get(node)
            .and_then(|&id| self.links.get(id))
            .is_some_and(|l| !l.connecting && !l.closed)
    }

    /// Queues a message on a link and writes what the socket takes.
    pub fn send(&mut self, id: usize, bytes: &[u8], limit: u64) {
        let Some(l) = self.links.get_mut(id) else {
            return;
        };
        if l.closed {
            return;
        }
        if limit > 0 && l.pending_out() as u64 > limit {
            // `cluster-link-sendbuf-limit`: the link is freed (the node's
            // messages are lost; the cron opens a new one).
            self.buffer_limit_exceeded += 1;
            l.closed = true;
            return;
        }
        if l.out_pos == l.out.len() {
            l.out.clear();
            l.out_pos = 0;
        }
        l.out.extend_from_slice(bytes);
        l.sent_bytes += bytes.len() as u64;
        if !l.connecting {
            l.flush();
        }
    }

    /// A readiness event on link `id`.
    pub fn event(&mut self, id: usize, readable: bool, writable: bool) -> Event {
        let Some(l) = self.links.get_mut(id) else {
            return Event::Closed;
        };
        if l.closed {
            return Event::Closed;
        }
        if l.connecting && (writable || readable) {
            // A refused or failed connect is marked closed here, so the
            // loop frees it and the cron dials again: edge-triggered
            // readiness reports it once, and a link left "connecting"
            // would queue every later message (a failover vote among
            // them) for a peer that never gets it.
            let failed = !matches!(l.sock().take_error(), Ok(None));
            match l.sock().peer_addr() {
                Ok(_) if !failed => l.connecting = false,
                Err(e) if !failed && e.kind() == io::ErrorKind::NotConnected => {
                    return Event::Messages(Vec::new())
                }
                _ => {
                    l.closed = true;
                    return Event::Closed;
                }
            }
        }
        if writable && (l.pending_out() > 0 || l.stream.transport() == Transport::Tls) {
            l.flush();
            if l.closed {
                return Event::Closed;
            }
        }
        if !readable {
            return Event::Messages(Vec::new());
        }
        let mut msgs = Vec::new();
        let mut buf = [0u8; 16 * 1024];
        loop {
            match l.stream.read(&mut buf) {
                Ok(0) => {
                    l.take_messages(&mut msgs);
                    l.closed = true;
                    return if msgs.is_empty() {
                        Event::Closed
                    } else {
                        Event::Messages(msgs)
                    };
                }
                Ok(n) => {
                    l.inbuf.extend_from_slice(&buf[..n]);
                    if !l.take_messages(&mut msgs) {
                        l.closed = true;
                        return Event::Closed;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    l.closed = true;
                    return if msgs.is_empty() {
                        Event::Closed
                    } else {
                        Event::Messages(msgs)
                    };
                }
            }
        }
        Event::Messages(msgs)
    }

    /// Frees link `id`.
    pub fn free(&mut self, id: usize, registry: Option<&Registry>) {
        if !self.links.contains(id) {
            return;
        }
        let mut l = self.links.remove(id);
        if let Some(r) = registry {
            let _ = r.deregister(&mut l.stream);
        }
        if let Some(n) = l.node {
            if self.outbound.get(&n) == Some(&id) {
                self.outbound.remove(&n);
            }
        }
    }

    /// Frees every link of a node (it was forgotten or deleted).
    pub fn drop_node_links(&mut self, node: &Name, registry: Option<&Registry>) {
        let ids: Vec<usize> = self
            .links
            .iter()
            .filter(|(_, l)| l.node.as_ref() == Some(node) || l.inbound_of.as_ref() == Some(node))
            .map(|(i, _)| i)
            .collect();
        for id in ids {
            self.free(id, registry);
        }
    }

    /// A handshake node got its real id.
    pub fn rename(&mut self, old: &Name, new: Name) {
        if let Some(id) = self.outbound.remove(old) {
            if let Some(l) = self.links.get_mut(id) {
                l.node = Some(new);
            }
            self.outbound.insert(new, id);
        }
    }

    /// Links marked closed, to free.
    pub fn closed(&self) -> Vec<usize> {
        self.links
            .iter()
            .filter(|(_, l)| l.closed)
            .map(|(i, _)| i)
            .collect()
    }

    /// Memory held by the links (`mem_cluster_links`).
    pub fn memory(&self) -> usize {
        self.links
            .iter()
            .map(|(_, l)| l.inbuf.capacity() + l.out.capacity() + std::mem::size_of::<Link>())
            .sum()
    }
}

impl Link {
    fn new(
        stream: Conn,
        node: Option<Name>,
        peer: Option<SocketAddr>,
        now: u64,
        connecting: bool,
    ) -> Link {
        Link {
            stream,
            node,
            inbound_of: None,
            peer,
            ctime_ms: now,
            connecting,
            inbuf: Vec::new(),
            out: Vec::new(),
            out_pos: 0,
            closed: false,
            sent_bytes: 0,
        }
    }

    /// Splits whole messages off the input; false when the stream is not
    /// the bus or a message is too large.
    fn take_messages(&mut self, msgs: &mut Vec<Vec<u8>>) -> bool {
        let mut at = 0;
        loop {
            let rest = &self.inbuf[at..];
            match bus::frame_len(rest) {
                None => break,
                Some(Err(_)) => return false,
                Some(Ok(len)) if len > MAX_MESSAGE => return false,
                // A peer that is no known node yet (no MEET taken from it)
                // sends handshakes only: a small message.
                Some(Ok(len))
                    if len > MAX_UNKNOWN_MESSAGE
                        && self.node.is_none()
                        && self.inbound_of.is_none() =>
                {
                    return false
                }
                Some(Ok(len)) => {
                    if rest.len() < len {
                        break;
                    }
                    msgs.push(rest[..len].to_vec());
                    at += len;
                }
            }
        }
        self.inbuf.drain(..at);
        if self.inbuf.is_empty() && self.inbuf.capacity() > 64 * 1024 {
            self.inbuf = Vec::new();
        }
        true
    }

    fn flush(&mut self) {
        while self.out_pos < self.out.len() {
            match self.stream.write(&self.out[self.out_pos..]) {
                Ok(0) => {
                    self.closed = true;
                    return;
                }
                Ok(n) => self.out_pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.closed = true;
                    return;
                }
            }
        }
        if self.out_pos == self.out.len() {
            // What TLS still holds goes when the socket takes it.
            if self.stream.drain().is_err() {
                self.closed = true;
                return;
            }
            self.out.clear();
            self.out_pos = 0;
            if self.out.capacity() > 256 * 1024 {
                self.out = Vec::new();
            }
        }
        // (Links are registered for both directions: with edge-triggered
        // readiness, a link with bytes left is woken when room comes.)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A dial to a port nobody listens on is reported once (edge-triggered);
    /// the link must then be marked closed so that it is freed and dialled
    /// again, not left "connecting" with every later message queued on it.
    #[test]
    fn a_refused_connect_marks_the_link_closed() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let mut poll = mio::Poll::new().unwrap();
        let mut links = Links::default();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let id = match links.connect([7u8; 40], addr, poll.registry(), 0) {
            Ok(id) => id,
            // Refused at once by connect(2): nothing is left to free.
            Err(_) => return,
        };
        links.send(id, b"queued while connecting", 0);
        let mut events = mio::Events::with_capacity(8);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !links.links[id].closed {
            assert!(std::time::Instant::now() < deadline, "no event closed it");
            poll.poll(&mut events, Some(Duration::from_millis(100)))
                .unwrap();
            for ev in events.iter() {
                assert_eq!(Links::id_of(ev.token().0), id);
                let r = ev.is_readable() || ev.is_read_closed() || ev.is_error();
                let _ = links.event(id, r, ev.is_writable());
            }
        }
        assert_eq!(links.closed(), vec![id]);
        links.free(id, Some(poll.registry()));
        assert_eq!(links.outbound_of(&[7u8; 40]), None);
    }
}
