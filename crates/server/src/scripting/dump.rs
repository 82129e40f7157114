//! `FUNCTION DUMP` / `FUNCTION RESTORE` payloads, in Redis 7.0's format:
//! each library as an RDB `FUNCTION2` record (opcode 245, the code as an
//! RDB string), then the RDB version (2 bytes, little-endian) and a CRC64
//! of everything before it (8 bytes, little-endian) — so payloads cross
//! between ferrokv and Redis both ways.

use super::function::Functions;

/// The RDB version this server writes (Redis 7.0's).
pub const RDB_VERSION: u16 = 10;

/// What `FUNCTION RESTORE` does with the libraries already loaded.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Policy {
    Flush,
    Append,
    Replace,
}

/// The payload holding `codes`.
pub fn dump(codes: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut enc = ferrokv_rdb::RdbEncoder::new(ferrokv_rdb::EncoderOptions::default());
    for c in codes {
        enc.function_library(&mut out, c);
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = ferrokv_rdb::crc64::crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The library codes of a payload, or Redis's error.
pub fn parse(payload: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    const WRONG: &str = "ERR DUMP payload version or checksum are wrong";
    if payload.len() < 10 {
        return Err(WRONG.into());
    }
    let (body, footer) = payload.split_at(payload.len() - 10);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let crc = u64::from_le_bytes(footer[2..10].try_into().expect("8 bytes"));
    if version > RDB_VERSION || ferrokv_rdb::crc64::crc64(0, &payload[..payload.len() - 8]) != crc {
        return Err(WRONG.into());
    }
    if body
        .first()
        .is_some_and(|&op| op != ferrokv_rdb::consts::OPCODE_FUNCTION2)
    {
        return Err("ERR given type is not a function".into());
    }
    // The records as the body of an RDB file: the decoder reads them and
    // hands each library to the visitor.
    let mut rdb = b"REDIS0010".to_vec();
    rdb.extend_from_slice(body);
    rdb.push(ferrokv_rdb::consts::OPCODE_EOF);
    rdb.extend_from_slice(&[0u8; 8]);
    struct Collect(Vec<Vec<u8>>);
    impl ferrokv_rdb::RdbVisitor for Collect {
        fn function_library(&mut self, code: &[u8]) -> Result<(), ferrokv_rdb::VisitError> {
            self.0.push(code.to_vec());
            Ok(())
        }
        fn entry(&mut self, _e: ferrokv_rdb::Entry<'_>) -> Result<(), ferrokv_rdb::VisitError> {
            Err("given type is not a function".into())
        }
    }
    let mut c = Collect(Vec::new());
    let opts = ferrokv_rdb::DecodeOptions {
        verify_checksum: false,
    };
    match ferrokv_rdb::decoder::decode_with(&rdb, &mut c, &opts) {
        Ok(_) => Ok(c.0),
        Err(e) if e.to_string().contains("given type is not a function") => {
            Err("ERR given type is not a function".into())
        }
        Err(_) => Err("ERR DUMP payload version or checksum are wrong".into()),
    }
}

/// Loads `codes` under `policy`; on any error nothing changes.
pub fn restore(
    f: &mut Functions,
    codes: Vec<Vec<u8>>,
    policy: Policy,
    heap_limit: usize,
) -> Result<(), String> {
    // Load into a fresh set first, so a failure leaves the old one intact.
    let mut fresh = Functions::new(heap_limit).map_err(|e| format!("ERR {e}"))?;
    if policy != Policy::Flush {
        for l in &f.libraries {
            fresh.load(&l.code, false)?;
        }
    }
    for code in &codes {
        let name = super::function::parse_metadata(code)?;
        if policy == Policy::Append && fresh.library(&name).is_some() {
            return Err(format!("ERR Library {name} already exists"));
        }
        fresh.load(code, policy == Policy::Replace)?;
    }
    *f = fresh;
    Ok(())
}
