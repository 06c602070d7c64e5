//! A Redis that evicts keys when it is full deletes job records, slot sets and owner leases
//! without an error, so the service refuses to start on one: every node it writes to must
//! have `maxmemory-policy noeviction`, unless `redis.allow_eviction` says to run anyway
//! (then a warning at start and in `/health`). The policy is read again every 30 s, since
//! `CONFIG SET` changes it under a running service.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::error::{Error, Result};

/// How often the nodes' policies are read again.
const RECHECK_EVERY: Duration = Duration::from_secs(30);

/// The nodes whose policy matters: the primaries a store writes to.
#[derive(Clone)]
pub(super) enum Nodes {
    /// One node, or the primary of the moment behind Sentinel.
    One(Arc<dyn Fn() -> redis::Client + Send + Sync>),
    /// Every primary of a Redis Cluster, found through any of `seeds` (with the TLS
    /// certificates of `rediss://` seeds).
    Cluster(Vec<String>, Option<redis::TlsCertificates>),
}

impl Nodes {
    async fn clients(&self) -> Result<Vec<redis::Client>> {
        match self {
            Nodes::One(client) => Ok(vec![client()]),
            Nodes::Cluster(seeds, certs) => cluster_primaries(seeds, certs.as_ref()).await,
        }
    }
}

/// Every primary of the cluster, as `CLUSTER NODES` on the first seed that answers lists them.
/// A primary is reached as its seed is: the same scheme, credentials and certificates.
async fn cluster_primaries(
    seeds: &[String],
    certs: Option<&redis::TlsCertificates>,
) -> Result<Vec<redis::Client>> {
    let mut last = None;
    for seed in seeds {
        let client = super::tls::client(seed, certs, "redis.cluster_nodes")?;
        let listed: redis::RedisResult<String> = async {
            let mut conn = client.get_multiplexed_async_connection().await?;
            redis::cmd("CLUSTER")
                .arg("NODES")
                .query_async(&mut conn)
                .await
        }
        .await;
        match listed {
            Ok(text) => {
                return text
                    .lines()
                    .filter(|l| l.contains("master") && !l.contains("fail"))
                    .filter_map(|l| l.split_whitespace().nth(1))
                    .map(|addr| {
                        let hostport = addr.split('@').next().unwrap_or(addr);
                        super::tls::client(&node_url(seed, hostport), certs, "redis.cluster_nodes")
                    })
                    .collect();
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.map_or_else(
        || Error::invalid("redis.cluster_nodes", "no nodes given"),
        Error::from,
    ))
}

/// The URL of the node at `hostport`, reached as `seed` is (scheme and credentials).
fn node_url(seed: &str, hostport: &str) -> String {
    let (host, port) = hostport.rsplit_once(':').unwrap_or((hostport, "6379"));
    let Ok(mut u) = url::Url::parse(seed) else {
        return format!("redis://{hostport}/");
    };
    if u.set_host(Some(host)).is_err() {
        return format!("redis://{hostport}/");
    }
    let _ = u.set_port(port.parse().ok());
    u.to_string()
}

/// Nodes whose policy evicts, as "address: policy"; nodes that do not let `CONFIG GET` be
/// called (managed services often rename it) are reported as unknown in `unknown`.
async fn evicting(nodes: &Nodes) -> Result<(Vec<String>, Vec<String>)> {
    let (mut evicting, mut unknown) = (Vec::new(), Vec::new());
    for client in nodes.clients().await? {
        let addr = client.get_connection_info().addr().to_string();
        let policy: redis::RedisResult<Vec<String>> = async {
            let mut conn = client.get_multiplexed_async_connection().await?;
            redis::cmd("CONFIG")
                .arg("GET")
                .arg("maxmemory-policy")
                .query_async(&mut conn)
                .await
        }
        .await;
        match policy {
            Ok(kv) => match kv.get(1).map(String::as_str) {
                Some("noeviction") => {}
                Some(other) => evicting.push(format!("{addr}: maxmemory-policy {other}")),
                None => unknown.push(addr),
            },
            Err(e) if e.kind() == redis::ErrorKind::Io => return Err(e.into()),
            Err(_) => unknown.push(addr),
        }
    }
    Ok((evicting, unknown))
}

/// What the primaries keep on disk, as the start log says it: durable only when every
/// primary appends each write (`appendonly yes`); to its last snapshot when some only
/// snapshot (`save`); not durable when one keeps nothing; as configured when `CONFIG GET`
/// is refused or Redis is not reachable yet.
pub(super) async fn persistence(nodes: &Nodes) -> &'static str {
    let Ok(clients) = nodes.clients().await else {
        return UNKNOWN_PERSISTENCE;
    };
    let mut weakest = 2; // 2: AOF everywhere, 1: a snapshot somewhere, 0: nothing somewhere
    for client in clients {
        let read: redis::RedisResult<(Vec<String>, Vec<String>)> = async {
            let mut conn = client.get_multiplexed_async_connection().await?;
            let aof = redis::cmd("CONFIG")
                .arg("GET")
                .arg("appendonly")
                .query_async(&mut conn)
                .await?;
            let save = redis::cmd("CONFIG")
                .arg("GET")
                .arg("save")
                .query_async(&mut conn)
                .await?;
            Ok((aof, save))
        }
        .await;
        let Ok((aof, save)) = read else {
            return UNKNOWN_PERSISTENCE;
        };
        let level = match (
            aof.get(1).map(String::as_str),
            save.get(1).map(String::as_str),
        ) {
            (Some("yes"), _) => 2,
            (_, Some(rules)) if !rules.trim().is_empty() => 1,
            _ => 0,
        };
        weakest = weakest.min(level);
    }
    match weakest {
        2 => "durable (Redis appendonly)",
        1 => "to Redis' last snapshot (save, no appendonly: writes since are lost in a crash)",
        _ => "not durable (Redis keeps nothing on disk: appendonly no, save '')",
    }
}

/// What the start log says when Redis' persistence cannot be read.
const UNKNOWN_PERSISTENCE: &str = "as Redis is configured (its persistence could not be read)";

fn explain(found: &[String]) -> String {
    format!(
        "Redis evicts keys when it is full, which deletes jobs without an error ({}); set \
         maxmemory-policy noeviction on every node (then a full Redis refuses new jobs with \
         503 store_full and changes nothing), or set redis.allow_eviction = true to run anyway",
        found.join(", ")
    )
}

/// Checks the nodes' policies at start: an evicting node refuses the start unless `allow`,
/// and is then a warning in `warnings`. Keeps checking every 30 s, noting any change there.
/// A Redis that cannot be reached at start is checked once it can (the store serves once
/// Redis is back), and an evicting one found then is a warning, as a change would be.
pub(super) async fn guard(
    nodes: Nodes,
    allow: bool,
    warnings: Arc<Mutex<Vec<String>>>,
) -> Result<()> {
    let mut wait = RECHECK_EVERY;
    match evicting(&nodes).await {
        Ok((found, unknown)) => {
            if !unknown.is_empty() {
                tracing::warn!(nodes = ?unknown, "could not read maxmemory-policy (CONFIG GET refused): make sure it is noeviction");
            }
            if !found.is_empty() {
                if !allow {
                    return Err(Error::invalid("redis.allow_eviction", explain(&found)));
                }
                tracing::warn!("{}", explain(&found));
            }
            set(&warnings, &found, allow);
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not read Redis' maxmemory-policy yet: it is checked once Redis answers");
            wait = Duration::from_secs(1);
        }
    }
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(wait).await;
            wait = RECHECK_EVERY;
            if Arc::strong_count(&warnings) == 1 {
                return;
            }
            if let Ok((found, _)) = evicting(&nodes).await {
                if !found.is_empty() {
                    tracing::error!("{}", explain(&found));
                }
                set(&warnings, &found, allow);
            }
        }
    });
    Ok(())
}

fn set(warnings: &Mutex<Vec<String>>, found: &[String], allow: bool) {
    let mut w = warnings.lock().unwrap_or_else(PoisonError::into_inner);
    w.clear();
    if !found.is_empty() {
        let how = if allow {
            "allowed by redis.allow_eviction"
        } else {
            "changed since the start"
        };
        w.push(format!("eviction is on ({how}): {}", found.join(", ")));
    }
}
