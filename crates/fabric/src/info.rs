//! Provider selection (`fi_getinfo`) and what the chosen provider demands of us.
//!
//! The hints say what ferrokv *can handle* — `FI_EP_MSG`, `FI_MSG | FI_RMA` (send, receive,
//! write, remote write; never `FI_RMA_EVENT`, which verbs lacks), the `FI_RX_CQ_DATA` mode, and
//! `mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY` — and the
//! provider answers with what it *requires*. [`Requirements`] turns that answer into the few
//! decisions the data path branches on, so the same code runs on `tcp` (mode 0, mr_mode 0,
//! 64-bit immediates) and `verbs` (pre-posted receives, local descriptors, virtual addresses,
//! provider keys, 32-bit immediates).

use std::ffi::{c_char, CStr, CString};
use std::net::SocketAddr;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::error::{FabricError, Result};
use crate::library::{Library, API_VERSION};
use crate::sys;

/// Environment variable libfabric itself reads to restrict providers; honoured here too.
pub const PROVIDER_ENV: &str = "FI_PROVIDER";

/// What to ask `fi_getinfo` for.
#[derive(Debug, Clone, Default)]
pub struct Hints {
    /// Provider name (`"tcp"`, `"verbs"`). `None`: the single name in `FI_PROVIDER` if set,
    /// otherwise the first provider that satisfies the hints.
    pub provider: Option<String>,
    /// Address: the local address to listen on (`passive`) or the peer to connect to.
    pub addr: Option<SocketAddr>,
    /// Listening side (`FI_SOURCE`): `addr` is local.
    pub passive: bool,
}

impl Hints {
    /// Hints for a listener on `addr` (port 0 picks a free port, see `PassiveEndpoint::local_addr`).
    pub fn listen(provider: Option<&str>, addr: SocketAddr) -> Self {
        Hints {
            provider: provider.map(str::to_owned),
            addr: Some(addr),
            passive: true,
        }
    }

    /// Hints for connecting to `addr`.
    pub fn connect(provider: Option<&str>, addr: SocketAddr) -> Self {
        Hints {
            provider: provider.map(str::to_owned),
            addr: Some(addr),
            passive: false,
        }
    }

    /// The provider name actually requested: explicit, else a single-name `FI_PROVIDER`.
    pub fn provider_name(&self) -> Option<String> {
        if let Some(p) = &self.provider {
            return Some(p.clone());
        }
        let env = std::env::var(PROVIDER_ENV).ok()?;
        // "tcp,verbs" and "^shm" are filters libfabric applies itself; only a plain name is ours.
        let plain = !env.is_empty() && !env.contains([',', '^', ';']);
        plain.then_some(env)
    }
}

/// The decisions the data path takes from the provider's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requirements {
    /// `FI_RX_CQ_DATA`: every incoming write-with-immediate consumes a posted receive, so the
    /// target pre-posts receives and re-posts one per remote-write completion.
    pub prepost_receives: bool,
    /// `FI_MR_LOCAL`: local buffers must be registered and their descriptor passed.
    pub local_descriptors: bool,
    /// `FI_MR_VIRT_ADDR`: remote addresses are virtual addresses (else offsets from 0).
    pub virtual_addresses: bool,
    /// `FI_MR_PROV_KEY`: the provider picks keys (else we request random ones).
    pub provider_keys: bool,
    /// Bits of immediate data a write carries (`cq_data_size * 8`: 64 on tcp, 32 on verbs).
    pub immediate_bits: u32,
    /// Bytes of a memory key (`mr_key_size`; keys wider than 8 bytes are refused).
    pub key_size: usize,
    /// Largest `fi_inject`.
    pub inject_size: usize,
    /// Transmit queue depth.
    pub tx_size: usize,
    /// Receive queue depth.
    pub rx_size: usize,
    /// Largest single message or write.
    pub max_msg_size: usize,
}

impl Requirements {
    /// Largest immediate value a write may carry.
    pub fn max_immediate(&self) -> u64 {
        match self.immediate_bits {
            0 => 0,
            64.. => u64::MAX,
            bits => (1u64 << bits) - 1,
        }
    }

    /// Refuses an immediate wider than the provider's `cq_data_size` (32 bits on verbs).
    pub fn check_immediate(&self, immediate: u64) -> Result<()> {
        if immediate > self.max_immediate() {
            return Err(FabricError::Invalid(format!(
                "immediate {immediate} exceeds the provider's {} bits of CQ data",
                self.immediate_bits
            )));
        }
        Ok(())
    }

    /// Decides from the raw `mode`, `mr_mode`, `cq_data_size` the provider returned.
    pub fn from_raw(mode: u64, mr_mode: i32, cq_data_size: usize) -> Self {
        let mr_mode = mr_mode as u32;
        Requirements {
            prepost_receives: mode & sys::FI_RX_CQ_DATA != 0,
            local_descriptors: mr_mode & sys::FI_MR_LOCAL != 0 || mode & sys::FI_LOCAL_MR != 0,
            virtual_addresses: mr_mode & sys::FI_MR_VIRT_ADDR != 0,
            provider_keys: mr_mode & sys::FI_MR_PROV_KEY != 0,
            immediate_bits: (cq_data_size.min(8) * 8) as u32,
            key_size: 8,
            inject_size: 0,
            tx_size: 0,
            rx_size: 0,
            max_msg_size: usize::MAX,
        }
    }
}

/// One provider answer from `fi_getinfo` (or the info of an incoming connection request),
/// freed with `fi_freeinfo`.
pub struct Info {
    pub(crate) lib: Arc<Library>,
    head: NonNull<sys::fi_info>,
}

// SAFETY: an fi_info is plain heap data owned by this value; libfabric keeps no reference to
// it and it is only read through `&self` (or freed once in Drop).
unsafe impl Send for Info {}
// SAFETY: see Send; shared access only reads.
unsafe impl Sync for Info {}

impl std::fmt::Debug for Info {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Info")
            .field("provider", &self.provider_name())
            .field("domain", &self.domain_name())
            .field("requirements", &self.requirements())
            .finish()
    }
}

impl Info {
    /// Asks libfabric for a provider matching `hints` (an `FI_EP_MSG` endpoint with send,
    /// receive and write-with-immediate).
    pub fn get(lib: &Arc<Library>, hints: &Hints) -> Result<Info> {
        let provider = hints.provider_name();
        let ipv6 = hints.addr.is_some_and(|a| a.is_ipv6());
        let raw_hints = RawHints::new(lib, provider.as_deref(), ipv6)?;
        let (node, service) = match hints.addr {
            Some(addr) => (
                Some(CString::new(addr.ip().to_string()).expect("no NUL in an IP")),
                Some(CString::new(addr.port().to_string()).expect("no NUL in a port")),
            ),
            None => (None, None),
        };
        let flags = if hints.passive { sys::FI_SOURCE } else { 0 };
        let mut out: *mut sys::fi_info = std::ptr::null_mut();
        // SAFETY: hints is a valid fi_info from fi_dupinfo; node/service are NUL-terminated or
        // NULL and outlive the call; `out` receives a list we own and free in Drop.
        let ret = unsafe {
            (lib.getinfo)(
                API_VERSION,
                node.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
                service.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
                flags,
                raw_hints.0.as_ptr(),
                &mut out,
            )
        };
        if ret == -(sys::FI_ENODATA as i32) || (ret == 0 && out.is_null()) {
            return Err(FabricError::Unavailable(format!(
                "no libfabric provider{} offers FI_EP_MSG with FI_MSG|FI_RMA and remote CQ data{}",
                provider
                    .map(|p| format!(" named {p:?}"))
                    .unwrap_or_default(),
                hints.addr.map(|a| format!(" at {a}")).unwrap_or_default(),
            )));
        }
        lib.check("fi_getinfo", ret as isize)?;
        let head = NonNull::new(out).expect("fi_getinfo succeeded with a NULL list");
        Ok(Info {
            lib: Arc::clone(lib),
            head,
        })
    }

    /// Takes ownership of an `fi_info` libfabric handed over (e.g. `fi_eq_cm_entry.info`).
    ///
    /// # Safety
    /// `raw` must be a non-null `fi_info` list the caller owns and that is freed by nobody else.
    pub(crate) unsafe fn from_raw(lib: &Arc<Library>, raw: NonNull<sys::fi_info>) -> Info {
        Info {
            lib: Arc::clone(lib),
            head: raw,
        }
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::fi_info {
        self.head.as_ptr()
    }

    fn raw(&self) -> &sys::fi_info {
        // SAFETY: head is a valid fi_info we own for as long as self lives.
        unsafe { self.head.as_ref() }
    }

    /// The provider's name, e.g. `"tcp"`.
    pub fn provider_name(&self) -> String {
        // SAFETY: fabric_attr of a returned info is valid; prov_name may be NULL (checked).
        unsafe {
            cstr_or_empty(
                self.raw()
                    .fabric_attr
                    .as_ref()
                    .map_or(std::ptr::null(), |a| a.prov_name),
            )
        }
    }

    /// The domain's name, e.g. `"lo"`.
    pub fn domain_name(&self) -> String {
        // SAFETY: domain_attr of a returned info is valid; name may be NULL (checked).
        unsafe {
            cstr_or_empty(
                self.raw()
                    .domain_attr
                    .as_ref()
                    .map_or(std::ptr::null(), |a| a.name),
            )
        }
    }

    /// The raw `mode` bits the provider requires.
    pub fn mode(&self) -> u64 {
        self.raw().mode
    }

    /// The raw `mr_mode` bits the provider requires.
    pub fn mr_mode(&self) -> i32 {
        // SAFETY: domain_attr of a returned info is valid or NULL (checked).
        unsafe { self.raw().domain_attr.as_ref() }.map_or(0, |d| d.mr_mode)
    }

    /// What the data path must do for this provider.
    pub fn requirements(&self) -> Requirements {
        let info = self.raw();
        // SAFETY: the attr pointers of a returned info are valid or NULL (checked).
        let (domain, tx, rx, ep) = unsafe {
            (
                info.domain_attr.as_ref(),
                info.tx_attr.as_ref(),
                info.rx_attr.as_ref(),
                info.ep_attr.as_ref(),
            )
        };
        let rx_mode = rx.map_or(0, |rx| rx.mode);
        let mut req = Requirements::from_raw(
            info.mode | rx_mode,
            domain.map_or(0, |d| d.mr_mode),
            domain.map_or(0, |d| d.cq_data_size),
        );
        req.key_size = domain.map_or(8, |d| d.mr_key_size);
        req.inject_size = tx.map_or(0, |t| t.inject_size);
        req.tx_size = tx.map_or(0, |t| t.size);
        req.rx_size = rx.map_or(0, |r| r.size);
        req.max_msg_size = ep.map_or(usize::MAX, |e| e.max_msg_size);
        req
    }
}

impl Drop for Info {
    fn drop(&mut self) {
        // SAFETY: head is a list we own (from fi_getinfo or handed over by an EQ event);
        // nothing borrows it past self.
        unsafe { (self.lib.freeinfo)(self.head.as_ptr()) }
    }
}

/// Hints allocated by libfabric (`fi_allocinfo`) so `fi_freeinfo` can free them.
struct RawHints<'a>(NonNull<sys::fi_info>, &'a Library);

impl<'a> RawHints<'a> {
    fn new(lib: &'a Library, provider: Option<&str>, ipv6: bool) -> Result<Self> {
        // SAFETY: fi_dupinfo(NULL) is fi_allocinfo: a zeroed fi_info with all attr structs
        // allocated, or NULL on allocation failure.
        let raw = unsafe { (lib.dupinfo)(std::ptr::null()) };
        let raw = NonNull::new(raw).ok_or(FabricError::Call {
            call: "fi_allocinfo",
            code: libc::ENOMEM,
            message: "out of memory".into(),
        })?;
        let hints = RawHints(raw, lib);
        // SAFETY: all attr pointers of fi_allocinfo's result are valid and exclusively ours.
        unsafe {
            let info = &mut *raw.as_ptr();
            info.caps = u64::from(
                sys::FI_MSG
                    | sys::FI_RMA
                    | sys::FI_SEND
                    | sys::FI_RECV
                    | sys::FI_WRITE
                    | sys::FI_REMOTE_WRITE,
            );
            // The modes we can handle: pre-posted receives for remote CQ data. Not FI_CONTEXT:
            // our operation contexts are tags, not memory the provider may use.
            info.mode = sys::FI_RX_CQ_DATA;
            info.addr_format = if ipv6 {
                sys::FI_SOCKADDR_IN6
            } else {
                sys::FI_SOCKADDR_IN
            };
            (*info.ep_attr).type_ = sys::FI_EP_MSG;
            let domain = &mut *info.domain_attr;
            domain.mr_mode = (sys::FI_MR_LOCAL
                | sys::FI_MR_VIRT_ADDR
                | sys::FI_MR_ALLOCATED
                | sys::FI_MR_PROV_KEY) as i32;
            // Objects of one connection may be driven from different threads.
            domain.threading = sys::FI_THREAD_SAFE;
            if let Some(name) = provider {
                let name = CString::new(name)
                    .map_err(|_| FabricError::Invalid(format!("provider name {name:?}")))?;
                // fi_freeinfo frees prov_name with free(): it must come from malloc.
                (*info.fabric_attr).prov_name = libc::strdup(name.as_ptr());
            }
        }
        Ok(hints)
    }
}

impl Drop for RawHints<'_> {
    fn drop(&mut self) {
        // SAFETY: allocated by fi_dupinfo and owned by us; prov_name (if set) is malloc'ed.
        unsafe { (self.1.freeinfo)(self.0.as_ptr()) }
    }
}

/// # Safety
/// `ptr` is NULL or a valid NUL-terminated string.
pub(crate) unsafe fn cstr_or_empty(ptr: *const c_char) -> String {
    if ptr.is_null() {
        String::new()
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_answer_needs_no_preposting_and_uses_offsets_and_our_keys() {
        let req = Requirements::from_raw(0, 0, 8);
        assert!(!req.prepost_receives);
        assert!(!req.local_descriptors);
        assert!(!req.virtual_addresses);
        assert!(!req.provider_keys);
        assert_eq!(req.immediate_bits, 64);
        assert_eq!(req.max_immediate(), u64::MAX);
    }

    #[test]
    fn verbs_answer_needs_preposting_descriptors_virtual_addresses_provider_keys_and_32_bit_immediates(
    ) {
        let mr_mode =
            (sys::FI_MR_LOCAL | sys::FI_MR_VIRT_ADDR | sys::FI_MR_ALLOCATED | sys::FI_MR_PROV_KEY)
                as i32;
        let req = Requirements::from_raw(sys::FI_RX_CQ_DATA, mr_mode, 4);
        assert!(req.prepost_receives);
        assert!(req.local_descriptors);
        assert!(req.virtual_addresses);
        assert!(req.provider_keys);
        assert_eq!(req.immediate_bits, 32);
        assert_eq!(req.max_immediate(), u32::MAX as u64);
    }

    #[test]
    fn immediates_beyond_32_bits_are_refused_when_cq_data_size_is_4() {
        let verbs = Requirements::from_raw(sys::FI_RX_CQ_DATA, 0, 4);
        assert!(verbs.check_immediate(u64::from(u32::MAX)).is_ok());
        let err = verbs.check_immediate(1 << 32).unwrap_err();
        assert!(err.to_string().contains("32 bits"), "{err}");
        assert!(Requirements::from_raw(0, 0, 8)
            .check_immediate(u64::MAX)
            .is_ok());
    }

    #[test]
    fn legacy_local_mr_mode_bit_also_means_local_descriptors() {
        assert!(Requirements::from_raw(sys::FI_LOCAL_MR, 0, 8).local_descriptors);
    }

    #[test]
    fn provider_without_cq_data_allows_no_immediates() {
        assert_eq!(Requirements::from_raw(0, 0, 0).max_immediate(), 0);
    }

    #[test]
    fn fi_provider_names_a_single_provider_and_leaves_filters_to_libfabric() {
        // The only test in this binary that reads FI_PROVIDER.
        let hints = Hints::default();
        std::env::set_var(PROVIDER_ENV, "verbs");
        assert_eq!(hints.provider_name().as_deref(), Some("verbs"));
        for filter in ["tcp,verbs", "^shm", ""] {
            std::env::set_var(PROVIDER_ENV, filter);
            assert_eq!(hints.provider_name(), None, "{filter:?}");
        }
        std::env::remove_var(PROVIDER_ENV);
        assert_eq!(hints.provider_name(), None);
    }

    #[test]
    fn explicit_provider_wins_over_the_environment() {
        let hints = Hints::listen(Some("verbs"), "127.0.0.1:0".parse().unwrap());
        assert_eq!(hints.provider_name().as_deref(), Some("verbs"));
    }
}
