//! Connection private data: what the replica tells the master in `fi_connect`, and what the
//! master answers in `fi_accept`.
//!
//! The verbs provider (rdma_cm over InfiniBand) carries at most 55 bytes of private data and may
//! pad what it delivers, so both messages are fixed-layout, little-endian, start with a magic and
//! a version, stay within [`MAX_PRIVATE_DATA`], and decoding ignores trailing bytes.
//!
//! ```text
//! RingDescriptor (47 bytes)                 AcceptDescriptor (25 bytes)
//!   0  magic  "FKVR"                          0  magic  "FKVA"
//!   4  version 1                              4  version 1
//!   5  addr   u64  remote address of slot 0   5  token  [u8; 16]  echo of the ring's token
//!  13  key    u64  remote key of the ring    21  window u32  writes the master keeps in flight
//!  21  slots  u32  K
//!  25  slot_size u32  C bytes
//!  29  token  [u8; 16]  one-time token issued on the TCP link
//!  45  lane   u8   which of the sync's endpoints this is (0-based)
//!  46  lanes  u8   how many endpoints the sync uses (1..=MAX_LANES)
//! ```
//!
//! A full sync may run over several endpoints at once (`rdma-sync-endpoints`): each connects
//! with the same token, its own ring and its index; chunk `g` of the file goes to lane
//! `g mod lanes`. A stream (one endpoint) is lane 0 of 1.

/// The most connection private data any supported provider carries (verbs: 56 minus one).
pub const MAX_PRIVATE_DATA: usize = 55;

/// The most endpoints one full sync may use.
pub const MAX_LANES: u8 = 16;

const RING_MAGIC: &[u8; 4] = b"FKVR";
const ACCEPT_MAGIC: &[u8; 4] = b"FKVA";
const VERSION: u8 = 1;

// Both messages must fit what the verbs provider carries.
const _: () = assert!(RingDescriptor::LEN <= MAX_PRIVATE_DATA);
const _: () = assert!(AcceptDescriptor::LEN <= MAX_PRIVATE_DATA);

/// Why private data did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrivateDataError {
    /// Fewer bytes than the message needs.
    #[error("private data too short: {got} bytes, need {need}")]
    TooShort {
        /// Bytes received.
        got: usize,
        /// Bytes the message needs.
        need: usize,
    },
    /// Not one of ours.
    #[error("private data has the wrong magic {0:?}")]
    BadMagic([u8; 4]),
    /// A version this build does not speak.
    #[error("private data version {0} is not supported")]
    BadVersion(u8),
    /// Values that cannot describe a ring.
    #[error("invalid ring: {0}")]
    InvalidRing(&'static str),
}

/// The replica's receive ring, sent in `fi_connect`: K slots of C bytes at `addr`/`key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingDescriptor {
    /// Remote address of slot 0 as the target's `mr_mode` requires ([`crate::MemoryRegion::remote_addr`]).
    pub addr: u64,
    /// Remote key of the ring's registration.
    pub key: u64,
    /// Number of slots K.
    pub slots: u32,
    /// Bytes per slot C.
    pub slot_size: u32,
    /// One-time token the master issued on the TCP link; it rejects any other.
    pub token: [u8; 16],
    /// This endpoint's index among the sync's endpoints.
    pub lane: u8,
    /// The sync's endpoints (1 for a single connection or a stream).
    pub lanes: u8,
}

impl RingDescriptor {
    /// Encoded length.
    pub const LEN: usize = 47;

    /// Remote address of slot `i`.
    pub fn slot_addr(&self, i: u32) -> u64 {
        self.addr + u64::from(i % self.slots) * u64::from(self.slot_size)
    }

    /// Bytes for `fi_connect`.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0u8; Self::LEN];
        out[0..4].copy_from_slice(RING_MAGIC);
        out[4] = VERSION;
        out[5..13].copy_from_slice(&self.addr.to_le_bytes());
        out[13..21].copy_from_slice(&self.key.to_le_bytes());
        out[21..25].copy_from_slice(&self.slots.to_le_bytes());
        out[25..29].copy_from_slice(&self.slot_size.to_le_bytes());
        out[29..45].copy_from_slice(&self.token);
        out[45] = self.lane;
        out[46] = self.lanes;
        out
    }

    /// Parses what arrived with `FI_CONNREQ`; trailing padding is ignored.
    pub fn decode(data: &[u8]) -> Result<Self, PrivateDataError> {
        check_header(data, Self::LEN, RING_MAGIC)?;
        let ring = RingDescriptor {
            addr: u64::from_le_bytes(data[5..13].try_into().unwrap()),
            key: u64::from_le_bytes(data[13..21].try_into().unwrap()),
            slots: u32::from_le_bytes(data[21..25].try_into().unwrap()),
            slot_size: u32::from_le_bytes(data[25..29].try_into().unwrap()),
            token: data[29..45].try_into().unwrap(),
            lane: data[45],
            lanes: data[46],
        };
        if ring.lanes == 0 || ring.lanes > MAX_LANES || ring.lane >= ring.lanes {
            return Err(PrivateDataError::InvalidRing(
                "lane outside the sync's endpoints",
            ));
        }
        if ring.slots == 0 {
            return Err(PrivateDataError::InvalidRing("zero slots"));
        }
        if ring.slot_size == 0 {
            return Err(PrivateDataError::InvalidRing("zero-byte slots"));
        }
        let len = u64::from(ring.slots) * u64::from(ring.slot_size);
        if ring.addr.checked_add(len).is_none() {
            return Err(PrivateDataError::InvalidRing(
                "ring wraps the address space",
            ));
        }
        Ok(ring)
    }
}

/// The master's answer in `fi_accept`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptDescriptor {
    /// The ring's token, echoed so the replica knows which sync this is.
    pub token: [u8; 16],
    /// Writes the master keeps in flight (at most the ring's K).
    pub window: u32,
}

impl AcceptDescriptor {
    /// Encoded length.
    pub const LEN: usize = 25;

    /// Bytes for `fi_accept`.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0u8; Self::LEN];
        out[0..4].copy_from_slice(ACCEPT_MAGIC);
        out[4] = VERSION;
        out[5..21].copy_from_slice(&self.token);
        out[21..25].copy_from_slice(&self.window.to_le_bytes());
        out
    }

    /// Parses what arrived with `FI_CONNECTED`; trailing padding is ignored.
    pub fn decode(data: &[u8]) -> Result<Self, PrivateDataError> {
        check_header(data, Self::LEN, ACCEPT_MAGIC)?;
        Ok(AcceptDescriptor {
            token: data[5..21].try_into().unwrap(),
            window: u32::from_le_bytes(data[21..25].try_into().unwrap()),
        })
    }
}

fn check_header(data: &[u8], need: usize, magic: &[u8; 4]) -> Result<(), PrivateDataError> {
    if data.len() < need {
        return Err(PrivateDataError::TooShort {
            got: data.len(),
            need,
        });
    }
    if &data[0..4] != magic {
        return Err(PrivateDataError::BadMagic(data[0..4].try_into().unwrap()));
    }
    if data[4] != VERSION {
        return Err(PrivateDataError::BadVersion(data[4]));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring() -> RingDescriptor {
        RingDescriptor {
            addr: 0x7f12_3456_7000,
            key: 0xdead_beef_cafe_f00d,
            slots: 16,
            slot_size: 1 << 20,
            token: *b"0123456789abcdef",
            lane: 1,
            lanes: 3,
        }
    }

    #[test]
    fn both_descriptors_fit_the_verbs_private_data_limit() {
        let accept = AcceptDescriptor {
            token: [0; 16],
            window: 1,
        };
        assert!(ring().encode().len() <= MAX_PRIVATE_DATA);
        assert!(accept.encode().len() <= MAX_PRIVATE_DATA);
        assert_eq!(ring().encode().len(), RingDescriptor::LEN);
    }

    #[test]
    fn ring_descriptor_round_trips_exactly() {
        assert_eq!(RingDescriptor::decode(&ring().encode()), Ok(ring()));
    }

    #[test]
    fn ring_descriptor_ignores_provider_padding() {
        let mut padded = ring().encode().to_vec();
        padded.resize(56, 0xAA);
        assert_eq!(RingDescriptor::decode(&padded), Ok(ring()));
    }

    #[test]
    fn ring_descriptor_layout_is_little_endian_at_fixed_offsets() {
        let bytes = ring().encode();
        assert_eq!(&bytes[0..5], b"FKVR\x01");
        assert_eq!(bytes[5..13], 0x7f12_3456_7000u64.to_le_bytes());
        assert_eq!(bytes[21..25], 16u32.to_le_bytes());
        assert_eq!(&bytes[29..45], b"0123456789abcdef");
        assert_eq!(bytes[45..47], [1, 3]);
    }

    #[test]
    fn truncated_ring_descriptor_is_rejected() {
        let bytes = ring().encode();
        assert_eq!(
            RingDescriptor::decode(&bytes[..46]),
            Err(PrivateDataError::TooShort { got: 46, need: 47 })
        );
    }

    #[test]
    fn foreign_private_data_is_rejected_by_magic_and_version() {
        let mut bytes = ring().encode();
        bytes[0] = b'X';
        assert!(matches!(
            RingDescriptor::decode(&bytes),
            Err(PrivateDataError::BadMagic(_))
        ));
        let mut bytes = ring().encode();
        bytes[4] = 2;
        assert_eq!(
            RingDescriptor::decode(&bytes),
            Err(PrivateDataError::BadVersion(2))
        );
        // An accept descriptor is not a ring descriptor.
        let accept = AcceptDescriptor {
            token: [7; 16],
            window: 8,
        }
        .encode();
        let mut long = accept.to_vec();
        long.resize(RingDescriptor::LEN, 0);
        assert!(matches!(
            RingDescriptor::decode(&long),
            Err(PrivateDataError::BadMagic(_))
        ));
    }

    #[test]
    fn ring_with_zero_slots_or_wrapping_addresses_is_rejected() {
        let mut r = ring();
        r.slots = 0;
        assert!(RingDescriptor::decode(&r.encode()).is_err());
        let mut r = ring();
        r.slot_size = 0;
        assert!(RingDescriptor::decode(&r.encode()).is_err());
        for (lane, lanes) in [(0, 0), (3, 3), (0, MAX_LANES + 1)] {
            let mut r = ring();
            r.lane = lane;
            r.lanes = lanes;
            assert_eq!(
                RingDescriptor::decode(&r.encode()),
                Err(PrivateDataError::InvalidRing(
                    "lane outside the sync's endpoints"
                ))
            );
        }
        let mut r = ring();
        r.addr = u64::MAX - 10;
        assert_eq!(
            RingDescriptor::decode(&r.encode()),
            Err(PrivateDataError::InvalidRing(
                "ring wraps the address space"
            ))
        );
    }

    #[test]
    fn slot_addresses_step_by_slot_size_and_wrap_at_k() {
        let r = ring();
        assert_eq!(r.slot_addr(0), r.addr);
        assert_eq!(r.slot_addr(3), r.addr + 3 * (1 << 20));
        assert_eq!(r.slot_addr(16), r.addr);
    }

    #[test]
    fn accept_descriptor_round_trips_and_ignores_padding() {
        let a = AcceptDescriptor {
            token: *b"fedcba9876543210",
            window: 32,
        };
        let mut bytes = a.encode().to_vec();
        assert_eq!(AcceptDescriptor::decode(&bytes), Ok(a));
        bytes.resize(56, 0);
        assert_eq!(AcceptDescriptor::decode(&bytes), Ok(a));
        assert!(AcceptDescriptor::decode(&bytes[..24]).is_err());
    }
}
