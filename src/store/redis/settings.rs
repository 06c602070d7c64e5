//! `[redis]`: where the Redis engine connects and what an acknowledgement waits for, which
//! `crate::config` loads and layers.

use serde::Deserialize;

/// Where the Redis store connects.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisSettings {
    /// A single node's URL.
    pub url: String,
    /// A Redis Cluster's nodes (any of them); when set, `url` is not used.
    pub cluster_nodes: Vec<String>,
    /// Redis Sentinel: the sentinels' addresses (`host:port`); when set, the primary is the
    /// one they name `sentinel_master`, and `url` gives only the database and credentials.
    pub sentinels: Vec<String>,
    /// The name the sentinels monitor the primary under.
    pub sentinel_master: String,
    /// What an acknowledged write waits for.
    pub durability: Durability,
    /// How long a write waits for its replicas before it is answered 503, in ms.
    pub durability_timeout_ms: u64,
    /// Run on a Redis whose `maxmemory-policy` evicts keys (it deletes jobs when full).
    pub allow_eviction: bool,
    /// For `rediss://`: a PEM file of the CA to trust instead of the system's roots.
    pub tls_ca: String,
    /// For `rediss://` with mutual TLS: the client's certificate (PEM).
    pub tls_cert: String,
    /// For `rediss://` with mutual TLS: the client's key (PEM).
    pub tls_key: String,
}

/// What an acknowledgement of a write means on Redis (docs/design.md, invariant 9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// The primary has the write (and its AOF, as Redis is configured).
    None,
    /// At least one replica has it too (`WAIT 1`), or the caller gets a 503.
    Replica,
}
