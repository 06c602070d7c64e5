//! Connecting the Redis store: one node (a connection manager that reconnects by itself), a
//! Redis Cluster, or the primary behind Sentinel; with `redis.durability = "replica"` a
//! second connection for the writes to confirm; and the start-up checks (the clock, the
//! eviction policy).

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use tokio::sync::mpsc;

use super::per_thread::PerThread;
use super::wake::{ClusterWakes, WakeClient, Wakes};
use super::{CONNECT_TIMEOUT, RESPONSE_TIMEOUT, RedisEngine, SentinelConnection, eviction};
use crate::error::{Error, Result};
use crate::store::engine::Engine;
use crate::store::topic_policy::StoreOptions;

fn manager_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(500))
}

/// The engine `settings` describe: a Cluster, a primary behind Sentinel, or one node; with
/// `durability = "replica"`, writes answered to callers are confirmed on a connection of their
/// own (`durable.rs`); refused on an evicting Redis unless allowed.
pub(crate) async fn open(
    settings: &super::settings::RedisSettings,
    options: &StoreOptions,
) -> Result<Arc<dyn Engine>> {
    use super::settings::Durability;
    let wait = match settings.durability {
        Durability::None => None,
        Durability::Replica => Some(Duration::from_millis(settings.durability_timeout_ms.max(1))),
    };
    let certs = super::tls::certificates(settings)?;
    if !settings.cluster_nodes.is_empty() {
        let mut engine = cluster(&settings.cluster_nodes, certs.as_ref(), options).await?;
        if let Some(timeout) = wait {
            engine.confirm_writes(1, timeout, false);
        }
        let nodes = eviction::Nodes::Cluster(settings.cluster_nodes.clone(), certs.clone());
        engine.persistence = eviction::persistence(&nodes).await;
        eviction::guard(nodes, settings.allow_eviction, engine.warnings.clone()).await?;
        return Ok(Arc::new(engine));
    }
    if !settings.sentinels.is_empty() {
        let node = redis::IntoConnectionInfo::into_connection_info(settings.url.as_str()).map_err(
            |e| {
                Error::invalid(
                    "redis.url",
                    format!(
                        "{}: {}",
                        super::tls::redact(&settings.url),
                        super::tls::redact_text(&e.to_string(), &settings.url)
                    ),
                )
            },
        )?;
        let connect = || {
            SentinelConnection::connect(
                &settings.sentinels,
                &settings.sentinel_master,
                &node,
                certs.as_ref(),
                manager_config(),
            )
        };
        let conn = connect().await?;
        let mut engine = RedisEngine::new(conn.clone(), options);
        engine.wakes = Wakes::Plain(WakeClient::Sentinel(conn.clone()));
        let nodes = eviction::Nodes::One(Arc::new(move || conn.client()));
        engine.persistence = eviction::persistence(&nodes).await;
        eviction::guard(nodes, settings.allow_eviction, engine.warnings.clone()).await?;
        engine.sync_clock().await;
        if let Some(timeout) = wait {
            engine.confirm_writes(1, timeout, true);
        }
        return Ok(Arc::new(engine));
    }
    let mut engine = one_node(&settings.url, certs.as_ref(), options).await?;
    let client = super::tls::client(&settings.url, certs.as_ref(), "redis.url")?;
    if let Some(timeout) = wait {
        engine.confirm_writes(1, timeout, true);
    }
    let nodes = eviction::Nodes::One(Arc::new(move || client.clone()));
    engine.persistence = eviction::persistence(&nodes).await;
    eviction::guard(nodes, settings.allow_eviction, engine.warnings.clone()).await?;
    Ok(Arc::new(engine))
}

fn cluster_client(
    nodes: &[String],
    certs: Option<&redis::TlsCertificates>,
) -> Result<redis::cluster::ClusterClient> {
    cluster_builder(nodes, certs)
        .build()
        .map_err(|e| Error::invalid("redis.cluster_nodes", redact_nodes(nodes, &e.to_string())))
}

/// A Cluster client's builder over `nodes`, with `certs` for `rediss://` nodes.
fn cluster_builder(
    nodes: &[String],
    certs: Option<&redis::TlsCertificates>,
) -> redis::cluster::ClusterClientBuilder {
    let builder = redis::cluster::ClusterClientBuilder::new(nodes.to_vec())
        .response_timeout(RESPONSE_TIMEOUT)
        .connection_timeout(CONNECT_TIMEOUT);
    match certs {
        Some(c) if nodes.iter().any(|n| n.starts_with("rediss://")) => builder.certs(c.clone()),
        _ => builder,
    }
}

/// `text` with the passwords of every node's URL replaced.
fn redact_nodes(nodes: &[String], text: &str) -> String {
    nodes
        .iter()
        .fold(text.to_string(), |t, n| super::tls::redact_text(&t, n))
}

/// The engine on one node, with a connection per thread (`per_thread.rs`).
pub(crate) async fn one_node(
    url: &str,
    certs: Option<&redis::TlsCertificates>,
    options: &StoreOptions,
) -> Result<RedisEngine<PerThread>> {
    let client = super::tls::client(url, certs, "redis.url")?;
    let shared = ConnectionManager::new_lazy_with_config(client.clone(), manager_config())?;
    let conn = PerThread::new(shared, client.clone(), manager_config());
    let mut engine = RedisEngine::new(conn, options);
    engine.wakes = Wakes::Plain(WakeClient::Fixed(Box::new(client)));
    engine.sync_clock().await;
    Ok(engine)
}

/// The engine on a Redis Cluster.
pub(crate) async fn cluster(
    nodes: &[String],
    certs: Option<&redis::TlsCertificates>,
    options: &StoreOptions,
) -> Result<RedisEngine<ClusterConnection>> {
    let conn = cluster_client(nodes, certs)?.get_async_connection().await?;
    let (tx, rx) = mpsc::unbounded_channel();
    let pubsub = cluster_builder(nodes, certs)
        .use_protocol(redis::ProtocolVersion::RESP3)
        .push_sender(tx)
        .build()
        .map_err(|e| Error::invalid("redis.cluster_nodes", e.to_string()))?;
    let mut engine = RedisEngine::new(conn, options);
    engine.wakes = Wakes::Cluster(ClusterWakes::new(pubsub.get_async_connection().await?, rx));
    engine.sync_clock().await;
    Ok(engine)
}
