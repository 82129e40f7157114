//! The cluster bus's messages, byte for byte as Redis 7.0 writes them
//! (`clusterMsg` in Redis's `cluster.h`): a 2256-byte big-endian header
//! beginning `RCmb`, then a body whose shape the type decides. A message
//! whose `totlen` is not exactly what its type and counts imply is not
//! decoded ([`DecodeError::Length`]); Redis drops such a packet and keeps
//! the link, and so must the caller.
//!
//! Offsets (`static_assert`ed in Redis): sig 0, totlen 4, ver 8, port 10,
//! type 12, count 14, currentEpoch 16, configEpoch 24, offset 32, sender 40,
//! myslots 80, slaveof 2128, myip 2168, extensions 2214, (30 unused),
//! pport 2246, cport 2248, flags 2250, state 2252, mflags 2253, data 2256.

use ferrokv_store::slots::SLOTS;

pub const SIGNATURE: &[u8; 4] = b"RCmb";
pub const VERSION: u16 = 1;
/// The header, up to the body (`CLUSTERMSG_MIN_LEN`).
pub const HEADER_LEN: usize = 2256;
/// One gossip entry of a PING, PONG or MEET.
pub const GOSSIP_LEN: usize = 104;
/// A node id: 40 hex characters.
pub const NAME_LEN: usize = 40;
/// `NET_IP_STR_LEN`: an address, NUL-padded.
pub const IP_LEN: usize = 46;
/// The slot bitmap.
pub const SLOTS_LEN: usize = SLOTS / 8;

/// Message types.
pub mod kind {
    pub const PING: u16 = 0;
    pub const PONG: u16 = 1;
    pub const MEET: u16 = 2;
    pub const FAIL: u16 = 3;
    pub const PUBLISH: u16 = 4;
    pub const FAILOVER_AUTH_REQUEST: u16 = 5;
    pub const FAILOVER_AUTH_ACK: u16 = 6;
    pub const UPDATE: u16 = 7;
    pub const MFSTART: u16 = 8;
    pub const MODULE: u16 = 9;
    pub const PUBLISHSHARD: u16 = 10;
}

/// Node flags, in the header and in gossip entries.
pub mod node_flags {
    pub const MASTER: u16 = 1;
    pub const SLAVE: u16 = 2;
    pub const PFAIL: u16 = 4;
    pub const FAIL: u16 = 8;
    pub const MYSELF: u16 = 16;
    pub const HANDSHAKE: u16 = 32;
    pub const NOADDR: u16 = 64;
    pub const MEET: u16 = 128;
    pub const MIGRATE_TO: u16 = 256;
    pub const NOFAILOVER: u16 = 512;
}

/// `mflags[0]`.
pub mod mflags0 {
    pub const PAUSED: u8 = 1;
    pub const FORCEACK: u8 = 2;
    pub const EXT_DATA: u8 = 4;
}

/// Ping extension types Redis 7.0 knows.
pub const EXT_HOSTNAME: u16 = 0;

/// A node id as sent: 40 bytes; all zeros for "none" (`slaveof` of a
/// master).
pub type Name = [u8; NAME_LEN];

pub const NULL_NAME: Name = [0; NAME_LEN];

/// Which slots a node serves: bit `1 << (slot & 7)` of byte `slot / 8`.
#[derive(Clone, PartialEq, Eq)]
pub struct SlotBitmap(pub Box<[u8; SLOTS_LEN]>);

impl Default for SlotBitmap {
    fn default() -> Self {
        SlotBitmap(Box::new([0; SLOTS_LEN]))
    }
}

impl std::fmt::Debug for SlotBitmap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SlotBitmap({} slots)", self.count())
    }
}

impl SlotBitmap {
    pub fn get(&self, slot: u16) -> bool {
        self.0[slot as usize / 8] & (1 << (slot & 7)) != 0
    }

    pub fn set(&mut self, slot: u16, on: bool) {
        let byte = &mut self.0[slot as usize / 8];
        if on {
            *byte |= 1 << (slot & 7);
        } else {
            *byte &= !(1 << (slot & 7));
        }
    }

    pub fn count(&self) -> usize {
        self.0.iter().map(|b| b.count_ones() as usize).sum()
    }
}

/// The header every message carries: who sends it and how it sees itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub kind: u16,
    /// Client port (the TLS one when clients use TLS).
    pub port: u16,
    pub current_epoch: u64,
    /// The sender's config epoch, or its master's when it is a replica.
    pub config_epoch: u64,
    /// Replication offset.
    pub offset: u64,
    pub sender: Name,
    /// The sender's slots, or its master's.
    pub slots: SlotBitmap,
    pub slaveof: Name,
    /// The sender's address as it announces it; empty for "use the
    /// address the packet came from".
    pub myip: String,
    /// Plain-text client port when `port` is the TLS one.
    pub pport: u16,
    /// Cluster bus port.
    pub cport: u16,
    pub flags: u16,
    /// The cluster state as the sender sees it: 0 ok, 1 fail.
    pub state: u8,
    pub mflags: [u8; 3],
}

/// One entry of a PING/PONG/MEET's gossip section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gossip {
    pub name: Name,
    /// Seconds (Unix time) of the last PING sent to and PONG received
    /// from the node, as the sender knows them.
    pub ping_sent: u32,
    pub pong_received: u32,
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    pub flags: u16,
    pub pport: u16,
}

/// A ping extension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ext {
    Hostname(String),
    /// A type Redis 7.0 does not know (7.2's human node name, forgotten
    /// node, shard id): kept as bytes, ignored by the receiver.
    Other {
        kind: u16,
        data: Vec<u8>,
    },
}

/// A message's body, by type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// PING, PONG, MEET.
    Ping {
        gossip: Vec<Gossip>,
        exts: Vec<Ext>,
    },
    Fail {
        about: Name,
    },
    /// PUBLISH and PUBLISHSHARD.
    Publish {
        channel: Vec<u8>,
        message: Vec<u8>,
    },
    Update {
        config_epoch: u64,
        name: Name,
        slots: SlotBitmap,
    },
    Module {
        module_id: u64,
        kind: u8,
        payload: Vec<u8>,
    },
    /// FAILOVER_AUTH_REQUEST, FAILOVER_AUTH_ACK, MFSTART: the header only.
    Empty,
    /// A type newer than this code knows: the bytes after the header.
    Unknown(Vec<u8>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub header: Header,
    pub body: Body,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Not `RCmb`, or a `totlen` below the header: the link is garbage
    /// and must be closed (Redis frees it).
    Framing,
    /// Another protocol version: ignored.
    Version(u16),
    /// `totlen` differs from what the type and counts imply: ignored.
    Length { totlen: usize, expected: usize },
}

/// The length of the message at the start of `buf`, once its first 8
/// bytes are in; `Err` when the link carries no cluster bus.
pub fn frame_len(buf: &[u8]) -> Option<Result<usize, DecodeError>> {
    if buf.len() < 8 {
        return None;
    }
    let totlen = u32::from_be_bytes(buf[4..8].try_into().unwrap()) as usize;
    if &buf[..4] != SIGNATURE || totlen < HEADER_LEN {
        return Some(Err(DecodeError::Framing));
    }
    Some(Ok(totlen))
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

fn be64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

fn name_at(b: &[u8], at: usize) -> Name {
    b[at..at + NAME_LEN].try_into().unwrap()
}

/// A NUL-terminated string in a fixed field.
fn cstr(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

fn put_cstr(out: &mut [u8], s: &str) {
    // Redis keeps the last byte as the terminator.
    let n = s.len().min(out.len() - 1);
    out[..n].copy_from_slice(&s.as_bytes()[..n]);
}

fn align8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

impl Ext {
    /// The extension's encoded size: its 8-byte header and its data,
    /// padded to 8 bytes.
    fn encoded_len(&self) -> usize {
        8 + match self {
            Ext::Hostname(h) => align8(h.len() + 1),
            Ext::Other { data, .. } => align8(data.len()),
        }
    }
}

impl Message {
    pub fn new(header: Header, body: Body) -> Message {
        Message { header, body }
    }

    /// The message's bytes; `count`, `extensions`, `totlen` (and the
    /// EXT_DATA flag when extensions are present) follow from the body.
    pub fn encode(&self) -> Vec<u8> {
        let h = &self.header;
        let mut out = vec![0u8; HEADER_LEN];
        let mut count = 0u16;
        let mut extensions = 0u16;
        let mut mflags = h.mflags;
        match &self.body {
            Body::Ping { gossip, exts } => {
                count = gossip.len() as u16;
                for g in gossip {
                    let mut e = [0u8; GOSSIP_LEN];
                    e[..40].copy_from_slice(&g.name);
                    e[40..44].copy_from_slice(&g.ping_sent.to_be_bytes());
                    e[44..48].copy_from_slice(&g.pong_received.to_be_bytes());
                    put_cstr(&mut e[48..48 + IP_LEN], &g.ip);
                    e[94..96].copy_from_slice(&g.port.to_be_bytes());
                    e[96..98].copy_from_slice(&g.cport.to_be_bytes());
                    e[98..100].copy_from_slice(&g.flags.to_be_bytes());
                    e[100..102].copy_from_slice(&g.pport.to_be_bytes());
                    out.extend_from_slice(&e);
                }
                extensions = exts.len() as u16;
                if !exts.is_empty() {
                    mflags[0] |= mflags0::EXT_DATA;
                }
                for x in exts {
                    let len = x.encoded_len();
                    let start = out.len();
                    out.resize(start + len, 0);
                    let e = &mut out[start..];
                    e[..4].copy_from_slice(&(len as u32).to_be_bytes());
                    let (kind, data): (u16, &[u8]) = match x {
                        Ext::Hostname(s) => (EXT_HOSTNAME, s.as_bytes()),
                        Ext::Other { kind, data } => (*kind, data),
                    };
                    e[4..6].copy_from_slice(&kind.to_be_bytes());
                    e[8..8 + data.len()].copy_from_slice(data);
                }
            }
            Body::Fail { about } => out.extend_from_slice(about),
            Body::Publish { channel, message } => {
                out.extend_from_slice(&(channel.len() as u32).to_be_bytes());
                out.extend_from_slice(&(message.len() as u32).to_be_bytes());
                out.extend_from_slice(channel);
                out.extend_from_slice(message);
            }
            Body::Update {
                config_epoch,
                name,
                slots,
            } => {
                out.extend_from_slice(&config_epoch.to_be_bytes());
                out.extend_from_slice(name);
                out.extend_from_slice(&slots.0[..]);
            }
            Body::Module {
                module_id,
                kind,
                payload,
            } => {
                // The module id travels as the sender's bytes (Redis:
                // "already endian adjusted").
                out.extend_from_slice(&module_id.to_ne_bytes());
                out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
                out.push(*kind);
                out.extend_from_slice(payload);
            }
            Body::Empty => {}
            Body::Unknown(rest) => out.extend_from_slice(rest),
        }
        let totlen = out.len() as u32;
        out[..4].copy_from_slice(SIGNATURE);
        out[4..8].copy_from_slice(&totlen.to_be_bytes());
        out[8..10].copy_from_slice(&VERSION.to_be_bytes());
        out[10..12].copy_from_slice(&h.port.to_be_bytes());
        out[12..14].copy_from_slice(&h.kind.to_be_bytes());
        out[14..16].copy_from_slice(&count.to_be_bytes());
        out[16..24].copy_from_slice(&h.current_epoch.to_be_bytes());
        out[24..32].copy_from_slice(&h.config_epoch.to_be_bytes());
        out[32..40].copy_from_slice(&h.offset.to_be_bytes());
        out[40..80].copy_from_slice(&h.sender);
        out[80..2128].copy_from_slice(&h.slots.0[..]);
        out[2128..2168].copy_from_slice(&h.slaveof);
        put_cstr(&mut out[2168..2168 + IP_LEN], &h.myip);
        out[2214..2216].copy_from_slice(&extensions.to_be_bytes());
        out[2246..2248].copy_from_slice(&h.pport.to_be_bytes());
        out[2248..2250].copy_from_slice(&h.cport.to_be_bytes());
        out[2250..2252].copy_from_slice(&h.flags.to_be_bytes());
        out[2252] = h.state;
        out[2253..2256].copy_from_slice(&mflags);
        out
    }

    /// Decodes one whole message (`buf` is exactly its `totlen` bytes, as
    /// [`frame_len`] delimited it), with Redis's length checks.
    pub fn decode(buf: &[u8]) -> Result<Message, DecodeError> {
        let totlen = match frame_len(buf) {
            Some(Ok(n)) if n == buf.len() => n,
            _ => return Err(DecodeError::Framing),
        };
        let ver = be16(buf, 8);
        if ver != VERSION {
            return Err(DecodeError::Version(ver));
        }
        let kind = be16(buf, 12);
        let count = be16(buf, 14) as usize;
        let mut slots = SlotBitmap::default();
        slots.0.copy_from_slice(&buf[80..2128]);
        let header = Header {
            kind,
            port: be16(buf, 10),
            current_epoch: be64(buf, 16),
            config_epoch: be64(buf, 24),
            offset: be64(buf, 32),
            sender: name_at(buf, 40),
            slots,
            slaveof: name_at(buf, 2128),
            myip: cstr(&buf[2168..2168 + IP_LEN]),
            pport: be16(buf, 2246),
            cport: be16(buf, 2248),
            flags: be16(buf, 2250),
            state: buf[2252],
            mflags: buf[2253..2256].try_into().unwrap(),
        };
        let data = &buf[HEADER_LEN..];
        let need = |expected: usize| -> Result<(), DecodeError> {
            if totlen == expected {
                Ok(())
            } else {
                Err(DecodeError::Length { totlen, expected })
            }
        };
        let short = |expected: usize| DecodeError::Length { totlen, expected };
        let body = match kind {
            kind::PING | kind::PONG | kind::MEET => {
                let mut explen = HEADER_LEN + GOSSIP_LEN * count;
                if totlen < explen {
                    return Err(short(explen));
                }
                let gossip = (0..count)
                    .map(|i| {
                        let e = &data[i * GOSSIP_LEN..(i + 1) * GOSSIP_LEN];
                        Gossip {
                            name: name_at(e, 0),
                            ping_sent: be32(e, 40),
                            pong_received: be32(e, 44),
                            ip: cstr(&e[48..48 + IP_LEN]),
                            port: be16(e, 94),
                            cport: be16(e, 96),
                            flags: be16(e, 98),
                            pport: be16(e, 100),
                        }
                    })
                    .collect();
                // Extensions are counted by `extensions`, each with its
                // own length, a multiple of 8 (Redis's checks).
                let mut exts = Vec::new();
                for _ in 0..be16(buf, 2214) {
                    if totlen - explen < 8 {
                        return Err(short(explen + 8));
                    }
                    let len = be32(buf, explen) as usize;
                    if !len.is_multiple_of(8) || len < 8 || totlen - explen < len {
                        return Err(short(explen + len.max(8)));
                    }
                    let ext_kind = be16(buf, explen + 4);
                    let payload = &buf[explen + 8..explen + len];
                    exts.push(match ext_kind {
                        EXT_HOSTNAME => Ext::Hostname(cstr(payload)),
                        k => Ext::Other {
                            kind: k,
                            data: payload.to_vec(),
                        },
                    });
                    explen += len;
                }
                need(explen)?;
                Body::Ping { gossip, exts }
            }
            kind::FAIL => {
                need(HEADER_LEN + NAME_LEN)?;
                Body::Fail {
                    about: name_at(data, 0),
                }
            }
            kind::PUBLISH | kind::PUBLISHSHARD => {
                if data.len() < 8 {
                    return Err(short(HEADER_LEN + 8));
                }
                let (cl, ml) = (be32(data, 0) as usize, be32(data, 4) as usize);
                need(HEADER_LEN + 8 + cl + ml)?;
                Body::Publish {
                    channel: data[8..8 + cl].to_vec(),
                    message: data[8 + cl..8 + cl + ml].to_vec(),
                }
            }
            kind::UPDATE => {
                need(HEADER_LEN + 8 + NAME_LEN + SLOTS_LEN)?;
                let mut slots = SlotBitmap::default();
                slots.0.copy_from_slice(&data[48..48 + SLOTS_LEN]);
                Body::Update {
                    config_epoch: be64(data, 0),
                    name: name_at(data, 8),
                    slots,
                }
            }
            kind::MODULE => {
                if data.len() < 13 {
                    return Err(short(HEADER_LEN + 13));
                }
                let len = be32(data, 8) as usize;
                need(HEADER_LEN + 13 + len)?;
                Body::Module {
                    module_id: u64::from_ne_bytes(data[..8].try_into().unwrap()),
                    kind: data[12],
                    payload: data[13..13 + len].to_vec(),
                }
            }
            kind::FAILOVER_AUTH_REQUEST | kind::FAILOVER_AUTH_ACK | kind::MFSTART => {
                need(HEADER_LEN)?;
                Body::Empty
            }
            _ => Body::Unknown(data.to_vec()),
        };
        Ok(Message { header, body })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(kind: u16) -> Header {
        let mut slots = SlotBitmap::default();
        for s in [0u16, 7, 8, 5000, 16383] {
            slots.set(s, true);
        }
        Header {
            kind,
            port: 7000,
            current_epoch: 9,
            config_epoch: 3,
            offset: 123_456,
            sender: *b"0123456789abcdef0123456789abcdef01234567",
            slots,
            slaveof: NULL_NAME,
            myip: "127.0.0.1".into(),
            pport: 0,
            cport: 17000,
            flags: node_flags::MASTER,
            state: 0,
            mflags: [0; 3],
        }
    }

    #[test]
    fn header_fields_sit_at_redis_offsets() {
        let b = Message::new(header(kind::PING), Body::Empty).encode();
        assert_eq!(b.len(), HEADER_LEN);
        assert_eq!(&b[..4], b"RCmb");
        assert_eq!(be32(&b, 4), HEADER_LEN as u32);
        assert_eq!(be16(&b, 8), 1);
        assert_eq!(be16(&b, 10), 7000);
        assert_eq!(be64(&b, 16), 9);
        assert_eq!(be64(&b, 32), 123_456);
        assert_eq!(&b[40..44], b"0123");
        // Slot j is bit 1 << (j & 7) of byte j / 8.
        assert_eq!(b[80], 0b1000_0001);
        assert_eq!(b[81], 0b0000_0001);
        assert_eq!(b[80 + 16383 / 8], 0x80);
        assert_eq!(&b[2168..2177], b"127.0.0.1");
        assert_eq!(be16(&b, 2248), 17000);
        assert_eq!(be16(&b, 2250), 1);
    }

    #[test]
    fn every_type_round_trips() {
        let gossip = Gossip {
            name: *b"ffffffffffffffffffffffffffffffffffffffff",
            ping_sent: 1,
            pong_received: 2,
            ip: "10.0.0.1".into(),
            port: 6379,
            cport: 16379,
            flags: node_flags::SLAVE | node_flags::PFAIL,
            pport: 0,
        };
        let bodies = [
            (
                kind::PING,
                Body::Ping {
                    gossip: vec![gossip.clone(), gossip],
                    exts: vec![
                        Ext::Hostname("node-a.example".into()),
                        Ext::Other {
                            kind: 3,
                            data: vec![7; 40],
                        },
                    ],
                },
            ),
            (
                kind::MEET,
                Body::Ping {
                    gossip: vec![],
                    exts: vec![],
                },
            ),
            (
                kind::FAIL,
                Body::Fail {
                    about: *b"abababababababababababababababababababab",
                },
            ),
            (
                kind::PUBLISH,
                Body::Publish {
                    channel: b"news".to_vec(),
                    message: b"hello\0world".to_vec(),
                },
            ),
            (
                kind::UPDATE,
                Body::Update {
                    config_epoch: 5,
                    name: NULL_NAME,
                    slots: header(0).slots,
                },
            ),
            (
                kind::MODULE,
                Body::Module {
                    module_id: 42,
                    kind: 7,
                    payload: b"xyz".to_vec(),
                },
            ),
            (kind::FAILOVER_AUTH_ACK, Body::Empty),
        ];
        for (k, body) in bodies {
            let m = Message::new(header(k), body);
            let bytes = m.encode();
            assert_eq!(frame_len(&bytes), Some(Ok(bytes.len())));
            let back = Message::decode(&bytes).unwrap();
            assert_eq!(back.body, m.body, "type {k}");
            assert_eq!(back.header.sender, m.header.sender);
            assert_eq!(back.header.slots, m.header.slots);
        }
    }

    #[test]
    fn hostname_extension_is_nul_terminated_and_padded_to_8() {
        let m = Message::new(
            header(kind::PONG),
            Body::Ping {
                gossip: vec![],
                exts: vec![Ext::Hostname("abcdefgh".into())],
            },
        );
        let b = m.encode();
        // 8 bytes of header, 9 of text and NUL padded to 16.
        assert_eq!(b.len(), HEADER_LEN + 24);
        assert_eq!(be32(&b, HEADER_LEN), 24);
        assert_eq!(be16(&b, 2214), 1);
        assert_eq!(b[2253] & mflags0::EXT_DATA, mflags0::EXT_DATA);
        assert_eq!(b[HEADER_LEN + 16], 0);
    }

    #[test]
    fn wrong_lengths_are_refused_as_redis_refuses_them() {
        let mut b = Message::new(header(kind::FAIL), Body::Fail { about: NULL_NAME }).encode();
        b.push(0);
        let n = b.len() as u32;
        b[4..8].copy_from_slice(&n.to_be_bytes());
        assert!(matches!(
            Message::decode(&b),
            Err(DecodeError::Length { .. })
        ));
        // A PING whose count promises more gossip than it has.
        let mut p = Message::new(
            header(kind::PING),
            Body::Ping {
                gossip: vec![],
                exts: vec![],
            },
        )
        .encode();
        p[14..16].copy_from_slice(&1u16.to_be_bytes());
        assert!(matches!(
            Message::decode(&p),
            Err(DecodeError::Length { .. })
        ));
        // An extension whose length is not a multiple of 8.
        let mut e = Message::new(
            header(kind::PING),
            Body::Ping {
                gossip: vec![],
                exts: vec![Ext::Hostname("h".into())],
            },
        )
        .encode();
        e[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&12u32.to_be_bytes());
        assert!(Message::decode(&e).is_err());
        assert_eq!(
            frame_len(b"RCmb\0\0\0\x10"),
            Some(Err(DecodeError::Framing))
        );
        assert_eq!(frame_len(b"HTTP/1.1"), Some(Err(DecodeError::Framing)));
        assert_eq!(frame_len(b"RCm"), None);
        let mut v = Message::new(header(kind::MFSTART), Body::Empty).encode();
        v[8..10].copy_from_slice(&2u16.to_be_bytes());
        assert_eq!(Message::decode(&v), Err(DecodeError::Version(2)));
    }
}
