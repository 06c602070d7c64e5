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
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
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
    /// it. `node` gives the scheme (`rediss://`: TLS), database and credentials of the Redis
    /// nodes; a sentinel written as a `rediss://` URL is reached over TLS, with its own
    /// credentials if the URL has them. `certs` serve both (`redis.tls_*`).
    pub(super) async fn connect(
        sentinels: &[String],
        master: &str,
        node: &redis::ConnectionInfo,
        certs: Option<&redis::TlsCertificates>,
        config: ConnectionManagerConfig,
    ) -> Result<Self> {
        use redis::IntoConnectionInfo;
        let invalid = |e: redis::RedisError| {
            let text = sentinels
                .iter()
                .fold(e.to_string(), |t, s| super::tls::redact_text(&t, s));
            Error::invalid("redis.sentinels", text)
        };
        let infos: Vec<redis::ConnectionInfo> = sentinels
            .iter()
            .map(|s| {
                let url = if s.contains("://") {
                    s.clone()
                } else {
                    format!("redis://{s}")
                };
                url.as_str().into_connection_info()
            })
            .collect::<redis::RedisResult<_>>()
            .map_err(invalid)?;
        let settings = node.redis_settings();
        let db = settings.db();
        let mut builder = SentinelClientBuilder::new(
            infos.iter().map(|i| i.addr().clone()),
            master,
            SentinelServerType::Master,
        )
        .map_err(invalid)?
        .set_client_to_redis_db(db);
        if let Some(user) = settings.username() {
            builder = builder.set_client_to_redis_username(user);
        }
        if let Some(password) = settings.password() {
            builder = builder.set_client_to_redis_password(password);
        }
        if matches!(node.addr(), redis::ConnectionAddr::TcpTls { .. }) {
            builder = builder.set_client_to_redis_tls_mode(redis::TlsMode::Secure);
        }
        if let Some(first) = infos.first() {
            let s = first.redis_settings();
            if let Some(user) = s.username() {
                builder = builder.set_client_to_sentinel_username(user);
            }
            if let Some(password) = s.password() {
                builder = builder.set_client_to_sentinel_password(password);
            }
            if matches!(first.addr(), redis::ConnectionAddr::TcpTls { .. }) {
                builder = builder.set_client_to_sentinel_tls_mode(redis::TlsMode::Secure);
            }
        }
        if let Some(c) = certs {
            builder = builder
                .set_client_to_redis_certificates(c.clone())
                .set_client_to_sentinel_certificates(c.clone());
        }
        let mut sentinel = builder.build().map_err(invalid)?;
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
