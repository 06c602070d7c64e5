//! The Redis engine: per slot, sorted sets of scheduled, running and dead jobs and a hash of
//! job records (see `keys.rs` and `record.rs`); every change of a job is one script of `lua/`.
//! Generic over the connection, so one code path serves a single node and a Redis Cluster.

mod clock;
mod connect;
mod durable;
mod eviction;
mod reply;
mod sentinel;
mod wake;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::aio::ConnectionLike;
use redis::{AsyncCommands, Value};

use self::reply::{Reply, int, text};
use self::wake::Wakes;
use super::Ownership;
use super::engine::{
    ClaimSettlement, DeadEntry, Engine, Handed, Membership, Refired, SlotJobs, SlotPumped,
    SlotReset, SlotScheduled, Stored, TopicSettings,
};
use super::event_id::EventId;
use super::keys::{INSTANCES, SlotKeys, TOPICS};
use super::record::Record;
use super::scripts::Scripts;
use super::topic_policy::{StoreOptions, TopicCache, check_update, fresh};
use crate::error::{Error, Result};
use crate::events::Event;
use crate::model::{
    DeadCursor, Finished, HandedRecord, JobState, RunOutcome, ScheduleMode, ScheduleOutcome,
    Settlement, SlotStats,
};
use crate::routing::slot_of;
use crate::time::{Millis, ServerClock, SharedClock};
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
    /// With `redis.durability = "replica"`: the connection that writes answered to a caller
    /// take, and the grouped `WAIT` after them (`durable.rs`).
    confirmer: Option<durable::Confirmer<C>>,
    /// What `/health` should say of the store (eviction allowed, see `eviction.rs`).
    warnings: Arc<std::sync::Mutex<Vec<String>>>,
}

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
            confirmer: None,
            warnings: Arc::default(),
        }
    }

    /// Makes every write answered to a caller wait until `replicas` replicas hold it
    /// (`WAIT`), over `conn`, a connection of its own to the same Redis; one not confirmed
    /// within `timeout` is answered as `Error::Unavailable`.
    fn confirm_writes_with(&mut self, conn: C, replicas: u32, timeout: Duration) {
        self.confirmer = Some(durable::Confirmer::new(conn, replicas, timeout));
    }
}

/// `settle.lua`'s arguments for an outcome: its kind, time and error text.
/// How often a topic change is decided again when the settings changed under it.
const PUT_TRIES: usize = 16;

fn outcome_args(outcome: &RunOutcome, now: Millis) -> (&'static str, Millis, &str) {
    match outcome {
        RunOutcome::Ack => ("ack", now, ""),
        RunOutcome::Retry { error, at } => ("retry", *at, error.as_str()),
        RunOutcome::Repeat { at } => ("repeat", *at, ""),
        RunOutcome::Bury { error } => ("bury", now, error.as_str()),
        RunOutcome::Release => ("release", now, ""),
    }
}

impl<C> RedisEngine<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn conn(&self) -> C {
        self.conn.clone()
    }

    /// The connection for a write that is answered to a caller: the confirmer's when writes
    /// are confirmed (its `WAIT` covers only writes sent on it).
    fn write_conn(&self) -> C {
        self.confirmer
            .as_ref()
            .map_or_else(|| self.conn.clone(), durable::Confirmer::conn)
    }

    /// After a write on `write_conn` came back: waits for its replicas, when asked to.
    async fn confirmed(&self) -> Result<()> {
        match &self.confirmer {
            Some(c) => c.confirm().await,
            None => Ok(()),
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
        stored
            .map(|json| parse_topic(&json).map(|c| self.topics.insert(c)))
            .transpose()
    }

    /// A call of `settle.lua` on one slot, before its runs' arguments.
    fn settle_call(
        &self,
        topic: &TopicConfig,
        slot: u32,
        now: Millis,
    ) -> redis::ScriptInvocation<'_> {
        let mut call = self.scripts.settle.prepare_invoke();
        call.key(SlotKeys::new(&topic.name, slot).all())
            .arg(now)
            .arg(topic.max_attempts)
            .arg(self.slot_stream_cap(topic))
            .arg(&topic.name)
            .arg(&topic.default_type);
        call
    }

    /// Runs a call of `settle.lua` and reads its results; `answered` when a caller is told
    /// the outcome (a consumer's ack), whose write is then confirmed like any other.
    async fn settled(
        &self,
        call: redis::ScriptInvocation<'_>,
        answered: bool,
    ) -> Result<Vec<Finished>> {
        let reply: Vec<String> = if answered {
            let reply = call.invoke_async(&mut self.write_conn()).await?;
            self.confirmed().await?;
            reply
        } else {
            call.invoke_async(&mut self.conn()).await?
        };
        reply
            .iter()
            .map(|r| {
                r.parse()
                    .map_err(|_| Error::Corrupt(format!("settle.lua answered {r:?}")))
            })
            .collect()
    }
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
        "durable (Redis)"
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

#[async_trait]
impl<C> TopicSettings for RedisEngine<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn find_topic(&self, name: &str) -> Result<Option<Arc<TopicConfig>>> {
        match self.topics.get(name) {
            Some(t) => Ok(Some(t)),
            None => self.load_topic(name).await,
        }
    }

    async fn create_topic(&self, config: TopicConfig) -> Result<Arc<TopicConfig>> {
        let config = fresh(config);
        let json = serde_json::to_string(&config).expect("topic config serialises");
        // Another instance may create it at the same moment: the first one wins and both
        // read back the same settings.
        let _: bool = self
            .write_conn()
            .hset_nx(TOPICS, &config.name, json)
            .await?;
        self.confirmed().await?;
        self.load_topic(&config.name).await?.ok_or_else(|| {
            Error::Corrupt(format!(
                "topic {:?} vanished as it was created",
                config.name
            ))
        })
    }

    async fn put_topic(&self, config: TopicConfig) -> Result<Arc<TopicConfig>> {
        let mut conn = self.write_conn();
        // Read, decide, then set only if nothing changed since (another instance, or a
        // call of this one, may be changing the topic at the same moment).
        for _ in 0..PUT_TRIES {
            let old: Option<String> = conn.hget(TOPICS, &config.name).await?;
            let next = match &old {
                Some(old) => check_update(&parse_topic(old)?, config.clone())?,
                None => fresh(config.clone()),
            };
            let json = serde_json::to_string(&next).expect("topic config serialises");
            let set: i64 = self
                .scripts
                .topic_put
                .key(TOPICS)
                .arg(&config.name)
                .arg(old.as_deref().unwrap_or(""))
                .arg(json)
                .invoke_async(&mut conn)
                .await?;
            if set == 1 {
                self.confirmed().await?;
                return Ok(self.topics.insert(next));
            }
        }
        Err(Error::TopicConflict {
            topic: config.name.clone(),
            message: "the topic's settings kept changing while this change was applied; \
                      try again"
                .to_string(),
        })
    }

    async fn topics(&self) -> Result<Vec<Arc<TopicConfig>>> {
        let all: BTreeMap<String, String> = self.conn().hgetall(TOPICS).await?;
        all.values()
            .map(|json| parse_topic(json).map(|c| self.topics.insert(c)))
            .collect()
    }

    async fn reload_topic(&self, name: &str) -> Result<Option<Arc<TopicConfig>>> {
        self.load_topic(name).await
    }

    async fn mark_layout(&self, topic: &TopicConfig, slot: u32) -> Result<()> {
        let _: i64 = self
            .scripts
            .layout
            .key(SlotKeys::new(&topic.name, slot).all())
            .arg(topic.slots)
            .invoke_async(&mut self.conn())
            .await?;
        Ok(())
    }
}

#[async_trait]
impl<C> SlotJobs for RedisEngine<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn schedule(
        &self,
        topic: &TopicConfig,
        slot: u32,
        id: &str,
        mode: ScheduleMode,
        fire_at: Millis,
        now: Millis,
        spec: Record,
    ) -> Result<SlotScheduled> {
        let mode_arg = mode.as_str();
        let reply: Vec<Value> = self
            .scripts
            .schedule
            .key(SlotKeys::new(&topic.name, slot).all())
            .arg(id)
            .arg(mode_arg)
            .arg(fire_at)
            .arg(now)
            .arg(spec.to_arg())
            .arg(topic.slots)
            .invoke_async(&mut self.write_conn())
            .await
            .map_err(|e| refused(e, topic, slot))?;
        self.confirmed().await?;
        let reply = Reply::new("schedule", &reply);
        let outcome: ScheduleOutcome = reply
            .text(0)?
            .parse()
            .map_err(|_| reply.corrupt("its outcome"))?;
        let fire_at = reply.int(2)?;
        let rearmed =
            Some(refired(id.to_string(), reply.get(4)?, reply.get(5)?)?).filter(|r| r.fires > 0);
        let state = parse_state(&reply.text(1)?)?;
        let score = reply.int(6)?;
        let stored = match state {
            Some(state) if score >= 0 => Some(Stored {
                state,
                score,
                record: Record::parse(&reply.text(7)?)?,
            }),
            _ => None,
        };
        Ok(SlotScheduled {
            outcome,
            state,
            fire_at: (fire_at >= 0).then_some(fire_at),
            is_head: reply.int(3)? == 1,
            rearmed,
            stored,
        })
    }

    async fn reset_many(
        &self,
        topic: &TopicConfig,
        slot: u32,
        items: &[(&str, Millis)],
        create: Option<&Record>,
        now: Millis,
    ) -> Result<SlotReset> {
        let create = create.map(Record::to_arg);
        let mut call = self.scripts.reset_many.prepare_invoke();
        call.key(SlotKeys::new(&topic.name, slot).all())
            .arg(now)
            .arg(create.as_deref().unwrap_or("-"));
        for (id, at) in items {
            call.arg(id).arg(at);
        }
        call.arg(topic.slots);
        let items: Vec<Value> = call
            .invoke_async(&mut self.write_conn())
            .await
            .map_err(|e| refused(e, topic, slot))?;
        self.confirmed().await?;
        let reply = Reply::new("reset_many", &items);
        let n_missing = usize::try_from(reply.int(2)?).map_err(|e| reply.corrupt(e))?;
        let missing = reply
            .slice(3, 3 + n_missing)?
            .iter()
            .map(text)
            .collect::<Result<_>>()?;
        let rearmed = reply
            .records(3 + n_missing, 3)?
            .map(|r| refired(text(&r[0])?, &r[1], &r[2]))
            .collect::<Result<_>>()?;
        Ok(SlotReset {
            reset: crate::num::unsigned(reply.int(0)?),
            created: crate::num::unsigned(reply.int(1)?),
            missing,
            rearmed,
        })
    }

    async fn cancel(&self, topic: &TopicConfig, slot: u32, id: &str) -> Result<Option<JobState>> {
        let state: String = self
            .scripts
            .cancel
            .key(SlotKeys::new(&topic.name, slot).all())
            .arg(id)
            .invoke_async(&mut self.write_conn())
            .await?;
        self.confirmed().await?;
        parse_state(&state)
    }

    async fn get(
        &self,
        topic: &TopicConfig,
        slot: u32,
        ids: &[&str],
    ) -> Result<Vec<Option<Stored>>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let reply: Vec<Value> = self
            .scripts
            .get
            .key(SlotKeys::new(&topic.name, slot).all())
            .arg(ids)
            .invoke_async(&mut self.conn())
            .await?;
        let reply = Reply::new("get", &reply);
        (0..ids.len())
            .map(|i| {
                let Some(state) = parse_state(&reply.text(3 * i)?)? else {
                    return Ok(None);
                };
                Ok(Some(Stored {
                    state,
                    score: reply.int(3 * i + 1)?,
                    record: Record::parse(&reply.text(3 * i + 2)?)?,
                }))
            })
            .collect()
    }

    async fn pump(
        &self,
        topic: &TopicConfig,
        slot: u32,
        now: Millis,
        limit: usize,
        lease_ms: u64,
        fence: u64,
    ) -> Result<SlotPumped> {
        let reply: Vec<Value> = self
            .scripts
            .pump
            .key(SlotKeys::new(&topic.name, slot).all())
            .arg(now)
            .arg(limit)
            .arg(lease_ms)
            .arg(topic.max_attempts)
            .arg(fence)
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| refused(e, topic, slot))?;
        let reply = Reply::new("pump", &reply);
        let next_at = reply.int(0)?;
        let handed = reply
            .records(2, 2)?
            .map(|entry| {
                let raw = text(&entry[1])?;
                let record = Record::parse(&raw)?;
                let token = record.token.ok_or_else(|| {
                    Error::Corrupt(format!("pump.lua handed out a run with no token: {raw}"))
                })?;
                Ok(Handed {
                    id: text(&entry[0])?,
                    token,
                    record,
                    text: HandedRecord::new(token, raw.into()),
                })
            })
            .collect::<Result<_>>()?;
        Ok(SlotPumped {
            handed,
            expired: crate::num::count_u32(reply.int(1)?),
            next_at: (next_at >= 0).then_some(next_at),
        })
    }

    async fn adopt(
        &self,
        topic: &TopicConfig,
        slot: u32,
        fence: u64,
        above: u64,
    ) -> Result<Vec<(Handed, Millis)>> {
        let reply: Vec<Value> = self
            .scripts
            .adopt
            .key(SlotKeys::new(&topic.name, slot).all())
            .arg(fence)
            .arg(above)
            .invoke_async(&mut self.conn())
            .await
            .map_err(|e| refused(e, topic, slot))?;
        Reply::new("adopt", &reply)
            .records(0, 3)?
            .map(|entry| {
                let raw = text(&entry[1])?;
                let record = Record::parse(&raw)?;
                let token = record.token.ok_or_else(|| {
                    Error::Corrupt(format!("adopt.lua answered a run with no token: {raw}"))
                })?;
                let handed = Handed {
                    id: text(&entry[0])?,
                    token,
                    record,
                    text: HandedRecord::new(token, raw.into()),
                };
                Ok((handed, int(&entry[2])?))
            })
            .collect()
    }

    async fn settle(
        &self,
        topic: &TopicConfig,
        slot: u32,
        batch: &[Settlement],
        now: Millis,
    ) -> Result<Vec<Finished>> {
        let mut call = self.settle_call(topic, slot, now);
        for s in batch {
            let (kind, at, error) = outcome_args(&s.outcome, now);
            call.arg(&s.run.job.id)
                .arg(s.run.token)
                .arg(s.run.handed_record.text_for(s.run.token))
                .arg(kind)
                .arg(at)
                .arg(error)
                .arg(Event::head_json(s))
                .arg(s.emitted.len());
            for e in &s.emitted {
                let event = Event::of_run(s, &e.event, e.data.clone());
                call.arg(serde_json::to_string(&event).expect("an event serialises"));
            }
        }
        self.settled(call, false).await
    }

    async fn settle_claimed(
        &self,
        topic: &TopicConfig,
        slot: u32,
        batch: &[ClaimSettlement<'_>],
        now: Millis,
    ) -> Result<Vec<Finished>> {
        let mut call = self.settle_call(topic, slot, now);
        for c in batch {
            let (kind, at, error) = outcome_args(&c.outcome, now);
            // An empty head: settle.lua builds it from the run's record.
            call.arg(c.id)
                .arg(c.token)
                .arg("")
                .arg(kind)
                .arg(at)
                .arg(error)
                .arg("")
                .arg(0);
        }
        self.settled(call, true).await
    }

    async fn touch(
        &self,
        topic: &TopicConfig,
        slot: u32,
        id: &str,
        token: u64,
        until: Millis,
    ) -> Result<bool> {
        let n: i64 = self
            .scripts
            .touch
            .key(SlotKeys::new(&topic.name, slot).all())
            .arg(id)
            .arg(token)
            .arg(until)
            .invoke_async(&mut self.write_conn())
            .await?;
        self.confirmed().await?;
        Ok(n == 1)
    }

    async fn dead_page(
        &self,
        topic: &TopicConfig,
        slot: u32,
        after: Option<&DeadCursor>,
        limit: usize,
    ) -> Result<Vec<DeadEntry>> {
        let (at_arg, id_arg) = match after {
            Some(c) => (c.dead_at.to_string(), c.id.as_str()),
            None => ("-inf".to_string(), ""),
        };
        let reply: Vec<Value> = self
            .scripts
            .dead_page
            .key(SlotKeys::new(&topic.name, slot).all())
            .arg(at_arg)
            .arg(id_arg)
            .arg(limit)
            .invoke_async(&mut self.conn())
            .await?;
        Reply::new("dead_page", &reply)
            .records(0, 3)?
            .map(|e| {
                Ok(DeadEntry {
                    cursor: DeadCursor {
                        dead_at: int(&e[1])?,
                        id: text(&e[0])?,
                    },
                    record: Record::parse(&text(&e[2])?)?,
                })
            })
            .collect()
    }

    async fn requeue(&self, topic: &TopicConfig, slot: u32, id: &str, now: Millis) -> Result<bool> {
        let n: i64 = self
            .scripts
            .requeue
            .key(SlotKeys::new(&topic.name, slot).all())
            .arg(id)
            .arg(now)
            .invoke_async(&mut self.write_conn())
            .await?;
        self.confirmed().await?;
        Ok(n == 1)
    }

    async fn dead_delete(&self, topic: &TopicConfig, slot: u32, id: &str) -> Result<bool> {
        let n: i64 = self
            .scripts
            .dead_delete
            .key(SlotKeys::new(&topic.name, slot).all())
            .arg(id)
            .invoke_async(&mut self.write_conn())
            .await?;
        self.confirmed().await?;
        Ok(n == 1)
    }

    async fn slot_stats(&self, topic: &TopicConfig, slot: u32) -> Result<SlotStats> {
        let keys = SlotKeys::new(&topic.name, slot);
        let (scheduled, running, dead, head): (u64, u64, u64, Vec<(String, f64)>) = redis::pipe()
            .zcard(&keys.due)
            // Not ZCARD: the run set's padding member (score +inf, see pump.lua) is no run.
            .zcount(&keys.run, "-inf", "(+inf")
            .zcard(&keys.dead)
            .zrange_withscores(&keys.due, 0, 0)
            .query_async(&mut self.conn())
            .await?;
        Ok(SlotStats {
            slot,
            scheduled,
            running,
            dead,
            next_fire_at: head.first().map(|(_, s)| crate::num::float_int(*s)),
        })
    }

    async fn scan_ids(
        &self,
        topic: &TopicConfig,
        slot: u32,
        state: JobState,
        cursor: u64,
        count: usize,
    ) -> Result<(u64, Vec<String>)> {
        let keys = SlotKeys::new(&topic.name, slot);
        let key = match state {
            JobState::Scheduled => &keys.due,
            JobState::Running => &keys.run,
            JobState::Dead => &keys.dead,
        };
        let (next, page): (u64, Vec<String>) = redis::cmd("ZSCAN")
            .arg(key)
            .arg(cursor)
            .arg("COUNT")
            .arg(count)
            .query_async(&mut self.conn())
            .await?;
        // ZSCAN answers member, score, member, score, ...; the run set's padding member
        // (see pump.lua) is longer than any id may be, and is no job.
        let ids = page
            .into_iter()
            .step_by(2)
            .filter(|id| id.chars().count() <= crate::validate::MAX_ID_LEN)
            .collect();
        Ok((next, ids))
    }

    async fn append_events(&self, topic: &TopicConfig, events: &[Event]) -> Result<()> {
        let cap = self.slot_stream_cap(topic);
        let mut pipe = redis::pipe();
        for e in events {
            let key = SlotKeys::new(&topic.name, slot_of(&e.job_id, topic.slots)).events;
            let json = serde_json::to_string(e).expect("an event serialises");
            pipe.cmd("XADD")
                .arg(key)
                .arg("MAXLEN")
                .arg("~")
                .arg(cap)
                .arg("*")
                .arg("e")
                .arg(json)
                .ignore();
        }
        // A pipeline rather than a transaction: on a cluster its commands go to many nodes.
        let _: () = pipe.query_async(&mut self.conn()).await?;
        Ok(())
    }

    async fn read_events(
        &self,
        topic: &TopicConfig,
        after: Option<EventId>,
        limit: usize,
    ) -> Result<Vec<Event>> {
        // Each slot's oldest `limit` after the cursor; then, of those older than every
        // slot's clock (nothing can still be appended before that), the oldest `limit`.
        let calls = (0..topic.slots).map(|slot| {
            let start = match &after {
                None => "-".to_string(),
                Some(c) if slot > c.slot => format!("{}-{}", c.ms, c.seq),
                Some(c) => format!("({}-{}", c.ms, c.seq),
            };
            let keys = SlotKeys::new(&topic.name, slot);
            let mut conn = self.conn();
            async move {
                let reply: Vec<Value> = self
                    .scripts
                    .events_page
                    .key(keys.all())
                    .arg(start)
                    .arg(limit)
                    .invoke_async(&mut conn)
                    .await?;
                Ok::<_, Error>((slot, reply))
            }
        });
        let mut horizon = i64::MAX;
        let mut entries: Vec<(EventId, String)> = Vec::new();
        for result in futures_util::future::join_all(calls).await {
            let (slot, reply) = result?;
            let reply = Reply::new("events_page", &reply);
            horizon = horizon.min(reply.int(0)?);
            for pair in reply.records(1, 2)? {
                let id = text(&pair[0])?;
                let id = EventId::of_stream(&id, slot)
                    .ok_or_else(|| Error::Corrupt(format!("stream id {id:?}")))?;
                entries.push((id, text(&pair[1])?));
            }
        }
        entries.retain(|(id, _)| crate::num::signed(id.ms) < horizon);
        entries.sort_by_key(|(id, _)| *id);
        entries.truncate(limit);
        entries
            .into_iter()
            .map(|(id, json)| {
                let mut event: Event = serde_json::from_str(&json)
                    .map_err(|e| Error::Corrupt(format!("event {id}: {e}")))?;
                event.id = id.to_string();
                Ok(event)
            })
            .collect()
    }
}

#[async_trait]
impl<C> Membership for RedisEngine<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn register(&self, instance: &str, now: Millis, ttl_ms: u64) -> Result<Vec<String>> {
        Ok(self
            .scripts
            .register
            .key(INSTANCES)
            .arg(instance)
            .arg(now)
            .arg(ttl_ms)
            .invoke_async(&mut self.conn())
            .await?)
    }

    async fn own(
        &self,
        topic: &TopicConfig,
        slot: u32,
        instance: &str,
        now: Millis,
        ttl_ms: u64,
    ) -> Result<Ownership> {
        let reply: Vec<Value> = self
            .scripts
            .own
            .key(SlotKeys::new(&topic.name, slot).all())
            .arg(instance)
            .arg(now)
            .arg(ttl_ms)
            .invoke_async(&mut self.conn())
            .await?;
        let reply = Reply::new("own", &reply);
        Ok(if reply.int(0)? == 1 {
            Ownership::Owned {
                fence: crate::num::unsigned(reply.int(1)?),
            }
        } else {
            Ownership::Held {
                by: reply.text(1)?,
                until: reply.int(2)?,
            }
        })
    }

    async fn disown(&self, topic: &TopicConfig, slot: u32, instance: &str) -> Result<bool> {
        let n: i64 = self
            .scripts
            .disown
            .key(SlotKeys::new(&topic.name, slot).all())
            .arg(instance)
            .invoke_async(&mut self.conn())
            .await?;
        Ok(n == 1)
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
    serde_json::from_str(json).map_err(|e| Error::Corrupt(format!("topic settings {json:?}: {e}")))
}

/// A script's word for a job's state, `''` when there is no job.
fn parse_state(s: &str) -> Result<Option<JobState>> {
    (!s.is_empty()).then(|| s.parse()).transpose()
}
