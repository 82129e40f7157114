//! The `cluster-*` configs (Redis 7.0's names, defaults and checks;
//! docs/cluster.md). `cluster-enabled`, `cluster-config-file` and
//! `cluster-port` are read once at start-up; the others act at once.

use super::{one, parse_bool, parse_int, parse_memory, yes_no, Config, ConfigOption};

/// What the `cluster-*` configs hold.
#[derive(Debug, Clone, Default)]
pub struct ClusterSettings {
    pub enabled: bool,
    pub config_file: String,
    /// The bus port (0: the client port + 10000).
    pub port: u16,
    pub node_timeout: u64,
    pub announce_ip: String,
    pub announce_port: u16,
    pub announce_tls_port: u16,
    pub announce_bus_port: u16,
    pub announce_hostname: String,
    pub require_full_coverage: bool,
    pub allow_reads_when_down: bool,
    pub allow_pubsubshard_when_down: bool,
    pub allow_replica_migration: bool,
    pub migration_barrier: u64,
    pub replica_validity_factor: u64,
    pub replica_no_failover: bool,
    /// `ip`, `hostname` or `unknown-endpoint`: what MOVED, ASK and
    /// CLUSTER SLOTS name a node by.
    pub preferred_endpoint_type: String,
    pub link_sendbuf_limit: u64,
}

macro_rules! cl_bool {
    ($name:literal, $default:literal, $field:ident) => {
        opt!(
            $name,
            $default,
            true,
            |c, a| {
                c.cluster.$field = parse_bool(a)?;
                Ok(())
            },
            |c| yes_no(c.cluster.$field)
        )
    };
}

macro_rules! cl_port {
    ($name:literal, $mutable:expr, $field:ident) => {
        opt!(
            $name,
            "0",
            $mutable,
            |c, a| {
                c.cluster.$field = parse_int(a, 0, 65535)? as u16;
                Ok(())
            },
            |c| c.cluster.$field.to_string()
        )
    };
}

macro_rules! cl_str {
    ($name:literal, $default:literal, $mutable:expr, $field:ident) => {
        opt!(
            $name,
            $default,
            $mutable,
            |c, a| {
                c.cluster.$field = one(a)?.to_string();
                Ok(())
            },
            |c| c.cluster.$field.clone()
        )
    };
}

const INT_MAX: u64 = i32::MAX as u64;

pub static CLUSTER_OPTIONS: &[ConfigOption] = &[
    opt!(
        "cluster-enabled",
        "no",
        false,
        |c, a| {
            c.cluster.enabled = parse_bool(a)?;
            Ok(())
        },
        |c| yes_no(c.cluster.enabled)
    ),
    cl_str!("cluster-config-file", "nodes.conf", false, config_file),
    cl_port!("cluster-port", false, port),
    opt!(
        "cluster-node-timeout",
        "15000",
        true,
        |c, a| {
            c.cluster.node_timeout = parse_int(a, 0, i64::MAX as u64)?;
            Ok(())
        },
        |c| c.cluster.node_timeout.to_string()
    ),
    cl_str!("cluster-announce-ip", "", true, announce_ip),
    cl_port!("cluster-announce-port", true, announce_port),
    cl_port!("cluster-announce-tls-port", true, announce_tls_port),
    cl_port!("cluster-announce-bus-port", true, announce_bus_port),
    opt!(
        "cluster-announce-hostname",
        "",
        true,
        |c, a| {
            let h = one(a)?;
            // Redis's isValidAuxString: hostnames go in nodes.conf lines.
            if !h
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
            {
                return Err("Hostnames must be less than 256 characters and only contain alphanumeric characters, '-' or '.'".into());
            }
            if h.len() > 255 {
                return Err("Hostnames must be less than 256 characters and only contain alphanumeric characters, '-' or '.'".into());
            }
            c.cluster.announce_hostname = h.to_string();
            Ok(())
        },
        |c| c.cluster.announce_hostname.clone()
    ),
    cl_bool!(
        "cluster-require-full-coverage",
        "yes",
        require_full_coverage
    ),
    cl_bool!("cluster-allow-reads-when-down", "no", allow_reads_when_down),
    cl_bool!(
        "cluster-allow-pubsubshard-when-down",
        "yes",
        allow_pubsubshard_when_down
    ),
    cl_bool!(
        "cluster-allow-replica-migration",
        "yes",
        allow_replica_migration
    ),
    opt!(
        "cluster-migration-barrier",
        "1",
        true,
        |c, a| {
            c.cluster.migration_barrier = parse_int(a, 0, INT_MAX)?;
            Ok(())
        },
        |c| c.cluster.migration_barrier.to_string()
    ),
    opt!(
        "cluster-replica-validity-factor",
        "10",
        true,
        |c, a| {
            c.cluster.replica_validity_factor = parse_int(a, 0, INT_MAX)?;
            Ok(())
        },
        |c| c.cluster.replica_validity_factor.to_string()
    ),
    alias!(
        "cluster-slave-validity-factor",
        "cluster-replica-validity-factor"
    ),
    cl_bool!("cluster-replica-no-failover", "no", replica_no_failover),
    alias!("cluster-slave-no-failover", "cluster-replica-no-failover"),
    opt!(
        "cluster-preferred-endpoint-type",
        "ip",
        true,
        |c, a| {
            let v = one(a)?.to_ascii_lowercase();
            if !["ip", "hostname", "unknown-endpoint"].contains(&v.as_str()) {
                return Err(
                    "argument(s) must be one of the following: ip, hostname, unknown-endpoint"
                        .into(),
                );
            }
            c.cluster.preferred_endpoint_type = v;
            Ok(())
        },
        |c| c.cluster.preferred_endpoint_type.clone()
    ),
    opt!(
        "cluster-link-sendbuf-limit",
        "0",
        true,
        |c, a| {
            c.cluster.link_sendbuf_limit =
                parse_memory(one(a)?).map_err(|_| "argument must be a memory value".to_string())?;
            Ok(())
        },
        |c| c.cluster.link_sendbuf_limit.to_string()
    ),
];

impl Config {
    /// The bus port: `cluster-port`, or the client port + 10000.
    pub fn cluster_bus_port(&self) -> u16 {
        if self.cluster.port != 0 {
            self.cluster.port
        } else {
            self.port.wrapping_add(10000)
        }
    }
}
