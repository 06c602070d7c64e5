//! [`Store`]: the one store type, over an engine (`Arc<dyn Engine>`, the Redis scripts or the
//! memory slots). It checks arguments, finds or creates topics, routes jobs to slots, groups
//! batches by slot, decodes cursors, clamps pages and builds the answers; the engine only
//! runs one slot's operation. Its constructors are in the engines' modules
//! ([`Store::memory`], [`Store::redis`], ...).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::doubling;
use super::engine::{ClaimSettlement, DeadEntry, Engine, Handed, Refired, WakeBus};
use super::event_id::EventId;
use super::memory::MemoryEngine;
use super::record::Record;
use super::topic_policy::StoreOptions;
use super::{MAX_PAGE, Ownership};
use crate::error::{Error, Result};
use crate::events::{Event, EventPage};
use crate::model::{
    ClaimOutcome, CreateSpec, DeadCursor, DeadPage, Finished, Job, JobRef, JobState, Leased,
    NewJob, Outcome, Pumped, Rearmed, Reset, ResetReport, RunOutcome, ScheduleMode,
    ScheduleOutcome, Scheduled, Settlement, SlotHead, TopicStats,
};
use crate::routing::slot_of;
use crate::time::{Millis, SharedClock, SteadyClock};
use crate::topic::TopicConfig;
use crate::validate;

/// A store of jobs: topics, their slots' jobs, dead letters and events, on the engine it was
/// made with (`Store::memory`, `Store::memory_journaled`, `Store::redis`,
/// `Store::redis_cluster`, `Store::open_redis`). Every method that changes a job is atomic
/// (one Lua script in Redis, one critical section in memory) and takes `now` as an argument,
/// so callers and tests choose the time. `Arc<Store>` ([`super::SharedStore`]) is what the
/// runtime and the HTTP layer hold.
pub struct Store {
    pub(crate) engine: Arc<dyn Engine>,
    /// The same engine when it is the memory engine, for what only it has (its journal).
    pub(crate) memory: Option<Arc<MemoryEngine>>,
    options: StoreOptions,
    /// Per draining topic, the slot where the last sweep found an old copy: the next sweep
    /// starts there, so a topic with old copies left costs a sweep little.
    sweep_from: std::sync::Mutex<HashMap<String, u32>>,
    /// The clock that decides for this store (see `crate::time`).
    clock: SharedClock,
}

impl Store {
    pub(crate) fn over(
        engine: Arc<dyn Engine>,
        memory: Option<Arc<MemoryEngine>>,
        options: StoreOptions,
    ) -> Self {
        let clock = engine
            .clock()
            .unwrap_or_else(|| Arc::new(SteadyClock::default()));
        Store {
            engine,
            memory,
            options,
            sweep_from: Default::default(),
            clock,
        }
    }

    /// A job's home slot (checking its id and shard key), then the old slots that may hold
    /// a copy of it while the topic drains from a doubling.
    fn places(topic: &TopicConfig, job: &JobRef) -> Result<(u32, Vec<u32>)> {
        let home = Self::route(topic, job)?;
        Ok((home, topic.old_slots(job.route_key())))
    }

    /// The slot of a job, after checking its id and shard key.
    fn route(topic: &TopicConfig, job: &JobRef) -> Result<u32> {
        validate::job_id(&job.id)?;
        validate::shard_key(job.shard_key.as_deref())?;
        Ok(slot_of(job.route_key(), topic.slots))
    }

    /// Refuses a slot number the topic does not have.
    fn check_slot(topic: &TopicConfig, slot: u32) -> Result<()> {
        if slot >= topic.slots {
            return Err(Error::invalid(
                "slot",
                format!("{slot} is not below the topic's {} slots", topic.slots),
            ));
        }
        Ok(())
    }
}

/// How often a call is tried again under settings read anew (see `Store::newer`).
const LAYOUT_TRIES: usize = 3;

impl Store {
    /// The topic's settings as stored now, when they route differently from `t` (a doubling
    /// since `t` was read, by this instance or another); `None` when they do not.
    async fn newer(&self, t: &TopicConfig) -> Result<Option<Arc<TopicConfig>>> {
        Ok(self
            .engine
            .reload_topic(&t.name)
            .await?
            .filter(|n| n.slots != t.slots || n.draining_from != t.draining_from))
    }

    /// `schedule` under the settings `t`, once.
    async fn schedule_once(
        &self,
        t: &Arc<TopicConfig>,
        job: &NewJob,
        mode: ScheduleMode,
        now: Millis,
    ) -> Result<Scheduled> {
        let t = t.clone();
        validate::new_job(t.max_payload_bytes, job)?;
        let (slot, old) = Self::places(
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
        if mode == ScheduleMode::CreateOnly
            && let Some((at, stored)) = doubling::find_old(&*self.engine, &t, &old, &job.id).await?
        {
            let state = stored.state;
            return Ok(Scheduled {
                outcome: ScheduleOutcome::Exists,
                slot: at,
                state: Some(state),
                fire_at: None,
                is_head: false,
                rearmed: None,
                job: Some(
                    stored
                        .record
                        .into_job(&t, job.id.clone(), state, stored.score)?,
                ),
            });
        }
        let mut r = self
            .engine
            .schedule(&t, slot, &job.id, mode, job.fire_at, now, spec)
            .await?;
        let mut slot = slot;
        if !old.is_empty() {
            match r.outcome {
                ScheduleOutcome::Missing => {
                    if let Some((at, moved)) = doubling::reset_old(
                        &*self.engine,
                        &t,
                        slot,
                        &old,
                        &job.id,
                        job.fire_at,
                        now,
                    )
                    .await?
                    {
                        (slot, r) = (at, moved);
                    }
                }
                ScheduleOutcome::Created | ScheduleOutcome::Replaced => {
                    let dropped =
                        doubling::drop_old_copies(&*self.engine, &t, &old, &job.id).await?;
                    if dropped.is_some() {
                        r.outcome = ScheduleOutcome::Replaced;
                    }
                }
                ScheduleOutcome::Exists | ScheduleOutcome::Reset => {}
            }
        }
        let stored = r
            .stored
            .map(|s| s.record.into_job(&t, job.id.clone(), s.state, s.score))
            .transpose()?;
        Ok(Scheduled {
            outcome: r.outcome,
            slot,
            state: r.state,
            fire_at: r.fire_at,
            is_head: r.is_head,
            rearmed: r.rearmed.filter(|r| r.fires > 0).map(|r| rearmed(&t, r)),
            job: stored,
        })
    }

    /// `reset_many` under the settings `t`, once.
    async fn reset_many_once(
        &self,
        t: &Arc<TopicConfig>,
        resets: &[Reset],
        create: Option<&CreateSpec>,
        now: Millis,
    ) -> Result<ResetReport> {
        let t = t.clone();
        validate::reset_batch(t.max_payload_bytes, resets, create)?;
        let spec = create.map(|c| Record::for_create(&t, c));
        // While the topic drains, a job its home slot does not hold may be an old copy:
        // nothing is created until the old slots were looked at.
        let draining = t.draining_from.is_some();
        let first_create = if draining { None } else { spec.as_ref() };
        let mut by_slot: BTreeMap<u32, Vec<(&str, Millis)>> = BTreeMap::new();
        for r in resets {
            by_slot
                .entry(slot_of(r.job.route_key(), t.slots))
                .or_default()
                .push((r.job.id.as_str(), r.fire_at));
        }
        // One engine call per slot, all in flight at once (one connection multiplexes them).
        let calls = by_slot.iter().map(|(slot, items)| {
            let (t, spec) = (&t, first_create);
            async move {
                let r = self.engine.reset_many(t, *slot, items, spec, now).await?;
                Ok::<_, Error>((*slot, r))
            }
        });
        let mut report = ResetReport::default();
        let mut full = None;
        let results = futures_util::future::join_all(calls).await;
        let slots = results.len();
        for (result, items) in results.into_iter().zip(by_slot.values()) {
            // A slot refused for a full store changed nothing: its ids are reported refused,
            // and what the other slots applied stands (one script per slot is atomic, a
            // batch over several slots is not).
            let (slot, r) = match result {
                Err(e @ Error::StoreFull(_)) => {
                    report
                        .refused
                        .extend(items.iter().map(|(id, _)| id.to_string()));
                    full = Some(e);
                    continue;
                }
                other => other?,
            };
            report.reset += r.reset;
            report.created += r.created;
            report.missing.extend(r.missing);
            report
                .rearmed
                .extend(r.rearmed.into_iter().map(|r| rearmed(&t, r)));
            if let Some(at) = by_slot[&slot].iter().map(|(_, at)| *at).min() {
                report.heads.push(SlotHead { slot, at });
            }
        }
        if let Some(e) = full
            && report.heads.is_empty()
            && slots > 0
        {
            return Err(e);
        }
        if draining && !report.missing.is_empty() {
            let moved =
                doubling::reset_missing(&*self.engine, &t, resets, spec.as_ref(), &mut report, now)
                    .await?;
            report
                .rearmed
                .extend(moved.into_iter().map(|r| rearmed(&t, r)));
        }
        Ok(report)
    }

    /// `cancel` under the settings `t`.
    async fn cancel_in(&self, t: &TopicConfig, job: &JobRef) -> Result<Option<JobState>> {
        let (slot, old) = Self::places(t, job)?;
        let state = self.engine.cancel(t, slot, &job.id).await?;
        let old_state = doubling::drop_old_copies(&*self.engine, t, &old, &job.id).await?;
        Ok(state.or(old_state))
    }

    /// `get` under the settings `t`.
    async fn get_in(&self, t: &TopicConfig, job: &JobRef) -> Result<Option<Job>> {
        let (slot, old) = Self::places(t, job)?;
        let mut found = self
            .engine
            .get(t, slot, &[job.id.as_str()])
            .await?
            .pop()
            .flatten();
        if found.is_none() {
            found = doubling::find_old(&*self.engine, t, &old, &job.id)
                .await?
                .map(|(_, s)| s);
        }
        found
            .map(|s| s.record.into_job(t, job.id.clone(), s.state, s.score))
            .transpose()
    }
}

/// The page of dead letters after a cursor: each slot's oldest `limit` entries merged, and the
/// oldest `limit` of them all kept (both engines page this way).
pub(super) fn dead_page(
    topic: &TopicConfig,
    mut entries: Vec<DeadEntry>,
    limit: usize,
) -> Result<DeadPage> {
    entries.sort_by(|a, b| a.cursor.cmp(&b.cursor));
    let more = entries.len() > limit;
    entries.truncate(limit);
    let next = more
        .then(|| entries.last().map(|e| e.cursor.encode()))
        .flatten();
    let items = entries
        .into_iter()
        .map(|e| {
            let c = e.cursor;
            e.record.into_job(topic, c.id, JobState::Dead, c.dead_at)
        })
        .collect::<Result<_>>()?;
    Ok(DeadPage { items, next })
}

/// A pump of one slot with a lease of `lease_ms`: the slot actors' pumps and consumers'
/// claims.
/// A run the engine handed out, as the runtime and consumers hold it.
fn leased(t: &TopicConfig, slot: u32, h: Handed, lease_until: Millis) -> Result<Leased> {
    let job = h.record.into_job(t, h.id, JobState::Running, lease_until)?;
    Ok(Leased {
        job,
        slot,
        token: h.token,
        lease_until,
        handed_record: h.text,
    })
}

async fn pump_slot(
    engine: &dyn Engine,
    t: &TopicConfig,
    slot: u32,
    now: Millis,
    limit: usize,
    lease_ms: u64,
    fence: u64,
) -> Result<Pumped> {
    Store::check_slot(t, slot)?;
    let p = engine
        .pump(t, slot, now, limit.max(1), lease_ms, fence)
        .await?;
    let lease_until =
        now.saturating_add(crate::num::millis(lease_ms).min(crate::validate::MAX_DELAY_MS));
    let jobs = p
        .handed
        .into_iter()
        .map(|h| leased(t, slot, h, lease_until))
        .collect::<Result<_>>()?;
    Ok(Pumped {
        jobs,
        expired: p.expired,
        next_at: p.next_at,
    })
}

/// Consumers' outcomes of one slot's claimed jobs (`claims[i]` for each of `indexes`), in
/// one settle that reads each run's details from its record as it settles it. Only a retry
/// that leaves its delay to the topic's backoff is read first, for its attempt count; a
/// token that is not the live run's there is stale at once (`settle_claimed` checks every
/// token again, atomically with the change). One result per index, in order.
async fn settle_slot_claims(
    engine: &dyn Engine,
    t: &TopicConfig,
    slot: u32,
    claims: &[ClaimOutcome],
    indexes: &[usize],
    now: Millis,
) -> Result<Vec<Finished>> {
    let backoff: Vec<&str> = indexes
        .iter()
        .map(|&i| &claims[i])
        .filter(|c| matches!(c.outcome, Outcome::Retry { delay: None, .. }))
        .map(|c| c.job.id.as_str())
        .collect();
    let mut attempts: HashMap<&str, Option<u32>> = HashMap::new();
    if !backoff.is_empty() {
        for (id, stored) in backoff.iter().zip(engine.get(t, slot, &backoff).await?) {
            attempts.insert(id, stored.map(|s| s.record.attempts.unwrap_or(0)));
        }
    }
    let mut batch = Vec::new();
    let mut live = Vec::new();
    for (k, &i) in indexes.iter().enumerate() {
        let c = &claims[i];
        let attempts = match (&c.outcome, attempts.get(c.job.id.as_str())) {
            (Outcome::Retry { delay: None, .. }, Some(Some(a))) => *a,
            (Outcome::Retry { delay: None, .. }, _) => continue, // no such job: stale
            _ => 0,
        };
        // A consumer's run has no fire time here: a repeat (refused over HTTP) is after now.
        let outcome = c.outcome.clone().into_run(
            now,
            now,
            || t.backoff.delay_ms(attempts, &mut rand::rng()),
            |delay| now.saturating_add(delay),
        );
        batch.push(ClaimSettlement {
            id: &c.job.id,
            token: c.token,
            outcome,
        });
        live.push(k);
    }
    let mut done = vec![Finished::Stale; indexes.len()];
    if batch.is_empty() {
        return Ok(done);
    }
    let results = engine.settle_claimed(t, slot, &batch, now).await?;
    for (k, f) in live.into_iter().zip(results) {
        done[k] = f;
    }
    Ok(done)
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn rearmed(topic: &TopicConfig, r: Refired) -> Rearmed {
    Rearmed {
        id: r.id,
        job_type: r.job_type.unwrap_or_else(|| topic.default_type.clone()),
        fires: r.fires,
    }
}

impl Store {
    /// The engine's name, as in the `store` setting (`redis`, `memory`).
    pub fn engine(&self) -> &'static str {
        self.engine.name()
    }

    /// Succeeds when the store answers.
    pub async fn ping(&self) -> Result<()> {
        self.engine.ping().await
    }

    /// The clock that decides every comparison of times for this store's jobs (DESIGN.md,
    /// invariant 3): Redis' own clock, or the memory engine's steady clock. The runtime
    /// reads `now` from it unless a test gives it another.
    pub fn clock(&self) -> SharedClock {
        self.clock.clone()
    }

    /// What an operator should know of the store's state, for `/health` (a change refused
    /// for a full disk, eviction allowed by the settings); empty when all is well.
    pub fn warnings(&self) -> Vec<String> {
        self.engine.warnings()
    }

    /// Whether accepted changes survive a restart of this process, in words for the logs.
    pub fn durability(&self) -> &'static str {
        self.engine.durability()
    }

    /// Creates or updates a topic. A topic's slot count may only double once it exists (no
    /// job moves; see `TopicConfig::draining_from`).
    pub async fn put_topic(&self, mut config: TopicConfig) -> Result<Arc<TopicConfig>> {
        config.validate()?;
        // Only a doubling and a sweep change `draining_from`: it is the store's.
        config.draining_from = None;
        let before = self.engine.reload_topic(&config.name).await?;
        let now = self.engine.put_topic(config).await?;
        if let Some(before) = before
            && now.slots > before.slots
        {
            // Writers that read the settings before the doubling route with the old count,
            // to the old slots: each is marked, so their writes are refused and retried.
            let marks = (0..now.slots / 2).map(|slot| self.engine.mark_layout(&now, slot));
            for r in futures_util::future::join_all(marks).await {
                r?;
            }
        }
        Ok(now)
    }

    /// A topic's settings; a topic used but never configured is created with the defaults
    /// unless auto-creation is off.
    pub async fn topic(&self, name: &str) -> Result<Arc<TopicConfig>> {
        validate::topic_name(name)?;
        match self.engine.find_topic(name).await? {
            Some(t) => Ok(t),
            None => {
                let config = self.options.defaults_for(name)?;
                self.engine.create_topic(config).await
            }
        }
    }

    /// A topic's settings read from the store past any cache, for an instance told that
    /// another changed them (a doubling). Never creates one.
    pub async fn reload_topic(&self, name: &str) -> Result<Option<Arc<TopicConfig>>> {
        validate::topic_name(name)?;
        self.engine.reload_topic(name).await
    }

    /// A topic's settings when it exists. Never creates one: reads, cancels and resets go
    /// through here, so naming an unknown topic leaves no trace.
    pub async fn find_topic(&self, name: &str) -> Result<Option<Arc<TopicConfig>>> {
        validate::topic_name(name)?;
        self.engine.find_topic(name).await
    }

    /// The settings a topic of this name would be created with (`UnknownTopic` when
    /// auto-creation is off), for checking a job before its topic exists.
    pub fn defaults_for(&self, name: &str) -> Result<TopicConfig> {
        self.options.defaults_for(name)
    }

    /// A topic's settings, or `TopicNotFound`.
    pub async fn existing_topic(&self, name: &str) -> Result<Arc<TopicConfig>> {
        self.find_topic(name)
            .await?
            .ok_or_else(|| crate::error::Error::TopicNotFound(name.to_string()))
    }

    /// For a topic draining from a doubling: looks for old copies in the slots it had
    /// before, and marks it drained when none is left. Answers the slot count it still
    /// drains from (`None`: drained, or never doubled).
    pub async fn sweep(&self, topic: &str) -> Result<Option<u32>> {
        let t = self.existing_topic(topic).await?;
        if t.draining_from.is_none() {
            return Ok(None);
        }
        let start = lock(&self.sweep_from).get(topic).copied().unwrap_or(0);
        if let Some(slot) = doubling::sweep(&*self.engine, &t, start).await? {
            lock(&self.sweep_from).insert(topic.to_string(), slot);
            return Ok(t.draining_from);
        }
        lock(&self.sweep_from).remove(topic);
        // A count at or above the topic's own marks it drained (see `check_update`); a
        // doubling since the sweep began makes the engine refuse this and keep draining.
        let drained = TopicConfig {
            draining_from: Some(t.slots),
            ..(*t).clone()
        };
        match self.engine.put_topic(drained).await {
            Ok(now) => Ok(now.draining_from),
            Err(Error::TopicConflict { .. }) => Ok(t.draining_from),
            Err(e) => Err(e),
        }
    }

    /// Every known topic, by name.
    pub async fn topics(&self) -> Result<Vec<Arc<TopicConfig>>> {
        let mut all = self.engine.topics().await?;
        all.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(all)
    }

    /// Creates, replaces or moves one job, as `mode` says.
    pub async fn schedule(
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
        self.schedule_in(t, &job, mode, now).await
    }

    /// `schedule` in a topic whose settings the caller has resolved.
    pub(crate) async fn schedule_in(
        &self,
        mut t: Arc<TopicConfig>,
        job: &NewJob,
        mode: ScheduleMode,
        now: Millis,
    ) -> Result<Scheduled> {
        let mut r = self.schedule_once(&t, job, mode, now).await;
        // Settings read before a doubling route wrongly: a write is refused (STALE_LAYOUT)
        // and a reset may miss; either is tried again under the settings as stored now.
        for _ in 0..LAYOUT_TRIES {
            let again = match &r {
                Err(Error::StaleLayout { .. }) => true,
                Ok(s) => s.outcome == ScheduleOutcome::Missing,
                Err(_) => false,
            };
            match again.then_some(()).and(self.newer(&t).await?) {
                Some(newer) => t = newer,
                None => break,
            }
            r = self.schedule_once(&t, job, mode, now).await;
        }
        r
    }

    /// Moves many jobs' fire times (heartbeats); with `create`, a missing job is created. A
    /// job named twice in one batch is reset twice, in order, as two calls would.
    pub async fn reset_many(
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
        self.reset_many_in(t, resets, create, now).await
    }

    /// `reset_many` in a topic whose settings the caller has resolved.
    pub(crate) async fn reset_many_in(
        &self,
        mut t: Arc<TopicConfig>,
        resets: &[Reset],
        create: Option<&CreateSpec>,
        now: Millis,
    ) -> Result<ResetReport> {
        for _ in 0..LAYOUT_TRIES {
            match self.reset_many_once(&t, resets, create, now).await {
                Err(Error::StaleLayout { .. }) => {}
                Ok(mut report) if !report.missing.is_empty() => {
                    // Missing jobs may live where settings read since a doubling route.
                    let Some(newer) = self.newer(&t).await? else {
                        return Ok(report);
                    };
                    let missing: HashSet<&str> =
                        report.missing.iter().map(String::as_str).collect();
                    let again: Vec<Reset> = resets
                        .iter()
                        .filter(|r| missing.contains(r.job.id.as_str()))
                        .cloned()
                        .collect();
                    let more = self.reset_many_once(&newer, &again, create, now).await?;
                    report.missing = more.missing;
                    report.reset += more.reset;
                    report.created += more.created;
                    report.rearmed.extend(more.rearmed);
                    report.heads.extend(more.heads);
                    return Ok(report);
                }
                r => return r,
            }
            if let Some(newer) = self.newer(&t).await? {
                t = newer;
            }
        }
        self.reset_many_once(&t, resets, create, now).await
    }

    /// Removes a job in any state; the state it was in, or `None` if there was none.
    pub async fn cancel(&self, topic: &str, job: &JobRef) -> Result<Option<JobState>> {
        let t = self.existing_topic(topic).await?;
        match self.cancel_in(&t, job).await? {
            None => match self.newer(&t).await? {
                Some(newer) => self.cancel_in(&newer, job).await,
                None => Ok(None),
            },
            found => Ok(found),
        }
    }

    /// A job, or `None`.
    pub async fn get(&self, topic: &str, job: &JobRef) -> Result<Option<Job>> {
        let t = self.existing_topic(topic).await?;
        match self.get_in(&t, job).await? {
            None => match self.newer(&t).await? {
                Some(newer) => self.get_in(&newer, job).await,
                None => Ok(None),
            },
            found => Ok(found),
        }
    }

    /// Hands out up to `limit` of a slot's due jobs (fire time at or before `now`) with a
    /// lease, and takes back runs whose lease expired.
    pub async fn pump(&self, topic: &str, slot: u32, now: Millis, limit: usize) -> Result<Pumped> {
        let t = self.existing_topic(topic).await?;
        let lease_ms = t.visibility_timeout_ms;
        pump_slot(&*self.engine, &t, slot, now, limit, lease_ms, 0).await
    }

    /// `pump` by the slot's owner: refused with `Error::Fenced`, changing nothing, unless
    /// `fence` is the slot's current owner fence (see [`Store::own`]), so an instance that
    /// lost a slot (paused past its lease, say) never pumps it again.
    pub async fn pump_fenced(
        &self,
        topic: &str,
        slot: u32,
        fence: u64,
        now: Millis,
        limit: usize,
    ) -> Result<Pumped> {
        let t = self.existing_topic(topic).await?;
        let lease_ms = t.visibility_timeout_ms;
        // Fence 0 is "no ownership": an owner's fence is never 0.
        let fence = fence.max(1);
        pump_slot(&*self.engine, &t, slot, now, limit, lease_ms, fence).await
    }

    /// For the slot's owner after a pump whose answer it never got: the runs handed out
    /// with a token above `above` (the highest it saw), so it runs them now rather than when
    /// their leases end. Refused with `Error::Fenced` unless `fence` is the slot's.
    pub async fn adopt(
        &self,
        topic: &str,
        slot: u32,
        fence: u64,
        above: u64,
    ) -> Result<Vec<Leased>> {
        let t = self.existing_topic(topic).await?;
        Self::check_slot(&t, slot)?;
        self.engine
            .adopt(&t, slot, fence.max(1), above)
            .await?
            .into_iter()
            .map(|(h, lease_until)| leased(&t, slot, h, lease_until))
            .collect()
    }

    /// Heartbeat of `instance` in the registry of instances sharing the store, valid for
    /// `ttl_ms` (0: the instance leaves); answers the live instances, sorted. An engine that
    /// is never shared answers this one alone.
    pub async fn register(&self, instance: &str, now: Millis, ttl_ms: u64) -> Result<Vec<String>> {
        validate::instance(instance)?;
        let mut live = self.engine.register(instance, now, ttl_ms).await?;
        live.sort();
        Ok(live)
    }

    /// Takes or renews `instance`'s owner lease of a slot for `ttl_ms`. A new owner gets a
    /// fence above every earlier one; an owner renewing keeps its own.
    pub async fn own(
        &self,
        topic: &str,
        slot: u32,
        instance: &str,
        now: Millis,
        ttl_ms: u64,
    ) -> Result<Ownership> {
        validate::instance(instance)?;
        let t = self.existing_topic(topic).await?;
        Self::check_slot(&t, slot)?;
        self.engine
            .own(&t, slot, instance, now, ttl_ms.max(1))
            .await
    }

    /// Gives up `instance`'s owner lease of a slot (a handoff); false when it held none.
    pub async fn disown(&self, topic: &str, slot: u32, instance: &str) -> Result<bool> {
        let t = self.existing_topic(topic).await?;
        Self::check_slot(&t, slot)?;
        self.engine.disown(&t, slot, instance).await
    }

    /// `pump` with a lease of `lease_ms` in place of the topic's visibility timeout: a
    /// consumer's claim.
    pub async fn claim(
        &self,
        topic: &str,
        slot: u32,
        now: Millis,
        limit: usize,
        lease_ms: u64,
    ) -> Result<Pumped> {
        let t = self.existing_topic(topic).await?;
        pump_slot(&*self.engine, &t, slot, now, limit, lease_ms, 0).await
    }

    /// Applies consumers' outcomes of claimed jobs, each naming its run by job and token:
    /// `settle` of the runs whose token is live (with their `job.done`, `job.retry` or
    /// `job.dead` event), `Finished::Stale` for the others, which change nothing. Answers
    /// in order.
    pub async fn settle_claims(
        &self,
        topic: &str,
        claims: &[ClaimOutcome],
        now: Millis,
    ) -> Result<Vec<Finished>> {
        let t = self.existing_topic(topic).await?;
        let mut places = Vec::with_capacity(claims.len());
        for c in claims {
            places.push(Self::places(&t, &c.job)?);
        }
        let mut done = vec![Finished::Stale; claims.len()];
        // Round 0 settles each claim in its home slot; while the topic drains, round k
        // settles what is still stale in its k-th old slot (a job claimed from an old copy).
        for round in 0.. {
            let mut by_slot: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
            for (i, (home, old)) in places.iter().enumerate() {
                let slot = if round == 0 {
                    Some(*home)
                } else {
                    old.get(round - 1).copied()
                };
                if let Some(slot) = slot.filter(|_| done[i] == Finished::Stale) {
                    by_slot.entry(slot).or_default().push(i);
                }
            }
            if by_slot.is_empty() {
                break;
            }
            let slots = by_slot.iter().map(|(&slot, indexes)| {
                settle_slot_claims(&*self.engine, &t, slot, claims, indexes, now)
            });
            for (results, indexes) in futures_util::future::join_all(slots)
                .await
                .into_iter()
                .zip(by_slot.values())
            {
                for (f, &i) in results?.into_iter().zip(indexes) {
                    done[i] = f;
                }
            }
        }
        Ok(done)
    }

    /// Moves a claimed run's lease deadline to `until`; false when the token is stale.
    pub async fn touch(
        &self,
        topic: &str,
        job: &JobRef,
        token: u64,
        until: Millis,
    ) -> Result<bool> {
        let t = self.existing_topic(topic).await?;
        let (slot, old) = Self::places(&t, job)?;
        for slot in std::iter::once(slot).chain(old) {
            if self.engine.touch(&t, slot, &job.id, token, until).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Applies the outcomes of runs of one slot and appends their events (see
    /// [`Event::of_settled`]): a run's outcome and its events are one atomic step, so no job
    /// is acknowledged whose events were not stored, and the whole batch is one script call
    /// (Redis) or one lock and one journal write (memory). Tokens are checked run by run: a
    /// run whose lease was taken over gets `Finished::Stale`, and changes nothing. Answers
    /// what happened to each run, in order.
    pub async fn settle(
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
        Self::check_slot(&t, slot)?;
        let done = self.engine.settle(&t, slot, batch, now).await?;
        if done.len() != batch.len() {
            return Err(Error::Corrupt(format!(
                "settle answered {} results for {} runs",
                done.len(),
                batch.len()
            )));
        }
        Ok(done)
    }

    /// Applies one run's outcome, with no events of its handler's (`settle` of one).
    pub async fn finish(
        &self,
        topic: &str,
        run: &Leased,
        outcome: RunOutcome,
        now: Millis,
    ) -> Result<Finished> {
        let batch = [Settlement::new(run.clone(), outcome, now)];
        let done = self.settle(topic, run.slot, &batch, now).await?;
        done.first()
            .copied()
            .ok_or_else(|| crate::error::Error::Corrupt("settle answered no result".into()))
    }

    /// Extends a live run's lease to `until`; false when the run is stale.
    pub async fn extend(&self, topic: &str, run: &Leased, until: Millis) -> Result<bool> {
        let t = self.existing_topic(topic).await?;
        Self::check_slot(&t, run.slot)?;
        self.engine
            .touch(&t, run.slot, &run.job.id, run.token, until)
            .await
    }

    /// Dead letters oldest first, after the cursor `after` (a previous page's `next`).
    pub async fn dead_list(
        &self,
        topic: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<DeadPage> {
        let t = self.existing_topic(topic).await?;
        let limit = limit.clamp(1, MAX_PAGE);
        let cursor = after
            .map(|s| {
                DeadCursor::decode(s)
                    .ok_or_else(|| Error::invalid("after", format!("{s:?} is not a cursor")))
            })
            .transpose()?;
        // Each slot's oldest `limit` after the cursor, then the oldest `limit` of them all.
        let calls =
            (0..t.slots).map(|slot| self.engine.dead_page(&t, slot, cursor.as_ref(), limit));
        let mut entries = Vec::new();
        for page in futures_util::future::join_all(calls).await {
            entries.extend(page?);
        }
        dead_page(&t, entries, limit)
    }

    /// Schedules a dead job again, due `now`, attempts starting again; false if none.
    pub async fn dead_requeue(&self, topic: &str, job: &JobRef, now: Millis) -> Result<bool> {
        let t = self.existing_topic(topic).await?;
        let (slot, old) = Self::places(&t, job)?;
        for slot in std::iter::once(slot).chain(old) {
            if self.engine.requeue(&t, slot, &job.id, now).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Drops a dead letter; false if there is no such dead job.
    pub async fn dead_delete(&self, topic: &str, job: &JobRef) -> Result<bool> {
        let t = self.existing_topic(topic).await?;
        let (slot, old) = Self::places(&t, job)?;
        for slot in std::iter::once(slot).chain(old) {
            if self.engine.dead_delete(&t, slot, &job.id).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Scheduled, running and dead counts per slot and in total, and the next fire time.
    pub async fn stats(&self, topic: &str) -> Result<TopicStats> {
        let t = self.existing_topic(topic).await?;
        let calls = (0..t.slots).map(|slot| self.engine.slot_stats(&t, slot));
        let per_slot = futures_util::future::join_all(calls)
            .await
            .into_iter()
            .collect::<Result<Vec<_>>>()?;
        Ok(TopicStats::from_slots(&t.name, per_slot))
    }

    /// Appends events that belong to no run's outcome (a re-arm, the application's own) to
    /// the topic's stream, which keeps about `StoreOptions::events_max_len` entries.
    pub async fn append_events(&self, topic: &str, events: &[Event]) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        let t = self.existing_topic(topic).await?;
        self.append_events_in(&t, events).await
    }

    /// `append_events` in a topic whose settings the caller has resolved.
    pub(crate) async fn append_events_in(&self, t: &TopicConfig, events: &[Event]) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        self.engine.append_events(t, events).await
    }

    /// Events after the position `after` (exclusive; from the oldest when `None`).
    pub async fn read_events(
        &self,
        topic: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<EventPage> {
        let after = after
            .map(|id| {
                EventId::parse(id).ok_or_else(|| {
                    Error::invalid("after", format!("{id:?} is not an event id (ms-seq-slot)"))
                })
            })
            .transpose()?;
        let t = self.existing_topic(topic).await?;
        let items = self
            .engine
            .read_events(&t, after, limit.clamp(1, MAX_PAGE))
            .await?;
        Ok(EventPage::new(items))
    }

    /// The wake bus of the instances sharing this store (the center's and the slot keeper's).
    pub(crate) fn wake_bus(&self) -> &dyn WakeBus {
        &*self.engine
    }
}
