//! Blocking connection setup, for tools, tests and the benchmark.
//!
//! The server's reactor drives the same steps without blocking (read the EQ when its fd is
//! readable); these helpers just wait on the EQ fd with a deadline, so a peer that never answers
//! gives a [`FabricError::Timeout`] instead of a hang.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::domain::{CompletionQueue, Domain};
use crate::endpoint::{Endpoint, PassiveEndpoint};
use crate::error::{FabricError, Result};
use crate::fabric::{CmEvent, ConnectionRequest, EventQueue, Fabric};
use crate::info::{Hints, Info};
use crate::library::Library;

const EQ_SIZE: usize = 64;

/// One connected endpoint with everything it needs.
#[derive(Debug)]
pub struct Connection {
    /// The fabric (for [`Fabric::trywait`] over `eq` and `cq`).
    pub fabric: Fabric,
    /// The domain (register memory here).
    pub domain: Domain,
    /// This connection's own event queue (shutdown events).
    pub eq: EventQueue,
    /// This connection's completion queue.
    pub cq: CompletionQueue,
    /// The endpoint.
    pub endpoint: Endpoint,
    /// Private data the peer sent (`fi_connect`'s on the acceptor, `fi_accept`'s on the connector).
    pub peer_data: Vec<u8>,
}

impl Connection {
    /// Reads the connection's EQ once: `Ok(true)` when the peer has shut the connection down.
    pub fn peer_shut_down(&self) -> Result<bool> {
        match self.eq.read()? {
            Some(CmEvent::Shutdown { id }) if id == self.endpoint.id() => Ok(true),
            _ => Ok(false),
        }
    }
}

fn wait_connected(eq: &EventQueue, ep: &Endpoint, timeout: Duration) -> Result<Vec<u8>> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(FabricError::Timeout(timeout, "FI_CONNECTED"));
        }
        match eq.wait(left)? {
            Some(CmEvent::Connected { id, private_data }) if id == ep.id() => {
                return Ok(private_data)
            }
            Some(CmEvent::Shutdown { .. }) => {
                return Err(FabricError::Call {
                    call: "fi_connect",
                    code: libc::ECONNRESET,
                    message: "peer shut down before the connection was established".into(),
                })
            }
            Some(_) | None => {}
        }
    }
}

/// Connects to a [`Listener`] at `addr`, sending `private_data`; waits for `FI_CONNECTED`.
pub fn connect(
    lib: &Arc<Library>,
    provider: Option<&str>,
    addr: SocketAddr,
    private_data: &[u8],
    cq_size: usize,
    timeout: Duration,
) -> Result<Connection> {
    let mut conn = Connection::prepare(lib, provider, addr, cq_size)?;
    conn.connect(private_data, timeout)?;
    Ok(conn)
}

impl Connection {
    /// Opens fabric, domain, EQ, CQ and an enabled endpoint towards `addr`, without connecting:
    /// register memory (whose descriptor goes in the private data) and pre-post receives
    /// (`FI_RX_CQ_DATA`) first, then [`Connection::connect`].
    pub fn prepare(
        lib: &Arc<Library>,
        provider: Option<&str>,
        addr: SocketAddr,
        cq_size: usize,
    ) -> Result<Connection> {
        Connection::prepare_with(lib, provider, addr, cq_size, false)
    }

    /// [`Connection::prepare`], its endpoint with selective transmit completions when
    /// `selective` and the provider allows it ([`Domain::endpoint_with`]).
    pub fn prepare_with(
        lib: &Arc<Library>,
        provider: Option<&str>,
        addr: SocketAddr,
        cq_size: usize,
        selective: bool,
    ) -> Result<Connection> {
        let info = Info::get(lib, &Hints::connect(provider, addr))?;
        let fabric = Fabric::open(&info)?;
        let eq = fabric.event_queue(EQ_SIZE)?;
        let domain = Domain::open(&fabric, &info)?;
        let cq = domain.completion_queue(cq_size)?;
        let endpoint = domain.endpoint_with(&info, &eq, &cq, selective)?;
        Ok(Connection {
            fabric,
            domain,
            eq,
            cq,
            endpoint,
            peer_data: Vec::new(),
        })
    }

    /// `fi_connect` with `private_data`, then waits for `FI_CONNECTED`; the acceptor's private
    /// data lands in `peer_data`.
    pub fn connect(&mut self, private_data: &[u8], timeout: Duration) -> Result<()> {
        self.endpoint.connect(private_data)?;
        self.peer_data = wait_connected(&self.eq, &self.endpoint, timeout)?;
        Ok(())
    }
}

/// A passive endpoint with its fabric and event queue.
#[derive(Debug)]
pub struct Listener {
    /// The fabric accepted connections are opened on.
    pub fabric: Fabric,
    /// The listener's event queue (connection requests).
    pub eq: EventQueue,
    /// The passive endpoint.
    pub pep: PassiveEndpoint,
    info: Info,
}

impl Listener {
    /// Listens on `addr` (port 0: any free port, see [`Listener::local_addr`]).
    pub fn bind(lib: &Arc<Library>, provider: Option<&str>, addr: SocketAddr) -> Result<Listener> {
        let info = Info::get(lib, &Hints::listen(provider, addr))?;
        let fabric = Fabric::open(&info)?;
        let eq = fabric.event_queue(EQ_SIZE)?;
        let pep = PassiveEndpoint::listen(&fabric, &info, &eq)?;
        Ok(Listener {
            fabric,
            eq,
            pep,
            info,
        })
    }

    /// The provider's answer the listener was opened with.
    pub fn info(&self) -> &Info {
        &self.info
    }

    /// The address peers connect to.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.pep.local_addr()
    }

    /// Waits for the next connection request.
    pub fn next_request(&self, timeout: Duration) -> Result<ConnectionRequest> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(FabricError::Timeout(timeout, "FI_CONNREQ"));
            }
            if let Some(CmEvent::ConnectionRequest(req)) = self.eq.wait(left)? {
                return Ok(req);
            }
        }
    }

    /// Opens the domain, EQ, CQ and endpoint for `request` without accepting it yet:
    /// register memory first (its descriptor goes in `fi_accept`'s private data), then
    /// `endpoint.accept`, and read the EQ for `FI_CONNECTED` (without blocking, from an event
    /// loop: [`crate::PendingStream`]).
    pub fn prepare_accept(
        &self,
        request: &ConnectionRequest,
        cq_size: usize,
        selective: bool,
    ) -> Result<Connection> {
        let domain = Domain::open(&self.fabric, &request.info)?;
        self.prepare_accept_in(&domain, request, cq_size, selective)
    }

    /// [`Listener::prepare_accept`] in an open `domain` (shared by several connections, so
    /// that memory registered in it serves any of them). `selective`: as for
    /// [`Connection::prepare_with`].
    pub fn prepare_accept_in(
        &self,
        domain: &Domain,
        request: &ConnectionRequest,
        cq_size: usize,
        selective: bool,
    ) -> Result<Connection> {
        let domain = domain.clone();
        let eq = self.fabric.event_queue(EQ_SIZE)?;
        let cq = domain.completion_queue(cq_size)?;
        let endpoint = domain.endpoint_with(&request.info, &eq, &cq, selective)?;
        Ok(Connection {
            fabric: self.fabric.clone(),
            domain,
            eq,
            cq,
            endpoint,
            peer_data: request.private_data.clone(),
        })
    }

    /// Accepts `request` with `private_data` on a new domain, EQ and CQ; waits for
    /// `FI_CONNECTED`.
    pub fn accept(
        &self,
        request: ConnectionRequest,
        private_data: &[u8],
        cq_size: usize,
        timeout: Duration,
    ) -> Result<Connection> {
        let conn = self.prepare_accept(&request, cq_size, false)?;
        conn.endpoint.accept(private_data)?;
        wait_connected(&conn.eq, &conn.endpoint, timeout)?;
        Ok(conn)
    }
}
