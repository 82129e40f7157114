//! ferrokv's RDMA transport: a libfabric 1.x binding opened at run time and a small safe API
//! for connected endpoints, registered memory and completion queues.
//!
//! # Why it is shaped so
//!
//! * **No build-time libfabric.** `libfabric.so.1` exports only a dozen functions; everything
//!   else in its API is a `static inline` calling through an object's ops table. So
//!   [`Library`] `dlopen`s the library and resolves those few functions by name, and the rest is
//!   called through struct layouts generated once by bindgen and committed ([`sys`]). ferrokv
//!   builds on a machine without libfabric, its headers or libclang; there,
//!   [`Library::open_default`] returns "RDMA unavailable: …" and the server falls back to TCP.
//!   (Published Rust bindings target libfabric 2.x headers or bundle their own library; Debian
//!   ships 1.17.)
//! * **Portable to verbs by construction.** The hints declare what ferrokv can handle and the
//!   answer is reduced to [`Requirements`]: pre-post receives under `FI_RX_CQ_DATA`, pass local
//!   descriptors under `FI_MR_LOCAL`, publish virtual addresses under `FI_MR_VIRT_ADDR`, use the
//!   provider's key under `FI_MR_PROV_KEY` (random requested keys otherwise), keep immediates
//!   within `cq_data_size`. `FI_RMA_EVENT` is never requested; private data stays ≤ 55 bytes.
//! * **Made for an event loop.** Queues use `FI_WAIT_FD` and implement `AsRawFd` for mio. The
//!   loop drains a queue until empty, then asks [`Fabric::trywait`]; only `true` allows sleeping.
//!   Never spin: on a busy 2-core machine both peers spinning collapses throughput.
//! * **RAII in the right order.** Every object holds an `Arc` of its parents, and endpoints hold
//!   the queues they are bound to and the regions they have posted from, so `fi_close` runs
//!   children-first however handles are dropped.
//!
//! Nearly all of ferrokv's `unsafe` lives here; each block carries a `// SAFETY:` note.
//!
//! # Layout
//!
//! ```text
//! library        dlopen libfabric.so.1, the exported functions, fi_strerror
//! sys            bindgen layouts (generated, committed; bindgen/regenerate.sh)
//! info           Hints -> fi_getinfo -> Info, Requirements (mode / mr_mode / cq_data_size)
//! fabric         Fabric, EventQueue + CmEvent, Waitable + fi_trywait
//! domain         Domain, CompletionQueue + Completion, MemoryRegion + Access
//! endpoint       PassiveEndpoint (listen/reject), Endpoint (connect/accept/writedata/send/recv)
//! connection     blocking helpers: Listener::accept, connect -> Connection
//! private_data   RingDescriptor / AcceptDescriptor (≤ 55 bytes)
//! stream         Stream: a duplex byte stream (rings both ways, cumulative credits)
//! tune           Tuner: online hill climb with confidence bounds over a grid of RDMA knobs
//! ```
//!
//! # A transfer (replica = connector and ring owner, master = listener and writer)
//!
//! ```text
//! replica                                          master
//! register ring K×C (REMOTE_WRITE)                 Listener::bind
//! connect(RingDescriptor{addr,key,K,C,token}) ───▶ FI_CONNREQ: check token, open ep,
//!                                     ◀─────────── accept(AcceptDescriptor{token, window})
//! FI_CONNECTED                                     FI_CONNECTED; post recvs for credits
//!                                     ◀─────────── write_data(slot i mod K, imm = i)
//! completion RemoteWrite{imm = i}: consume slot,
//! send credit ───────────────────────────────────▶ Recv completion: one more write allowed
//! ```

/// Fetches an operation from a libfabric ops table, or returns `FabricError::Unsupported`.
/// Only usable inside `unsafe` (it dereferences the table pointer).
macro_rules! op {
    ($table:expr, $name:ident) => {{
        let table = $table;
        if table.is_null() {
            return Err($crate::FabricError::Unsupported(stringify!($name)).into());
        }
        match (*table).$name {
            Some(f) => f,
            None => return Err($crate::FabricError::Unsupported(stringify!($name)).into()),
        }
    }};
}

pub mod connection;
mod domain;
mod endpoint;
mod error;
mod fabric;
mod info;
mod library;
pub mod private_data;
pub mod stream;
#[allow(clippy::all, clippy::pedantic, unsafe_op_in_unsafe_fn)]
pub mod sys;
pub mod tune;

pub use connection::{connect, Connection, Listener};
pub use domain::{Access, Completion, CompletionKind, CompletionQueue, Domain, MemoryRegion};
pub use endpoint::{Endpoint, PassiveEndpoint};
pub use error::{CompletionError, EventError, FabricError, Result};
pub use fabric::{close_failures, CmEvent, ConnectionRequest, EventQueue, Fabric, Waitable};
pub use info::{Hints, Info, Requirements, PROVIDER_ENV};
pub use library::{Library, DEFAULT_LIBRARY, LIBRARY_ENV};
pub use private_data::{AcceptDescriptor, RingDescriptor, MAX_LANES, MAX_PRIVATE_DATA};
pub use stream::{
    PendingStream, RingPool, RingPoolStats, Stream, StreamConfig, StreamStats, WriteLatency,
    STREAM_TOKEN, WRITE_LATENCY_BOUNDS_USEC,
};

#[cfg(test)]
mod layout_tests {
    //! The committed layouts must match what the C compiler gives libfabric 1.17 on x86_64
    //! (sizes printed by a C program compiled against the headers, see docs/fabric.md).
    use super::sys;
    use std::mem::{offset_of, size_of};

    #[test]
    fn struct_sizes_match_libfabric_1_17() {
        assert_eq!(size_of::<sys::fi_info>(), 120);
        assert_eq!(size_of::<sys::fi_cq_data_entry>(), 40);
        assert_eq!(size_of::<sys::fi_eq_cm_entry>(), 16);
        assert_eq!(size_of::<sys::fi_cq_err_entry>(), 80);
        assert_eq!(size_of::<sys::fi_eq_err_entry>(), 48);
        assert_eq!(size_of::<sys::fi_domain_attr>(), 192);
        assert_eq!(size_of::<sys::fid>(), 24);
        assert_eq!(size_of::<sys::fid_ep>(), 80);
        assert_eq!(size_of::<sys::fid_mr>(), 40);
    }

    #[test]
    fn ops_tables_put_the_calls_we_use_where_c_does() {
        // Offsets in units of pointers after the leading `size_t size`.
        assert_eq!(offset_of!(sys::fi_ops, close), 8);
        assert_eq!(offset_of!(sys::fi_ops, control), 24);
        assert_eq!(offset_of!(sys::fi_ops_fabric, trywait), 40);
        assert_eq!(offset_of!(sys::fi_ops_domain, endpoint), 24);
        assert_eq!(offset_of!(sys::fi_ops_msg, send), 32);
        assert_eq!(offset_of!(sys::fi_ops_rma, writedata), 64);
        assert_eq!(offset_of!(sys::fi_ops_cm, shutdown), 64);
        assert_eq!(offset_of!(sys::fi_ops_cq, readerr), 24);
        assert_eq!(offset_of!(sys::fid_ep, rma), 48);
        assert_eq!(offset_of!(sys::fid_domain, mr), 32);
    }
}
