//! The one front of both engines: [`StoreFront`] implements [`Store`] over a
//! [`SlotEngine`]. It checks arguments, finds or creates topics, routes jobs to slots, groups
//! batches by slot, decodes cursors, clamps pages and builds the answers; the engine only
//! runs one slot's operation. `MemoryStore` and `RedisStore` are this front over their
//! engines.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::mpsc;

use super::doubling;
use super::engine::{ClaimSettlement, DeadEntry, Handed, Refired, SlotEngine};
use super::event_id::EventId;
use super::record::Record;
use super::topic_policy::StoreOptions;
use super::{MAX_PAGE, Store, WakeNotice};
use crate::error::{Error, Result};
use crate::events::{Event, EventPage};
use crate::model::{
    ClaimOutcome, ClaimResult, CreateSpec, DeadCursor, DeadPage, Finished, Job, JobRef, JobState,
    Leased, NewJob, Pumped, Rearmed, Reset, ResetReport, RunOutcome, ScheduleMode, ScheduleOutcome,
    Scheduled, Settlement, SlotHead, TopicStats,
};
use crate::routing::slot_of;
use crate::time::{Millis, SharedClock, SteadyClock};
use crate::topic::TopicConfig;
use crate::validate;

/// A store: the front every engine shares, over the engine `E`. Use it as
/// [`MemoryStore`](super::MemoryStore) or [`RedisStore`](super::RedisStore).
pub struct StoreFront<E> {
    pub(crate) engine: E,
    options: StoreOptions,
    /// Per draining topic, the slot where the last sweep found an old copy: the next sweep
    /// starts there, so a topic with old copies left costs a sweep little.
    sweep_from: std::sync::Mutex<HashMap<String, u32>>,
    /// The clock that decides for this store (see `crate::time`).
    clock: SharedClock,
}

impl<E> StoreFront<E> {
    pub(crate) fn over(engine: E, options: StoreOptions) -> Self
    where
        E: SlotEngine,
    {
        let clock = engine
            .clock()
            .unwrap_or_else(|| Arc::new(SteadyClock::default()));
        StoreFront {
            engine,
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

/// How often a call is tried again under settings read anew (see `StoreFront::newer`).
const LAYOUT_TRIES: usize = 3;

// The engine trait is the crate's own; these helpers are too (none is public).
#[allow(private_bounds)]
impl<E: SlotEngine> StoreFront<E> {
    /// The topic's settings as stored now, when they route differently from `t` (a doubling
    /// since `t` was read, by this instance or another); `None` when they do not.
    async fn newer(&self, t: &TopicConfig) -> Result<Option<Arc<TopicConfig>>> {
        Ok(self
            .engine
            .reload_topic(&t.name)
            .await?
            .filter(|n| n.slots != t.slots || n.draining_from != t.draining_from))
    }

    /// `schedule` under the settings `t`.
    async fn schedule_in(
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
            && let Some((at, stored)) = doubling::find_old(&self.engine, &t, &old, &job.id).await?
        {
            return Ok(Scheduled {
                outcome: ScheduleOutcome::Exists,
                slot: at,
                state: Some(stored.state),
                fire_at: None,
                is_head: false,
                rearmed: None,
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
                    if let Some((at, moved)) =
                        doubling::reset_old(&self.engine, &t, slot, &old, &job.id, job.fire_at, now)
                            .await?
                    {
                        (slot, r) = (at, moved);
                    }
                }
                ScheduleOutcome::Created | ScheduleOutcome::Replaced => {
                    let dropped =
                        doubling::drop_old_copies(&self.engine, &t, &old, &job.id).await?;
                    if dropped.is_some() {
                        r.outcome = ScheduleOutcome::Replaced;
                    }
                }
                ScheduleOutcome::Exists | ScheduleOutcome::Reset => {}
            }
        }
        Ok(Scheduled {
            outcome: r.outcome,
            slot,
            state: r.state,
            fire_at: r.fire_at,
            is_head: r.is_head,
            rearmed: r.rearmed.filter(|r| r.fires > 0).map(|r| rearmed(&t, r)),
        })
    }

    /// `reset_many` under the settings `t`.
    async fn reset_many_in(
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
                doubling::reset_missing(&self.engine, &t, resets, spec.as_ref(), &mut report, now)
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
        let old_state = doubling::drop_old_copies(&self.engine, t, &old, &job.id).await?;
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
            found = doubling::find_old(&self.engine, t, &old, &job.id)
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

async fn pump_slot<E: SlotEngine>(
    engine: &E,
    t: &TopicConfig,
    slot: u32,
    now: Millis,
    limit: usize,
    lease_ms: u64,
    fence: u64,
) -> Result<Pumped> {
    StoreFront::<E>::check_slot(t, slot)?;
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
async fn settle_slot_claims<E: SlotEngine>(
    engine: &E,
    t: &TopicConfig,
    slot: u32,
    claims: &[ClaimOutcome],
    indexes: &[usize],
    now: Millis,
) -> Result<Vec<Finished>> {
    let at = |delay: u64| {
        now.saturating_add(crate::num::millis(delay).min(crate::validate::MAX_DELAY_MS))
    };
    let backoff: Vec<&str> = indexes
        .iter()
        .map(|&i| &claims[i])
        .filter(|c| matches!(c.result, ClaimResult::Retry { delay_ms: None, .. }))
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
        let outcome = match &c.result {
            ClaimResult::Ack => RunOutcome::Ack,
            ClaimResult::Retry { error, delay_ms } => {
                let delay = match delay_ms {
                    Some(d) => *d,
                    None => match attempts.get(c.job.id.as_str()) {
                        Some(Some(a)) => t.backoff.delay_ms(*a, &mut rand::rng()),
                        _ => continue, // no such job: stale
                    },
                };
                RunOutcome::Retry {
                    error: error.clone(),
                    at: at(delay),
                }
            }
            ClaimResult::Bury { error } => RunOutcome::Bury {
                error: error.clone(),
            },
        };
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

#[async_trait]
impl<E: SlotEngine> Store for StoreFront<E> {
    fn clock(&self) -> SharedClock {
        self.clock.clone()
    }

    fn warnings(&self) -> Vec<String> {
        self.engine.warnings()
    }

    fn engine(&self) -> &'static str {
        self.engine.name()
    }

    async fn ping(&self) -> Result<()> {
        self.engine.ping().await
    }

    fn durability(&self) -> &'static str {
        self.engine.durability()
    }

    async fn put_topic(&self, mut config: TopicConfig) -> Result<Arc<TopicConfig>> {
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

    async fn reload_topic(&self, name: &str) -> Result<Option<Arc<TopicConfig>>> {
        validate::topic_name(name)?;
        self.engine.reload_topic(name).await
    }

    async fn sweep(&self, topic: &str) -> Result<Option<u32>> {
        let t = self.existing_topic(topic).await?;
        if t.draining_from.is_none() {
            return Ok(None);
        }
        let start = lock(&self.sweep_from).get(topic).copied().unwrap_or(0);
        if let Some(slot) = doubling::sweep(&self.engine, &t, start).await? {
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

    async fn topic(&self, name: &str) -> Result<Arc<TopicConfig>> {
        validate::topic_name(name)?;
        match self.engine.find_topic(name).await? {
            Some(t) => Ok(t),
            None => {
                let config = self.options.defaults_for(name)?;
                self.engine.create_topic(config).await
            }
        }
    }

    async fn find_topic(&self, name: &str) -> Result<Option<Arc<TopicConfig>>> {
        validate::topic_name(name)?;
        self.engine.find_topic(name).await
    }

    fn defaults_for(&self, name: &str) -> Result<TopicConfig> {
        self.options.defaults_for(name)
    }

    async fn topics(&self) -> Result<Vec<Arc<TopicConfig>>> {
        let mut all = self.engine.topics().await?;
        all.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(all)
    }

    async fn schedule(
        &self,
        topic: &str,
        job: NewJob,
        mode: ScheduleMode,
        now: Millis,
    ) -> Result<Scheduled> {
        let mut t = match mode {
            ScheduleMode::ResetOnly => self.existing_topic(topic).await?,
            _ => self.topic(topic).await?,
        };
        let mut r = self.schedule_in(&t, &job, mode, now).await;
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
            r = self.schedule_in(&t, &job, mode, now).await;
        }
        r
    }

    async fn reset_many(
        &self,
        topic: &str,
        resets: &[Reset],
        create: Option<&CreateSpec>,
        now: Millis,
    ) -> Result<ResetReport> {
        let mut t = match create {
            Some(_) => self.topic(topic).await?,
            None => self.existing_topic(topic).await?,
        };
        for _ in 0..LAYOUT_TRIES {
            match self.reset_many_in(&t, resets, create, now).await {
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
                    let more = self.reset_many_in(&newer, &again, create, now).await?;
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
        self.reset_many_in(&t, resets, create, now).await
    }

    async fn cancel(&self, topic: &str, job: &JobRef) -> Result<Option<JobState>> {
        let t = self.existing_topic(topic).await?;
        match self.cancel_in(&t, job).await? {
            None => match self.newer(&t).await? {
                Some(newer) => self.cancel_in(&newer, job).await,
                None => Ok(None),
            },
            found => Ok(found),
        }
    }

    async fn get(&self, topic: &str, job: &JobRef) -> Result<Option<Job>> {
        let t = self.existing_topic(topic).await?;
        match self.get_in(&t, job).await? {
            None => match self.newer(&t).await? {
                Some(newer) => self.get_in(&newer, job).await,
                None => Ok(None),
            },
            found => Ok(found),
        }
    }

    async fn pump(&self, topic: &str, slot: u32, now: Millis, limit: usize) -> Result<Pumped> {
        let t = self.existing_topic(topic).await?;
        let lease_ms = t.visibility_timeout_ms;
        pump_slot(&self.engine, &t, slot, now, limit, lease_ms, 0).await
    }

    async fn adopt(&self, topic: &str, slot: u32, fence: u64, above: u64) -> Result<Vec<Leased>> {
        let t = self.existing_topic(topic).await?;
        Self::check_slot(&t, slot)?;
        self.engine
            .adopt(&t, slot, fence.max(1), above)
            .await?
            .into_iter()
            .map(|(h, lease_until)| leased(&t, slot, h, lease_until))
            .collect()
    }

    async fn pump_fenced(
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
        pump_slot(&self.engine, &t, slot, now, limit, lease_ms, fence).await
    }

    async fn register(&self, instance: &str, now: Millis, ttl_ms: u64) -> Result<Vec<String>> {
        validate::instance(instance)?;
        let mut live = self.engine.register(instance, now, ttl_ms).await?;
        live.sort();
        Ok(live)
    }

    async fn own(
        &self,
        topic: &str,
        slot: u32,
        instance: &str,
        now: Millis,
        ttl_ms: u64,
    ) -> Result<super::Ownership> {
        validate::instance(instance)?;
        let t = self.existing_topic(topic).await?;
        Self::check_slot(&t, slot)?;
        self.engine
            .own(&t, slot, instance, now, ttl_ms.max(1))
            .await
    }

    async fn disown(&self, topic: &str, slot: u32, instance: &str) -> Result<bool> {
        let t = self.existing_topic(topic).await?;
        Self::check_slot(&t, slot)?;
        self.engine.disown(&t, slot, instance).await
    }

    async fn claim(
        &self,
        topic: &str,
        slot: u32,
        now: Millis,
        limit: usize,
        lease_ms: u64,
    ) -> Result<Pumped> {
        let t = self.existing_topic(topic).await?;
        pump_slot(&self.engine, &t, slot, now, limit, lease_ms, 0).await
    }

    async fn settle_claims(
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
                settle_slot_claims(&self.engine, &t, slot, claims, indexes, now)
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

    async fn touch(&self, topic: &str, job: &JobRef, token: u64, until: Millis) -> Result<bool> {
        let t = self.existing_topic(topic).await?;
        let (slot, old) = Self::places(&t, job)?;
        for slot in std::iter::once(slot).chain(old) {
            if self.engine.touch(&t, slot, &job.id, token, until).await? {
                return Ok(true);
            }
        }
        Ok(false)
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

    async fn extend(&self, topic: &str, run: &Leased, until: Millis) -> Result<bool> {
        let t = self.existing_topic(topic).await?;
        Self::check_slot(&t, run.slot)?;
        self.engine
            .touch(&t, run.slot, &run.job.id, run.token, until)
            .await
    }

    async fn dead_list(&self, topic: &str, after: Option<&str>, limit: usize) -> Result<DeadPage> {
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

    async fn dead_requeue(&self, topic: &str, job: &JobRef, now: Millis) -> Result<bool> {
        let t = self.existing_topic(topic).await?;
        let (slot, old) = Self::places(&t, job)?;
        for slot in std::iter::once(slot).chain(old) {
            if self.engine.requeue(&t, slot, &job.id, now).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    async fn dead_delete(&self, topic: &str, job: &JobRef) -> Result<bool> {
        let t = self.existing_topic(topic).await?;
        let (slot, old) = Self::places(&t, job)?;
        for slot in std::iter::once(slot).chain(old) {
            if self.engine.dead_delete(&t, slot, &job.id).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    async fn stats(&self, topic: &str) -> Result<TopicStats> {
        let t = self.existing_topic(topic).await?;
        let calls = (0..t.slots).map(|slot| self.engine.slot_stats(&t, slot));
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
        self.engine.append_events(&t, events).await
    }

    async fn read_events(
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

    async fn publish_wake(&self, notice: &WakeNotice) -> Result<()> {
        self.engine.publish_wake(notice).await
    }

    async fn listen_wakes(&self, tx: mpsc::UnboundedSender<WakeNotice>) -> Result<()> {
        self.engine.listen_wakes(tx).await
    }

    async fn publish_slot_wake(&self, notice: &WakeNotice) -> Result<()> {
        self.engine.publish_slot_wake(notice).await
    }

    async fn watch_slot(&self, topic: &str, slot: u32, watch: bool) -> Result<()> {
        self.engine.watch_slot(topic, slot, watch).await
    }
}
