//! Passive endpoints (listeners) and connected `FI_EP_MSG` endpoints: connection setup with
//! private data, `fi_writedata`, `fi_send`, `fi_recv`.
//!
//! Operation contexts are *tags*: a `u64` the caller picks, handed to libfabric as the context
//! pointer and given back in the completion. We therefore never advertise the `FI_CONTEXT`
//! mode (which would let the provider scribble on that memory).
//!
//! Buffers of posted operations must stay put until the operation completes or the endpoint
//! is closed. An endpoint keeps an `Arc` of every memory region it has posted from, so a
//! region's buffer outlives the endpoint's `fi_close` (which cancels what is in flight) even if
//! the application drops its handle first.

use std::ffi::c_void;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use crate::domain::{Access, CompletionQueue, CqInner, Domain, DomainInner, MemoryRegion, MrInner};
use crate::error::{FabricError, Result};
use crate::fabric::{
    close_fid, tag_context, ConnectionRequest, EqInner, EventQueue, Fabric, FabricInner,
};
use crate::info::{Info, Requirements};
use crate::private_data::MAX_PRIVATE_DATA;
use crate::sys;

fn check_private_data(data: &[u8]) -> Result<()> {
    if data.len() > MAX_PRIVATE_DATA {
        return Err(FabricError::Invalid(format!(
            "{} bytes of connection private data; the verbs provider carries at most {MAX_PRIVATE_DATA}",
            data.len()
        )));
    }
    Ok(())
}

/// A listening endpoint (`fi_passive_ep` + `fi_listen`); its events arrive on its EQ.
pub struct PassiveEndpoint {
    ptr: NonNull<sys::fid_pep>,
    fabric: Arc<FabricInner>,
    // Closed after the pep (fields drop after Drop::drop).
    _eq: Arc<EqInner>,
}

// SAFETY: FI_THREAD_SAFE; closed once, in Drop.
unsafe impl Send for PassiveEndpoint {}
// SAFETY: see Send.
unsafe impl Sync for PassiveEndpoint {}

impl Drop for PassiveEndpoint {
    fn drop(&mut self) {
        // SAFETY: the pep is live and closed only here; its EQ and fabric outlive it (Arcs).
        unsafe { close_fid(self.ptr.as_ptr().cast()) };
    }
}

impl std::fmt::Debug for PassiveEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PassiveEndpoint")
            .field("local_addr", &self.local_addr().ok())
            .finish()
    }
}

impl PassiveEndpoint {
    /// Opens a passive endpoint for `info` (from [`crate::Hints::listen`]), binds `eq`, listens.
    pub fn listen(fabric: &Fabric, info: &Info, eq: &EventQueue) -> Result<PassiveEndpoint> {
        let lib = &fabric.inner.lib;
        let mut ptr: *mut sys::fid_pep = std::ptr::null_mut();
        // SAFETY: the fabric is live; info is valid; ptr receives a pep we own.
        let ret = unsafe {
            let fab = fabric.inner.ptr.as_ptr();
            let passive_ep = op!((*fab).ops, passive_ep);
            passive_ep(fab, info.as_ptr(), &mut ptr, std::ptr::null_mut())
        };
        lib.check("fi_passive_ep", ret as isize)?;
        let pep = PassiveEndpoint {
            ptr: NonNull::new(ptr).ok_or(FabricError::Unsupported("fi_passive_ep"))?,
            fabric: Arc::clone(&fabric.inner),
            _eq: Arc::clone(&eq.inner),
        };
        // SAFETY: pep and EQ are live; fi_pep_bind(pep, &eq->fid, 0), then fi_listen(pep).
        let ret = unsafe {
            let p = pep.ptr.as_ptr();
            let bind = op!((*p).fid.ops, bind);
            bind(&mut (*p).fid, eq.inner.ptr.as_ptr().cast(), 0)
        };
        lib.check("fi_pep_bind", ret as isize)?;
        // SAFETY: as above.
        let ret = unsafe {
            let p = pep.ptr.as_ptr();
            let listen = op!((*p).cm, listen);
            listen(p)
        };
        lib.check("fi_listen", ret as isize)?;
        Ok(pep)
    }

    /// The bound address (`fi_getname`), e.g. to learn the port after listening on port 0.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        // SAFETY: the passive endpoint is live; its fid and CM ops are its own.
        unsafe {
            let p = self.ptr.as_ptr();
            cm_address(&self.fabric.lib, &mut (*p).fid, (*p).cm, Name::Local)
        }
    }

    /// Rejects a connection request (`fi_reject`), with optional private data.
    pub fn reject(&self, request: ConnectionRequest, private_data: &[u8]) -> Result<()> {
        check_private_data(private_data)?;
        // SAFETY: the pep is live; the request's info->handle is the connreq fid libfabric gave
        // us; private_data is readable for its length.
        let ret = unsafe {
            let p = self.ptr.as_ptr();
            let reject = op!((*p).cm, reject);
            reject(
                p,
                (*request.info.as_ptr()).handle,
                private_data.as_ptr().cast(),
                private_data.len(),
            )
        };
        self.fabric.lib.check("fi_reject", ret as isize)?;
        Ok(())
    }

    /// Identity of this listener in [`crate::CmEvent`]s.
    pub fn id(&self) -> usize {
        self.ptr.as_ptr() as usize
    }
}

fn sockaddr_to_std(storage: &libc::sockaddr_storage) -> Result<SocketAddr> {
    match storage.ss_family as i32 {
        libc::AF_INET => {
            // SAFETY: family says this is a sockaddr_in, which fits in sockaddr_storage.
            let sin =
                unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Ok(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: family says this is a sockaddr_in6, which fits in sockaddr_storage.
            let sin6 = unsafe {
                &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
            };
            Ok(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        family => Err(FabricError::Invalid(format!(
            "address family {family} is not IP"
        ))),
    }
}

/// A connection-oriented endpoint (`fi_endpoint`, `FI_EP_MSG`), bound to an EQ and a CQ and
/// enabled.
pub struct Endpoint {
    ptr: NonNull<sys::fid_ep>,
    req: Requirements,
    dest_addr: Option<Vec<u8>>,
    // Everything below is released only after Drop::drop has closed the endpoint.
    retained: Mutex<Vec<Arc<MrInner>>>,
    /// Unregistered buffers written from ([`Endpoint::write_data_unregistered`]).
    retained_buffers: Mutex<Vec<Arc<dyn std::any::Any + Send + Sync>>>,
    /// Bound with `FI_SELECTIVE_COMPLETION`: writes posted with
    /// [`Endpoint::write_data_signalled`] and `signal == false` produce no
    /// completion.
    selective: bool,
    _cq: Arc<CqInner>,
    _eq: Arc<EqInner>,
    _domain: Arc<DomainInner>,
}

// SAFETY: FI_THREAD_SAFE domain; closed once, in Drop.
unsafe impl Send for Endpoint {}
// SAFETY: see Send.
unsafe impl Sync for Endpoint {}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // SAFETY: the endpoint is live and closed only here. Closing cancels outstanding
        // operations; their buffers (retained regions), CQ, EQ and domain are freed after this.
        unsafe { close_fid(self.ptr.as_ptr().cast()) };
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("id", &self.id())
            .field("requirements", &self.req)
            .finish()
    }
}

impl Domain {
    /// Opens an endpoint for `info` (a connector's `fi_getinfo` answer, or a connection
    /// request's info), binds `eq` and `cq` (transmit and receive), and enables it.
    pub fn endpoint(&self, info: &Info, eq: &EventQueue, cq: &CompletionQueue) -> Result<Endpoint> {
        self.endpoint_with(info, eq, cq, false)
    }

    /// [`Domain::endpoint`], with `selective`: transmit completions only for the
    /// operations that ask for one (`FI_SELECTIVE_COMPLETION` on the transmit side, with
    /// `FI_COMPLETION` in the default operation flags so that sends and plain writes still
    /// complete; [`Endpoint::write_data_signalled`] chooses per write). A provider that
    /// refuses the flag gets an ordinary endpoint ([`Endpoint::is_selective`] says which).
    pub fn endpoint_with(
        &self,
        info: &Info,
        eq: &EventQueue,
        cq: &CompletionQueue,
        selective: bool,
    ) -> Result<Endpoint> {
        match self.open_endpoint(info, eq, cq, selective) {
            Err(FabricError::Call { call, .. }) if selective && call == "fi_ep_bind(cq tx)" => {
                self.open_endpoint(info, eq, cq, false)
            }
            other => other,
        }
    }

    fn open_endpoint(
        &self,
        info: &Info,
        eq: &EventQueue,
        cq: &CompletionQueue,
        selective: bool,
    ) -> Result<Endpoint> {
        let lib = &self.inner.fabric.lib;
        if selective {
            // SAFETY: info is a valid fi_info we own; its tx_attr is allocated with it (or
            // null). The endpoint reads its default operation flags from it.
            unsafe {
                let tx = (*info.as_ptr()).tx_attr;
                if !tx.is_null() {
                    (*tx).op_flags |= sys::FI_COMPLETION as u64;
                }
            }
        }
        let mut ptr: *mut sys::fid_ep = std::ptr::null_mut();
        // SAFETY: the domain is live; info is valid; ptr receives an endpoint we own.
        let ret = unsafe {
            let dom = self.inner.ptr.as_ptr();
            let endpoint = op!((*dom).ops, endpoint);
            endpoint(dom, info.as_ptr(), &mut ptr, std::ptr::null_mut())
        };
        lib.check("fi_endpoint", ret as isize)?;
        // SAFETY: dest_addr/dest_addrlen of a valid fi_info describe a readable buffer or NULL.
        let dest_addr = unsafe {
            let raw = &*info.as_ptr();
            (!raw.dest_addr.is_null()).then(|| {
                std::slice::from_raw_parts(raw.dest_addr as *const u8, raw.dest_addrlen).to_vec()
            })
        };
        let ep = Endpoint {
            ptr: NonNull::new(ptr).ok_or(FabricError::Unsupported("fi_endpoint"))?,
            req: self.inner.req,
            dest_addr,
            retained: Mutex::new(Vec::new()),
            retained_buffers: Mutex::new(Vec::new()),
            selective,
            _cq: Arc::clone(&cq.inner),
            _eq: Arc::clone(&eq.inner),
            _domain: Arc::clone(&self.inner),
        };
        ep.bind(eq.inner.ptr.as_ptr().cast(), 0, "fi_ep_bind(eq)")?;
        if selective {
            ep.bind(
                cq.inner.ptr.as_ptr().cast(),
                sys::FI_TRANSMIT as u64 | sys::FI_SELECTIVE_COMPLETION,
                "fi_ep_bind(cq tx)",
            )?;
            ep.bind(
                cq.inner.ptr.as_ptr().cast(),
                sys::FI_RECV as u64,
                "fi_ep_bind(cq rx)",
            )?;
        } else {
            ep.bind(
                cq.inner.ptr.as_ptr().cast(),
                sys::FI_TRANSMIT as u64 | sys::FI_RECV as u64,
                "fi_ep_bind(cq)",
            )?;
        }
        // SAFETY: the endpoint is live; fi_enable is fi_control(FI_ENABLE, NULL).
        let ret = unsafe {
            let e = ep.ptr.as_ptr();
            let control = op!((*e).fid.ops, control);
            control(&mut (*e).fid, sys::FI_ENABLE as i32, std::ptr::null_mut())
        };
        lib.check("fi_enable", ret as isize)?;
        Ok(ep)
    }
}

impl Endpoint {
    fn lib(&self) -> &crate::Library {
        &self._domain.fabric.lib
    }

    fn bind(&self, target: *mut sys::fid, flags: u64, call: &'static str) -> Result<()> {
        // SAFETY: the endpoint and `target` (an EQ or CQ this endpoint holds an Arc of) are live.
        let ret = unsafe {
            let e = self.ptr.as_ptr();
            let bind = op!((*e).fid.ops, bind);
            bind(&mut (*e).fid, target, flags)
        };
        self.lib().check(call, ret as isize)?;
        Ok(())
    }

    /// Identity of this endpoint in [`crate::CmEvent`]s and event errors.
    pub fn id(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// What the data path must do for this endpoint's provider.
    pub fn requirements(&self) -> Requirements {
        self.req
    }

    /// The connected peer's address (`fi_getpeer`).
    pub fn peer_addr(&self) -> Result<SocketAddr> {
        // SAFETY: the endpoint is live; its fid and CM ops are its own.
        unsafe {
            let e = self.ptr.as_ptr();
            cm_address(self.lib(), &mut (*e).fid, (*e).cm, Name::Peer)
        }
    }

    /// This end's address (`fi_getname`).
    pub fn local_addr(&self) -> Result<SocketAddr> {
        // SAFETY: the endpoint is live; its fid and CM ops are its own.
        unsafe {
            let e = self.ptr.as_ptr();
            cm_address(self.lib(), &mut (*e).fid, (*e).cm, Name::Local)
        }
    }

    /// `fi_connect` to the address the endpoint's info named, with private data (≤ 55 bytes).
    /// Completion is an `FI_CONNECTED` event carrying the acceptor's private data.
    pub fn connect(&self, private_data: &[u8]) -> Result<()> {
        check_private_data(private_data)?;
        let addr = self.dest_addr.as_ref().ok_or_else(|| {
            FabricError::Invalid("endpoint info has no destination address".into())
        })?;
        // SAFETY: the endpoint is live; addr and private_data are readable for the call
        // (libfabric copies both).
        let ret = unsafe {
            let e = self.ptr.as_ptr();
            let connect = op!((*e).cm, connect);
            connect(
                e,
                addr.as_ptr().cast(),
                private_data.as_ptr().cast(),
                private_data.len(),
            )
        };
        self.lib().check("fi_connect", ret as isize)?;
        Ok(())
    }

    /// `fi_accept` a connection request this endpoint was opened for, with private data.
    pub fn accept(&self, private_data: &[u8]) -> Result<()> {
        check_private_data(private_data)?;
        // SAFETY: the endpoint is live; private_data is readable for the call (copied).
        let ret = unsafe {
            let e = self.ptr.as_ptr();
            let accept = op!((*e).cm, accept);
            accept(e, private_data.as_ptr().cast(), private_data.len())
        };
        self.lib().check("fi_accept", ret as isize)?;
        Ok(())
    }

    /// `fi_shutdown`: the peer sees an `FI_SHUTDOWN` event.
    pub fn shutdown(&self) -> Result<()> {
        // SAFETY: the endpoint is live.
        let ret = unsafe {
            let e = self.ptr.as_ptr();
            let shutdown = op!((*e).cm, shutdown);
            shutdown(e, 0)
        };
        self.lib().check("fi_shutdown", ret as isize)?;
        Ok(())
    }

    /// One operation moves at most the provider's `max_msg_size` bytes.
    fn check_len(&self, len: usize) -> Result<()> {
        if len > self.req.max_msg_size {
            return Err(FabricError::Invalid(format!(
                "{len} bytes exceed the provider's max_msg_size {}",
                self.req.max_msg_size
            )));
        }
        Ok(())
    }

    fn retain(&self, mr: &MemoryRegion) {
        let mut retained = self.retained.lock().unwrap_or_else(|e| e.into_inner());
        if !retained.iter().any(|r| Arc::ptr_eq(r, &mr.inner)) {
            retained.push(Arc::clone(&mr.inner));
        }
    }

    fn local_buffer(
        &self,
        mr: &MemoryRegion,
        range: &Range<usize>,
        need: Access,
    ) -> Result<(*mut c_void, *mut c_void)> {
        mr.check_range(range)?;
        if !mr.access().contains(need) {
            return Err(FabricError::Invalid(format!(
                "region registered for {:#x}, operation needs {:#x}",
                mr.access().bits(),
                need.bits()
            )));
        }
        self.check_len(range.len())?;
        self.retain(mr);
        // SAFETY: range is inside the region's buffer.
        let buf = unsafe { mr.inner.addr.add(range.start) };
        Ok((buf.cast(), mr.inner.desc))
    }

    /// `fi_writedata`: writes `src[range]` to the peer's `remote_addr` (see
    /// [`crate::RingDescriptor::slot_addr`]) under `remote_key`, with `immediate` delivered in
    /// the peer's completion. `immediate` must fit the provider's `cq_data_size` (32 bits on
    /// verbs). Returns [`FabricError::WouldBlock`] when the transmit queue is full.
    pub fn write_data(
        &self,
        src: &MemoryRegion,
        range: Range<usize>,
        immediate: u64,
        remote_addr: u64,
        remote_key: u64,
        tag: u64,
    ) -> Result<()> {
        self.req.check_immediate(immediate)?;
        let (buf, desc) = self.local_buffer(src, &range, Access::WRITE)?;
        // SAFETY: buf/len lie in a registered region retained by this endpoint until it is
        // closed; desc is that region's descriptor.
        unsafe {
            self.post_writedata(
                buf,
                range.len(),
                desc,
                immediate,
                remote_addr,
                remote_key,
                tag,
            )
        }
    }

    /// Whether the endpoint was bound with `FI_SELECTIVE_COMPLETION`.
    pub fn is_selective(&self) -> bool {
        self.selective
    }

    /// [`Endpoint::write_data`] that asks for a local completion only when `signal` (on a
    /// selective endpoint; any other completes every write): `fi_writemsg` with
    /// `FI_REMOTE_CQ_DATA`, plus `FI_COMPLETION` when signalled. An unsignalled write is
    /// known to be done once a later signalled one on the same endpoint completes: both
    /// providers this runs on (tcp, and verbs' reliable-connected queue pairs) complete
    /// an endpoint's transmit operations in the order they were posted.
    #[allow(clippy::too_many_arguments)]
    pub fn write_data_signalled(
        &self,
        src: &MemoryRegion,
        range: Range<usize>,
        immediate: u64,
        remote_addr: u64,
        remote_key: u64,
        tag: u64,
        signal: bool,
    ) -> Result<()> {
        if !self.selective {
            return self.write_data(src, range, immediate, remote_addr, remote_key, tag);
        }
        self.req.check_immediate(immediate)?;
        let (buf, desc) = self.local_buffer(src, &range, Access::WRITE)?;
        let iov = sys::iovec {
            iov_base: buf,
            iov_len: range.len(),
        };
        let mut desc = desc;
        let rma = FiRmaIov {
            addr: remote_addr,
            len: range.len(),
            key: remote_key,
        };
        let msg = FiMsgRma {
            msg_iov: &iov,
            desc: &mut desc,
            iov_count: 1,
            addr: 0,
            rma_iov: &rma,
            rma_iov_count: 1,
            context: tag_context(tag),
            data: immediate,
        };
        let mut flags = sys::FI_REMOTE_CQ_DATA as u64;
        if signal {
            flags |= sys::FI_COMPLETION as u64;
        }
        // SAFETY: the endpoint is live; msg and what it points to live across the call
        // (libfabric copies the descriptors at post time); buf lies in a registered
        // region retained by this endpoint until it is closed.
        let ret = unsafe {
            let e = self.ptr.as_ptr();
            let writemsg = op!((*e).rma, writemsg);
            writemsg(e, (&msg as *const FiMsgRma).cast(), flags)
        };
        self.lib().check("fi_writemsg", ret)?;
        Ok(())
    }

    /// The `fi_writedata` call itself.
    ///
    /// # Safety
    /// `buf..buf+len` must stay readable until the endpoint is closed, and `desc` must be
    /// its region's descriptor, or null where the provider needs none.
    #[allow(clippy::too_many_arguments)]
    unsafe fn post_writedata(
        &self,
        buf: *mut c_void,
        len: usize,
        desc: *mut c_void,
        immediate: u64,
        remote_addr: u64,
        remote_key: u64,
        tag: u64,
    ) -> Result<()> {
        // SAFETY: the endpoint is live; the caller vouches for the buffer.
        let ret = unsafe {
            let e = self.ptr.as_ptr();
            let writedata = op!((*e).rma, writedata);
            writedata(
                e,
                buf,
                len,
                desc,
                immediate,
                0,
                remote_addr,
                remote_key,
                tag_context(tag),
            )
        };
        self.lib().check("fi_writedata", ret)?;
        Ok(())
    }

    /// `fi_writedata` straight from memory that is not registered, for providers without
    /// `FI_MR_LOCAL` (tcp: [`Requirements::local_descriptors`] is false) — no copy into a
    /// registered buffer first. `owner` holds the bytes; it is retained (like a region) until
    /// the endpoint closes, so the provider may read them until then. With `FI_MR_LOCAL`
    /// (verbs) this is refused: write from a registered region instead.
    pub fn write_data_unregistered<T: AsRef<[u8]> + Send + Sync + 'static>(
        &self,
        owner: &Arc<T>,
        range: Range<usize>,
        immediate: u64,
        remote_addr: u64,
        remote_key: u64,
        tag: u64,
    ) -> Result<()> {
        self.req.check_immediate(immediate)?;
        if self.req.local_descriptors {
            return Err(FabricError::Invalid(
                "the provider requires registered local buffers (FI_MR_LOCAL)".into(),
            ));
        }
        let bytes = (**owner).as_ref();
        if range.start > range.end || range.end > bytes.len() {
            return Err(FabricError::Invalid(format!(
                "range {range:?} outside a buffer of {} bytes",
                bytes.len()
            )));
        }
        self.check_len(range.len())?;
        {
            let mut kept = self
                .retained_buffers
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let addr = Arc::as_ptr(owner).cast::<u8>();
            if !kept.iter().any(|k| Arc::as_ptr(k).cast::<u8>() == addr) {
                kept.push(Arc::clone(owner) as Arc<dyn std::any::Any + Send + Sync>);
            }
        }
        let buf = bytes[range.clone()].as_ptr() as *mut c_void;
        // SAFETY: buf/len lie in `owner`'s bytes, which stay allocated (retained above)
        // until the endpoint is closed; no descriptor is needed without FI_MR_LOCAL. The
        // provider only reads the buffer.
        unsafe {
            self.post_writedata(
                buf,
                range.len(),
                std::ptr::null_mut(),
                immediate,
                remote_addr,
                remote_key,
                tag,
            )
        }
    }

    /// `fi_inject_writedata`: like [`Endpoint::write_data`] for at most the provider's
    /// `inject_size` bytes ([`Requirements::inject_size`]), which it copies before returning:
    /// `bytes` may be reused at once, need no registration, and the write produces no local
    /// completion (the peer's still carries the immediate). On verbs this is an inline send.
    pub fn inject_write_data(
        &self,
        bytes: &[u8],
        immediate: u64,
        remote_addr: u64,
        remote_key: u64,
    ) -> Result<()> {
        self.req.check_immediate(immediate)?;
        if bytes.len() > self.req.inject_size {
            return Err(FabricError::Invalid(format!(
                "{} bytes exceed the provider's inject_size {}",
                bytes.len(),
                self.req.inject_size
            )));
        }
        // SAFETY: the endpoint is live; the provider copies `bytes` before returning.
        let ret = unsafe {
            let e = self.ptr.as_ptr();
            let injectdata = op!((*e).rma, injectdata);
            injectdata(
                e,
                bytes.as_ptr().cast(),
                bytes.len(),
                immediate,
                0,
                remote_addr,
                remote_key,
            )
        };
        self.lib().check("fi_inject_writedata", ret)?;
        Ok(())
    }

    /// `fi_send` of `src[range]` (a registered region, retained until the endpoint closes).
    pub fn send(&self, src: &MemoryRegion, range: Range<usize>, tag: u64) -> Result<()> {
        let (buf, desc) = self.local_buffer(src, &range, Access::SEND)?;
        // SAFETY: as in write_data.
        let ret = unsafe {
            let e = self.ptr.as_ptr();
            let send = op!((*e).msg, send);
            send(e, buf, range.len(), desc, 0, tag_context(tag))
        };
        self.lib().check("fi_send", ret)?;
        Ok(())
    }

    /// `fi_recv` into `dst[range]` (a registered, writable region retained until close).
    pub fn recv(&self, dst: &MemoryRegion, range: Range<usize>, tag: u64) -> Result<()> {
        if dst.is_shared() {
            return Err(FabricError::Invalid(
                "cannot receive into a read-only region".into(),
            ));
        }
        let (buf, desc) = self.local_buffer(dst, &range, Access::RECV)?;
        // SAFETY: as in write_data; the region is writable (owned buffer).
        let ret = unsafe {
            let e = self.ptr.as_ptr();
            let recv = op!((*e).msg, recv);
            recv(e, buf, range.len(), desc, 0, tag_context(tag))
        };
        self.lib().check("fi_recv", ret)?;
        Ok(())
    }

    /// A zero-length `fi_recv`: what an incoming write-with-immediate consumes on providers
    /// with the `FI_RX_CQ_DATA` mode (verbs). Not needed (and not consumed) on tcp.
    pub fn recv_for_immediate(&self, tag: u64) -> Result<()> {
        // SAFETY: the endpoint is live; a zero-length receive touches no memory.
        let ret = unsafe {
            let e = self.ptr.as_ptr();
            let recv = op!((*e).msg, recv);
            recv(
                e,
                std::ptr::null_mut(),
                0,
                std::ptr::null_mut(),
                0,
                tag_context(tag),
            )
        };
        self.lib().check("fi_recv", ret)?;
        Ok(())
    }
}

/// `struct fi_rma_iov` (rma.h), which the generated bindings leave opaque.
#[repr(C)]
struct FiRmaIov {
    addr: u64,
    len: usize,
    key: u64,
}

/// `struct fi_msg_rma` (rma.h).
#[repr(C)]
struct FiMsgRma {
    msg_iov: *const sys::iovec,
    desc: *mut *mut c_void,
    iov_count: usize,
    addr: u64,
    rma_iov: *const FiRmaIov,
    rma_iov_count: usize,
    context: *mut c_void,
    data: u64,
}

const _: () = assert!(std::mem::size_of::<FiMsgRma>() == std::mem::size_of::<sys::fi_msg_rma>());

/// Which address [`cm_address`] asks for.
enum Name {
    Local,
    Peer,
}

/// `fi_getname` or `fi_getpeer` of an endpoint or passive endpoint.
///
/// # Safety
/// `fid` and `cm` must be a live endpoint's fid and CM operations table.
unsafe fn cm_address(
    lib: &crate::Library,
    fid: *mut sys::fid,
    cm: *mut sys::fi_ops_cm,
    which: Name,
) -> Result<SocketAddr> {
    // SAFETY: sockaddr_storage is plain data.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>();
    let buf = (&mut storage as *mut libc::sockaddr_storage).cast();
    // SAFETY: the caller vouches for fid and cm; storage is writable for len bytes.
    let (call, ret) = unsafe {
        match which {
            Name::Local => ("fi_getname", op!(cm, getname)(fid, buf, &mut len)),
            // fi_getpeer takes the endpoint itself, whose first member is its fid.
            Name::Peer => ("fi_getpeer", op!(cm, getpeer)(fid.cast(), buf, &mut len)),
        }
    };
    lib.check(call, ret as isize)?;
    sockaddr_to_std(&storage)
}
