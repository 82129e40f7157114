//! Domain, completion queue and memory regions.
//!
//! Close order is carried by ownership: every object holds an `Arc` of what it was opened from
//! (memory region → domain → fabric, CQ → domain), and an endpoint holds its domain, EQ, CQ and
//! every memory region it ever posted from. So the provider is never left pointing at a closed
//! queue or at freed memory, whatever order the application drops its handles in.
//!
//! Registration (`fi_mr_reg`) is expensive; register a ring once per transfer. Keys follow the
//! provider: its own under `FI_MR_PROV_KEY`, otherwise a random key we request (so a stale or
//! guessed key from another sync does not match). The remote address published to a peer is the
//! buffer's virtual address under `FI_MR_VIRT_ADDR`, otherwise 0 (offset addressing).

use std::alloc::Layout;
use std::ffi::c_void;
use std::ops::Range;
use std::os::fd::{AsRawFd, RawFd};
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{CompletionError, FabricError, Result};
use crate::fabric::{
    close_fid, join_messages, poll_readable, sealed, wait_fd, Fabric, FabricInner, Waitable,
};
use crate::info::{cstr_or_empty, Info, Requirements};
use crate::sys;

pub(crate) struct DomainInner {
    pub(crate) fabric: Arc<FabricInner>,
    pub(crate) ptr: NonNull<sys::fid_domain>,
    pub(crate) req: Requirements,
}

// SAFETY: opened with FI_THREAD_SAFE; closed once, in Drop.
unsafe impl Send for DomainInner {}
// SAFETY: see Send.
unsafe impl Sync for DomainInner {}

impl Drop for DomainInner {
    fn drop(&mut self) {
        // SAFETY: endpoints, CQs and MRs hold an Arc to the domain, so they are closed already.
        unsafe { close_fid(self.ptr.as_ptr().cast()) };
    }
}

/// A resource domain (`fi_domain`): one NIC, or the tcp provider on one interface.
#[derive(Clone)]
pub struct Domain {
    pub(crate) inner: Arc<DomainInner>,
}

impl std::fmt::Debug for Domain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Domain")
            .field("requirements", &self.inner.req)
            .finish()
    }
}

/// What a memory region may be used for (`FI_SEND`, `FI_RECV`, `FI_WRITE`, `FI_REMOTE_WRITE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access(u64);

impl Access {
    /// Source of `fi_send`.
    pub const SEND: Access = Access(sys::FI_SEND as u64);
    /// Destination of `fi_recv`.
    pub const RECV: Access = Access(sys::FI_RECV as u64);
    /// Source of `fi_writedata`.
    pub const WRITE: Access = Access(sys::FI_WRITE as u64);
    /// Target of a peer's `fi_writedata`.
    pub const REMOTE_WRITE: Access = Access(sys::FI_REMOTE_WRITE as u64);

    /// The raw `FI_*` bits.
    pub fn bits(self) -> u64 {
        self.0
    }

    /// True when every bit of `other` is set.
    pub fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

impl Domain {
    /// Opens the domain of `info` (from `fi_getinfo`, or from a connection request).
    pub fn open(fabric: &Fabric, info: &Info) -> Result<Domain> {
        let lib = &fabric.inner.lib;
        let mut ptr: *mut sys::fid_domain = std::ptr::null_mut();
        // SAFETY: the fabric is live; info is a valid fi_info; ptr receives a domain we own.
        let ret = unsafe {
            let fab = fabric.inner.ptr.as_ptr();
            let domain = op!((*fab).ops, domain);
            domain(fab, info.as_ptr(), &mut ptr, std::ptr::null_mut())
        };
        lib.check("fi_domain", ret as isize)?;
        let ptr = NonNull::new(ptr).ok_or(FabricError::Unsupported("fi_domain"))?;
        let req = info.requirements();
        if req.key_size > 8 {
            // Owned, so dropping it closes the domain.
            drop(DomainInner {
                fabric: Arc::clone(&fabric.inner),
                ptr,
                req,
            });
            return Err(FabricError::Unavailable(format!(
                "provider {} uses {}-byte (raw) memory keys; ferrokv supports at most 8",
                info.provider_name(),
                req.key_size
            )));
        }
        Ok(Domain {
            inner: Arc::new(DomainInner {
                fabric: Arc::clone(&fabric.inner),
                ptr,
                req,
            }),
        })
    }

    /// What the data path must do for this domain's provider.
    pub fn requirements(&self) -> Requirements {
        self.inner.req
    }

    /// The fabric this domain belongs to (for [`Fabric::trywait`]).
    pub fn fabric(&self) -> Fabric {
        Fabric {
            inner: Arc::clone(&self.inner.fabric),
        }
    }

    /// Opens a completion queue of `size` entries (`FI_CQ_FORMAT_DATA`, `FI_WAIT_FD`).
    pub fn completion_queue(&self, size: usize) -> Result<CompletionQueue> {
        let lib = &self.inner.fabric.lib;
        let mut attr = sys::fi_cq_attr {
            size,
            flags: 0,
            format: sys::FI_CQ_FORMAT_DATA,
            wait_obj: sys::FI_WAIT_FD,
            signaling_vector: 0,
            wait_cond: sys::FI_CQ_COND_NONE,
            wait_set: std::ptr::null_mut(),
        };
        let mut ptr: *mut sys::fid_cq = std::ptr::null_mut();
        // SAFETY: the domain is live; attr and ptr are valid for the call.
        let ret = unsafe {
            let dom = self.inner.ptr.as_ptr();
            let cq_open = op!((*dom).ops, cq_open);
            cq_open(dom, &mut attr, &mut ptr, std::ptr::null_mut())
        };
        lib.check("fi_cq_open", ret as isize)?;
        let ptr = NonNull::new(ptr).ok_or(FabricError::Unsupported("fi_cq_open"))?;
        let mut inner = CqInner {
            domain: Arc::clone(&self.inner),
            ptr,
            fd: -1,
        };
        // SAFETY: the CQ was just opened with FI_WAIT_FD.
        inner.fd = unsafe { wait_fd(lib, ptr.as_ptr().cast())? };
        Ok(CompletionQueue {
            inner: Arc::new(inner),
        })
    }

    /// Allocates `len` zeroed, page-aligned bytes and registers them for `access`.
    pub fn register(&self, len: usize, access: Access) -> Result<MemoryRegion> {
        if len == 0 {
            return Err(FabricError::Invalid("cannot register 0 bytes".into()));
        }
        let layout = Layout::from_size_align(len, 4096)
            .map_err(|e| FabricError::Invalid(format!("region of {len} bytes: {e}")))?;
        // SAFETY: layout has a non-zero size.
        let ptr = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
            .unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        let storage = Storage::Owned(OwnedBuffer { ptr, layout });
        self.register_storage(storage, access)
    }

    /// Registers memory the caller shares read-only (e.g. a mapped snapshot file) as a source of
    /// sends and writes. The region keeps `data` alive until it is closed.
    pub fn register_shared(
        &self,
        data: Arc<dyn AsRef<[u8]> + Send + Sync>,
    ) -> Result<MemoryRegion> {
        if data.as_ref().as_ref().is_empty() {
            return Err(FabricError::Invalid("cannot register 0 bytes".into()));
        }
        self.register_storage(Storage::Shared(data), Access::SEND | Access::WRITE)
    }

    fn register_storage(&self, storage: Storage, access: Access) -> Result<MemoryRegion> {
        let lib = &self.inner.fabric.lib;
        let (addr, len) = storage.span();
        let mut last_err = None;
        // Requested keys are random; a collision (-FI_ENOKEY) is retried with another.
        for _ in 0..4 {
            let requested_key = if self.inner.req.provider_keys {
                0
            } else {
                random_key(self.inner.req.key_size)?
            };
            let mut mr: *mut sys::fid_mr = std::ptr::null_mut();
            // SAFETY: the domain is live; [addr, addr+len) is memory `storage` keeps allocated
            // until after the region is closed (MrInner closes before its storage drops).
            let ret = unsafe {
                let dom = self.inner.ptr.as_ptr();
                let reg = op!((*dom).mr, reg);
                reg(
                    &mut (*dom).fid,
                    addr as *const c_void,
                    len,
                    access.bits(),
                    0,
                    requested_key,
                    0,
                    &mut mr,
                    std::ptr::null_mut(),
                )
            };
            if ret == -(sys::FI_ENOKEY as i32) {
                last_err = Some(lib.check("fi_mr_reg", ret as isize).unwrap_err());
                continue;
            }
            lib.check("fi_mr_reg", ret as isize)?;
            let mr = NonNull::new(mr).ok_or(FabricError::Unsupported("fi_mr_reg"))?;
            // SAFETY: mr is a live fid_mr; desc and key are plain fields (fi_mr_desc, fi_mr_key).
            let (desc, key) = unsafe { (mr.as_ref().mem_desc, mr.as_ref().key) };
            return Ok(MemoryRegion {
                inner: Arc::new(MrInner {
                    domain: Arc::clone(&self.inner),
                    ptr: mr,
                    desc,
                    key,
                    addr,
                    len,
                    access,
                    storage,
                }),
            });
        }
        Err(last_err.expect("loop ran"))
    }
}

fn random_key(key_size: usize) -> Result<u64> {
    let mut bytes = [0u8; 8];
    // SAFETY: bytes is writable for 8 bytes.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if got != 8 {
        return Err(std::io::Error::last_os_error().into());
    }
    let key = u64::from_ne_bytes(bytes);
    Ok(match key_size {
        0 | 8.. => key,
        n => key & ((1u64 << (n * 8)) - 1),
    })
}

pub(crate) struct OwnedBuffer {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl Drop for OwnedBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in Domain::register with this layout; freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

pub(crate) enum Storage {
    Owned(OwnedBuffer),
    Shared(Arc<dyn AsRef<[u8]> + Send + Sync>),
}

impl Storage {
    fn span(&self) -> (*mut u8, usize) {
        match self {
            Storage::Owned(b) => (b.ptr.as_ptr(), b.layout.size()),
            Storage::Shared(data) => {
                let bytes = (**data).as_ref();
                (bytes.as_ptr() as *mut u8, bytes.len())
            }
        }
    }
}

pub(crate) struct MrInner {
    domain: Arc<DomainInner>,
    ptr: NonNull<sys::fid_mr>,
    pub(crate) desc: *mut c_void,
    key: u64,
    pub(crate) addr: *mut u8,
    pub(crate) len: usize,
    pub(crate) access: Access,
    // Dropped after Drop::drop has closed the registration.
    #[allow(dead_code)]
    storage: Storage,
}

// SAFETY: FI_THREAD_SAFE domain; the buffer is heap memory (or Send + Sync shared data) that
// is only read or written through MemoryRegion's borrow-checked accessors.
unsafe impl Send for MrInner {}
// SAFETY: see Send.
unsafe impl Sync for MrInner {}

impl Drop for MrInner {
    fn drop(&mut self) {
        // SAFETY: endpoints that posted from this region hold an Arc to it, so none can still
        // touch it; the domain is kept alive by our Arc.
        unsafe { close_fid(self.ptr.as_ptr().cast()) };
    }
}

/// Registered memory (`fi_mr_reg`) together with the buffer it covers.
///
/// The region owns its buffer, so the buffer outlives the registration and any operation posted
/// from it (endpoints keep the regions they post from alive until they are closed).
///
/// Bytes are shared with the provider and, for a remote-write target, with the peer: the
/// protocol (credits) decides when a slot is stable. [`MemoryRegion::bytes`] reads what is
/// there now; reading a slot the peer still holds a credit for may observe a write in progress.
pub struct MemoryRegion {
    pub(crate) inner: Arc<MrInner>,
}

impl std::fmt::Debug for MemoryRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryRegion")
            .field("len", &self.inner.len)
            .field("key", &self.inner.key)
            .field("remote_addr", &self.remote_addr())
            .finish()
    }
}

impl MemoryRegion {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.inner.len
    }

    /// Always false: empty regions cannot be registered.
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// The remote key to give the peer (`fi_mr_key`).
    pub fn key(&self) -> u64 {
        self.inner.key
    }

    /// The address a peer writes byte 0 at: the virtual address under `FI_MR_VIRT_ADDR`,
    /// otherwise 0 (offset addressing).
    pub fn remote_addr(&self) -> u64 {
        if self.inner.domain.req.virtual_addresses {
            self.inner.addr as u64
        } else {
            0
        }
    }

    /// The local descriptor (`fi_mr_desc`; NULL when the provider has none). Endpoint posts
    /// pass it automatically; exposed for diagnostics.
    pub fn descriptor(&self) -> *mut c_void {
        self.inner.desc
    }

    /// What the region was registered for.
    pub fn access(&self) -> Access {
        self.inner.access
    }

    /// The bytes of `range` as they are now.
    ///
    /// Panics if `range` is outside the region.
    pub fn bytes(&self, range: Range<usize>) -> &[u8] {
        self.check_range(&range).expect("range within the region");
        // SAFETY: the range is inside the live buffer; mutation from this process needs
        // `&mut self` (bytes_mut), so no Rust reference aliases a local write. Remote writes by
        // the peer are outside the program, as with a shared mapping.
        unsafe { std::slice::from_raw_parts(self.inner.addr.add(range.start), range.len()) }
    }

    /// The bytes of `range`, writable; `None` for read-only (shared) regions.
    ///
    /// Panics if `range` is outside the region.
    pub fn bytes_mut(&mut self, range: Range<usize>) -> Option<&mut [u8]> {
        self.check_range(&range).expect("range within the region");
        if matches!(self.inner.storage, Storage::Shared(_)) {
            return None;
        }
        // SAFETY: owned buffer, range checked; `&mut self` excludes other local borrows.
        Some(unsafe {
            std::slice::from_raw_parts_mut(self.inner.addr.add(range.start), range.len())
        })
    }

    pub(crate) fn check_range(&self, range: &Range<usize>) -> Result<()> {
        if range.start > range.end || range.end > self.inner.len {
            return Err(FabricError::Invalid(format!(
                "range {range:?} outside a region of {} bytes",
                self.inner.len
            )));
        }
        Ok(())
    }

    pub(crate) fn is_shared(&self) -> bool {
        matches!(self.inner.storage, Storage::Shared(_))
    }
}

pub(crate) struct CqInner {
    pub(crate) domain: Arc<DomainInner>,
    pub(crate) ptr: NonNull<sys::fid_cq>,
    fd: RawFd,
}

// SAFETY: FI_THREAD_SAFE domain; closed once, in Drop.
unsafe impl Send for CqInner {}
// SAFETY: see Send.
unsafe impl Sync for CqInner {}

impl Drop for CqInner {
    fn drop(&mut self) {
        // SAFETY: endpoints bound to this CQ hold an Arc to it, so they are closed already.
        unsafe { close_fid(self.ptr.as_ptr().cast()) };
    }
}

/// One successful completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The tag the operation was posted with. For a remote write it is 0, or — on providers
    /// that consume a receive per remote write (`FI_RX_CQ_DATA`) — the tag of that receive.
    pub tag: u64,
    /// Raw completion flags.
    pub flags: u64,
    /// Bytes transferred (received length for receives and remote writes).
    pub len: usize,
    /// The immediate data of a remote write (`FI_REMOTE_CQ_DATA`).
    pub immediate: Option<u64>,
}

/// What a completion reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionKind {
    /// Our `fi_send` finished.
    Send,
    /// A message arrived in a posted receive.
    Recv,
    /// Our `fi_writedata` finished locally (the target's completion is what proves delivery).
    Write,
    /// A peer's write landed in our memory (with immediate data).
    RemoteWrite,
    /// Anything else.
    Other,
}

impl Completion {
    /// Classifies the completion by its flags.
    pub fn kind(&self) -> CompletionKind {
        let f = self.flags;
        if f & sys::FI_REMOTE_WRITE as u64 != 0
            || (f & sys::FI_REMOTE_CQ_DATA as u64 != 0 && f & sys::FI_RMA as u64 != 0)
        {
            CompletionKind::RemoteWrite
        } else if f & sys::FI_RECV as u64 != 0 {
            CompletionKind::Recv
        } else if f & sys::FI_SEND as u64 != 0 {
            CompletionKind::Send
        } else if f & sys::FI_WRITE as u64 != 0 {
            CompletionKind::Write
        } else {
            CompletionKind::Other
        }
    }
}

/// A completion queue (`fi_cq_open`, `FI_CQ_FORMAT_DATA`, `FI_WAIT_FD`).
///
/// Reading it also drives progress: with the tcp provider data only moves while the target
/// reads its CQ, so an event loop reads it each turn and whenever its fd is readable.
#[derive(Clone)]
pub struct CompletionQueue {
    pub(crate) inner: Arc<CqInner>,
}

impl std::fmt::Debug for CompletionQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompletionQueue")
            .field("fd", &self.inner.fd)
            .finish()
    }
}

const READ_BATCH: usize = 32;

impl CompletionQueue {
    /// Reads up to `max` completions into `out` without blocking, until the queue reports
    /// `-FI_EAGAIN`. Returns how many were appended (0: empty).
    ///
    /// An error completion stops the read: completions read before it are already in `out`,
    /// and the error is returned decoded ([`FabricError::Completion`], via `fi_cq_readerr` and
    /// `fi_cq_strerror`).
    pub fn read(&self, out: &mut Vec<Completion>, max: usize) -> Result<usize> {
        let lib = &self.inner.domain.fabric.lib;
        let mut total = 0;
        // SAFETY: fi_cq_data_entry is plain data; all-zero is a valid value.
        let mut entries: [sys::fi_cq_data_entry; READ_BATCH] = unsafe { std::mem::zeroed() };
        while total < max {
            let want = (max - total).min(READ_BATCH);
            // SAFETY: the CQ is live and was opened with FI_CQ_FORMAT_DATA, so it writes at
            // most `want` fi_cq_data_entry into `entries`.
            let ret = unsafe {
                let cq = self.inner.ptr.as_ptr();
                let read = op!((*cq).ops, read);
                read(cq, entries.as_mut_ptr().cast(), want)
            };
            if ret == -(sys::FI_EAVAIL as isize) {
                return Err(self.read_error()?.into());
            }
            let n = match lib.check("fi_cq_read", ret) {
                Ok(n) => n,
                Err(FabricError::WouldBlock { .. }) => break,
                Err(e) => return Err(e),
            };
            for e in &entries[..n] {
                let immediate = (e.flags & sys::FI_REMOTE_CQ_DATA as u64 != 0).then_some(e.data);
                out.push(Completion {
                    tag: e.op_context as usize as u64,
                    flags: e.flags,
                    len: e.len,
                    immediate,
                });
            }
            total += n;
            if n < want {
                break;
            }
        }
        Ok(total)
    }

    fn read_error(&self) -> Result<CompletionError> {
        let lib = &self.inner.domain.fabric.lib;
        // SAFETY: fi_cq_err_entry is plain data; all-zero is a valid value (err_data NULL).
        let mut entry: sys::fi_cq_err_entry = unsafe { std::mem::zeroed() };
        // SAFETY: the CQ is live and entry is writable.
        let ret = unsafe {
            let cq = self.inner.ptr.as_ptr();
            let readerr = op!((*cq).ops, readerr);
            readerr(cq, &mut entry, 0)
        };
        lib.check("fi_cq_readerr", ret)?;
        let mut text = [0 as libc::c_char; 256];
        // SAFETY: the CQ is live; err_data is valid until the next read of this CQ; text is
        // writable for its length; the result is NULL or a NUL-terminated string.
        let detail = unsafe {
            let cq = self.inner.ptr.as_ptr();
            match (*(*cq).ops).strerror {
                Some(strerror) => cstr_or_empty(strerror(
                    cq,
                    entry.prov_errno,
                    entry.err_data,
                    text.as_mut_ptr(),
                    text.len(),
                )),
                None => String::new(),
            }
        };
        Ok(CompletionError {
            tag: entry.op_context as usize as u64,
            flags: entry.flags,
            err: entry.err,
            prov_errno: entry.prov_errno,
            message: join_messages(lib.strerror(entry.err), detail),
        })
    }

    /// The fabric this queue belongs to (for [`Fabric::trywait`] over several queues).
    pub fn fabric(&self) -> Fabric {
        Fabric {
            inner: Arc::clone(&self.inner.domain.fabric),
        }
    }

    /// `fi_trywait` on this queue alone: `Ok(true)` when it is safe to sleep on the fd.
    pub fn trywait(&self) -> Result<bool> {
        self.fabric().trywait(&[self])
    }

    /// Sleeps on the fd until it is readable or `timeout` passes — unless `fi_trywait` says an
    /// entry may already be there, in which case it returns at once. Call [`Self::read`] after.
    pub fn wait(&self, timeout: Duration) -> Result<()> {
        if self.trywait()? {
            poll_readable(self.inner.fd, timeout)?;
        }
        Ok(())
    }
}

impl AsRawFd for CompletionQueue {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.fd
    }
}

impl sealed::AsFid for CompletionQueue {
    fn as_fid(&self) -> *mut sys::fid {
        self.inner.ptr.as_ptr().cast()
    }
}

impl Waitable for CompletionQueue {}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(flags: u32) -> CompletionKind {
        Completion {
            tag: 0,
            flags: u64::from(flags),
            len: 0,
            immediate: None,
        }
        .kind()
    }

    #[test]
    fn completions_are_classified_by_their_flags() {
        // tcp's target side of fi_writedata (measured), and verbs' RECV_RDMA_WITH_IMM.
        assert_eq!(
            kind(sys::FI_REMOTE_WRITE | sys::FI_REMOTE_CQ_DATA),
            CompletionKind::RemoteWrite
        );
        assert_eq!(
            kind(sys::FI_RMA | sys::FI_REMOTE_WRITE | sys::FI_REMOTE_CQ_DATA),
            CompletionKind::RemoteWrite
        );
        // A message that carries CQ data is still a receive, not a remote write.
        assert_eq!(
            kind(sys::FI_MSG | sys::FI_RECV | sys::FI_REMOTE_CQ_DATA),
            CompletionKind::Recv
        );
        assert_eq!(kind(sys::FI_MSG | sys::FI_RECV), CompletionKind::Recv);
        assert_eq!(kind(sys::FI_MSG | sys::FI_SEND), CompletionKind::Send);
        assert_eq!(kind(sys::FI_RMA | sys::FI_WRITE), CompletionKind::Write);
        assert_eq!(kind(0), CompletionKind::Other);
    }

    #[test]
    fn access_flags_combine_and_are_checked_by_containment() {
        let a = Access::SEND | Access::WRITE;
        assert!(a.contains(Access::SEND));
        assert!(a.contains(Access::WRITE));
        assert!(!a.contains(Access::RECV));
        assert!(!a.contains(Access::SEND | Access::REMOTE_WRITE));
        assert_eq!(a.bits(), u64::from(sys::FI_SEND | sys::FI_WRITE));
    }

    #[test]
    fn requested_keys_fit_the_providers_key_size() {
        for size in [1usize, 2, 4] {
            for _ in 0..64 {
                assert!(random_key(size).unwrap() < 1u64 << (size * 8));
            }
        }
        // 64 random bits: two draws colliding would mean the generator is broken.
        assert_ne!(random_key(8).unwrap(), random_key(8).unwrap());
    }
}
