//! The Redis engine: per slot, sorted sets of scheduled, running and dead jobs and a hash of
//! job records (see `keys.rs` and `record.rs`); every change of a job is one script of `lua/`.
//! Generic over the connection, so one code path serves a single node and a Redis Cluster.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::{AsyncCommands, Value};

use tokio::sync::mpsc;

use super::keys::{SlotKeys, TOPICS, wake_channel};
use super::record::Record;
use super::scripts::Scripts;
use super::topics::{StoreOptions, TopicCache, check_update};
use super::{MAX_PAGE, Store, WakeNotice, check_slot};
use crate::error::{Error, Result};
use crate::events::{Event, EventPage};
use crate::job::{
    CreateSpec, DeadCursor, DeadPage, Finished, Job, JobRef, JobState, Leased, NewJob, Pumped,
    Rearmed, Reset, ResetReport, RunOutcome, ScheduleMode, ScheduleOutcome, Scheduled, Settlement,
    SlotStats, TopicStats,
};
use crate::routing::slot_of;
use crate::time::Millis;
use crate::topic::{TopicConfig, validate_topic_name};
use crate::validate;

/// How long a command may wait for Redis before the call fails (and HTTP answers 503).
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The Redis engine over a connection `C` (a `ConnectionManager` or a cluster connection).
pub struct RedisStore<C> {
    conn: C,
    /// For the pub/sub connection that hears wake notices (single node only).
    client: Option<redis::Client>,
    scripts: Arc<Scripts>,
    topics: TopicCache,
    options: StoreOptions,
}

impl RedisStore<ConnectionManager> {
    /// Connects to one Redis node. The connection is made lazily and remade after a loss, so
    /// a store created while Redis is down starts serving once Redis is back.
    pub async fn connect(url: &str, options: StoreOptions) -> Result<Self> {
        let client = redis::Client::open(url)
            .map_err(|e| Error::invalid("redis.url", format!("{url:?}: {e}")))?;
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), config)?;
        let mut store = RedisStore::with_connection(conn, options);
        store.client = Some(client);
        Ok(store)
    }
}

impl RedisStore<ClusterConnection> {
    /// Connects to a Redis Cluster through any of its nodes.
    pub async fn connect_cluster(nodes: &[String], options: StoreOptions) -> Result<Self> {
        let client = redis::cluster::ClusterClientBuilder::new(nodes.to_vec())
            .response_timeout(RESPONSE_TIMEOUT)
            .connection_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| Error::invalid("redis.cluster_nodes", e.to_string()))?;
        let conn = client.get_async_connection().await?;
        Ok(RedisStore::with_connection(conn, options))
    }
}

impl<C> RedisStore<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    pub fn with_connection(conn: C, options: StoreOptions) -> Self {
        RedisStore {
            conn,
            client: None,
            scripts: Arc::new(Scripts::new()),
            topics: TopicCache::default(),
            options,
        }
    }

    /// A clone of the connection (multiplexed: clones share one socket).
    pub fn connection(&self) -> C {
        self.conn.clone()
    }

    fn locate(&self, topic: &TopicConfig, job: &JobRef) -> Result<(u32, SlotKeys)> {
        validate::job_id(&job.id)?;
        validate::shard_key(job.shard_key.as_deref())?;
        let slot = slot_of(job.route_key(), topic.slots);
        Ok((slot, SlotKeys::new(&topic.name, slot)))
    }

    async fn reset_slot(
        &self,
        topic: &TopicConfig,
        slot: u32,
        batch: &[&Reset],
        create: Option<&str>,
        now: Millis,
    ) -> Result<(u64, u64, Millis, Vec<String>, Vec<Rearmed>)> {
        let keys = SlotKeys::new(&topic.name, slot);
        let mut call = self.scripts.reset_many.prepare_invoke();
        call.key(keys.all()).arg(now).arg(create.unwrap_or("-"));
        for r in batch {
            call.arg(&r.job.id).arg(r.fire_at);
        }
        let items: Vec<Value> = call.invoke_async(&mut self.conn.clone()).await?;
        let reply = Reply::new("reset_many", &items);
        let (reset, created, head) = (reply.int(0)?, reply.int(1)?, reply.int(2)?);
        let n_missing = usize::try_from(reply.int(3)?).map_err(|e| reply.corrupt(e))?;
        let missing = reply
            .slice(4, 4 + n_missing)?
            .iter()
            .map(text)
            .collect::<Result<_>>()?;
        let rearmed = reply
            .records(4 + n_missing, 3)?
            .map(|r| rearmed(topic, text(&r[0])?, &r[1], &r[2]))
            .collect::<Result<_>>()?;
        Ok((reset as u64, created as u64, head, missing, rearmed))
    }

    /// Each slot's share of the topic's event stream cap.
    fn slot_stream_cap(&self, topic: &TopicConfig) -> usize {
        self.options
            .events_max_len
            .div_ceil(topic.slots as usize)
            .max(1)
    }

    async fn slot_stats(&self, topic: &str, slot: u32) -> Result<SlotStats> {
        let keys = SlotKeys::new(topic, slot);
        let (scheduled, running, dead, head): (u64, u64, u64, Vec<(String, f64)>) = redis::pipe()
            .zcard(&keys.due)
            .zcard(&keys.run)
            .zcard(&keys.dead)
            .zrange_withscores(&keys.due, 0, 0)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(SlotStats {
            slot,
            scheduled,
            running,
            dead,
            next_fire_at: head.first().map(|(_, s)| *s as Millis),
        })
    }
}

#[async_trait]
impl<C> Store for RedisStore<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn engine(&self) -> &'static str {
        "redis"
    }

    async fn ping(&self) -> Result<()> {
        let _: String = redis::cmd("PING")
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(())
    }

    async fn put_topic(&self, config: TopicConfig) -> Result<Arc<TopicConfig>> {
        config.validate()?;
        let mut conn = self.conn.clone();
        let old: Option<String> = conn.hget(TOPICS, &config.name).await?;
        if let Some(old) = old {
            check_update(&parse_topic(&old)?, &config)?;
        }
        let json = serde_json::to_string(&config).expect("topic config serialises");
        let _: () = conn.hset(TOPICS, &config.name, json).await?;
        Ok(self.topics.insert(config))
    }

    async fn topic(&self, name: &str) -> Result<Arc<TopicConfig>> {
        if let Some(t) = self.topics.get(name) {
            return Ok(t);
        }
        let mut conn = self.conn.clone();
        let stored: Option<String> = conn.hget(TOPICS, name).await?;
        let config = match stored {
            Some(json) => parse_topic(&json)?,
            None => {
                let config = self.options.defaults_for(name)?;
                let json = serde_json::to_string(&config).expect("topic config serialises");
                // Another instance may create it at the same moment: the first one wins and
                // both read back the same settings.
                let _: bool = conn.hset_nx(TOPICS, name, json).await?;
                let json: String = conn.hget(TOPICS, name).await?;
                parse_topic(&json)?
            }
        };
        Ok(self.topics.insert(config))
    }

    fn defaults_for(&self, name: &str) -> Result<TopicConfig> {
        self.options.defaults_for(name)
    }

    async fn find_topic(&self, name: &str) -> Result<Option<Arc<TopicConfig>>> {
        validate_topic_name(name)?;
        if let Some(t) = self.topics.get(name) {
            return Ok(Some(t));
        }
        let stored: Option<String> = self.conn.clone().hget(TOPICS, name).await?;
        stored
            .map(|json| parse_topic(&json).map(|c| self.topics.insert(c)))
            .transpose()
    }

    async fn topics(&self) -> Result<Vec<Arc<TopicConfig>>> {
        let all: BTreeMap<String, String> = self.conn.clone().hgetall(TOPICS).await?;
        all.values()
            .map(|json| parse_topic(json).map(|c| self.topics.insert(c)))
            .collect()
    }

    async fn schedule(
        &self,
        topic: &str,
        job: NewJob,
        mode: ScheduleMode,
        now: Millis,
    ) -> Result<Scheduled> {
        let t = match mode {
            ScheduleMode::ResetOnly => self.existing_topic(topic).await?,
            _ => self.topic(topic).await?,
        };
        validate::new_job(&t, &job)?;
        let (slot, keys) = self.locate(
            &t,
            &JobRef::new(job.id.clone()).with_shard_key(job.shard_key.clone()),
        )?;
        let spec = Record::spec(
            &t,
            job.job_type.as_deref(),
            &job.payload,
            job.max_attempts,
            job.max_fire_at,
        );
        let mode_arg = match mode {
            ScheduleMode::Upsert => "upsert",
            ScheduleMode::CreateOnly => "create",
            ScheduleMode::ResetOnly => "reset",
        };
        let reply: Vec<Value> = self
            .scripts
            .schedule
            .key(keys.all())
            .arg(&job.id)
            .arg(mode_arg)
            .arg(job.fire_at)
            .arg(now)
            .arg(spec.to_arg())
            .invoke_async(&mut self.conn.clone())
            .await?;
        let reply = Reply::new("schedule", &reply);
        let outcome = match reply.text(0)?.as_str() {
            "created" => ScheduleOutcome::Created,
            "replaced" => ScheduleOutcome::Replaced,
            "exists" => ScheduleOutcome::Exists,
            "reset" => ScheduleOutcome::Reset,
            "missing" => ScheduleOutcome::Missing,
            other => return Err(Error::Corrupt(format!("schedule.lua answered {other:?}"))),
        };
        let fire_at = reply.int(2)?;
        let rearmed = match (reply.items.get(4), reply.items.get(5)) {
            (Some(fires), Some(job_type)) if int(fires)? > 0 => {
                Some(rearmed(&t, job.id.clone(), fires, job_type)?)
            }
            _ => None,
        };
        Ok(Scheduled {
            outcome,
            slot,
            state: parse_state(&reply.text(1)?)?,
            fire_at: (fire_at >= 0).then_some(fire_at),
            is_head: reply.int(3)? == 1,
            rearmed,
        })
    }

    async fn reset_many(
        &self,
        topic: &str,
        resets: &[Reset],
        create: Option<&CreateSpec>,
        now: Millis,
    ) -> Result<ResetReport> {
        let t = match create {
            Some(_) => self.topic(topic).await?,
            None => self.existing_topic(topic).await?,
        };
        validate::reset_batch(&t, resets, create)?;
        let create_arg = create.map(|spec| Record::for_create(&t, spec).to_arg());
        let mut by_slot: BTreeMap<u32, Vec<&Reset>> = BTreeMap::new();
        for r in resets {
            by_slot
                .entry(slot_of(r.job.route_key(), t.slots))
                .or_default()
                .push(r);
        }
        // One script call per slot, all in flight at once on the multiplexed connection.
        let calls = by_slot.iter().map(|(slot, batch)| {
            let create_arg = create_arg.as_deref();
            let t = &t;
            async move {
                let r = self.reset_slot(t, *slot, batch, create_arg, now).await;
                r.map(|r| (*slot, r))
            }
        });
        let mut report = ResetReport::default();
        for result in futures_util::future::join_all(calls).await {
            let (slot, (reset, created, head, missing, rearmed)) = result?;
            report.reset += reset;
            report.created += created;
            report.missing.extend(missing);
            report.rearmed.extend(rearmed);
            if head >= 0 {
                report.heads.push((slot, head));
            }
        }
        Ok(report)
    }

    async fn cancel(&self, topic: &str, job: &JobRef) -> Result<Option<JobState>> {
        let t = self.existing_topic(topic).await?;
        let (_, keys) = self.locate(&t, job)?;
        let state: String = self
            .scripts
            .cancel
            .key(keys.all())
            .arg(&job.id)
            .invoke_async(&mut self.conn.clone())
            .await?;
        parse_state(&state)
    }

    async fn get(&self, topic: &str, job: &JobRef) -> Result<Option<Job>> {
        let t = self.existing_topic(topic).await?;
        let (_, keys) = self.locate(&t, job)?;
        let reply: Vec<Value> = self
            .scripts
            .get
            .key(keys.all())
            .arg(&job.id)
            .invoke_async(&mut self.conn.clone())
            .await?;
        let reply = Reply::new("get", &reply);
        let Some(state) = parse_state(&reply.text(0)?)? else {
            return Ok(None);
        };
        let record = Record::parse(&reply.text(2)?)?;
        record
            .into_job(&t, job.id.clone(), state, reply.int(1)?)
            .map(Some)
    }

    async fn pump(&self, topic: &str, slot: u32, now: Millis, limit: usize) -> Result<Pumped> {
        let t = self.existing_topic(topic).await?;
        check_slot(&t, slot)?;
        let keys = SlotKeys::new(&t.name, slot);
        let reply: Vec<Value> = self
            .scripts
            .pump
            .key(keys.all())
            .arg(now)
            .arg(limit.max(1))
            .arg(t.visibility_timeout_ms)
            .arg(t.max_attempts)
            .invoke_async(&mut self.conn.clone())
            .await?;
        let reply = Reply::new("pump", &reply);
        let next_at = reply.int(0)?;
        let lease_until = t.lease_deadline(now);
        let entries = reply.records(2, 4)?;
        let mut jobs = Vec::with_capacity(entries.len());
        for entry in entries {
            let id = text(&entry[0])?;
            let token = int(&entry[2])? as u64;
            let record = Record::parse(&text(&entry[3])?)?;
            let job = record.into_job(&t, id, JobState::Running, lease_until)?;
            jobs.push(Leased {
                job,
                slot,
                token,
                lease_until,
            });
        }
        Ok(Pumped {
            jobs,
            expired: reply.int(1)? as u32,
            next_at: (next_at >= 0).then_some(next_at),
        })
    }

    async fn settle(
        &self,
        topic: &str,
        slot: u32,
        batch: &[Settlement],
        now: Millis,
    ) -> Result<Vec<Finished>> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let t = self.existing_topic(topic).await?;
        check_slot(&t, slot)?;
        let keys = SlotKeys::new(&t.name, slot);
        let mut call = self.scripts.settle.prepare_invoke();
        call.key(keys.all())
            .arg(now)
            .arg(t.max_attempts)
            .arg(self.slot_stream_cap(&t));
        for s in batch {
            let (kind, at, error) = match &s.outcome {
                RunOutcome::Ack => ("ack", now, ""),
                RunOutcome::Retry { error, at } => ("retry", *at, error.as_str()),
                RunOutcome::Repeat { at } => ("repeat", *at, ""),
                RunOutcome::Bury { error } => ("bury", now, error.as_str()),
                RunOutcome::Release => ("release", now, ""),
            };
            call.arg(&s.run.job.id)
                .arg(s.run.token)
                .arg(kind)
                .arg(at)
                .arg(error)
                .arg(Event::head_json(s))
                .arg(s.emitted.len());
            for (name, data) in &s.emitted {
                let event = Event::of_run(s, name, data.clone());
                call.arg(serde_json::to_string(&event).expect("an event serialises"));
            }
        }
        let reply: Vec<String> = call.invoke_async(&mut self.conn.clone()).await?;
        if reply.len() != batch.len() {
            return Err(Error::Corrupt(format!(
                "settle.lua answered {} results for {} runs",
                reply.len(),
                batch.len()
            )));
        }
        reply
            .iter()
            .map(|r| {
                Ok(match r.as_str() {
                    "done" => Finished::Done,
                    "retrying" => Finished::Retrying,
                    "repeating" => Finished::Repeating,
                    "dead" => Finished::Dead,
                    "released" => Finished::Released,
                    "rescheduled" => Finished::Rescheduled,
                    "stale" => Finished::Stale,
                    other => {
                        return Err(Error::Corrupt(format!("settle.lua answered {other:?}")));
                    }
                })
            })
            .collect()
    }

    async fn extend(&self, topic: &str, run: &Leased, until: Millis) -> Result<bool> {
        let t = self.existing_topic(topic).await?;
        let keys = SlotKeys::new(&t.name, run.slot);
        let n: i64 = self
            .scripts
            .touch
            .key(keys.all())
            .arg(&run.job.id)
            .arg(run.token)
            .arg(until)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(n == 1)
    }

    async fn dead_list(&self, topic: &str, after: Option<&str>, limit: usize) -> Result<DeadPage> {
        let t = self.existing_topic(topic).await?;
        let limit = limit.clamp(1, MAX_PAGE);
        let cursor = match after {
            Some(s) => Some(
                DeadCursor::decode(s)
                    .ok_or_else(|| Error::invalid("after", format!("{s:?} is not a cursor")))?,
            ),
            None => None,
        };
        let (at_arg, id_arg) = match &cursor {
            Some(c) => (c.dead_at.to_string(), c.id.clone()),
            None => ("-inf".to_string(), String::new()),
        };
        // Each slot's oldest `limit` after the cursor, then the oldest `limit` of them all.
        let calls = (0..t.slots).map(|slot| {
            let keys = SlotKeys::new(&t.name, slot);
            let mut conn = self.conn.clone();
            let (at_arg, id_arg) = (&at_arg, &id_arg);
            async move {
                let reply: Vec<Value> = self
                    .scripts
                    .dead_page
                    .key(keys.all())
                    .arg(at_arg)
                    .arg(id_arg)
                    .arg(limit)
                    .invoke_async(&mut conn)
                    .await?;
                Ok::<_, Error>(reply)
            }
        });
        let mut entries: Vec<(DeadCursor, Record)> = Vec::new();
        for reply in futures_util::future::join_all(calls).await {
            let reply = reply?;
            for e in Reply::new("dead_page", &reply).records(0, 3)? {
                let cursor = DeadCursor {
                    dead_at: int(&e[1])?,
                    id: text(&e[0])?,
                };
                entries.push((cursor, Record::parse(&text(&e[2])?)?));
            }
        }
        super::record::dead_page(&t, entries, limit)
    }

    async fn dead_requeue(&self, topic: &str, job: &JobRef, now: Millis) -> Result<bool> {
        let t = self.existing_topic(topic).await?;
        let (_, keys) = self.locate(&t, job)?;
        let n: i64 = self
            .scripts
            .requeue
            .key(keys.all())
            .arg(&job.id)
            .arg(now)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(n == 1)
    }

    async fn dead_delete(&self, topic: &str, job: &JobRef) -> Result<bool> {
        let t = self.existing_topic(topic).await?;
        let (_, keys) = self.locate(&t, job)?;
        let n: i64 = self
            .scripts
            .dead_delete
            .key(keys.all())
            .arg(&job.id)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(n == 1)
    }

    async fn stats(&self, topic: &str) -> Result<TopicStats> {
        let t = self.existing_topic(topic).await?;
        let calls = (0..t.slots).map(|slot| self.slot_stats(&t.name, slot));
        let per_slot = futures_util::future::join_all(calls)
            .await
            .into_iter()
            .collect::<Result<Vec<_>>>()?;
        Ok(TopicStats::from_slots(&t.name, per_slot))
    }

    async fn append_events(&self, topic: &str, events: &[Event]) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        let t = self.existing_topic(topic).await?;
        let cap = self.slot_stream_cap(&t);
        let mut pipe = redis::pipe();
        for e in events {
            let key = SlotKeys::new(&t.name, slot_of(&e.job_id, t.slots)).events;
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
        let _: () = pipe.query_async(&mut self.conn.clone()).await?;
        Ok(())
    }

    async fn read_events(
        &self,
        topic: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<EventPage> {
        let cursor = match after {
            Some(id) => Some(EventId::parse(id).ok_or_else(|| {
                Error::invalid("after", format!("{id:?} is not an event id (ms-seq-slot)"))
            })?),
            None => None,
        };
        let t = self.existing_topic(topic).await?;
        let limit = limit.clamp(1, MAX_PAGE);
        // Each slot's oldest `limit` after the cursor; then, of those older than every
        // slot's clock (nothing can still be appended before that), the oldest `limit`.
        let calls = (0..t.slots).map(|slot| {
            let start = match &cursor {
                None => "-".to_string(),
                Some(c) if slot > c.slot => format!("{}-{}", c.ms, c.seq),
                Some(c) => format!("({}-{}", c.ms, c.seq),
            };
            let keys = SlotKeys::new(&t.name, slot);
            let mut conn = self.conn.clone();
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
            let Some((now, rest)) = reply.split_first() else {
                return Err(Error::Corrupt("events_page.lua answered nothing".into()));
            };
            horizon = horizon.min(int(now)?);
            for pair in rest.chunks(2) {
                let [id, json] = pair else {
                    return Err(Error::Corrupt(
                        "events_page.lua answered an odd list".into(),
                    ));
                };
                let id = text(id)?;
                let id = EventId::of_stream(&id, slot)
                    .ok_or_else(|| Error::Corrupt(format!("stream id {id:?}")))?;
                entries.push((id, text(json)?));
            }
        }
        entries.retain(|(id, _)| (id.ms as i64) < horizon);
        entries.sort_by_key(|(id, _)| *id);
        entries.truncate(limit);
        let items = entries
            .into_iter()
            .map(|(id, json)| {
                let mut event: Event = serde_json::from_str(&json)
                    .map_err(|e| Error::Corrupt(format!("event {id}: {e}")))?;
                event.id = id.to_string();
                Ok(event)
            })
            .collect::<Result<_>>()?;
        Ok(EventPage::new(items))
    }

    async fn publish_wake(&self, notice: &WakeNotice) -> Result<()> {
        let _: i64 = self
            .conn
            .clone()
            .publish(wake_channel(&notice.topic), notice.encode())
            .await?;
        Ok(())
    }

    async fn listen_wakes(&self, tx: mpsc::UnboundedSender<WakeNotice>) -> Result<()> {
        let Some(client) = self.client.clone() else {
            return Ok(());
        };
        // Reconnects after a loss, until the receiver is gone.
        while !tx.is_closed() {
            match listen_once(&client, &tx).await {
                Ok(()) => return Ok(()),
                Err(e) => {
                    tracing::warn!(error = %e, "wake notices: connection lost, reconnecting");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
        Ok(())
    }
}

async fn listen_once(client: &redis::Client, tx: &mpsc::UnboundedSender<WakeNotice>) -> Result<()> {
    use futures_util::StreamExt;
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.psubscribe(wake_channel("*")).await?;
    let prefix = wake_channel("");
    let mut messages = pubsub.on_message();
    while let Some(msg) = messages.next().await {
        let channel = msg.get_channel_name().to_string();
        let payload: String = msg.get_payload().unwrap_or_default();
        let Some(topic) = channel.strip_prefix(&prefix) else {
            continue;
        };
        if let Some(notice) = WakeNotice::decode(topic, &payload)
            && tx.send(notice).is_err()
        {
            return Ok(());
        }
    }
    Err(Error::Unavailable("the pub/sub connection closed".into()))
}

fn rearmed(topic: &TopicConfig, id: String, fires: &Value, job_type: &Value) -> Result<Rearmed> {
    let job_type = text(job_type)?;
    Ok(Rearmed {
        id,
        job_type: if job_type.is_empty() {
            topic.default_type.clone()
        } else {
            job_type
        },
        fires: int(fires)? as u32,
    })
}

/// An event's position in a topic: its slot stream's id and the slot. Pages are ordered by
/// (ms, seq, slot), and the id's text is `ms-seq-slot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct EventId {
    ms: u64,
    seq: u64,
    slot: u32,
}

impl EventId {
    fn of_stream(id: &str, slot: u32) -> Option<Self> {
        let (ms, seq) = id.split_once('-')?;
        Some(EventId {
            ms: ms.parse().ok()?,
            seq: seq.parse().ok()?,
            slot,
        })
    }

    fn parse(text: &str) -> Option<Self> {
        let mut parts = text.splitn(3, '-');
        fn number<T: std::str::FromStr>(part: Option<&str>) -> Option<T> {
            part.filter(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))?
                .parse()
                .ok()
        }
        let (ms, seq) = (number(parts.next())?, number(parts.next())?);
        // `ms-seq` (no slot) is a position before every slot's entries of that instant.
        let slot = match parts.next() {
            None => 0,
            some => number(some)?,
        };
        Some(EventId { ms, seq, slot })
    }
}

impl std::fmt::Display for EventId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}-{}", self.ms, self.seq, self.slot)
    }
}

fn parse_topic(json: &str) -> Result<TopicConfig> {
    serde_json::from_str(json).map_err(|e| Error::Corrupt(format!("topic settings {json:?}: {e}")))
}

fn parse_state(s: &str) -> Result<Option<JobState>> {
    Ok(match s {
        "" => None,
        "scheduled" => Some(JobState::Scheduled),
        "running" => Some(JobState::Running),
        "dead" => Some(JobState::Dead),
        other => return Err(Error::Corrupt(format!("unknown job state {other:?}"))),
    })
}

/// A script's reply, read with checks: a short or odd reply is an error that names the
/// script, never an index panic.
struct Reply<'a> {
    script: &'static str,
    items: &'a [Value],
}

impl<'a> Reply<'a> {
    fn new(script: &'static str, items: &'a [Value]) -> Self {
        Reply { script, items }
    }

    fn corrupt(&self, what: impl std::fmt::Display) -> Error {
        Error::Corrupt(format!(
            "{}.lua answered {} values: {what}",
            self.script,
            self.items.len()
        ))
    }

    fn get(&self, i: usize) -> Result<&'a Value> {
        self.items
            .get(i)
            .ok_or_else(|| self.corrupt(format!("value {} is missing", i + 1)))
    }

    fn int(&self, i: usize) -> Result<i64> {
        int(self.get(i)?).map_err(|e| self.corrupt(e))
    }

    fn text(&self, i: usize) -> Result<String> {
        text(self.get(i)?).map_err(|e| self.corrupt(e))
    }

    fn slice(&self, from: usize, to: usize) -> Result<&'a [Value]> {
        self.items
            .get(from..to)
            .ok_or_else(|| self.corrupt(format!("values {}..{to} are missing", from + 1)))
    }

    /// The values from `from` on, as records of `width` values each.
    fn records(&self, from: usize, width: usize) -> Result<std::slice::ChunksExact<'a, Value>> {
        let rest = self.slice(from, self.items.len().max(from))?;
        if rest.len() % width != 0 {
            return Err(self.corrupt(format!(
                "records of {width} values do not divide {}",
                rest.len()
            )));
        }
        Ok(rest.chunks_exact(width))
    }
}

fn int(v: &Value) -> Result<i64> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .map(|f| f as i64)
            .ok_or_else(|| Error::Corrupt(format!("not a number: {v:?}"))),
        other => Err(Error::Corrupt(format!("not a number: {other:?}"))),
    }
}

fn text(v: &Value) -> Result<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone())
            .map_err(|_| Error::Corrupt("a reply is not UTF-8".to_string())),
        Value::SimpleString(s) => Ok(s.clone()),
        Value::Int(i) => Ok(i.to_string()),
        Value::Nil => Ok(String::new()),
        other => Err(Error::Corrupt(format!("not text: {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_or_odd_reply_is_an_error_naming_the_script() {
        let items = vec![
            Value::Int(-1),
            Value::Int(0),
            Value::BulkString(b"a".to_vec()),
        ];
        let reply = Reply::new("pump", &items);
        let err = reply.records(2, 4).unwrap_err().to_string();
        assert!(err.contains("pump.lua"), "{err}");
        let err = reply.int(7).unwrap_err().to_string();
        assert!(err.contains("pump.lua") && err.contains("value 8"), "{err}");
        let err = reply.slice(2, 9).unwrap_err().to_string();
        assert!(err.contains("pump.lua"), "{err}");
        assert_eq!(reply.int(0).unwrap(), -1);
        assert_eq!(reply.records(3, 4).unwrap().count(), 0);
    }
}
