//! Opcodes, value types and encoding bytes of the RDB format, named as in
//! Redis's `rdb.h` so a reader can grep both code bases for the same word.

/// `REDIS` followed by the zero-padded four-digit version.
pub const MAGIC: &[u8; 5] = b"REDIS";
/// The version Redis 7.0 writes and this crate's encoder writes.
pub const RDB_VERSION: u32 = 10;
/// The newest version the decoder accepts. Version 11 (Redis 7.2, Valkey 8)
/// adds value types (`SET_LISTPACK`, streams v3); version 12 (Redis 7.4)
/// adds the `SLOT_INFO` opcode (a sizing hint in cluster mode, skipped) and
/// the types of hashes whose fields have TTLs, which ferrokv cannot hold
/// yet: such a key is refused by name (`DecodeError::UnsupportedType`),
/// never loaded without its TTLs.
pub const MAX_SUPPORTED_VERSION: u32 = 12;
/// Versions below 5 have no CRC64 trailer.
pub const FIRST_VERSION_WITH_CHECKSUM: u32 = 5;

// Opcodes (rdb.h RDB_OPCODE_*).
/// Redis 7.4, cluster mode: a slot's id and sizes (a hint; skipped).
pub const OPCODE_SLOT_INFO: u8 = 244;
pub const OPCODE_FUNCTION2: u8 = 245;
/// The pre-GA 7.0 release candidates' function format; never written by 7.0.
pub const OPCODE_FUNCTION_PRE_GA: u8 = 246;
pub const OPCODE_MODULE_AUX: u8 = 247;
pub const OPCODE_IDLE: u8 = 248;
pub const OPCODE_FREQ: u8 = 249;
pub const OPCODE_AUX: u8 = 250;
pub const OPCODE_RESIZEDB: u8 = 251;
pub const OPCODE_EXPIRETIME_MS: u8 = 252;
pub const OPCODE_EXPIRETIME: u8 = 253;
pub const OPCODE_SELECTDB: u8 = 254;
pub const OPCODE_EOF: u8 = 255;

// Value types (rdb.h RDB_TYPE_*).
pub const TYPE_STRING: u8 = 0;
pub const TYPE_LIST: u8 = 1;
pub const TYPE_SET: u8 = 2;
pub const TYPE_ZSET: u8 = 3;
pub const TYPE_HASH: u8 = 4;
pub const TYPE_ZSET_2: u8 = 5;
pub const TYPE_MODULE_PRE_GA: u8 = 6;
pub const TYPE_MODULE_2: u8 = 7;
pub const TYPE_HASH_ZIPMAP: u8 = 9;
pub const TYPE_LIST_ZIPLIST: u8 = 10;
pub const TYPE_SET_INTSET: u8 = 11;
pub const TYPE_ZSET_ZIPLIST: u8 = 12;
pub const TYPE_HASH_ZIPLIST: u8 = 13;
pub const TYPE_LIST_QUICKLIST: u8 = 14;
pub const TYPE_STREAM_LISTPACKS: u8 = 15;
pub const TYPE_HASH_LISTPACK: u8 = 16;
pub const TYPE_ZSET_LISTPACK: u8 = 17;
pub const TYPE_LIST_QUICKLIST_2: u8 = 18;
pub const TYPE_STREAM_LISTPACKS_2: u8 = 19;
pub const TYPE_SET_LISTPACK: u8 = 20;
pub const TYPE_STREAM_LISTPACKS_3: u8 = 21;
/// Hashes with field TTLs (Redis 7.4): as 7.4's release candidates wrote
/// them, then as 7.4.0 does (the minimum TTL first).
pub const TYPE_HASH_METADATA_PRE_GA: u8 = 22;
pub const TYPE_HASH_LISTPACK_EX_PRE_GA: u8 = 23;
pub const TYPE_HASH_METADATA: u8 = 24;
pub const TYPE_HASH_LISTPACK_EX: u8 = 25;

// Length encoding (rdb.h RDB_6BITLEN ... RDB_64BITLEN, RDB_ENC_*).
pub const LEN_6BIT: u8 = 0;
pub const LEN_14BIT: u8 = 1;
pub const LEN_32BIT: u8 = 0x80;
pub const LEN_64BIT: u8 = 0x81;
pub const LEN_ENCVAL: u8 = 3;
pub const ENC_INT8: u8 = 0;
pub const ENC_INT16: u8 = 1;
pub const ENC_INT32: u8 = 2;
pub const ENC_LZF: u8 = 3;

// Quicklist node containers (quicklist.h QUICKLIST_NODE_CONTAINER_*).
pub const QUICKLIST_NODE_PLAIN: u64 = 1;
pub const QUICKLIST_NODE_PACKED: u64 = 2;

// Module value opcodes (rdb.h RDB_MODULE_OPCODE_*), needed to skip module
// aux payloads when naming the module in an error.
pub const MODULE_OPCODE_EOF: u64 = 0;
pub const MODULE_OPCODE_SINT: u64 = 1;
pub const MODULE_OPCODE_UINT: u64 = 2;
pub const MODULE_OPCODE_FLOAT: u64 = 3;
pub const MODULE_OPCODE_DOUBLE: u64 = 4;
pub const MODULE_OPCODE_STRING: u64 = 5;

/// A human name for a value-type byte, used in errors.
pub fn type_name(t: u8) -> &'static str {
    match t {
        TYPE_STRING => "string",
        TYPE_LIST => "list (linked list)",
        TYPE_SET => "set",
        TYPE_ZSET => "zset (text scores)",
        TYPE_HASH => "hash",
        TYPE_ZSET_2 => "zset",
        TYPE_MODULE_PRE_GA => "module (pre-GA)",
        TYPE_MODULE_2 => "module",
        TYPE_HASH_ZIPMAP => "hash (zipmap)",
        TYPE_LIST_ZIPLIST => "list (ziplist)",
        TYPE_SET_INTSET => "set (intset)",
        TYPE_ZSET_ZIPLIST => "zset (ziplist)",
        TYPE_HASH_ZIPLIST => "hash (ziplist)",
        TYPE_LIST_QUICKLIST => "list (quicklist of ziplists)",
        TYPE_STREAM_LISTPACKS => "stream",
        TYPE_HASH_LISTPACK => "hash (listpack)",
        TYPE_ZSET_LISTPACK => "zset (listpack)",
        TYPE_LIST_QUICKLIST_2 => "list (quicklist)",
        TYPE_STREAM_LISTPACKS_2 => "stream (v2)",
        TYPE_SET_LISTPACK => "set (listpack)",
        TYPE_STREAM_LISTPACKS_3 => "stream (v3)",
        TYPE_HASH_METADATA_PRE_GA | TYPE_HASH_LISTPACK_EX_PRE_GA => {
            "hash with field TTLs (Redis 7.4 release candidate)"
        }
        TYPE_HASH_METADATA | TYPE_HASH_LISTPACK_EX => "hash with field TTLs",
        _ => "unknown",
    }
}
