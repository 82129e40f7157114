//! Opening `libfabric.so.1` at run time.
//!
//! libfabric exports only a handful of functions (`fi_getinfo`, `fi_freeinfo`, `fi_dupinfo`,
//! `fi_fabric`, `fi_strerror`, `fi_version`, ...); everything else is a `static inline` in the
//! headers that calls through an object's ops table. So this module resolves just those few
//! symbols by name, and the rest of the crate calls through the committed layouts in
//! [`crate::sys`]. Building ferrokv therefore needs no libfabric, no headers and no libclang;
//! a machine without the library gets [`FabricError::Unavailable`] at run time.
//!
//! A library, once opened, stays loaded for the life of the process: every libfabric object
//! points into the library's code and its providers' ops tables, and libfabric's own
//! initialisation/finalisation is not meant to run twice in one process. Opening the same
//! path again returns the same [`Library`].

use std::ffi::{c_char, c_int, c_void, CStr, OsStr, OsString};
use std::sync::{Arc, Mutex};

use crate::error::{FabricError, Result};
use crate::sys;

/// The library opened when nothing else is asked for.
pub const DEFAULT_LIBRARY: &str = "libfabric.so.1";
/// Environment variable that overrides [`DEFAULT_LIBRARY`] for [`Library::open_default`].
pub const LIBRARY_ENV: &str = "FERROKV_LIBFABRIC";

/// The version the committed layouts were generated from; passed to `fi_getinfo`.
pub(crate) const API_VERSION: u32 = (1 << 16) | 17;

type FiGetinfo = unsafe extern "C" fn(
    u32,
    *const c_char,
    *const c_char,
    u64,
    *const sys::fi_info,
    *mut *mut sys::fi_info,
) -> c_int;
type FiFreeinfo = unsafe extern "C" fn(*mut sys::fi_info);
type FiDupinfo = unsafe extern "C" fn(*const sys::fi_info) -> *mut sys::fi_info;
type FiFabric =
    unsafe extern "C" fn(*mut sys::fi_fabric_attr, *mut *mut sys::fid_fabric, *mut c_void) -> c_int;
type FiStrerror = unsafe extern "C" fn(c_int) -> *const c_char;
type FiVersion = unsafe extern "C" fn() -> u32;

/// A loaded `libfabric.so.1` and the functions it exports.
pub struct Library {
    path: OsString,
    version: u32,
    pub(crate) getinfo: FiGetinfo,
    pub(crate) freeinfo: FiFreeinfo,
    pub(crate) dupinfo: FiDupinfo,
    pub(crate) fabric: FiFabric,
    strerror: FiStrerror,
    // Kept so the mapping is owned by something; `Library` values are never dropped (see the
    // cache in `open`), so libfabric is never unloaded under live objects.
    _handle: libloading::Library,
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Library")
            .field("path", &self.path)
            .field("version", &self.version_string())
            .finish()
    }
}

static OPENED: Mutex<Vec<Arc<Library>>> = Mutex::new(Vec::new());

impl Library {
    /// Opens the library named by `FERROKV_LIBFABRIC`, or `libfabric.so.1`.
    pub fn open_default() -> Result<Arc<Library>> {
        match std::env::var_os(LIBRARY_ENV) {
            Some(path) if !path.is_empty() => Self::open(path),
            _ => Self::open(DEFAULT_LIBRARY),
        }
    }

    /// Opens libfabric from `path` (a file name searched the `dlopen` way, or a path).
    ///
    /// Fails with [`FabricError::Unavailable`] ("RDMA unavailable: …") when the library cannot
    /// be loaded, lacks one of the symbols, or is not a 1.x release.
    pub fn open(path: impl AsRef<OsStr>) -> Result<Arc<Library>> {
        let path = path.as_ref();
        let mut opened = OPENED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(lib) = opened.iter().find(|lib| lib.path == path) {
            return Ok(Arc::clone(lib));
        }
        let shown = path.to_string_lossy();
        // SAFETY: loading libfabric runs its ELF constructors, which only initialise libfabric's
        // own state; we load it with the default (RTLD_NOW | RTLD_LOCAL) flags.
        let handle = unsafe { libloading::Library::new(path) }
            .map_err(|e| FabricError::Unavailable(format!("cannot load {shown}: {e}")))?;

        fn symbol<T: Copy>(handle: &libloading::Library, shown: &str, name: &str) -> Result<T> {
            // SAFETY: `T` is the exact C signature of the named libfabric 1.x function (see the
            // type aliases above, transcribed from rdma/fabric.h).
            unsafe { handle.get::<T>(name.as_bytes()) }
                .map(|sym| *sym)
                .map_err(|e| FabricError::Unavailable(format!("{shown} has no symbol {name}: {e}")))
        }
        let version_fn: FiVersion = symbol(&handle, &shown, "fi_version")?;
        // SAFETY: fi_version takes no arguments and only returns a constant.
        let version = unsafe { version_fn() };
        if version >> 16 != 1 || (version & 0xffff) < 17 {
            return Err(FabricError::Unavailable(format!(
                "{shown} is libfabric {}.{}, this build needs 1.x with x >= 17",
                version >> 16,
                version & 0xffff
            )));
        }
        let lib = Arc::new(Library {
            path: path.to_owned(),
            version,
            getinfo: symbol(&handle, &shown, "fi_getinfo")?,
            freeinfo: symbol(&handle, &shown, "fi_freeinfo")?,
            dupinfo: symbol(&handle, &shown, "fi_dupinfo")?,
            fabric: symbol(&handle, &shown, "fi_fabric")?,
            strerror: symbol(&handle, &shown, "fi_strerror")?,
            _handle: handle,
        });
        opened.push(Arc::clone(&lib));
        Ok(lib)
    }

    /// `fi_version()` of the loaded library, `major << 16 | minor`.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The version as `"1.17"`.
    pub fn version_string(&self) -> String {
        format!("{}.{}", self.version >> 16, self.version & 0xffff)
    }

    /// `fi_strerror` of a positive libfabric or errno code.
    pub fn strerror(&self, code: i32) -> String {
        // SAFETY: fi_strerror accepts any int and returns a pointer to a static NUL-terminated
        // string (never NULL in 1.x; checked anyway).
        let ptr = unsafe { (self.strerror)(code.abs()) };
        if ptr.is_null() {
            return format!("error {code}");
        }
        // SAFETY: non-null, NUL-terminated, static lifetime (see above).
        unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned()
    }

    /// Turns a negative libfabric return code into an error naming the call.
    pub(crate) fn check(&self, call: &'static str, ret: isize) -> Result<usize> {
        if ret >= 0 {
            return Ok(ret as usize);
        }
        let code = (-ret) as i32;
        if code == sys::FI_EAGAIN as i32 {
            return Err(FabricError::WouldBlock { call });
        }
        Err(FabricError::Call {
            call,
            code,
            message: self.strerror(code),
        })
    }
}
