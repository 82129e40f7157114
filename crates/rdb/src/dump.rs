//! `DUMP` payloads, as Redis 7.0 writes them: one value in its RDB form
//! (the type byte, then the value exactly as a file stores it), the RDB
//! version as 2 bytes little-endian, and the CRC64 (Jones, as the file
//! trailer) of everything before it, as 8 bytes little-endian. A payload
//! crosses between ferrokv and Redis both ways (`RESTORE`, `MIGRATE`).

use crate::crc64::crc64;
use crate::decoder::RdbValue;
use crate::error::DecodeError;

/// The RDB version DUMP writes (Redis 7.0's `RDB_VERSION`), so that Redis
/// 7.0 restores ferrokv's payloads.
pub const DUMP_RDB_VERSION: u16 = 10;

/// RESTORE takes payloads up to the newest version the decoder reads: Redis
/// 7.2's and Valkey 8's (11) and Redis 7.4's (12), whose values are those
/// of a file of that version (a hash with field TTLs is a bad format here).
pub const RESTORE_MAX_RDB_VERSION: u16 = crate::consts::MAX_SUPPORTED_VERSION as u16;

/// The version of a payload holding a hash with field TTLs (Redis 7.4's),
/// which an older Redis refuses by its version rather than misreads.
pub const DUMP_RDB_VERSION_FIELD_TTLS: u16 = 12;

/// Appends the version and the CRC64 to `body` (a type byte and a value).
pub fn seal(body: &mut Vec<u8>) {
    seal_version(body, DUMP_RDB_VERSION)
}

/// [`seal`] with the given RDB version.
pub fn seal_version(body: &mut Vec<u8>, version: u16) {
    body.extend_from_slice(&version.to_le_bytes());
    let crc = crc64(0, body);
    body.extend_from_slice(&crc.to_le_bytes());
}

/// Why a payload was refused, in Redis's two classes of error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DumpError {
    /// Too short, a newer RDB version, or a CRC64 that does not match:
    /// "DUMP payload version or checksum are wrong".
    VersionOrChecksum,
    /// The value does not decode: "Bad data format".
    BadFormat(String),
}

/// Checks a payload's footer (Redis's `verifyDumpPayload`; the CRC64 only
/// when `verify_checksum`) and decodes its value. An empty collection is a
/// bad format, as Redis refuses to load one.
pub fn decode(payload: &[u8], verify_checksum: bool) -> Result<RdbValue<'_>, DumpError> {
    if payload.len() < 10 {
        return Err(DumpError::VersionOrChecksum);
    }
    let footer = payload.len() - 10;
    let version = u16::from_le_bytes([payload[footer], payload[footer + 1]]);
    if version > RESTORE_MAX_RDB_VERSION {
        return Err(DumpError::VersionOrChecksum);
    }
    if verify_checksum {
        let crc = crc64(0, &payload[..footer + 2]);
        if crc.to_le_bytes() != payload[footer + 2..] {
            return Err(DumpError::VersionOrChecksum);
        }
    }
    let body = &payload[..footer];
    let Some((&rdb_type, value)) = body.split_first() else {
        return Err(DumpError::BadFormat("no value type".into()));
    };
    let v = crate::decoder::decode_value(value, rdb_type)
        .map_err(|e: DecodeError| DumpError::BadFormat(e.to_string()))?;
    if v.is_empty() {
        return Err(DumpError::BadFormat("an empty collection".into()));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `DUMP` of the string "bar" on redis-server 7.0.15.
    const REDIS_BAR: &[u8] = b"\x00\x03bar\n\x00\xe6\xbeI`\xeef\xfd\x17";

    #[test]
    fn a_payload_from_redis_decodes_and_ours_seals_identically() {
        let v = decode(REDIS_BAR, true).unwrap();
        assert_eq!(v, RdbValue::String(b"bar"[..].into()));
        let mut ours = b"\x00\x03bar".to_vec();
        seal(&mut ours);
        assert_eq!(ours, REDIS_BAR);
    }

    #[test]
    fn wrong_footers_and_bodies_are_refused_with_redis_classes() {
        let mut bad_crc = REDIS_BAR.to_vec();
        *bad_crc.last_mut().unwrap() ^= 1;
        assert_eq!(decode(&bad_crc, true), Err(DumpError::VersionOrChecksum));
        assert!(decode(&bad_crc, false).is_ok());
        // Redis 7.2's and 7.4's versions are read; a later one is not.
        for (version, readable) in [(11u16, true), (12, true), (13, false)] {
            let mut newer = b"\x00\x03bar".to_vec();
            newer.extend_from_slice(&version.to_le_bytes());
            let crc = crc64(0, &newer);
            newer.extend_from_slice(&crc.to_le_bytes());
            if readable {
                assert!(decode(&newer, true).is_ok(), "{version}");
            } else {
                assert_eq!(decode(&newer, true), Err(DumpError::VersionOrChecksum));
            }
        }
        assert_eq!(decode(b"short", true), Err(DumpError::VersionOrChecksum));
        // A string that claims more bytes than there are; an unknown type.
        for body in [&b"\x00\x09bar"[..], b"\x63\x03bar", b""] {
            let mut p = body.to_vec();
            seal(&mut p);
            assert!(
                matches!(decode(&p, true), Err(DumpError::BadFormat(_))),
                "{body:?}"
            );
        }
    }
}
