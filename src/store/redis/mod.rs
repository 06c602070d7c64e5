//! The Redis engine: per slot, sorted sets of scheduled, running and dead jobs and a hash of
//! job records (see `keys.rs` and `record.rs`); every change of a job is one script of `lua/`,
//! whose call is in `scripts/` under the same name. Generic over the connection, so one code
//! path serves a single node, the primary behind Sentinel and a Redis Cluster.
//!
//! The engine's four concerns are one file each: `topics.rs` (settings), `jobs.rs` (one
//! slot's jobs), `membership.rs` (instances and slot owners), `wake.rs` (the wake bus);
//! `connect.rs` makes an engine, `per_thread.rs` gives each slot-actor thread its connection on
//! one node, `durable.rs` confirms writes, `clock.rs` samples `TIME`.

mod clock;
pub(crate) mod connect;
mod durable;
mod eviction;
mod flows;
mod jobs;
mod membership;
mod per_thread;
mod rate;
mod reply;
mod scripts;
mod sentinel;
pub(crate) mod settings;
mod tls;
mod topics;
mod wake;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::AsyncCommands;
use redis::Value;
use redis::aio::ConnectionLike;

use self::reply::{int, text};
use self::scripts::{Call, Invocation, Scripts};
use self::wake::Wakes;
use super::engine::{Engine, Refired};
use super::keys::TOPICS;
use super::topic_policy::{StoreOptions, TopicCache};
use crate::error::{Error, Result};
use crate::model::JobState;
use crate::time::{ServerClock, SharedClock};
use crate::topic::TopicConfig;

/// How long a command may wait for Redis before the call fails (and HTTP answers 503).
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The Redis engine: the scripts of `lua/` over a connection `C` (one node, the primary
/// behind Sentinel, or a Redis Cluster). [`super::Store::redis`] and its siblings in
/// `connect.rs` make one.
pub(crate) struct RedisEngine<C> {
    conn: C,
    /// Where wake notices are published and heard (`wake.rs`).
    wakes: Wakes,
    scripts: Arc<Scripts>,
    topics: TopicCache,
    /// About how many events a topic's streams keep, over all its slots.
    events_max_len: usize,
    /// Redis' clock, as the sampler (`clock.rs`) reads it: the one clock that decides.
    clock: Arc<ServerClock>,
    /// With `redis.durability = "replica"`: the `WAIT` each write answered to a caller is
    /// sent with, in one pipeline (`durable.rs`).
    durability: Option<durable::Wait>,
    /// What `/health` should say of the store (eviction allowed, see `eviction.rs`).
    warnings: Arc<std::sync::Mutex<Vec<String>>>,
    /// What the primaries keep on disk, read at the start (`eviction::persistence`).
    persistence: &'static str,
    /// The slots, by topic, where `reset_many.lua` has run (it marks a slot written before
    /// due members were marked: `lua/lib.lua`'s `MARK`), only whose batch resets take the
    /// plain path (`jobs.rs`), with how many creating batches skip it there yet.
    plain: std::sync::Mutex<std::collections::HashMap<String, std::collections::HashMap<u32, u8>>>,
    /// Each topic's keys with limits of their own, as last read, by revision (`flows.rs`).
    flow_cache: flows::FlowCache,
}

pub use self::per_thread::own_connection;
pub use self::sentinel::SentinelConnection;

impl<C> RedisEngine<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// The engine over a connection made elsewhere.
    fn new(conn: C, options: &StoreOptions) -> Self {
        let clock = Arc::new(ServerClock::default());
        clock::spawn_sampler(conn.clone(), &clock);
        RedisEngine {
            conn,
            wakes: Wakes::None,
            scripts: Arc::new(Scripts::new()),
            topics: TopicCache::default(),
            events_max_len: options.events_max_len,
            clock,
            durability: None,
            warnings: Arc::default(),
            persistence: "as Redis is configured",
            plain: Default::default(),
            flow_cache: Default::default(),
        }
    }

    /// Makes every write answered to a caller wait until `replicas` replicas of the node
    /// that took it hold it (`WAIT`, in the write's pipeline); one not confirmed within
    /// `timeout` is answered as `Error::Unavailable`.
    /// `grouped`: one node or Sentinel (one `WAIT` for many writes on their connection);
    /// else a Cluster (a `WAIT` in each write's pipeline, to its node).
    fn confirm_writes(&mut self, replicas: u32, timeout: Duration, grouped: bool) {
        self.durability = Some(durable::Wait::new(replicas, timeout, grouped));
    }
}

impl<C> RedisEngine<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn conn(&self) -> C {
        self.conn.clone()
    }

    /// Sends a write that is answered to a caller: with its `WAIT` when writes are
    /// confirmed, refused unless the node that took it has the replicas (`place` names what
    /// was written, for the refusal).
    async fn write<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd, place: &str) -> Result<T> {
        let mut conn = self.conn();
        match &self.durability {
            None => Ok(cmd.query_async(&mut conn).await?),
            Some(wait) => {
                let (reply, sent) = wait
                    .send(&mut conn, cmd)
                    .await
                    .map_err(|e| durable::unconfirmed(&e, place))?;
                wait.confirm(&mut conn, sent, place).await?;
                Ok(reply)
            }
        }
    }

    /// Reads Redis' clock once before the store is handed out, so the first requests are
    /// timed by it; a Redis that is down now is read by the sampler once it is back.
    async fn sync_clock(&self) {
        let mut conn = self.conn();
        match tokio::time::timeout(CONNECT_TIMEOUT, clock::sample(&mut conn)).await {
            Ok(Ok(s)) => self.clock.observe(s),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "could not read Redis' clock yet: the local steady clock stands in until it can")
            }
            Err(_) => tracing::warn!(
                "Redis did not answer TIME in time: the local steady clock stands in until it does"
            ),
        }
    }

    /// Each slot's share of the topic's event stream cap.
    fn slot_stream_cap(&self, topic: &TopicConfig) -> usize {
        self.events_max_len.div_ceil(topic.slots as usize).max(1)
    }

    /// Reads a topic's settings from Redis into the cache.
    async fn load_topic(&self, name: &str) -> Result<Option<Arc<TopicConfig>>> {
        let stored: Option<String> = self.conn().hget(TOPICS, name).await?;
        let Some(json) = stored else {
            return Ok(None);
        };
        let config = parse_topic(&json)?;
        let rev = self.flow_rev(name).await?;
        Ok(Some(self.with_flows(config, rev).await?))
    }

    /// Runs one script call: over the connection whose writes are confirmed when the call
    /// is a write answered to a caller (then confirmed before it is answered), else over
    /// the shared one; a slot's refusal comes back as the crate's error that names it.
    async fn run<K: Call>(&self, call: K) -> Result<K::Out> {
        let lua = K::script(&self.scripts);
        let mut invocation = Invocation::default();
        call.build(&mut invocation);
        let answered = call.answered();
        let library = &self.scripts.library;
        let wait = if answered {
            self.durability.as_ref()
        } else {
            None
        };
        let place = || match call.place() {
            Some((topic, slot)) => format!("topic {topic:?} slot {slot}"),
            None => "the store".to_string(),
        };
        let mut conn = self.conn();
        let (reply, sent): (K::Reply, Option<durable::Sent>) = library
            .invoke(&mut conn, lua, &invocation, wait)
            .await
            .map_err(|e| match (call.place(), wait.is_some() && is_lost(&e)) {
                (_, true) => durable::unconfirmed(&e, &place()),
                (Some((topic, slot)), false) => refused(e, topic, slot),
                (None, false) => e.into(),
            })?;
        if let (Some(wait), Some(sent)) = (wait, sent) {
            wait.confirm(&mut conn, sent, &place()).await?;
        }
        call.read(reply)
    }
}

/// An error that leaves a write's fate unknown (the connection went, or no answer came).
fn is_lost(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_timeout() || e.is_unrecoverable_error()
}

#[async_trait]
impl<C> Engine for RedisEngine<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn name(&self) -> &'static str {
        "redis"
    }

    fn durability(&self) -> &'static str {
        self.persistence
    }

    fn clock(&self) -> Option<SharedClock> {
        Some(self.clock.clone())
    }

    fn warnings(&self) -> Vec<String> {
        self.warnings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    async fn ping(&self) -> Result<()> {
        let _: String = redis::cmd("PING").query_async(&mut self.conn()).await?;
        Ok(())
    }
}

/// A re-armed job as the scripts report it: fires, then type ('' when the default).
fn refired(id: String, fires: &Value, job_type: &Value) -> Result<Refired> {
    let job_type = text(job_type)?;
    Ok(Refired {
        id,
        fires: crate::num::count_u32(int(fires)?),
        job_type: (!job_type.is_empty()).then_some(job_type),
    })
}

/// A script's refusal as the crate's error: `FENCED` (a pump by a former owner) and
/// `STALE_LAYOUT` (a write routed with a slot count a doubling has left behind).
fn refused(e: redis::RedisError, topic: &TopicConfig, slot: u32) -> Error {
    let message = e.detail().unwrap_or("").to_string();
    match e.code() {
        Some("FENCED") => Error::Fenced {
            topic: topic.name.clone(),
            slot,
            message,
        },
        Some("STALE_LAYOUT") => Error::StaleLayout {
            topic: topic.name.clone(),
            message,
        },
        _ => e.into(),
    }
}

fn parse_topic(json: &str) -> Result<TopicConfig> {
    serde_json::from_str(json)
        .map_err(|e| Error::undecodable(format!("topic settings {json:?}"), e))
}

/// A script's word for a job's state, `''` when there is no job.
fn parse_state(s: &str) -> Result<Option<JobState>> {
    (!s.is_empty()).then(|| s.parse()).transpose()
}
