//! The fabric, its event queue (connection management events), and `fi_trywait`.
//!
//! Queues are opened with `FI_WAIT_FD` so the server's reactor can put their file descriptors
//! into its mio poll next to its sockets. The contract that makes that safe with edge-triggered
//! polling: drain the queue until it is empty (`-FI_EAGAIN`), then call [`Fabric::trywait`];
//! only when it answers `true` may the loop sleep on the fds. libfabric may report events that
//! never touched the fd (manual progress, internal queues), which is exactly what `trywait`
//! catches.

use std::ffi::c_void;
use std::os::fd::{AsRawFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{EventError, FabricError, Result};
use crate::info::{cstr_or_empty, Info};
use crate::library::Library;
use crate::sys;

/// Calls `fid->ops->close`, the body of `fi_close`.
///
/// # Safety
/// `fid` must be a live libfabric object that is closed only here, and nothing may use it after.
pub(crate) unsafe fn close_fid(fid: *mut sys::fid) -> i32 {
    // SAFETY: the caller guarantees fid is live; every fid has an ops table with close.
    let ret = unsafe {
        match (*(*fid).ops).close {
            Some(close) => close(fid),
            None => 0,
        }
    };
    if ret != 0 {
        CLOSE_FAILURES.fetch_add(1, Ordering::Relaxed);
    }
    ret
}

static CLOSE_FAILURES: AtomicUsize = AtomicUsize::new(0);

/// How many `fi_close` calls have failed in this process (e.g. `-FI_EBUSY` for a queue closed
/// before an endpoint bound to it). Drop cannot report errors; this makes a wrong close order
/// visible to tests and metrics. Stays 0 when ownership works as designed.
pub fn close_failures() -> usize {
    CLOSE_FAILURES.load(Ordering::Relaxed)
}

/// Reads the wait fd of an EQ or CQ opened with `FI_WAIT_FD` (`fi_control(FI_GETWAIT)`).
///
/// # Safety
/// `fid` must be a live EQ or CQ.
pub(crate) unsafe fn wait_fd(lib: &Library, fid: *mut sys::fid) -> Result<RawFd> {
    let mut fd: libc::c_int = -1;
    // SAFETY: fid is live (caller); FI_GETWAIT on an FI_WAIT_FD object writes one int.
    let ret = unsafe {
        let control = op!((*fid).ops, control);
        control(
            fid,
            sys::FI_GETWAIT as i32,
            (&mut fd as *mut libc::c_int).cast(),
        )
    };
    lib.check("fi_control(FI_GETWAIT)", ret as isize)?;
    Ok(fd)
}

/// Blocks in `poll(2)` until `fd` is readable or `timeout` passes; true when readable.
pub(crate) fn poll_readable(fd: RawFd, timeout: Duration) -> Result<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd, count 1.
    let ret = unsafe { libc::poll(&mut pfd, 1, ms) };
    if ret < 0 {
        let err = std::io::Error::last_os_error();
        if err.kind() == std::io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(err.into());
    }
    Ok(ret > 0)
}

pub(crate) struct FabricInner {
    pub(crate) lib: Arc<Library>,
    pub(crate) ptr: NonNull<sys::fid_fabric>,
}

// SAFETY: domains are opened with FI_THREAD_SAFE, so libfabric objects may be used from any
// thread; the pointer is only closed once, in Drop.
unsafe impl Send for FabricInner {}
// SAFETY: see Send.
unsafe impl Sync for FabricInner {}

impl Drop for FabricInner {
    fn drop(&mut self) {
        // SAFETY: every child object holds an Arc to this, so all of them are closed already.
        unsafe { close_fid(self.ptr.as_ptr().cast()) };
    }
}

/// An open fabric (`fi_fabric`): the root every other object hangs from.
#[derive(Clone)]
pub struct Fabric {
    pub(crate) inner: Arc<FabricInner>,
}

impl std::fmt::Debug for Fabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fabric")
            .field("ptr", &self.inner.ptr)
            .finish()
    }
}

/// An EQ or CQ that can take part in [`Fabric::trywait`].
pub trait Waitable: sealed::AsFid + AsRawFd {}

pub(crate) mod sealed {
    pub trait AsFid {
        fn as_fid(&self) -> *mut crate::sys::fid;
    }
}

impl Fabric {
    /// Opens the fabric named in `info`.
    pub fn open(info: &Info) -> Result<Fabric> {
        let lib = Arc::clone(&info.lib);
        let mut ptr: *mut sys::fid_fabric = std::ptr::null_mut();
        // SAFETY: info is a valid fi_info whose fabric_attr libfabric filled in; ptr receives
        // a new fabric we own.
        let ret =
            unsafe { (lib.fabric)((*info.as_ptr()).fabric_attr, &mut ptr, std::ptr::null_mut()) };
        lib.check("fi_fabric", ret as isize)?;
        let ptr = NonNull::new(ptr).ok_or(FabricError::Unsupported("fi_fabric"))?;
        Ok(Fabric {
            inner: Arc::new(FabricInner { lib, ptr }),
        })
    }

    /// The library this fabric came from.
    pub fn library(&self) -> &Arc<Library> {
        &self.inner.lib
    }

    /// Opens an event queue with an `FI_WAIT_FD` wait object.
    pub fn event_queue(&self, size: usize) -> Result<EventQueue> {
        let mut attr = sys::fi_eq_attr {
            size,
            flags: 0,
            wait_obj: sys::FI_WAIT_FD,
            signaling_vector: 0,
            wait_set: std::ptr::null_mut(),
        };
        let mut ptr: *mut sys::fid_eq = std::ptr::null_mut();
        let lib = &self.inner.lib;
        // SAFETY: the fabric is live; attr and ptr are valid for the call.
        let ret = unsafe {
            let fabric = self.inner.ptr.as_ptr();
            let eq_open = op!((*fabric).ops, eq_open);
            eq_open(fabric, &mut attr, &mut ptr, std::ptr::null_mut())
        };
        lib.check("fi_eq_open", ret as isize)?;
        let ptr = NonNull::new(ptr).ok_or(FabricError::Unsupported("fi_eq_open"))?;
        // Owned from here on, so an error below closes it.
        let mut inner = EqInner {
            fabric: Arc::clone(&self.inner),
            ptr,
            fd: -1,
        };
        // SAFETY: the EQ was just opened with FI_WAIT_FD.
        inner.fd = unsafe { wait_fd(lib, ptr.as_ptr().cast())? };
        Ok(EventQueue {
            inner: Arc::new(inner),
        })
    }

    /// `fi_trywait` over `objects`: `Ok(true)` when it is safe to sleep on their fds, `Ok(false)`
    /// when one of them may hold (or be about to produce) an entry, so read them again first.
    pub fn trywait(&self, objects: &[&dyn Waitable]) -> Result<bool> {
        let mut fids: Vec<*mut sys::fid> = objects.iter().map(|o| o.as_fid()).collect();
        // SAFETY: the fabric is live; every fid belongs to a live EQ/CQ of it (borrowed here).
        let ret = unsafe {
            let fabric = self.inner.ptr.as_ptr();
            let trywait = op!((*fabric).ops, trywait);
            trywait(fabric, fids.as_mut_ptr(), fids.len() as i32)
        };
        match self.inner.lib.check("fi_trywait", ret as isize) {
            Ok(_) => Ok(true),
            Err(FabricError::WouldBlock { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

pub(crate) struct EqInner {
    pub(crate) fabric: Arc<FabricInner>,
    pub(crate) ptr: NonNull<sys::fid_eq>,
    fd: RawFd,
}

// SAFETY: FI_THREAD_SAFE domains; the EQ is closed once, in Drop.
unsafe impl Send for EqInner {}
// SAFETY: see Send.
unsafe impl Sync for EqInner {}

impl Drop for EqInner {
    fn drop(&mut self) {
        // SAFETY: endpoints bound to this EQ hold an Arc to it, so they are closed already.
        unsafe { close_fid(self.ptr.as_ptr().cast()) };
    }
}

/// An event queue (`fi_eq_open`, `FI_WAIT_FD`): connection requests, connections, shutdowns.
#[derive(Clone)]
pub struct EventQueue {
    pub(crate) inner: Arc<EqInner>,
}

impl std::fmt::Debug for EventQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventQueue")
            .field("fd", &self.inner.fd)
            .finish()
    }
}

/// A connection request that arrived on a passive endpoint.
#[derive(Debug)]
pub struct ConnectionRequest {
    /// The info to open the domain and endpoint with (`fi_domain`, `fi_endpoint`).
    pub info: Info,
    /// The connector's private data (at most 55 bytes are meaningful, padding possible).
    pub private_data: Vec<u8>,
}

/// A connection-management event.
#[derive(Debug)]
pub enum CmEvent {
    /// `FI_CONNREQ` on a passive endpoint.
    ConnectionRequest(ConnectionRequest),
    /// `FI_CONNECTED`: the endpoint `id` is connected; the connector sees the acceptor's data.
    Connected {
        /// [`crate::Endpoint::id`] of the endpoint.
        id: usize,
        /// Private data from the peer's `fi_accept` (empty on the accepting side).
        private_data: Vec<u8>,
    },
    /// `FI_SHUTDOWN`: the peer went away or shut the connection down.
    Shutdown {
        /// [`crate::Endpoint::id`] of the endpoint.
        id: usize,
    },
    /// Any other event number.
    Other {
        /// The event number.
        event: u32,
        /// The object it is about.
        id: usize,
    },
}

/// Room for an `fi_eq_cm_entry` and the largest private data any provider delivers.
#[repr(C, align(8))]
struct EventBuffer([u8; 16 + 512]);

impl EventQueue {
    /// Reads one event without blocking: `Ok(None)` when the queue is empty. An error event is
    /// returned as [`FabricError::Event`], decoded with `fi_eq_strerror`.
    pub fn read(&self) -> Result<Option<CmEvent>> {
        let lib = &self.inner.fabric.lib;
        let mut event: u32 = 0;
        let mut buf = EventBuffer([0; 16 + 512]);
        // SAFETY: the EQ is live; buf is writable for its length and 8-aligned, as
        // fi_eq_cm_entry needs.
        let ret = unsafe {
            let eq = self.inner.ptr.as_ptr();
            let read = op!((*eq).ops, read);
            read(eq, &mut event, buf.0.as_mut_ptr().cast(), buf.0.len(), 0)
        };
        if ret == -(sys::FI_EAVAIL as isize) {
            return Err(self.read_error()?.into());
        }
        let len = match lib.check("fi_eq_read", ret) {
            Ok(len) => len,
            Err(FabricError::WouldBlock { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let header = std::mem::size_of::<sys::fi_eq_cm_entry>();
        // SAFETY: libfabric wrote an fi_eq_cm_entry (or the fid-first fi_eq_entry) at the
        // start of buf, which is aligned for it.
        let entry = unsafe { &*(buf.0.as_ptr() as *const sys::fi_eq_cm_entry) };
        let id = entry.fid as usize;
        let private_data = if len > header {
            buf.0[header..len].to_vec()
        } else {
            Vec::new()
        };
        Ok(Some(match event {
            sys::FI_CONNREQ => {
                let info = NonNull::new(entry.info)
                    .ok_or(FabricError::Unsupported("FI_CONNREQ without info"))?;
                ConnectionRequest {
                    // SAFETY: the CONNREQ's info is handed to the application, which must free it.
                    info: unsafe { Info::from_raw(lib, info) },
                    private_data,
                }
                .into()
            }
            sys::FI_CONNECTED => CmEvent::Connected { id, private_data },
            sys::FI_SHUTDOWN => CmEvent::Shutdown { id },
            other => CmEvent::Other { event: other, id },
        }))
    }

    fn read_error(&self) -> Result<EventError> {
        let lib = &self.inner.fabric.lib;
        // SAFETY: fi_eq_err_entry is plain data; all-zero is a valid value.
        let mut entry: sys::fi_eq_err_entry = unsafe { std::mem::zeroed() };
        // SAFETY: the EQ is live and entry is writable.
        let ret = unsafe {
            let eq = self.inner.ptr.as_ptr();
            let readerr = op!((*eq).ops, readerr);
            readerr(eq, &mut entry, 0)
        };
        lib.check("fi_eq_readerr", ret)?;
        let mut text = [0 as libc::c_char; 256];
        // SAFETY: the EQ is live; err_data stays valid until the next read of this EQ; text is
        // writable for its length; the result is NULL or a NUL-terminated string.
        let detail = unsafe {
            let eq = self.inner.ptr.as_ptr();
            match (*(*eq).ops).strerror {
                Some(strerror) => cstr_or_empty(strerror(
                    eq,
                    entry.prov_errno,
                    entry.err_data,
                    text.as_mut_ptr(),
                    text.len(),
                )),
                None => String::new(),
            }
        };
        Ok(EventError {
            fid: entry.fid as usize,
            err: entry.err,
            prov_errno: entry.prov_errno,
            message: join_messages(lib.strerror(entry.err), detail),
        })
    }

    /// `fi_trywait` on this queue alone.
    pub fn trywait(&self) -> Result<bool> {
        Fabric {
            inner: Arc::clone(&self.inner.fabric),
        }
        .trywait(&[self])
    }

    /// Blocks (on the fd, never spinning) until an event arrives or `timeout` passes.
    pub fn wait(&self, timeout: Duration) -> Result<Option<CmEvent>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(event) = self.read()? {
                return Ok(Some(event));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            if self.trywait()? {
                // Capped so that connection events a provider progresses without touching the
                // EQ fd (manual progress) are still picked up: a slow re-check, not a spin.
                poll_readable(self.inner.fd, left.min(Duration::from_millis(100)))?;
            }
        }
    }
}

impl From<ConnectionRequest> for CmEvent {
    fn from(req: ConnectionRequest) -> Self {
        CmEvent::ConnectionRequest(req)
    }
}

impl AsRawFd for EventQueue {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.fd
    }
}

impl sealed::AsFid for EventQueue {
    fn as_fid(&self) -> *mut sys::fid {
        self.inner.ptr.as_ptr().cast()
    }
}

impl Waitable for EventQueue {}

pub(crate) fn join_messages(generic: String, detail: String) -> String {
    if detail.is_empty() || detail == generic {
        generic
    } else {
        format!("{generic}: {detail}")
    }
}

/// A null context pointer (our operation contexts are tags, see `Endpoint`).
pub(crate) fn tag_context(tag: u64) -> *mut c_void {
    tag as usize as *mut c_void
}
