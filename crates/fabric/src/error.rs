//! Errors of the fabric crate.
//!
//! One enum at the crate boundary (`thiserror`), with the two failures the data plane must
//! tell apart carried as their own types: an error *completion* (a posted operation failed,
//! [`CompletionError`]) and an error *event* on the event queue (a connection failed,
//! [`EventError`]). Both carry libfabric's decoded message, so a log line says what happened.

use crate::private_data::PrivateDataError;

/// Result of the fabric crate.
pub type Result<T, E = FabricError> = std::result::Result<T, E>;

/// Any failure of the RDMA layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FabricError {
    /// libfabric could not be loaded (missing, wrong version) or offers no usable provider.
    #[error("RDMA unavailable: {0}")]
    Unavailable(String),
    /// A libfabric call returned an error code.
    #[error("{call} failed: {message} (error {code})")]
    Call {
        /// The libfabric function, e.g. `fi_mr_reg`.
        call: &'static str,
        /// The positive `FI_E*`/errno code.
        code: i32,
        /// `fi_strerror(code)`.
        message: String,
    },
    /// The queue is full (`-FI_EAGAIN`): drive the completion queue, then post again.
    #[error("{call} would block (-FI_EAGAIN): drain the completion queue and retry")]
    WouldBlock {
        /// The libfabric function that returned `-FI_EAGAIN`.
        call: &'static str,
    },
    /// The provider does not implement an operation this crate needs.
    #[error("the provider does not implement {0}")]
    Unsupported(&'static str),
    /// A posted operation completed with an error.
    #[error(transparent)]
    Completion(#[from] CompletionError),
    /// The event queue reported an error (connection refused, reset, ...).
    #[error(transparent)]
    Event(#[from] EventError),
    /// A caller passed something the provider's limits rule out.
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// Connection private data that does not decode.
    #[error(transparent)]
    PrivateData(#[from] PrivateDataError),
    /// Waiting on a queue's file descriptor failed.
    #[error("waiting for the fabric: {0}")]
    Wait(#[from] std::io::Error),
    /// A blocking helper gave up.
    #[error("timed out after {0:?} waiting for {1}")]
    Timeout(std::time::Duration, &'static str),
}

impl FabricError {
    /// True for `-FI_EAGAIN` from a post: not a failure, the queue is momentarily full.
    pub fn is_would_block(&self) -> bool {
        matches!(self, FabricError::WouldBlock { .. })
    }
}

/// An error completion, read with `fi_cq_readerr` and decoded with `fi_cq_strerror`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("completion error (tag {tag}, flags {flags:#x}): {message} (error {err}, provider error {prov_errno})")]
pub struct CompletionError {
    /// The tag the operation was posted with (0 for remote-write completions).
    pub tag: u64,
    /// Completion flags (`FI_WRITE`, `FI_SEND`, `FI_RECV`, `FI_REMOTE_WRITE`, ...).
    pub flags: u64,
    /// Positive libfabric error code (`FI_EIO`, `FI_ECANCELED`, ...).
    pub err: i32,
    /// Provider-specific error.
    pub prov_errno: i32,
    /// `fi_strerror(err)` and the provider's `fi_cq_strerror` text.
    pub message: String,
}

/// An error event, read with `fi_eq_readerr` and decoded with `fi_eq_strerror`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("event queue error on {fid:#x}: {message} (error {err}, provider error {prov_errno})")]
pub struct EventError {
    /// The object the error is about (compare with `Endpoint::id`).
    pub fid: usize,
    /// Positive libfabric error code (`FI_ECONNREFUSED`, ...).
    pub err: i32,
    /// Provider-specific error.
    pub prov_errno: i32,
    /// `fi_strerror(err)` and the provider's `fi_eq_strerror` text.
    pub message: String,
}
