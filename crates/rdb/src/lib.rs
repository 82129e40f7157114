//! The Redis RDB snapshot format, version 10 (what Redis 7.0 writes), for
//! ferrokv: an incremental encoder, a zero-copy decoder, LZF and CRC64.
//! Pure: no I/O, no threads, no `unsafe`. The server decides where bytes go
//! (file writer thread, replica sockets) and where they come from (a mapped
//! file, a received snapshot).
//!
//! # Why it is shaped so
//! - **Encoder appends to caller chunks.** ferrokv snapshots without fork:
//!   the event loop serialises segment by segment and hands each chunk to
//!   several consumers. [`RdbEncoder`] therefore owns no stream; it appends
//!   to the `Vec<u8>` it is given and carries the running CRC64 across
//!   chunks, so the concatenated chunks are a valid file ending in
//!   [`RdbEncoder::finish`]'s trailer.
//! - **Encodings Redis 7.0 itself writes**, chosen per value by
//!   [`EncodingLimits`] (Redis's `*-max-listpack-*` settings), so a real
//!   Redis loads our snapshots without conversion and `redis-check-rdb`
//!   accepts them — the interoperability tests run both.
//! - **Decoder over a byte slice with a visitor.** Loading maps the file, so
//!   the decoder borrows from it: keys and uncompressed elements reach
//!   [`RdbVisitor::entry`] as `Cow::Borrowed`. It reads every encoding Redis
//!   7.0 reads (ziplists, zipmaps, text-score zsets, quicklist v1 included),
//!   refuses types ferrokv lacks (modules) naming the key, and
//!   reports every problem as a [`DecodeError`] with a byte offset. It is
//!   fuzzed (`fuzz/fuzz_targets/rdb_load.rs`) and never panics.
//!
//! # Layout
//! - [`encoder`]: [`RdbEncoder`], [`EncoderOptions`], [`EncodingLimits`].
//! - [`decoder`]: [`decode`], [`RdbVisitor`], [`Entry`], [`RdbValue`], and
//!   [`StreamDecoder`] for an RDB that arrives in pieces.
//! - [`stream`]: the stream value ([`StreamPayload`]): node listpacks as
//!   bytes, metadata, consumer groups.
//! - [`owned`]: [`Dataset`], an owned, ordered copy of a file's content
//!   (tests, tools).
//! - [`crc64`], [`lzf`]: the checksum and compressor, usable on their own.
//! - [`consts`]: opcodes and type numbers.
//! - `listpack`, `intset`, `ziplist`: the encoded containers (internal).
//!
//! # Example
//! ```
//! use ferrokv_rdb::{decode, Dataset, EncoderOptions, RdbEncoder, OwnedValue};
//!
//! let mut enc = RdbEncoder::new(EncoderOptions::default());
//! let mut chunk = Vec::new();
//! enc.header(&mut chunk, &[(b"redis-ver", b"7.0.15")]);
//! enc.select_db(&mut chunk, 0);
//! enc.resize_db(&mut chunk, 2, 1);
//! enc.string_entry(&mut chunk, b"greeting", b"hello", Some(1_900_000_000_000));
//! enc.hash_entry(&mut chunk, b"h", [(&b"f"[..], &b"v"[..])], None);
//! enc.finish(&mut chunk);
//!
//! let (data, summary) = Dataset::from_rdb(&chunk).unwrap();
//! assert_eq!(summary.keys, 2);
//! let e = data.get(0, b"greeting").unwrap();
//! assert_eq!(e.value, OwnedValue::String(b"hello".to_vec()));
//! assert_eq!(e.expire_ms, Some(1_900_000_000_000));
//! ```
#![forbid(unsafe_code)]

pub mod consts;
pub mod crc64;
pub mod decoder;
pub mod dump;
pub mod encoder;
mod error;
mod intset;
mod listpack;
pub mod lzf;
pub mod owned;
pub mod stream;
mod ziplist;

pub use decoder::{
    decode, decode_with, Checksum, CutString, DecodeOptions, DecodeSummary, Entry, Fed, FieldValue,
    RdbValue, RdbVisitor, StreamDecoder,
};
pub use encoder::{EncoderOptions, EncodingLimits, RdbEncoder};
pub use error::{DecodeError, FunctionsUnsupported, VisitError};
pub use lzf::{LzfCompressor, LzfError};
pub use owned::{Dataset, OrderedScore, OwnedEntry, OwnedValue};
pub use stream::{StreamConsumer, StreamGroup, StreamPayload};
