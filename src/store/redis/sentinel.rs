//! Redis behind Sentinel: a connection to whichever node the sentinels name as the primary,
//! following their failovers without a restart. Each command goes to the current primary's
//! connection; a command that fails for a reason a failover explains (the connection
//! dropped, or the node answers that it is a read-only replica now) makes the connection
//! ask the sentinels again, as does a background check every second. The failed command is
//! answered as the error it met (callers retry: slot actors after a backoff, HTTP clients
//! on a 503), never sent twice here.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{Cmd, Pipeline, RedisFuture, Value};

use crate::error::{Error, Result};

/// How often the sentinels are asked which node is the primary, besides after a failure.
const CHECK_EVERY: Duration = Duration::from_secs(1);
/// The least time between two questions to the sentinels after failures.
const ASK_AT_MOST_EVERY: Duration = Duration::from_millis(200);

/// A multiplexed connection to the primary the sentinels name (`Clone`: clones share it).
#[derive(Clone)]
pub struct SentinelConnection {
    follower: Arc<Follower>,
}

struct Follower {
    sentinel: tokio::sync::Mutex<SentinelClient>,
    config: ConnectionManagerConfig,
    /// The primary's client (for pub/sub), its connection, and when the sentinels were last
    /// asked.
    current: RwLock<Current>,
    db: i64,
}

#[derive(Clone)]
struct Current {
    client: redis::Client,
    conn: ConnectionManager,
    asked: Instant,
}

impl SentinelConnection {
    /// Asks `sentinels` for the primary of `master`, connects to it, and keeps following
    /// it. `node` gives the database and credentials of the Redis nodes (not of the
    /// sentinels).
    pub(super) async fn connect(
        sentinels: &[String],
        master: &str,
        node: redis::RedisConnectionInfo,
        config: ConnectionManagerConfig,
    ) -> Result<Self> {
        let urls: Vec<String> = sentinels
            .iter()
            .map(|s| {
                if s.contains("://") {
                    s.clone()
                } else {
                    format!("redis://{s}")
                }
            })
            .collect();
        let db = node.db();
        let node = SentinelNodeConnectionInfo::default().set_redis_connection_info(node);
        let mut sentinel = SentinelClient::build(
            urls,
            master.to_string(),
            Some(node),
            SentinelServerType::Master,
        )
        .map_err(|e| Error::invalid("redis.sentinels", e.to_string()))?;
        let client = sentinel.async_get_client().await?;
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), config.clone())?;
        let follower = Arc::new(Follower {
            sentinel: tokio::sync::Mutex::new(sentinel),
            config,
            current: RwLock::new(Current {
                client,
                conn,
                asked: Instant::now(),
            }),
            db,
        });
        let watch = Arc::downgrade(&follower);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(CHECK_EVERY).await;
                let Some(f) = watch.upgrade() else { return };
                f.follow(true).await;
            }
        });
        Ok(SentinelConnection { follower })
    }

    /// A client of the current primary, for a pub/sub connection.
    pub(super) fn client(&self) -> redis::Client {
        self.follower.current().client
    }
}

impl Follower {
    fn current(&self) -> Current {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Asks the sentinels for the primary and moves to it if it changed; `always`: even
    /// when they were asked a moment ago.
    async fn follow(&self, always: bool) {
        if !always && self.current().asked.elapsed() < ASK_AT_MOST_EVERY {
            return;
        }
        let asked = {
            let mut sentinel = self.sentinel.lock().await;
            sentinel.async_get_client().await
        };
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        current.asked = Instant::now();
        let client = match asked {
            Ok(client) => client,
            Err(e) => {
                tracing::warn!(error = %e, "the sentinels did not name a primary");
                return;
            }
        };
        if client.get_connection_info().addr() == current.client.get_connection_info().addr() {
            return;
        }
        match ConnectionManager::new_lazy_with_config(client.clone(), self.config.clone()) {
            Ok(conn) => {
                tracing::info!(primary = %client.get_connection_info().addr(), "following the sentinels to a new primary");
                current.client = client;
                current.conn = conn;
            }
            Err(e) => tracing::warn!(error = %e, "could not connect to the new primary"),
        }
    }
}

/// Whether an error may mean the primary moved.
fn may_have_moved(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || e.code() == Some("READONLY")
        || e.code() == Some("MASTERDOWN")
}

impl ConnectionLike for SentinelConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let mut conn = self.follower.current().conn;
            let r = conn.req_packed_command(cmd).await;
            if let Err(e) = &r
                && may_have_moved(e)
            {
                self.follower.follow(false).await;
            }
            r
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let mut conn = self.follower.current().conn;
            let r = conn.req_packed_commands(pipeline, offset, count).await;
            if let Err(e) = &r
                && may_have_moved(e)
            {
                self.follower.follow(false).await;
            }
            r
        })
    }

    fn get_db(&self) -> i64 {
        self.follower.db
    }
}
