//! Decoder errors. Every variant that concerns the file's content carries the
//! byte offset where the problem was found, so an operator can open the
//! file in a hex editor (or compare with `redis-check-rdb`'s report).

use crate::lzf::LzfError;

/// What a [`crate::RdbVisitor`] method may return to stop decoding.
pub type VisitError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why an RDB byte slice could not be decoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    #[error("not an RDB file: it does not start with \"REDIS\" and a four-digit version")]
    BadMagic,
    #[error("RDB version {version} is not supported (this build reads versions 1 to {max})")]
    UnsupportedVersion { version: u32, max: u32 },
    #[error("RDB truncated at offset {offset}: {needed} more bytes expected")]
    Truncated { offset: usize, needed: u64 },
    #[error("RDB CRC error: checksum mismatch, the trailer at offset {offset} holds {stored:#018x}, the content hashes to {computed:#018x}")]
    ChecksumMismatch {
        offset: usize,
        stored: u64,
        computed: u64,
    },
    #[error("unknown opcode or value type {byte} at offset {offset}")]
    UnknownType { offset: usize, byte: u8 },
    #[error("key {key} at offset {offset} holds a {type_name} (RDB type {type_byte}), which ferrokv does not support")]
    UnsupportedType {
        offset: usize,
        type_byte: u8,
        type_name: &'static str,
        /// The key, with non-printable bytes escaped.
        key: String,
    },
    #[error("RDB holds data of module {module:?} (MODULE_AUX at offset {offset}); ferrokv has no modules")]
    ModuleAux { offset: usize, module: String },
    #[error("unsupported opcode {opcode} ({name}) at offset {offset}")]
    UnsupportedOpcode {
        offset: usize,
        opcode: u8,
        name: &'static str,
    },
    #[error("invalid length encoding (byte {byte:#04x}) at offset {offset}")]
    BadLength { offset: usize, byte: u8 },
    #[error("invalid string encoding {encoding} at offset {offset}")]
    BadStringEncoding { offset: usize, encoding: u8 },
    #[error("length {len} at offset {offset} does not fit this platform's address space")]
    TooLong { offset: usize, len: u64 },
    #[error("corrupt LZF string at offset {offset}: {source}")]
    Lzf {
        offset: usize,
        #[source]
        source: LzfError,
    },
    #[error("corrupt {what} at offset {offset}: {reason}")]
    Corrupt {
        offset: usize,
        what: &'static str,
        reason: &'static str,
    },
    #[error(
        "corrupt {what} stored at offset {offset}: {reason} (at byte {inner_offset} of the {what})"
    )]
    CorruptBlob {
        offset: usize,
        what: &'static str,
        inner_offset: usize,
        reason: &'static str,
    },
    #[error("decoding stopped by the visitor at offset {offset}: {source}")]
    Visitor {
        offset: usize,
        #[source]
        source: VisitError,
    },
}

/// The `offset` field of the variants that have one, bound to `$o` (by
/// reference, as `$e` matches), in one list for every use.
macro_rules! offset_field {
    ($e:expr, $o:ident => $v:expr) => {{
        use DecodeError::*;
        match $e {
            Truncated { offset: $o, .. }
            | ChecksumMismatch { offset: $o, .. }
            | UnknownType { offset: $o, .. }
            | UnsupportedType { offset: $o, .. }
            | ModuleAux { offset: $o, .. }
            | UnsupportedOpcode { offset: $o, .. }
            | BadLength { offset: $o, .. }
            | BadStringEncoding { offset: $o, .. }
            | TooLong { offset: $o, .. }
            | Lzf { offset: $o, .. }
            | Corrupt { offset: $o, .. }
            | CorruptBlob { offset: $o, .. }
            | Visitor { offset: $o, .. } => Some($v),
            BadMagic | UnsupportedVersion { .. } => None,
        }
    }};
}

impl DecodeError {
    /// The byte offset the error refers to, if it concerns the file content.
    pub fn offset(&self) -> Option<usize> {
        match self {
            DecodeError::BadMagic => Some(0),
            DecodeError::UnsupportedVersion { .. } => Some(5),
            other => offset_field!(other, o => *o),
        }
    }

    /// The same error with its offset moved by `base` bytes: a
    /// [`crate::StreamDecoder`] decodes slices that start `base` bytes into
    /// the stream.
    pub(crate) fn shifted(mut self, base: usize) -> Self {
        if let Some(o) = offset_field!(&mut self, o => o) {
            *o += base;
        }
        self
    }
}

/// The default answer of [`crate::RdbVisitor::function_library`]: Redis
/// functions (`FUNCTION LOAD` libraries, opcode FUNCTION2) are not supported.
#[derive(Debug, thiserror::Error)]
#[error("the RDB holds a Redis function library; ferrokv does not support functions")]
pub struct FunctionsUnsupported;
