//! `TimeoutCenter`: the library API. It owns the runtime (slot keeper, slot actors, handler
//! actors) over a store, and wraps each store call with what the runtime must know: a job due
//! before its slot wakes wakes the slot (in process, and through the store for other
//! instances), counters are kept, and re-armed jobs tell their type.
//!
//! Start it inside an actix system (`#[actix_web::main]`, `#[actix_rt::main]`).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::{Actor, Addr};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::actors::keeper::SlotKeeper;
use crate::actors::messages::{DropTopic, GetHealth, HaltSlot, ServeTopic, Shutdown, WakeSlot};
use crate::actors::runtime::TypeEntry;
use crate::actors::{Runtime, SlotHealth};
use crate::claims::{ClaimRequest, Claims};
use crate::config::RuntimeSettings;
use crate::error::{Error, Result};
use crate::events::{Event, EventPage};
use crate::job_type::{Handlers, JobHandler, PayloadRefusal};
use crate::jobs::pull;
use crate::jobs::webhook::WebhookSettings;
use crate::metrics::Metrics;
use crate::model::*;
use crate::routing::slot_of;
use crate::store::{SharedStore, WakeNotice};
use crate::time::{Millis, SharedClock};
use crate::topic::TopicConfig;

/// Times a topic's types are written again when a concurrent change dropped one.
const NAME_TYPES_TRIES: usize = 3;

/// Builds a [`TimeoutCenter`].
pub struct TimeoutCenterBuilder {
    store: SharedStore,
    settings: RuntimeSettings,
    handlers: Handlers,
    clock: SharedClock,
    builtin_types: bool,
    webhooks: WebhookSettings,
    metrics: Option<Arc<Metrics>>,
}

impl TimeoutCenterBuilder {
    /// The runtime's settings (pump batch, poll, grace, workers).
    pub fn settings(mut self, settings: RuntimeSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Registers a job type (one line per type).
    pub fn handler<H: JobHandler>(mut self, handler: H) -> Self {
        self.handlers.register(handler);
        self
    }

    /// Registers every type of `handlers` (a service's own types, gathered before it starts).
    pub fn handlers(mut self, handlers: Handlers) -> Self {
        for h in handlers.iter() {
            self.handlers.insert_erased(h.clone());
        }
        self
    }

    /// The clock the center reads `now` from (tests pass a controlled one).
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// The metrics registry to count in (one per service).
    pub fn metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The built-in `webhook` type's settings: its egress policy (by default only public
    /// addresses), redirects and signing keys.
    pub fn webhooks(mut self, webhooks: WebhookSettings) -> Self {
        self.webhooks = webhooks;
        self
    }

    /// Leaves out the built-in types (`emit`, `webhook`, `device_offline`, `meeting_state`).
    pub fn without_builtin_types(mut self) -> Self {
        self.builtin_types = false;
        self
    }

    /// Starts the runtime. Must run inside an actix system.
    pub async fn start(self) -> Result<TimeoutCenter> {
        let mut handlers = Handlers::new();
        if self.builtin_types {
            crate::jobs::register_builtin(&mut handlers, &self.webhooks);
        }
        // The application's types come last, so they may replace a built-in one.
        for h in self.handlers.iter() {
            handlers.insert_erased(h.clone());
        }
        let types = handlers
            .iter()
            .map(|h| (h.job_type(), TypeEntry::new(h.clone())))
            .collect();
        // The store keeps each job's type key as it is written (`tk`), read by these types.
        let keys = handlers.clone();
        self.store.learn_type_keys(Arc::new(
            move |job_type: &str, payload: &serde_json::Value| {
                keys.get(job_type).and_then(|h| h.flow_key(payload))
            },
        ));
        let rt = Arc::new(Runtime {
            store: self.store.clone(),
            types,
            clock: self.clock,
            instance: crate::actors::runtime::instance_name(&self.settings),
            settings: self.settings,
            metrics: self.metrics.unwrap_or_default(),
            slot_changes: Default::default(),
            flow_bells: Default::default(),
        });
        let keeper = SlotKeeper::new(rt.clone()).start();

        // Wake notices from other instances sharing the store.
        let (tx, mut rx) = mpsc::unbounded_channel();
        let store = self.store.clone();
        let resyncs = tx.clone();
        let round = Duration::from_millis(rt.settings.poll_ms);
        actix_rt::spawn(async move {
            if let Err(e) = store.wake_bus().listen(tx).await {
                // Deaf to other writers: the safety net reads every slot's head each round.
                tracing::warn!(error = %e, "not listening for wake notices; the safety net reads every slot each round");
                while resyncs.send(WakeNotice::resync()).is_ok() {
                    tokio::time::sleep(round).await;
                }
            }
        });
        let sup = keeper.clone();
        let claims = Arc::new(Claims::new(rt.settings.poll_ms));
        let waiting = claims.clone();
        actix_rt::spawn(async move {
            while let Some(notice) = rx.recv().await {
                if notice.slot == WakeNotice::TOPIC {
                    waiting.topic_changed(&notice.topic);
                } else if notice.slot != WakeNotice::RESYNC {
                    waiting.wake(&notice.topic, notice.slot, notice.at);
                }
                sup.do_send(WakeSlot(notice));
            }
        });

        Ok(TimeoutCenter {
            rt,
            keeper,
            served: Arc::new(Mutex::new(HashSet::new())),
            claims,
            imports: Default::default(),
        })
    }
}

/// A running timeout center. Cheap to clone; every clone drives the same runtime.
#[derive(Clone)]
pub struct TimeoutCenter {
    rt: Arc<Runtime>,
    keeper: Addr<SlotKeeper>,
    /// Topics whose slots the slot keeper has been told to serve.
    served: Arc<Mutex<HashSet<String>>>,
    /// Consumers' claims of pull topics, and their long polls.
    claims: Arc<Claims>,
    /// The lines of imports under way, by topic and digest (`import`).
    imports: Arc<crate::transfer::Imports>,
}

impl TimeoutCenter {
    /// A builder over `store`, with the built-in job types registered.
    pub fn builder(store: SharedStore) -> TimeoutCenterBuilder {
        TimeoutCenterBuilder {
            clock: store.clock(),
            store,
            settings: crate::config::Settings::defaults().runtime,
            handlers: Handlers::new(),
            builtin_types: true,
            webhooks: WebhookSettings::default(),
            metrics: None,
        }
    }

    /// The store under the center (for the crate; tests reach it through the conformance door).
    pub(crate) fn store(&self) -> &SharedStore {
        &self.rt.store
    }

    /// The center's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.rt.metrics
    }

    /// The center's clock, now: the earliest the store's clock may read.
    pub fn now(&self) -> Millis {
        self.rt.clock.now()
    }

    /// The instant `delay_ms` from now on the store's clock, never early: the latest that
    /// clock may read now plus the delay (no delay: now).
    pub fn after(&self, delay_ms: Millis) -> Millis {
        self.rt.clock.after(delay_ms)
    }

    /// The topic's settings, and its slots served by this runtime.
    pub async fn topic(&self, name: &str) -> Result<Arc<TopicConfig>> {
        let topic = self.rt.store.topic(name).await?;
        self.serve(&topic);
        Ok(topic)
    }

    /// An existing topic's settings as the store holds them now (not this instance's cache,
    /// which another instance's change reaches later); `TopicNotFound` when it does not exist.
    pub async fn topic_settings(&self, name: &str) -> Result<Arc<TopicConfig>> {
        self.rt
            .store
            .reload_topic(name)
            .await?
            .ok_or_else(|| Error::TopicNotFound(name.to_string()))
    }

    /// An existing topic's settings, its slots served by this runtime; `TopicNotFound` when
    /// it does not exist (nothing is created and no slot actor starts).
    async fn existing(&self, name: &str) -> Result<Arc<TopicConfig>> {
        let topic = self.rt.store.existing_topic(name).await?;
        self.serve(&topic);
        Ok(topic)
    }

    fn serve(&self, topic: &Arc<TopicConfig>) {
        let new = self
            .served
            .lock()
            .expect("served lock")
            .insert(topic.name.clone());
        if new {
            self.keeper.do_send(ServeTopic(topic.clone()));
            self.announce(topic);
        }
    }

    /// Tells the other instances sharing the store that this one serves `topic` now, or
    /// changed its settings, so that each reads them anew and takes the slots it should own
    /// at once rather than at its next topic discovery.
    fn announce(&self, topic: &TopicConfig) {
        let notice = WakeNotice {
            topic: topic.name.clone(),
            slot: WakeNotice::TOPIC,
            at: self.now(),
        };
        let store = self.rt.store.clone();
        tokio::spawn(async move {
            if let Err(e) = store.wake_bus().announce(&notice).await {
                tracing::debug!(error = %e, "could not announce a topic");
            }
        });
    }

    /// Creates or updates a topic, and starts or retunes its slots.
    pub async fn put_topic(&self, config: TopicConfig) -> Result<Arc<TopicConfig>> {
        let topic = self.rt.store.put_topic(config).await?;
        self.changed(&topic);
        Ok(topic)
    }

    /// Sets (`Some`) or removes (`None`) a flow key's own limits in place of the topic's
    /// `flow`; the change writes that key only, and reaches the slots as a topic change
    /// does. Answers the topic's settings with it and the key's limits before.
    pub async fn put_flow(
        &self,
        topic: &str,
        key: &str,
        limits: Option<crate::flow::FlowLimits>,
    ) -> Result<(Arc<TopicConfig>, Option<crate::flow::FlowLimits>)> {
        let (topic, before) = self.rt.store.put_flow(topic, key, limits).await?;
        self.changed(&topic);
        Ok((topic, before))
    }

    /// A topic's settings changed here: its claims, its slots and the other instances hear.
    fn changed(&self, topic: &Arc<TopicConfig>) {
        self.claims.topic_changed(&topic.name);
        self.served
            .lock()
            .expect("served lock")
            .insert(topic.name.clone());
        self.keeper.do_send(ServeTopic(topic.clone()));
        self.announce(topic);
    }

    /// Deletes a topic whole: its settings, jobs, dead letters, events and owner leases.
    /// Refused with `TopicConflict` while any of its jobs is running (a handler or a consumer
    /// holds it), unless `force`; a topic of the same name made later starts empty. This
    /// instance stops serving it at once, and the others when they hear its notice. Answers
    /// what it held.
    pub async fn delete_topic(&self, name: &str, force: bool) -> Result<TopicStats> {
        let t = self.rt.store.existing_topic(name).await?;
        let held = self.rt.store.delete_topic(name, force).await?;
        self.served.lock().expect("served lock").remove(name);
        self.keeper.do_send(DropTopic(name.to_string()));
        self.announce(&t);
        self.rt.metrics.forget_topic(name, &self.job_types());
        Ok(held)
    }

    /// Every topic.
    pub async fn topics(&self) -> Result<Vec<Arc<TopicConfig>>> {
        self.rt.store.topics().await
    }

    /// Tells the slot of its new head `at`: its actor here, and its owner elsewhere through
    /// the store's wake bus (which chooses the transport).
    async fn wake(&self, topic: &TopicConfig, slot: u32, at: Millis) {
        // A long poll may wait longer than the slots' poll: it is told of every head.
        self.claims.wake(&topic.name, slot, at);
        // A head past the safety net's longest sweep is found by the sweep before it is due:
        // heartbeats pushing alarms that far cost no notice (no publish, no keeper message).
        if self
            .notice_horizon()
            .is_some_and(|h| at > self.now().saturating_add(h))
        {
            return;
        }
        let notice = WakeNotice {
            topic: topic.name.clone(),
            slot,
            at,
        };
        self.keeper.do_send(WakeSlot(notice.clone()));
        if let Err(e) = self.rt.store.wake_bus().wake(topic, &notice).await {
            tracing::debug!(error = %e, "could not publish a wake notice");
        }
    }

    /// How far ahead a new head must be told to its slot's owner: the longest the safety net
    /// of an instance may take to read every slot's head (every slot the limits allow, at
    /// `runtime.safety_net_reads_per_s`, and at least `runtime.safety_net_ms`), and two of its
    /// rounds more. Any owner's sweep reads the slot within that and wakes it before a head
    /// further ahead is due. `None` without `limits.max_total_slots`: every head is told.
    fn notice_horizon(&self) -> Option<Millis> {
        let s = &self.rt.settings;
        let slots = self.rt.store.max_total_slots()?;
        let per_s = s.safety_net_reads_per_s.max(1);
        let sweep_ms = slots
            .saturating_mul(1_000)
            .div_ceil(per_s)
            .max(s.net_sweep_ms());
        Some(crate::num::millis(
            sweep_ms.saturating_add(s.poll_ms.saturating_mul(2)),
        ))
    }

    /// A slot's jobs as an export holds them (`crate::transfer`).
    pub async fn export_slot(&self, topic: &TopicConfig, slot: u32) -> Result<Vec<Job>> {
        self.rt.store.export_slot(topic, slot).await
    }

    /// One batch of an import of topic `topic` (`crate::transfer`): `settings` (the export's
    /// first line of the topic) makes the topic when it does not exist, with its keys' own
    /// limits; `slots` is the count the export was made with, which the topic must have
    /// (each job goes to the slot it was exported from). Every line is checked as a `PUT` of
    /// it would be, and against the topic's quotas, before anything is written (the topic
    /// included); then each job is written unless its slot holds its id. `last` records
    /// `digest` in the topic, after which the same import is skipped whole, when the lines
    /// this instance wrote under that digest add up to it (`transfer::LineSum`).
    pub async fn import(
        &self,
        topic: &str,
        batch: crate::transfer::Batch,
    ) -> Result<crate::transfer::ImportReport> {
        crate::validate::topic_name(topic)?;
        let mut report = crate::transfer::ImportReport::default();
        let existing = self.rt.store.find_topic(topic).await?;
        let planned = match (&existing, &batch.settings) {
            (Some(t), _) => t.clone(),
            (None, None) => return Err(Error::TopicNotFound(topic.to_string())),
            (None, Some(settings)) => Arc::new(self.imported_settings(topic, settings).await?),
        };
        if planned.slots != batch.slots {
            return Err(Error::TopicConflict {
                topic: topic.to_string(),
                message: format!(
                    "the topic has {} slots here and had {} where it was exported: each job \
                     goes to the slot it was exported from, so import into a topic of the \
                     same count (or let the import make it)",
                    planned.slots, batch.slots
                ),
            });
        }
        if planned.imports.contains(&batch.digest) {
            report.skipped = true;
            return Ok(report);
        }
        for (_, job) in &batch.jobs {
            self.check_job(
                &planned,
                Some(job.job_type.as_str()),
                &job.payload,
                job.flow_key.as_deref(),
            )?;
        }
        self.rt
            .store
            .check_import(&planned, &batch.jobs, existing.is_none())
            .await?;
        // Every line passed: the topic is made now, not before.
        let t = match existing {
            Some(t) => t,
            None => {
                let mut settings = (*planned).clone();
                let flows = std::mem::take(&mut settings.flows);
                self.put_topic(settings).await?;
                for (key, limits) in flows {
                    self.put_flow(topic, &key, Some(limits)).await?;
                }
                report.topic_created = true;
                self.rt.store.existing_topic(topic).await?
            }
        };
        let t = self
            .name_types(t, batch.jobs.iter().map(|(_, j)| j.job_type.as_str()))
            .await?;
        self.serve(&t);
        let done = self.rt.store.import_jobs(&t, &batch.jobs).await?;
        report.written = done.written;
        report.existing = crate::num::usize_u64(batch.jobs.len()).saturating_sub(done.written);
        for (slot, at) in done.heads {
            self.wake(&t, slot, at).await;
        }
        let sum = self
            .imports
            .add(topic, &batch.digest, &batch.lines, batch.last);
        if batch.last {
            if sum.digest() == batch.digest {
                let mut settings = (*self.rt.store.existing_topic(topic).await?).clone();
                settings.imports.push(batch.digest);
                let over = settings
                    .imports
                    .len()
                    .saturating_sub(crate::topic::MAX_IMPORTS);
                settings.imports.drain(..over);
                self.put_topic(settings).await?;
            } else {
                tracing::warn!(topic, digest = %batch.digest, written = %sum.digest(),
                    "the lines imported here under this digest do not add up to it: it is not recorded, so the same import is not skipped later");
            }
        }
        Ok(report)
    }

    /// The settings an import makes its topic with: those of its first line, checked as a
    /// `PUT` of them would be.
    async fn imported_settings(&self, topic: &str, settings: &TopicConfig) -> Result<TopicConfig> {
        if settings.name != topic {
            return Err(Error::invalid(
                "name",
                format!(
                    "settings of topic {:?} in the import of {topic:?}",
                    settings.name
                ),
            ));
        }
        if !self.job_types().contains(&settings.default_type)
            && !settings.types.contains(&settings.default_type)
        {
            return Err(Error::invalid(
                "default_type",
                format!(
                    "{:?} is not a type this instance accepts (nor one the topic's types \
                     name, for the instances that run it)",
                    settings.default_type
                ),
            ));
        }
        let mut settings = settings.clone();
        settings.imports.clear();
        settings.draining_from = None;
        // A tenant's import is its topic; the operator's keeps the exported tenant.
        settings.tenant = crate::tenant::current().or(settings.tenant);
        settings.validate()?;
        self.rt
            .store
            .check_room(topic, None, settings.slots, settings.tenant.as_deref())
            .await?;
        Ok(settings)
    }

    /// The job types this instance runs (what it announces to the others), sorted.
    pub fn runs(&self) -> Vec<String> {
        self.rt.type_names()
    }

    /// The job types this instance accepts: those it registers and `runtime.foreign_types`.
    pub fn job_types(&self) -> Vec<String> {
        let mut all: Vec<String> = self.rt.types.keys().map(|t| t.to_string()).collect();
        all.extend(self.rt.settings.foreign_types.iter().cloned());
        all.sort();
        all.dedup();
        all
    }

    /// The payload schema of each registered type that declares one (the API description).
    pub fn payload_schemas(&self) -> BTreeMap<String, Value> {
        self.rt
            .types
            .iter()
            .filter_map(|(name, e)| Some((name.to_string(), e.handler.payload_schema()?)))
            .collect()
    }

    /// The topic a new job goes to, once its type and payload passed `check_job` against
    /// the topic's settings (or the ones it would be created with: a refused job creates no
    /// topic either); its slots are served by this runtime.
    async fn topic_for_new(
        &self,
        topic: &str,
        job_type: Option<&str>,
        payload: &Value,
        flow_key: Option<&str>,
    ) -> Result<Arc<TopicConfig>> {
        let t = match self.rt.store.find_topic(topic).await? {
            Some(t) => {
                self.check_job(&t, job_type, payload, flow_key)?;
                t
            }
            None => {
                let defaults = self.rt.store.defaults_for(topic)?;
                self.check_job(&defaults, job_type, payload, flow_key)?;
                self.rt.store.topic(topic).await?
            }
        };
        let t = match job_type {
            Some(name) => self.name_types(t, [name]).await?,
            None => t,
        };
        self.serve(&t);
        Ok(t)
    }

    /// `t` with every type of `job_types` that is not built in named in its `types` (one
    /// settings write, the first time a type is written to it), so that only instances
    /// that run them take its slots. Read afresh before it is changed: another instance's
    /// change of the settings since this one's cache was filled is kept.
    async fn name_types<'a>(
        &self,
        t: Arc<TopicConfig>,
        job_types: impl IntoIterator<Item = &'a str>,
    ) -> Result<Arc<TopicConfig>> {
        let wanted: Vec<&str> = job_types
            .into_iter()
            .filter(|n| !crate::jobs::is_builtin(n))
            .collect();
        if wanted.iter().all(|n| t.names(n)) {
            return Ok(t);
        }
        // Another instance may name a type of its own at the same moment, and the store
        // keeps the last write: a change that did not keep every type wanted is made again.
        let mut t = t;
        for _ in 0..NAME_TYPES_TRIES {
            let mut fresh = (*self.rt.store.reload_topic(&t.name).await?.unwrap_or(t)).clone();
            for name in &wanted {
                if !fresh.names(name) {
                    fresh.types.push((*name).to_string());
                }
            }
            if fresh.types.len() > crate::topic::MAX_TYPES {
                return Err(Error::invalid(
                    "type",
                    format!(
                        "topic {:?} would name {} job types, more than a topic may ({})",
                        fresh.name,
                        fresh.types.len(),
                        crate::topic::MAX_TYPES
                    ),
                ));
            }
            tracing::info!(topic = %fresh.name, types = ?fresh.types,
                "the topic names a new job type: only instances that run its types take its slots");
            t = self.put_topic(fresh).await?;
            if wanted.iter().all(|n| t.names(n)) {
                return Ok(t);
            }
        }
        Ok(t)
    }

    /// Refuses a job whose type no instance runs, or whose payload does not decode as its
    /// type's payload, before anything is stored: the error names the type or the field.
    fn check_job(
        &self,
        topic: &TopicConfig,
        job_type: Option<&str>,
        payload: &Value,
        flow_key: Option<&str>,
    ) -> Result<()> {
        let name = job_type.unwrap_or(&topic.default_type);
        let pull_topic = topic.is_pull();
        if pull_topic && name != pull::TYPE {
            return Err(Error::WrongTopicKind {
                topic: topic.name.clone(),
                message: format!(
                    "a pull topic (default_type pull): its jobs are claimed by consumers, so \
                     their type must be pull, not {name:?}"
                ),
            });
        }
        if !pull_topic && name == pull::TYPE {
            return Err(Error::WrongTopicKind {
                topic: topic.name.clone(),
                message: "not a pull topic, so it cannot hold a pull job (set its \
                          default_type to pull)"
                    .into(),
            });
        }
        match self.rt.types.get(name) {
            Some(entry)
                if flow_key.is_some()
                    && topic
                        .flow
                        .is_some_and(|f| f.key == crate::flow::KeyFrom::Url)
                    && entry.handler.flow_key(payload).is_some() =>
            {
                Err(Error::unprocessable(
                    "flow_key",
                    format!(
                        "topic {:?} keys a {name} job by its URL's host and port (flow.key = url): a job may not name its own",
                        topic.name
                    ),
                ))
            }
            Some(entry) => entry.handler.check_payload(payload).map_err(|e| match e {
                PayloadRefusal::Invalid(e) => {
                    Error::invalid("payload", format!("{e} (job type {name:?})"))
                }
                PayloadRefusal::Unprocessable(e) => {
                    Error::unprocessable("payload", format!("{e} (job type {name:?})"))
                }
            }),
            // Run by other instances: their payload is checked by nobody until it fires.
            None if self.rt.settings.foreign_types.iter().any(|t| t == name)
                || (topic.names(name) && !crate::jobs::is_builtin(name)) =>
            {
                Ok(())
            }
            None => Err(Error::invalid(
                "type",
                format!(
                    "no job type {name:?} is registered (known: {}; a topic that names a type in \
                     its types takes jobs of it for the instances that run it)",
                    self.job_types().join(", ")
                ),
            )),
        }
    }

    /// Creates, replaces or moves one job, as `mode` says, and wakes its slot if it is now
    /// its earliest. The answer holds the job as stored.
    pub async fn schedule(
        &self,
        topic: &str,
        job: NewJob,
        mode: ScheduleMode,
    ) -> Result<Scheduled> {
        let t = match mode {
            ScheduleMode::ResetOnly => self.existing(topic).await?,
            _ => {
                self.topic_for_new(
                    topic,
                    job.job_type.as_deref(),
                    &job.payload,
                    job.flow_key.as_deref(),
                )
                .await?
            }
        };
        let now = self.now();
        let r = self.rt.store.schedule(t.clone(), &job, mode, now).await?;
        let m = &self.rt.metrics;
        match r.outcome {
            ScheduleOutcome::Created | ScheduleOutcome::Replaced => {
                m.writes.scheduled.with_label_values(&[topic]).inc()
            }
            ScheduleOutcome::Reset => m.writes.reset.with_label_values(&[topic]).inc(),
            ScheduleOutcome::Exists | ScheduleOutcome::Missing => {}
        }
        if r.is_head
            && let Some(at) = r.fire_at
        {
            self.wake(&t, r.slot, at).await;
        }
        if let Some(rearmed) = &r.rearmed {
            self.tell_rearmed(&t, std::slice::from_ref(rearmed), r.fire_at.unwrap_or(now))
                .await;
        }
        Ok(r)
    }

    /// Moves one job's fire time; its payload stays.
    pub async fn reset(&self, topic: &str, job: &JobRef, fire_at: Millis) -> Result<Scheduled> {
        self.reset_traced(topic, job, fire_at, None).await
    }

    /// `reset`, by a traced request: the job keeps `traceparent` (the reset's span), so its
    /// next fire continues that trace; `None` leaves the context it kept as it is.
    pub async fn reset_traced(
        &self,
        topic: &str,
        job: &JobRef,
        fire_at: Millis,
        traceparent: Option<String>,
    ) -> Result<Scheduled> {
        let new = NewJob {
            id: job.id.clone(),
            shard_key: job.shard_key.clone(),
            fire_at,
            traceparent,
            ..NewJob::default()
        };
        self.schedule(topic, new, ScheduleMode::ResetOnly).await
    }

    /// The heartbeat path: many resets, optionally creating missing jobs.
    pub async fn reset_many(
        &self,
        topic: &str,
        resets: &[Reset],
        create: Option<&CreateSpec>,
    ) -> Result<ResetReport> {
        let t = match create {
            Some(spec) => {
                self.topic_for_new(topic, spec.job_type.as_deref(), &spec.payload, None)
                    .await?
            }
            None => self.existing(topic).await?,
        };
        let now = self.now();
        let report = self
            .rt
            .store
            .reset_many(t.clone(), resets, create, now)
            .await?;
        let m = &self.rt.metrics;
        m.writes
            .reset
            .with_label_values(&[topic])
            .inc_by(report.reset);
        m.writes
            .scheduled
            .with_label_values(&[topic])
            .inc_by(report.created);
        for head in &report.heads {
            self.wake(&t, head.slot, head.at).await;
        }
        if !report.rearmed.is_empty() {
            self.tell_rearmed(&t, &report.rearmed, now).await;
        }
        Ok(report)
    }

    /// Lets each re-armed job's type react (a device heard again reports its recovery).
    async fn tell_rearmed(&self, topic: &Arc<TopicConfig>, rearmed: &[Rearmed], now: Millis) {
        let events: Vec<Event> = rearmed
            .iter()
            .filter_map(|r| {
                let entry = self.rt.types.get(r.job_type.as_str())?;
                let Emitted { event, data } = entry.handler.on_rearm(r)?;
                Some(Event {
                    id: String::new(),
                    topic: topic.name.clone(),
                    job_id: r.id.clone(),
                    job_type: r.job_type.clone(),
                    event,
                    fire_at: now,
                    fired_at: now,
                    attempt: 0,
                    data,
                })
            })
            .collect();
        if let Err(e) = self.rt.store.append_events(topic, &events).await {
            tracing::warn!(error = %e, "could not append re-arm events");
        }
    }

    /// Removes a job in any state; the state it was in, or `None`.
    pub async fn cancel(&self, topic: &str, job: &JobRef) -> Result<Option<JobState>> {
        let state = self.rt.store.cancel(topic, job).await?;
        self.rt.metrics.count_cancelled(topic, state);
        Ok(state)
    }

    /// Cancels a topic's scheduled jobs that `filter` takes (by label and fire-time range);
    /// how many. Running jobs finish their run; dead letters stay.
    pub async fn cancel_where(&self, topic: &str, filter: &crate::store::JobFilter) -> Result<u64> {
        let n = self.rt.store.cancel_where(topic, filter).await?;
        self.rt
            .metrics
            .writes
            .cancelled
            .with_label_values(&[topic])
            .inc_by(n);
        Ok(n)
    }

    /// Schedules again, due now, a topic's dead letters that `filter` takes (by label and the
    /// fire time of their last run); how many.
    pub async fn requeue_where(
        &self,
        topic: &str,
        filter: &crate::store::JobFilter,
    ) -> Result<u64> {
        let t = self.existing(topic).await?;
        let now = self.now();
        let (n, slots) = self.rt.store.requeue_where(&t, filter, now).await?;
        for slot in slots {
            self.wake(&t, slot, now).await;
        }
        Ok(n)
    }

    /// Deletes the topic's dead letters `filter` takes (by label and fire-time range, at
    /// most `filter.limit`): how many.
    pub async fn delete_dead_where(
        &self,
        topic: &str,
        filter: &crate::store::JobFilter,
    ) -> Result<u64> {
        let t = self.existing(topic).await?;
        Ok(self.rt.store.delete_dead_where(&t, filter).await?.0)
    }

    /// A job, or `None`.
    pub async fn get(&self, topic: &str, job: &JobRef) -> Result<Option<Job>> {
        self.rt.store.get(topic, job).await
    }

    /// Fires a recurring job once, now, and leaves its series as it is: a one-shot job of
    /// its own, `{id}~{now}`, with the job's type, payload, attempts, flow key, labels,
    /// shard key and trace context, due now (its
    /// handler sees that id and `fire_at`). `None` when there is no such job; a job that
    /// fires once is refused (reset it to now instead).
    pub async fn trigger(&self, topic: &str, job: &JobRef) -> Result<Option<Scheduled>> {
        let Some(series) = self.get(topic, job).await? else {
            return Ok(None);
        };
        if series.repeat.is_none() {
            return Err(Error::unprocessable(
                "id",
                format!(
                    "{:?} fires once: trigger is for a recurring job (reset a one-shot job to now instead)",
                    series.id
                ),
            ));
        }
        let now = self.after(0);
        // The series' flow key, labels, shard key and trace context go with it: the fire
        // waits for the same room, is found by the same label, and lands in the series' slot.
        let mut once = NewJob::new(format!("{}~{now}", series.id), now)
            .job_type(series.job_type)
            .payload(series.payload)
            .max_attempts(series.max_attempts);
        once.flow_key = series.flow_key;
        once.labels = series.labels;
        once.shard_key = job.shard_key.clone();
        once.traceparent = series.traceparent;
        self.schedule(topic, once, ScheduleMode::CreateOnly)
            .await
            .map(Some)
    }

    /// A page of the topic's scheduled or running jobs in fire-time order (lease deadline for
    /// running ones), merged across its slots.
    pub async fn list(&self, topic: &str, query: &crate::store::ListQuery) -> Result<JobPage> {
        self.rt.store.list(topic, query).await
    }

    /// Dead letters, oldest first, after the cursor `after`.
    pub async fn dead_list(
        &self,
        topic: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<DeadPage> {
        self.rt.store.dead_list(topic, after, limit).await
    }

    /// Schedules a dead job again, due now, with attempts starting again.
    pub async fn dead_requeue(&self, topic: &str, job: &JobRef) -> Result<bool> {
        let t = self.existing(topic).await?;
        let now = self.now();
        let done = self.rt.store.dead_requeue(&t, job, now).await?;
        if done {
            let slot = crate::routing::slot_of(job.route_key(), t.slots);
            self.wake(&t, slot, now).await;
        }
        Ok(done)
    }

    /// Drops a dead letter; false if there is no such dead job.
    pub async fn dead_delete(&self, topic: &str, job: &JobRef) -> Result<bool> {
        self.rt.store.dead_delete(topic, job).await
    }

    /// A topic's scheduled, running and dead counts, per slot and in total.
    pub async fn stats(&self, topic: &str) -> Result<TopicStats> {
        let stats = self.rt.store.stats(topic).await?;
        self.rt.metrics.observe_stats(&stats);
        Ok(stats)
    }

    /// The topic's events after `after`.
    pub async fn events(
        &self,
        topic: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<EventPage> {
        self.rt.store.read_events(topic, after, limit).await
    }

    /// Claimed jobs too late to hand out (a one-shot job past its `expire_after_ms`, a
    /// recurring fire past its `repeat.catchup_window_ms`) are settled here as the slot
    /// actor settles them (dead as expired, dropped, or skipped to the next instant) and
    /// left out of the answer; the rest are answered.
    async fn settle_misfires(
        &self,
        t: &Arc<TopicConfig>,
        jobs: Vec<Leased>,
    ) -> Result<Vec<Leased>> {
        let now = self.now();
        let (mut late, mut keep) = (std::collections::BTreeMap::<u32, Vec<_>>::new(), Vec::new());
        for lease in jobs {
            match lease.job.misfire(now) {
                None => keep.push(lease),
                Some(outcome) => {
                    let attempts = lease.job.attempts;
                    let run = outcome.into_run(
                        lease.job.fire_at,
                        now,
                        || t.backoff.delay_ms(attempts, &mut rand::rng()),
                        |delay| self.rt.clock.after(delay),
                    );
                    late.entry(lease.slot)
                        .or_default()
                        .push(crate::model::Settlement::new(lease, run, now));
                }
            }
        }
        for (slot, batch) in late {
            let n = batch.len() as u64;
            let door = self.rt.store.door(Arc::clone(t), slot, 0)?;
            door.settle(&batch, now).await?;
            self.rt
                .metrics
                .fires
                .misfired
                .with_label_values(&[t.name.as_str()])
                .inc_by(n);
        }
        Ok(keep)
    }

    /// Leases up to `req.max` due jobs of a pull topic to a consumer, taking from every slot
    /// in turn; with `req.wait_ms`, waits for one to come due (a long poll, woken by the
    /// notices that wake slots). The consumer reports each job's outcome by its token.
    /// A job claimed too late (past its `expire_after_ms`, or a recurring fire past its
    /// `repeat.catchup_window_ms`) is not handed out: the claim may answer fewer jobs.
    pub async fn claim(&self, topic: &str, req: ClaimRequest) -> Result<Vec<Leased>> {
        req.check()?;
        let mut t = self.pull_topic(topic).await?;
        let mut req = req;
        if t.paused {
            // No claim is served while paused: a long poll waits (without a look at the
            // store) until the topic's settings change or its time is up, so consumers do
            // not spin; resumed in time, it claims for what is left of its wait.
            let deadline = std::time::Instant::now() + Duration::from_millis(req.wait_ms);
            while t.paused {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() || !self.claims.until_changed(topic, left).await {
                    return Ok(Vec::new());
                }
                t = self
                    .rt
                    .store
                    .reload_topic(topic)
                    .await?
                    .ok_or_else(|| Error::TopicNotFound(topic.to_string()))?;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            req.wait_ms = crate::num::duration_ms(left);
        }
        let jobs = self
            .claims
            .claim(&self.rt.store, &self.rt.clock, &t, req)
            .await?;
        let jobs = self.settle_misfires(&t, jobs).await?;
        if !jobs.is_empty() {
            let now = self.now();
            let m = &self.rt.metrics;
            m.fires
                .fired
                .with_label_values(&[topic])
                .inc_by(jobs.len() as u64);
            let lateness = m.claims.lateness.with_label_values(&[topic]);
            for j in &jobs {
                lateness.observe(crate::num::float((now - j.job.fire_at).max(0)) / 1_000.0);
            }
        }
        Ok(jobs)
    }

    /// Applies consumers' outcomes of claimed jobs; a stale token gets `Finished::Stale` and
    /// changes nothing.
    pub async fn settle_claims(
        &self,
        topic: &str,
        outcomes: &[ClaimOutcome],
    ) -> Result<Vec<Finished>> {
        let t = self.pull_topic(topic).await?;
        for o in outcomes {
            match &o.outcome {
                Outcome::Retry { delay: Some(d), .. }
                    if d.as_millis() > crate::time::MAX_DELAY_MS as u128 =>
                {
                    return Err(Error::invalid(
                        "delay_ms",
                        format!(
                            "must be at most {}, got {}",
                            crate::time::MAX_DELAY_MS,
                            d.as_millis()
                        ),
                    ));
                }
                Outcome::Repeat { .. } => {
                    return Err(Error::invalid(
                        "outcome",
                        "a consumer reports done, retry or dead; a repeat is a handler's \
                         (schedule the job again to run it later)",
                    ));
                }
                _ => {}
            }
        }
        let done = self
            .rt
            .store
            .settle_claims(&t, outcomes, self.now())
            .await?;
        let m = &self.rt.metrics;
        let now = self.now();
        let mut due: BTreeMap<u32, Millis> = BTreeMap::new();
        for (f, o) in done.iter().zip(outcomes) {
            // A job scheduled again is due to claims: at the retry's delay when the consumer
            // named it, else no later than now (a backoff, or a reset's time).
            let due_at = match (f, &o.outcome) {
                (Finished::Retrying, Outcome::Retry { delay: Some(d), .. }) => {
                    Some(now.saturating_add(crate::num::duration_millis(*d)))
                }
                (Finished::Retrying | Finished::Rescheduled, _) => Some(now),
                _ => None,
            };
            if let Some(at) = due_at {
                let first = due.entry(slot_of(o.job.route_key(), t.slots)).or_insert(at);
                *first = (*first).min(at);
            }
            match f {
                Finished::Retrying => m.fires.retried.with_label_values(&[topic]).inc(),
                Finished::Dead => m.fires.dead.with_label_values(&[topic]).inc(),
                _ => {}
            }
        }
        for (slot, at) in due {
            self.wake(&t, slot, at).await;
        }
        Ok(done)
    }

    /// Extends a claimed job's lease to `lease_ms` from now (the topic's visibility timeout
    /// when `None`): the lease's new end, or `None` when the token is stale.
    pub async fn touch(
        &self,
        topic: &str,
        job: &JobRef,
        token: u64,
        lease_ms: Option<u64>,
    ) -> Result<Option<Millis>> {
        let t = self.pull_topic(topic).await?;
        let req = ClaimRequest {
            lease_ms,
            ..ClaimRequest::default()
        };
        req.check()?;
        let until = self.after(crate::num::millis(
            lease_ms.unwrap_or(t.visibility_timeout_ms),
        ));
        let live = self.rt.store.touch(&t, job, token, until).await?;
        Ok(live.then_some(until))
    }

    /// A pull topic's settings; an error naming the topic when it is not one.
    async fn pull_topic(&self, topic: &str) -> Result<Arc<TopicConfig>> {
        let t = self.rt.store.existing_topic(topic).await?;
        if !t.is_pull() {
            return Err(Error::WrongTopicKind {
                topic: topic.to_string(),
                message: "not a pull topic: its jobs are run by the service (set its \
                          default_type to pull for consumers to claim them)"
                    .into(),
            });
        }
        Ok(t)
    }

    /// Appends an event of the application's own to a topic's stream.
    pub async fn emit(&self, topic: &str, job_id: &str, event: &str, data: Value) -> Result<()> {
        let now = self.now();
        let e = Event {
            id: String::new(),
            topic: topic.to_string(),
            job_id: job_id.to_string(),
            job_type: String::new(),
            event: event.to_string(),
            fire_at: now,
            fired_at: now,
            attempt: 0,
            data,
        };
        let t = self.rt.store.existing_topic(topic).await?;
        self.rt.store.append_events(&t, &[e]).await
    }

    /// Each slot actor's state.
    pub async fn health(&self) -> Vec<SlotHealth> {
        self.keeper.send(GetHealth).await.unwrap_or_default()
    }

    /// This instance's name among the instances sharing the store.
    pub fn instance(&self) -> &str {
        &self.rt.instance
    }

    /// Stops one slot actor; the slot keeper restarts it. For operations and tests.
    pub async fn halt_slot(&self, topic: &str, slot: u32) -> bool {
        let msg = HaltSlot {
            topic: topic.to_string(),
            slot,
        };
        self.keeper.send(msg).await.unwrap_or(false)
    }

    /// Stops pumping, lets running handlers finish within `grace`, and gives back the leases
    /// of those that did not (their jobs are due again at once). Returns how many it gave back.
    pub async fn shutdown(&self, grace: Duration) -> usize {
        self.keeper.send(Shutdown { grace }).await.unwrap_or(0)
    }
}
